"""``flightlog verify`` / ``audit`` check the artifacts only a link names (:mod:`flightlog.integrity.linked`).

A LangGraph record names the newest content-linked delta; the artifacts it extends and adds are named inside
its content. Before, deleting or altering such an artifact passed ``verify`` and ``audit`` (only the thread's
next read refused it). Now they report ``artifact_missing`` / ``artifact_corrupt`` naming the session, the
artifact that links to it and the record, and exit 1; a session with no linking record reads no artifact.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
from fastapi.testclient import TestClient
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.events import Custom
from flightlog.integrations.langgraph import _delta_bytes
from flightlog.integrity.verify import audit_session
from flightlog.recorder import Recorder
from flightlog.store.base import Store
from flightlog.web.app import create_app
from flightlog.web.security import Auth
from flightlog.web.views import session_page
from postgres.server import database_url

from .test_dbcopy_langgraph import SID, _linked, _thread

_runner = CliRunner()
TOKEN = "test-token-0123456789abcdef"


def _cli(db: str, *args: str) -> tuple[int, str]:
    result = _runner.invoke(app, ["--db", db, *args])
    return result.exit_code, result.stdout + result.stderr


def _tamper(url: str, sql: str, params: Sequence[object]) -> None:
    """Run one statement on the store's tables behind its back (SQLite file or PostgreSQL schema)."""
    if "://" not in url:
        raw = sqlite3.connect(url)
        raw.execute(sql, tuple(params))
        raw.commit()
        raw.close()
        return
    schema = parse_qs(urlsplit(url).query)["schema"][0]
    with psycopg.connect(database_url(), autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        conn.execute(sql.replace("?", "%s"), tuple(params))


def _chain(url: str) -> tuple[str, dict[str, str]]:
    """A session whose LangGraph record names a delta that links to ``elements`` (named by no event) and
    ``base`` (a delta linking to ``deep``, named by no event either); its id and those digests."""
    with flightlog.open_store(url) as store:
        rec = Recorder.create(store, task="linked")
        deep = rec.put_artifact(b"deep elements", "application/octet-stream").removeprefix("sha256:")
        base = rec.put_artifact(_delta_bytes({"e": deep}), "application/octet-stream")
        elements = rec.put_artifact(b"new elements", "application/octet-stream").removeprefix("sha256:")
        top = rec.put_artifact(_delta_bytes({"e": elements, "b": base.removeprefix("sha256:")}))
        rec.append(Custom(custom_kind="note", payload={"text": "first"}))
        rec.append(Custom(custom_kind="langgraph.checkpoint", payload={"channels": {"m": {"ref": top}}}))
        digests = {"top": top, "base": base, "elements": elements, "deep": deep}
        return rec.session_id, {k: v.removeprefix("sha256:") for k, v in digests.items()}


def test_an_artifact_only_a_link_names_is_checked(store_url: str) -> None:
    """SQLite and PostgreSQL: deleted is ``artifact_missing``, altered ``artifact_corrupt``, exit 1."""
    sid, d = _chain(store_url)
    code, out = _cli(store_url, "verify", sid)
    assert code == 0, out
    assert "4 artifact(s) of linking records and their links checked" in out  # top, elements, base, deep
    _tamper(store_url, "DELETE FROM artifacts WHERE sha256 = ?", (d["deep"],))
    _tamper(store_url, "UPDATE artifacts SET content = ? WHERE sha256 = ?", (b"other", d["elements"]))
    for command in ("verify", "audit"):
        code, out = _cli(store_url, command, sid, "--json")
        assert code == 1, out
        (report,) = json.loads(out)
        found = {(x["reason"], x["detail"].split(",")[0]) for x in report["divergences"]}
        assert found == {
            ("artifact_missing", f"artifact sha256:{d['deep']}"),
            ("artifact_corrupt", f"artifact sha256:{d['elements']}"),
        }, report["divergences"]
        text = " ".join(x["detail"] for x in report["divergences"])
        assert f"linked from artifact sha256:{d['base']}" in text  # the artifact linking to it
        assert f"1 link(s) down from sha256:{d['top']}" not in text
        assert f"2 link(s) down from sha256:{d['top']}" in text  # the path from the record's artifact
        assert "named by the record at seq 1" in text
    code, out = _cli(store_url, "verify", sid)
    assert code == 1 and sid in out and "DIVERGES" in out, out


def test_a_record_whose_own_artifact_is_gone_diverges(store_url: str) -> None:
    sid, d = _chain(store_url)
    _tamper(store_url, "DELETE FROM artifacts WHERE sha256 = ?", (d["top"],))
    with flightlog.open_store(store_url) as store:
        report = audit_session(store, sid)
    assert [(x.seq, x.reason) for x in report.divergences] == [(1, "artifact_missing")]
    assert (
        f"artifact sha256:{d['top']}, named by the record at seq 1, is missing from the store"
        in report.divergences[0].detail
    )
    assert report.linked == 1  # a missing artifact's links cannot be followed


def test_a_real_thread_missing_a_linked_artifact_fails_verify(tmp_path: Path) -> None:
    db = tmp_path / "lg.db"
    _thread(db)
    code, out = _cli(str(db), "verify", "--all")
    assert code == 0, out
    gone = _linked(db)[0]
    _tamper(str(db), "DELETE FROM artifacts WHERE sha256 = ?", (gone,))
    code, out = _cli(str(db), "verify", "--all")
    assert code == 1, out
    assert f"DIVERGES  {SID}" in out and f"artifact_missing (artifact sha256:{gone}," in out


def test_a_session_without_linking_records_reads_no_artifact(tmp_path: Path) -> None:
    """The link walk runs only where a linking record exists: an event quoting handles costs no read."""
    with flightlog.open_store(str(tmp_path / "plain.db")) as store:
        rec = Recorder.create(store, task="plain")
        ref = rec.put_artifact(
            _delta_bytes({"e": "1" * 64, "b": "2" * 64})
        )  # a delta no linking record names
        rec.append(Custom(custom_kind="note", payload={"ref": ref}))

        def no_reads(handles: Sequence[str]) -> dict[str, bytes]:
            raise AssertionError(f"read artifacts {handles}")

        store.get_artifacts = no_reads  # type: ignore[method-assign]
        report = audit_session(store, rec.session_id)
    assert report.ok and report.linked == 0, report.divergences
    assert isinstance(store, Store)


def test_the_dashboard_lists_what_only_a_link_names_with_the_path(store_url: str) -> None:
    """SQLite and PostgreSQL: the Artifacts table lists ``elements``, ``base`` and ``deep`` (named by no
    event) after what events name, each with its link path and state; a deleted one as missing."""
    sid, d = _chain(store_url)
    _tamper(store_url, "DELETE FROM artifacts WHERE sha256 = ?", (d["deep"],))
    with flightlog.open_store(store_url) as store:
        page = session_page(store, sid)
    short = {k: f"sha256:{v[:12]}…" for k, v in d.items()}
    assert [(a["handle"], a["seq"], a["state"], a["via"]) for a in page.artifacts] == [
        (f"sha256:{d['top']}", 1, "present", ""),
        (f"sha256:{d['elements']}", 1, "present", short["top"]),
        (f"sha256:{d['base']}", 1, "present", short["top"]),
        (f"sha256:{d['deep']}", 1, "missing", f"{short['top']} → {short['base']}"),
    ]
    assert page.artifacts[1]["size"] == "12" and page.artifacts[1]["media_type"] == "application/octet-stream"

    def open_db(read_only: bool) -> Any:
        return flightlog.open_store(store_url, read_only=read_only)

    with TestClient(create_app(open_db, token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        html = client.get("/session", params={"id": sid}).text
    assert f'<code class="via">{short["top"]} → {short["base"]}</code>' in html


def test_the_link_walk_reads_a_batch_at_a_time(tmp_path: Path) -> None:
    """A record naming 300 deltas, each linking to its elements and to a 300-delta chain: every artifact is
    checked once, never more than WALK_BATCH read at once."""
    from flightlog.store.links import WALK_BATCH

    with flightlog.open_store(str(tmp_path / "chain.db")) as store:
        rec = Recorder.create(store, task="chain")
        below = rec.put_artifact(b"first").removeprefix("sha256:")
        named = []
        for n in range(300):
            elements = rec.put_artifact(f"elements {n}".encode()).removeprefix("sha256:")
            below = rec.put_artifact(_delta_bytes({"e": elements, "b": below})).removeprefix("sha256:")
            named.append(rec.put_artifact(_delta_bytes({"e": elements, "b": below})))
        rec.append(
            Custom(custom_kind="langgraph.checkpoint", payload={"writes": [{"ref": h} for h in named]})
        )
        reads: list[int] = []
        get = store.get_artifacts

        def counted(handles: Sequence[str]) -> dict[str, bytes]:
            reads.append(len(handles))
            return get(handles)

        store.get_artifacts = counted  # type: ignore[method-assign]
        report = audit_session(store, rec.session_id)
    assert report.ok, report.divergences
    assert report.linked == sum(reads) == 901  # 300 named, 300 in the chain, 300 elements, the first
    assert max(reads) == WALK_BATCH
