"""A session row's ``source`` is compared with the ledger that says who wrote the session.

On main no hash covered the row's ``source``, and nothing compared it: a kernel run whose row alone was
edited to ``source = 'import:claude-code'`` (its events untouched) passed the full check, so ``abort`` and
``signal`` refused it with exit 2 as "an imported claude-code transcript", and an imported transcript whose
row was edited to ``kernel`` passed too, so ``signal`` queued a signal nothing reads and ``abort`` recorded
a stop of a run the kernel never ran. Now the full check compares the row's source with the one the first
verified events fix (the kernel's start: ``run_started`` .. ``budget_limits``; an import's
``import_source`` record): ``verify``/``audit`` report a ``row_mismatch`` naming the row's source and the
ledger's, and ``abort``/``signal``/``resume`` refuse the session as tampered (exit 1, the divergence of the
README's exit-code paragraph), never by the forged source. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flightlog.store import open_store

from .helpers import cli, execute, suspended_run

SAMPLE = Path(__file__).parents[1] / "data" / "samples" / "claude-code" / "spotter_short.jsonl"
PAD = " " * 10


def _imported(url: str) -> str:
    """Import the Claude Code sample; its session id."""
    code, _, err = cli(url, "import", str(SAMPLE))
    assert code == 0, err
    code, out, _ = cli(url, "ls", "--json")
    (sid,) = [r["session_id"] for r in json.loads(out) if r["source"] == "import:claude-code"]
    return str(sid)


def _forge(url: str, sid: str, source: str) -> None:
    execute(url, f"UPDATE sessions SET source = '{source}' WHERE session_id = '{sid}'")


def _budget_seq(url: str, sid: str) -> int:
    """The seq of the kernel run's ``budget_limits`` (the end of its start)."""
    code, out, _ = cli(url, "export", sid)
    assert code == 0
    return next(i for i, line in enumerate(out.splitlines()) if '"budget_limits"' in line)


def _epoch(url: str, sid: str) -> int:
    with open_store(url, read_only=True) as store:
        return store.authority_epoch(sid)


def _refused_as_tampered(url: str, sid: str, seq: int, detail: str) -> None:
    """``abort``, ``signal`` and ``resume`` exit 1 naming the ``row_mismatch`` at ``seq``, nothing fenced."""
    before = _epoch(url, sid)
    for args in (("abort", sid), ("signal", sid, "--message", "stop"), ("resume", sid)):
        code, out, err = cli(url, *args)
        assert (code, out) == (1, ""), (args, err)
        (line,) = err.splitlines()
        assert line == (
            f"flightlog: error: ledger of session {sid} diverges at sequence {seq}: row_mismatch: {detail}; "
            "refusing to act on it"
        ), line
    assert _epoch(url, sid) == before  # refused at the first check: nothing bumped, nothing written


def _verify_and_audit_name(url: str, sid: str, seq: int, detail: str) -> None:
    """``verify``, ``audit`` (text and JSON) and ``show``'s quick check name the ``row_mismatch``."""
    for command in ("verify", "audit"):
        code, out, _ = cli(url, command, sid)
        assert code == 1 and f"{PAD}seq {seq}: row_mismatch ({detail})" in out.splitlines(), out
        code, out, _ = cli(url, command, sid, "--json")
        assert code == 1, out
        assert json.loads(out)[0]["divergences"] == [{"seq": seq, "reason": "row_mismatch", "detail": detail}]
    code, _, err = cli(url, "show", sid)
    assert code == 1 and f"fails verification at seq {seq} (row_mismatch): {detail}; " in err, err


@pytest.mark.parametrize("forged", ["import:claude-code", "claude-code", "langgraph"])
def test_a_kernel_run_whose_row_names_another_source(url: str, forged: str) -> None:
    sid = suspended_run(url)
    seq = _budget_seq(url, sid)
    _forge(url, sid, forged)
    detail = (
        f"sessions row source {forged!r}, the ledger's 'kernel': seq 0 is a kernel run's run_started, its "
        f"budget_limits at seq {seq}"
    )
    _verify_and_audit_name(url, sid, seq, detail)
    _refused_as_tampered(url, sid, seq, detail)
    _forge(url, sid, "kernel")  # the row put back: the check passes and the kernel acts again
    code, out, err = cli(url, "abort", sid, "--json")
    assert (code, json.loads(out)) == (0, {"session_id": sid, "aborted": True}), err


