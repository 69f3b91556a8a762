"""``signal``, ``abort`` and ``resume`` run the full check before they read the session row's ``source``.

On main they read the row's ``source`` (which no hash covers) to refuse a session no flightlog kernel runs
before any check (``signal`` ran none at all): a kernel run whose row was edited to ``source = 'langgraph'`` and one of whose rows'
bytes was changed made ``abort`` refuse with exit 2 naming the forged source ("a LangGraph thread ... its
app runs it"), ``signal`` likewise, and ``resume`` with "a langgraph session, run by its own app", so the
tampering went unsaid. Now they run the full check ``flightlog audit`` makes first and refuse the session as tampered (exit 1, as README's exit-code paragraph
gives a divergence), naming the seq, never the source; the source rule comes after, on a session that
passed. The dashboard's Signal and Abort forms answer the same (HTTP 409). On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from fastapi.testclient import TestClient

from flightlog.store import Store, open_store
from flightlog.web.app import create_app
from flightlog.web.security import Auth

from .helpers import cli, connect, execute, suspended_run

TOKEN = "test-token-0123456789abcdef"
BASE = "http://127.0.0.1:8000"


def _flip_a_byte(url: str, session_id: str, seq: int) -> None:
    """Change one stored byte of event ``seq`` (its tool name's first letter) behind flightlog's back."""
    raw = connect(url)
    try:
        cur = raw.cursor()
        mark = "?" if "://" not in url else "%s"
        cur.execute(f"SELECT event FROM events WHERE session_id = {mark} AND seq = {mark}", (session_id, seq))
        (data,) = cur.fetchone()
        data = bytes(data)
        changed = data.replace(b'"note"', b'"mote"', 1)
        assert changed != data, data
        cur.execute(
            f"UPDATE events SET event = {mark} WHERE session_id = {mark} AND seq = {mark}",
            (changed, session_id, seq),
        )
        raw.commit()
    finally:
        raw.close()


def _tool_seq(url: str, session_id: str) -> int:
    """The seq of the run's first event that names the tool ``note`` (its ``tool_requested``)."""
    code, out, _ = cli(url, "export", session_id)
    assert code == 0
    return next(i for i, line in enumerate(out.splitlines()) if '"note"' in line)


def _forged(url: str) -> tuple[str, int]:
    """A kernel run waiting for a decision, its row's source forged to a LangGraph thread's and a row's
    bytes changed; the session id and the changed seq."""
    sid = suspended_run(url)
    seq = _tool_seq(url, sid)
    execute(url, f"UPDATE sessions SET source = 'langgraph' WHERE session_id = '{sid}'")
    _flip_a_byte(url, sid, seq)
    return sid, seq


def _says_tampered(err: str, sid: str, seq: int) -> None:
    (line,) = err.splitlines()
    assert line.startswith(
        f"flightlog: error: ledger of session {sid} diverges at sequence {seq}: hash_mismatch: "
    ), line
    assert line.endswith("; refusing to act on it"), line
    assert "langgraph" not in line.lower() and "refused" not in line, line


def test_abort_and_signal_name_the_tamper_not_a_forged_source(url: str) -> None:
    sid, seq = _forged(url)
    epoch_before = _epoch(url, sid)
    code, out, err = cli(url, "abort", sid)
    assert (code, out) == (1, ""), err
    _says_tampered(err, sid, seq)
    assert _epoch(url, sid) == epoch_before  # refused at the first check: nothing fenced, nothing written
    code, out, err = cli(url, "signal", sid, "--message", "stop")
    assert (code, out) == (1, ""), err
    _says_tampered(err, sid, seq)
    code, out, _ = cli(url, "abort", sid, "--json")
    assert (code, out) == (1, "")
    code, out, err = cli(url, "resume", sid)  # its LangGraph refusal (exit 2) came before the check on main
    assert (code, out) == (1, ""), err
    _says_tampered(err, sid, seq)


def test_the_dashboard_refuses_them_as_tampered(url: str) -> None:
    sid, seq = _forged(url)
    with _client(url) as client:
        for path, form in (
            ("/runs/abort", {"session_id": sid, "operator": "ops", "confirm": "yes"}),
            ("/signals/send", {"session_id": sid, "operator": "ops", "kind": "message", "text": "stop"}),
        ):
            response = client.post(
                path,
                data={**form, "csrf": Auth(TOKEN).csrf},
                headers={"accept": "application/json", "Origin": BASE},
            )
            assert response.status_code == 409, response.text
            error = response.json()["error"]
            assert f"ledger of session {sid} diverges at sequence {seq}: hash_mismatch" in error, error
            assert "langgraph" not in error.lower(), error


def test_an_untouched_kernel_run_still_takes_a_signal_and_an_abort(url: str) -> None:
    """A session that passes the check goes on to the source rule: a kernel run takes both (an import or a
    LangGraph thread that passes is refused with exit 2: tests/integrations/test_langgraph_signal.py)."""
    sid = suspended_run(url)
    code, out, err = cli(url, "signal", sid, "--message", "the file is under /etc")
    assert code == 0 and out.startswith("queued message "), err
    code, out, err = cli(url, "abort", sid, "--json")
    assert (code, json.loads(out)) == (0, {"session_id": sid, "aborted": True}), err


def _epoch(url: str, session_id: str) -> int:
    with open_store(url, read_only=True) as store:
        return store.authority_epoch(session_id)


@contextmanager
def _client(url: str) -> Iterator[TestClient]:
    def opener() -> Callable[[bool], AbstractContextManager[Store]]:
        @contextmanager
        def open_db(read_only: bool) -> Iterator[Store]:
            with open_store(url, read_only=read_only) as store:
                yield store

        return open_db

    with TestClient(create_app(opener(), token=TOKEN), base_url=BASE) as client:
        client.cookies.set("flightlog_ui_8000", Auth(TOKEN).cookie_value)
        yield client


def test_an_abort_of_a_session_busy_through_the_first_check_fences_it_then_checks(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer that keeps appending through every pass of the first check (``SessionBusy``, simulated
    here by the first check's answer) must not make the emergency brake fail: the abort fences the writer
    off, checks the settled ledger, then applies the source rule and records the abort."""
    import importlib

    from flightlog.errors import SessionBusy

    abort_module = importlib.import_module("flightlog.kernel.abort")  # the package's `abort` is the function

    sid = suspended_run(url)
    real = abort_module.require_intact
    checks: list[int] = []

    def busy_first(store: Store, session_id: str, **kw: Any) -> Any:
        checks.append(store.authority_epoch(session_id))
        if len(checks) == 1:
            raise SessionBusy(session_id=session_id, seq=0)
        return real(store, session_id, **kw)

    monkeypatch.setattr(abort_module, "require_intact", busy_first)
    before = _epoch(url, sid)
    code, out, err = cli(url, "abort", sid, "--json")
    assert (code, json.loads(out)) == (0, {"session_id": sid, "aborted": True}), err
    assert checks == [before, before + 1]  # the second check ran on the fenced ledger
