"""Fixtures for the issue-5 (second half) tests: keys, heads, stores and a witness, all under ``tmp_path``.

Every test runs with ``$FLIGHTLOG_KEY_DIR`` and ``$FLIGHTLOG_HEAD_DIR`` in its own temporary directory and
``$FLIGHTLOG_LOG_KEY`` unset. Every store and witness server a test opens is closed at teardown.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flightlog.events import Custom
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import ENV_KEY, ENV_KEY_DIR
from flightlog.integrity.notary import Notary
from flightlog.integrity.witness import Witness, WitnessServer
from flightlog.integrity.witness_client import TrustedWitness
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

SID = "sess-1"
OTHER = "sess-2"


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_KEY_DIR, str(tmp_path / "keys"))
    monkeypatch.setenv("FLIGHTLOG_HEAD_DIR", str(tmp_path / "heads"))
    monkeypatch.delenv(ENV_KEY, raising=False)


@pytest.fixture
def notary() -> Notary:
    """The user's notary (key in ``$FLIGHTLOG_KEY_DIR``, created on first use), checkpoint every 4 events."""
    return Notary.from_env(every=4)


@pytest.fixture
def heads(notary: Notary) -> HeadStore:
    return notary.heads


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "flightlog.db"


@pytest.fixture
def opened() -> Iterator[list[SqliteStore]]:
    stores: list[SqliteStore] = []
    yield stores
    for store in stores:
        store.close()


@pytest.fixture
def open_db(db_path: Path, opened: list[SqliteStore]) -> Callable[..., SqliteStore]:
    def _open(path: Path | None = None, **kwargs: object) -> SqliteStore:
        store = SqliteStore(path or db_path, **kwargs)  # type: ignore[arg-type]
        opened.append(store)
        return store

    return _open


@pytest.fixture
def store(open_db: Callable[..., SqliteStore]) -> SqliteStore:
    return open_db()


def step(i: int, sid: str = SID) -> Custom:
    return Custom(custom_kind="step", payload={"i": i, "of": sid})


def record(store: SqliteStore, notary: Notary, sid: str = SID, n: int = 10) -> Recorder:
    """``n`` single appends (checkpoints every 4 events)."""
    rec = Recorder.create(store, session_id=sid, notary=notary)
    for i in range(n):
        rec.append(step(i, sid))
    return rec


def tamper(db_path: Path, *statements: str) -> None:
    """Edit the database file behind flightlog's back (append-only triggers dropped first)."""
    raw = sqlite3.connect(db_path)
    try:
        for trigger in (
            "events_no_update",
            "events_no_delete",
            "index_leaves_no_update",
            "index_leaves_no_delete",
        ):
            raw.execute(f"DROP TRIGGER IF EXISTS {trigger}")
        for statement in statements:
            raw.execute(statement)
        raw.commit()
    finally:
        raw.close()


def copy_db(source: Path, target: Path) -> None:
    """A consistent copy of a database file (sqlite backup API)."""
    src, dst = sqlite3.connect(source), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


@pytest.fixture
def witness(tmp_path: Path, notary: Notary) -> Witness:
    """A witness (own state dir) trusting the user's log key for every flightlog origin."""
    return Witness.open(tmp_path / "witness", log_keys=[str(notary.signer.verifier)])


@pytest.fixture
def witness_server(witness: Witness) -> Iterator[WitnessServer]:
    with WitnessServer(witness, "127.0.0.1", 0) as server:
        yield server


@pytest.fixture
def trusted_witness(witness: Witness, witness_server: WitnessServer) -> TrustedWitness:
    from flightlog.integrity.witness_client import trust_witness

    return trust_witness(str(witness.cosigner.verifier), witness_server.url)
