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
        (f"sha256:{d['top']}", 1, "present and intact", ""),
        (f"sha256:{d['elements']}", 1, "present and intact", short["top"]),
        (f"sha256:{d['base']}", 1, "present and intact", short["top"]),
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


def test_the_dashboard_shows_the_state_the_check_found_for_an_event_named_artifact(tmp_path: Path) -> None:
    """A real thread with two artifacts its records name swapped (each key now holds the other's bytes):
    verify reports both ``artifact_corrupt``; before, the Artifacts table said ``present`` for both (it asked
    only whether the store holds the key, and dropped the walk's hash result for event-named rows)."""
    from flightlog.store.links import linking_refs
    from flightlog.web.views import ARTIFACT_PAGE

    db = tmp_path / "lg.db"
    _thread(db)
    with flightlog.open_store(str(db)) as store:
        roots = list(
            dict.fromkeys(
                digest for row in store.read_events(SID) for digest in linking_refs(row.event_bytes)
            )
        )
    a, b = roots[0], roots[-1]
    assert a != b
    for old, new in ((a, "swap"), (b, a), ("swap", b)):
        _tamper(str(db), "UPDATE artifacts SET sha256 = ? WHERE sha256 = ?", (new, old))
    with flightlog.open_store(str(db)) as store:
        report = audit_session(store, SID)
        page = session_page(store, SID)
        rows = {row["handle"]: row for row in page.artifacts}
        while page.artifacts_later:  # the thread's table may span pages
            page = session_page(store, SID, artifacts_from=page.artifacts_from + ARTIFACT_PAGE)
            rows.update((row["handle"], row) for row in page.artifacts)
    corrupt = {x.detail.split(",")[0].removeprefix("artifact sha256:") for x in report.divergences}
    assert {x.reason for x in report.divergences} == {"artifact_corrupt"} and corrupt == {a, b}
    assert len(rows) == page.artifacts_total
    for digest in (a, b):
        assert (
            rows[f"sha256:{digest}"]["state"] == "digest mismatch" and rows[f"sha256:{digest}"]["via"] == ""
        )
    assert all(
        row["state"] == "present and intact"
        for h, row in rows.items()
        if h.removeprefix("sha256:") not in corrupt
    )


