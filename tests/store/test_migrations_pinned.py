"""Migrations that shipped are history: users' databases already ran them, and a schema is identified by
its version number alone. A refactor must not change one byte of their SQL, so each one's sha256 is pinned
here; a new schema change is a new migration appended to the list (then pin it here too). The memory
migrations live beside their index code (``store/memory_sqlite.py``, ``store/memory_postgres.py``), the
signal queue's in ``store/signals.py``."""

from __future__ import annotations

import hashlib

import pytest

from flightlog.store import sqlite

SQLITE = [
    "09bbb7c741e40d991aacdbc1d2c2fba1b316caa6722bef51101e29b00e125dc6",
    "737abaef31160efcf747b9dc4b5dad93f5b0f7877ce0d61630cd3fabedb0d67f",
    "94bb2b84f5ae104d1184ace070e7470799b906d3af3e8c15aa80cda8c4436cde",
    "4c11aeb96eb6ab382919dbf2590a9409a7745b49f5165e54976822a66499c425",
    "51fea311003a567b5c64df0d7cb16379b9f0892d13e3b3688c2fe4c399ac9576",
    "3805a9867c4b159e852adb7e964671bbbaa0185730b6fe2f375b823a2503ce61",
    "2d9f5d588218c734aaf867a60d546abe4478fffe7809d6e6b40e5eb099a07d3f",  # long-term memory (store/memory_sqlite.py)
    "886c4e56654c261a64cfb8d7e5db4ea36e2972b9a556539f5e0bff9a438f0bd0",  # signal queue (store/signals.py)
    "89dc009b34bd1e3af6867cce60d27beea889858b717600c99738bfade11a936a",  # runs list (ddl.SQLITE_RUNS_LIST)
    "fa66b9076cc9546535d8a0ff5f67c6a5d91db8c13f3b1cb9bda06281e37b619a",  # runs fold rules 2 (ddl.RUNS_FOLD_2)
    "0b1c75751cdc048abf3d2ac62a867585818e7f5ff8c2a5d0cd6f36785d3fef65",  # runs fold rules 3 (ddl.RUNS_FOLD_3)
    "f4f006793771344aca75ba1f6b7548cb0ba9880d0bfc3383cc8610904c75da00",  # runs fold rules 4 (ddl.RUNS_FOLD_4)
    "ed2dd688f90ccc0ed635ff208ba4d5e10257f9d34e9d7920f1f232a57596f474",  # runs fold text 5 (ddl.RUNS_FOLD_5)
    "d74bca2e771205ceb6706ced715cb8721a635d42425b1c167546da9a807fee84",  # runs fold rules 6 (ddl.RUNS_FOLD_6)
    "042c9fa7a84f8011a5f1d08c19ff3d70a51805df8bf72e87da56abba155ebefc",  # runs fold rules 7 (ddl.RUNS_FOLD_7)
    "f7a9da5785ec3d97baa0dfee24e2bf27163b338d5a3df99bbee3fe70e7821380",  # wait-mark index (ddl.SQLITE_EVENTS_SUSPENDED)
    "8fcb6d6a23358080be538e827b36df1ba3f0d7b10e277e77dd5794082f9a7026",  # live record host, owner (ddl.LIVE_RUNS_OWNER)
]
POSTGRES = [
    "444ebb775f784a74816dc21fb6f9d2dfc5abc2ea66031eabf69ab6856626b231",
    "8615fabc627d559b56bbe2c82db59c0f192b8afdc7609248df76d9a7b6765f67",
    "803df85a45f0f44931948613cebbc2f7a8827c220b932c4fcd844195a3c31c98",  # long-term memory (store/memory_postgres.py)
    "585b448dc986f90d8886b87118e50989ac26fa0b0f0a15ad3daf2be086ed45a7",  # signal queue (store/signals.py)
    "df1e20687bcb5cf6e95a5f6628418f6311f32ae33bfd3cfddbc4a576185e6731",  # runs list (ddl.POSTGRES_RUNS_LIST)
    "36e00a4a14fdaaa868646a75cbe11319f6af60c03cba207127505e8e30256bd8",  # HOT run rows (ddl.POSTGRES_RUNS_HOT)
    "fa66b9076cc9546535d8a0ff5f67c6a5d91db8c13f3b1cb9bda06281e37b619a",  # runs fold rules 2 (ddl.RUNS_FOLD_2)
    "0b1c75751cdc048abf3d2ac62a867585818e7f5ff8c2a5d0cd6f36785d3fef65",  # runs fold rules 3 (ddl.RUNS_FOLD_3)
    "f4f006793771344aca75ba1f6b7548cb0ba9880d0bfc3383cc8610904c75da00",  # runs fold rules 4 (ddl.RUNS_FOLD_4)
    "ed2dd688f90ccc0ed635ff208ba4d5e10257f9d34e9d7920f1f232a57596f474",  # runs fold text 5 (ddl.RUNS_FOLD_5)
    "d74bca2e771205ceb6706ced715cb8721a635d42425b1c167546da9a807fee84",  # runs fold rules 6 (ddl.RUNS_FOLD_6)
    "042c9fa7a84f8011a5f1d08c19ff3d70a51805df8bf72e87da56abba155ebefc",  # runs fold rules 7 (ddl.RUNS_FOLD_7)
    "d6fb37e4b5bf23ee46b3c4c28707cd6e378903689d924629b350df8c17cb214d",  # wait-mark index (ddl.POSTGRES_EVENTS_SUSPENDED)
    "8fcb6d6a23358080be538e827b36df1ba3f0d7b10e277e77dd5794082f9a7026",  # live record host, owner (ddl.LIVE_RUNS_OWNER)
]


def _digests(migrations: list[tuple[str, str]]) -> list[str]:
    return [hashlib.sha256(sql.encode("utf-8")).hexdigest() for _description, sql in migrations]


def test_shipped_sqlite_migrations_are_unchanged() -> None:
    assert _digests(sqlite.MIGRATIONS)[: len(SQLITE)] == SQLITE


def test_shipped_postgres_migrations_are_unchanged() -> None:
    postgres = pytest.importorskip("flightlog.store.postgres", reason="needs the postgres extra")
    assert _digests(postgres.MIGRATIONS)[: len(POSTGRES)] == POSTGRES


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_every_migration_is_pinned(backend: str) -> None:
    """A migration added without a pin fails here, so the next refactor cannot change it either."""
    if backend == "postgres":
        module = pytest.importorskip("flightlog.store.postgres", reason="needs the postgres extra")
        pinned = POSTGRES
    else:
        module, pinned = sqlite, SQLITE
    assert len(module.MIGRATIONS) == len(pinned), f"pin the new {backend} migration's sha256 here"