def test_an_import_whose_row_names_the_kernel(url: str) -> None:
    sid = _imported(url)
    assert cli(url, "verify", sid)[0] == 0
    _forge(url, sid, "kernel")
    detail = "sessions row source 'kernel', the ledger's 'import:claude-code': seq 0 is an import_source record of format 'claude-code'"
    _verify_and_audit_name(url, sid, 0, detail)
    _refused_as_tampered(url, sid, 0, detail)
    _forge(url, sid, "import:codex")  # another import's format contradicts the record too
    code, out, _ = cli(url, "verify", sid)
    assert code == 1 and "row_mismatch (sessions row source 'import:codex'" in out, out


def test_an_integration_session_whose_row_names_the_kernel(tmp_path: Path) -> None:
    """A ledger that is neither a kernel run nor an import (a LangGraph thread's: ``run_started``, then its
    ``langgraph.checkpoint`` record at seq 1) contradicts ``kernel``."""
    from integrations.langgraph_waiting import waiting_thread

    db = tmp_path / "lg.db"
    waiting_thread(db)
    _forge(str(db), "langgraph:t1", "kernel")
    code, out, err = cli(db, "abort", "langgraph:t1")
    assert (code, out) == (1, ""), err
    assert "row_mismatch: sessions row source 'kernel', the ledger's neither 'kernel' nor an import" in err, (
        err
    )
    assert "refused" not in err


def test_a_run_started_without_the_kernel_start_may_be_named_kernel_never_an_import(url: str) -> None:
    """A ``run_started`` no ``budget_limits`` follows (a run recorded through the ``Recorder`` API, a kernel
    run built by an older writer) says only that it is no import."""
    from flightlog.events import RunStarted
    from flightlog.recorder import Recorder

    with open_store(url) as store:
        Recorder.create(store, session_id="r", task="t", source="kernel", notary=None).append(
            RunStarted(run_id="r", goal="g")
        )
    assert cli(url, "verify", "r")[0] == 0
    _forge(url, "r", "import:codex")
    code, out, _ = cli(url, "verify", "r")
    detail = "sessions row source 'import:codex', the ledger's not an import: seq 0 is a run_started no kernel budget_limits follows"
    assert code == 1 and f"{PAD}seq 0: row_mismatch ({detail})" in out.splitlines(), out


@pytest.mark.parametrize(
    ("first", "seq", "why"),
    [
        (
            ["openai_agents.session"],
            0,
            "seq 0 is neither a kernel run's run_started nor an import_source record",
        ),
        (
            ["run_started", "pydantic_ai.request"],
            1,
            "seq 0 is a run_started an integration's pydantic_ai.request record follows at seq 1",
        ),
    ],
)
def test_other_integrations_first_records_contradict_kernel(
    url: str, first: list[str], seq: int, why: str
) -> None:
    """The first records the OpenAI Agents SDK and Pydantic AI integrations write (kinds as they write them)."""
    from flightlog.events import Custom, RunStarted
    from flightlog.recorder import Recorder

    events = [
        RunStarted(run_id="r", goal="g") if k == "run_started" else Custom(custom_kind=k, payload={})
        for k in first
    ]
    with open_store(url) as store:
        Recorder.create(store, session_id="i", task="t", source="openai-agents", notary=None).append_many(
            events
        )
    assert cli(url, "verify", "i")[0] == 0
    _forge(url, "i", "kernel")
    code, out, _ = cli(url, "verify", "i")
    detail = f"sessions row source 'kernel', the ledger's neither 'kernel' nor an import: {why}"
    assert code == 1 and f"{PAD}seq {seq}: row_mismatch ({detail})" in out.splitlines(), out


def test_a_session_with_no_events_keeps_its_row_source(url: str) -> None:
    """The ledger cannot say: nothing is compared (the row stays the only record of its source)."""
    from flightlog.recorder import Recorder

    with open_store(url) as store:
        Recorder.create(store, session_id="empty", task="t", source="kernel", notary=None)
    code, out, _ = cli(url, "verify", "empty")
    assert code == 0 and "row_mismatch" not in out, out