def test_a_deep_delta_chain_gives_a_bounded_artifacts_page(tmp_path: Path) -> None:
    """A record naming the top of a 3000-delta chain: before, every row spelled its whole link path (a
    208 MB page for this chain); now a page holds ARTIFACT_PAGE rows, each "linked from" cell at most
    VIA_SHOWN steps, and the later pages reach every row."""
    from flightlog.web.views import ARTIFACT_PAGE, VIA_SHOWN

    db = str(tmp_path / "deep.db")
    with flightlog.open_store(db) as store:
        rec = Recorder.create(store, task="deep")
        first = below = rec.put_artifact(b"first").removeprefix("sha256:")
        for _ in range(3000):
            below = rec.put_artifact(_delta_bytes({"b": below})).removeprefix("sha256:")
        rec.append(Custom(custom_kind="langgraph.checkpoint", payload={"m": {"ref": f"sha256:{below}"}}))
        sid = rec.session_id
        page = session_page(store, sid)
        last = session_page(store, sid, artifacts_from=3000)
        past = session_page(store, sid, artifacts_from=5000)
    assert len(page.artifacts) == ARTIFACT_PAGE and page.artifacts_total == 3001 and page.artifacts_from == 0
    assert page.artifacts[0]["handle"] == f"sha256:{below}" and page.artifacts[0]["via"] == ""
    for row in page.artifacts[1:]:
        assert row["state"] == "present and intact" and row["via"].count("sha256:") <= VIA_SHOWN, row["via"]
    assert page.artifacts_later.endswith("artifacts_from=100") and not page.artifacts_earlier
    ((deepest),) = last.artifacts
    assert deepest["handle"] == f"sha256:{first}" and not last.artifacts_later
    assert deepest["via"] == f"sha256:{below[:12]}… → (2998 more) → sha256:{last_parent(db, first)[:12]}…"
    assert past.artifacts == [] and past.artifacts_total == 3001

    def open_db(read_only: bool) -> Any:
        return flightlog.open_store(db, read_only=read_only)

    with TestClient(create_app(open_db, token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        html = client.get("/session", params={"id": sid}).text
        tail = client.get("/session", params={"id": sid, "artifacts_from": "3000"}).text
        bad = client.get("/session", params={"id": sid, "artifacts_from": "-1"})
    assert html.count('<code class="via">') == ARTIFACT_PAGE - 1 and len(html) < 200_000, len(html)
    assert "rows 1..100 of 3001" in html and "artifacts_from=100#artifacts" in html
    assert "rows 3001..3001 of 3001" in tail and "artifacts_from=2900#artifacts" in tail
    assert bad.status_code == 400 and "artifacts_from" in bad.text


def last_parent(db: str, digest: str) -> str:
    """The artifact of ``db`` whose content links to ``digest`` (exactly one)."""
    from flightlog.store.links import artifact_links

    raw = sqlite3.connect(db)
    try:
        (parent,) = [
            key
            for key, content in raw.execute("SELECT sha256, content FROM artifacts")
            if digest in artifact_links(content)
        ]
    finally:
        raw.close()
    return str(parent)


def test_a_record_naming_an_unreadable_ref_diverges(tmp_path: Path) -> None:
    """Before, a ``langgraph.*`` record whose ref is not lowercase sha256 hex verified ok with "0 linked"
    (the link check skipped it) though the saver refuses to read it; now each is ``ref_unreadable``."""
    db = str(tmp_path / "refs.db")
    with flightlog.open_store(db) as store:
        rec = Recorder.create(store, task="refs")
        good = rec.put_artifact(b"value")
        rec.append(
            Custom(custom_kind="note", payload={"ref": "sha256:NOT-HEX", "type": "msgpack"})
        )  # not linking
        rec.append(
            Custom(custom_kind="langgraph.checkpoint", payload={"m": {"ref": "sha256:NOT-HEX", "type": "t"}})
        )
        upper = good.upper().replace("SHA256:", "sha256:")
        rec.append(Custom(custom_kind="langgraph.writes", payload={"w": [{"ref": upper, "type": "t"}]}))
        rec.append(
            Custom(
                custom_kind="langgraph.checkpoint",
                payload={
                    "m": {"ref": good, "type": "t"},
                    "metadata": {"ref": "main"},
                },  # a user's key: no entry
            )
        )
        sid = rec.session_id
    code, out = _cli(db, "verify", sid, "--json")
    assert code == 1, out
    (report,) = json.loads(out)
    assert [(x["seq"], x["reason"]) for x in report["divergences"]] == [
        (1, "ref_unreadable"),
        (2, "ref_unreadable"),
    ]
    assert (
        'names ref "sha256:NOT-HEX", not a sha256:<64 lowercase hex> handle'
        in report["divergences"][0]["detail"]
    )
    assert f'names ref "{upper}"' in report["divergences"][1]["detail"]
    code, out = _cli(db, "verify", sid)
    assert code == 1 and "seq 1: ref_unreadable (the LangGraph record at seq 1 names ref" in out, out


def test_verify_prints_a_bounded_number_of_divergences_per_session(tmp_path: Path) -> None:
    """A delta whose run names 1000 missing artifacts: before, 1002 lines; now the first DIVERGENCE_LINES
    and a "+N more divergent" line, exit 1 either way, ``--json`` still lists every one; the session page's
    Verification table lists the first KEEP_DIVERGENCES (before: all 1000 rows)."""
    from flightlog.cli.audit import DIVERGENCE_LINES

    db = str(tmp_path / "many.db")
    gone = [f"{n:064x}" for n in range(1000)]
    with flightlog.open_store(db) as store:
        rec = Recorder.create(store, task="many")
        top = rec.put_artifact(_delta_bytes({"h": gone}))
        rec.append(Custom(custom_kind="langgraph.checkpoint", payload={"m": {"ref": top, "type": "t"}}))
        sid = rec.session_id
    code, out = _cli(db, "verify", sid)
    assert code == 1, out
    lines = out.splitlines()
    assert len(lines) <= DIVERGENCE_LINES + 6, len(lines)
    assert f"artifact sha256:{gone[0]}, linked from artifact {top}" in out
    assert f"(+{1000 - DIVERGENCE_LINES} more divergent; --json lists them all)" in out
    code, out = _cli(db, "verify", sid, "--json")
    assert code == 1 and len(json.loads(out)[0]["divergences"]) == 1000

    def open_db(read_only: bool) -> Any:
        return flightlog.open_store(db, read_only=read_only)

    from flightlog.web.views import KEEP_DIVERGENCES

    with TestClient(create_app(open_db, token=TOKEN), base_url="http://127.0.0.1:8000") as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        html = client.get("/session", params={"id": sid}).text
    listed = html.split('<table class="divergences">', 1)[1].split("</table>", 1)[0]
    assert listed.count("<td>artifact_missing</td>") == KEEP_DIVERGENCES  # the page's table is bounded too
    assert f"+{1000 - KEEP_DIVERGENCES} more divergent (<code>flightlog verify {sid} --json</code>" in html
