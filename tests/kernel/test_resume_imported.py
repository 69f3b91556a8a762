"""``resume`` of an imported transcript (found by a new-user pass): ``flightlog resume`` of a Claude Code import
printed ``has ended: failed at seq 47 (run_terminal) ... after 0 turn(s), 0 tokens`` (the *first* of its runs,
read with a later run's counts) or asked for ``--spec``. An import records another agent's runs: the kernel
refuses it plainly, and the kernel's reading of a session holding several runs is its last run's."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.events import RunTerminal
from flightlog.integrity.notary import Notary
from flightlog.kernel import Kernel, KernelError, SignalRefused, send_signal
from flightlog.kernel.result import result_of
from flightlog.kernel.scripted import ScriptedProvider, reply
from flightlog.kernel.state import load_state
from flightlog.store import SqliteStore
from flightlog.store.signals import pending_signals

from .helpers import agent, of

runner = CliRunner()
SAMPLE = Path(__file__).parents[1] / "data" / "samples" / "claude-code" / "spotter_subagent_parent.jsonl"
SID = "claude-code:491e126e-1e71-469c-ade2-fcc8af567c74"


def _rows(store: SqliteStore) -> tuple[int, str]:
    """The session's row count and status (what a write would change)."""
    return len(list(store.read_events(SID))), store.get_session(SID).status


def _import(db: Path, *extra: str) -> None:
    done = runner.invoke(app, ["--db", str(db), "import", str(SAMPLE), *extra])
    assert done.exit_code == 0, done.output


@pytest.mark.parametrize("spec", [[], ["--spec", "kernel.cli_agents:approval_agent"]])
def test_resume_of_an_import_says_it_is_an_imported_transcript_exit_2(
    tmp_path: Path, spec: list[str]
) -> None:
    db = tmp_path / "imp.db"
    _import(db)
    with SqliteStore(db) as store:
        before = _rows(store)
    done = runner.invoke(app, ["--db", str(db), "resume", "491e", *spec])
    assert done.exit_code == 2, done.output
    said = " ".join(done.stderr.split())
    assert (
        f"session {SID} is an imported claude-code transcript from spotter_subagent_parent.jsonl "
        "(source import:claude-code), not a kernel run: the kernel cannot resume it"
    ) in said
    assert "nothing to resume" not in done.output and "give --spec" not in said and done.stdout == ""
    with SqliteStore(db) as store:
        assert _rows(store) == before  # nothing written


def _resume(store: SqliteStore) -> object:
    return Kernel(store, agent(ScriptedProvider([reply("hi")])), notary=Notary.from_env()).resume_sync(SID)


def _signal(store: SqliteStore) -> object:
    return send_signal(store, SID, "message", "hello")


@pytest.mark.parametrize(("act", "error"), [(_resume, KernelError), (_signal, SignalRefused)])
def test_the_kernel_neither_resumes_nor_signals_an_import_and_writes_nothing(
    tmp_path: Path, act: Callable[[SqliteStore], object], error: type[Exception]
) -> None:
    """The import's last run has no ``run_terminal`` (no longer hidden by its first run's), yet no kernel
    runs it: ``Kernel.resume`` and ``send_signal`` refuse it, naming it."""
    db = tmp_path / "imp.db"
    _import(db)
    with SqliteStore(db) as store:
        before = _rows(store)
        with pytest.raises(error, match="imported claude-code transcript"):
            act(store)
        assert _rows(store) == before and pending_signals(store, SID) == []


def test_a_later_run_started_opens_a_new_run_and_an_ended_run_reads_its_own_counts(tmp_path: Path) -> None:
    db = tmp_path / "imp.db"
    _import(db)
    with SqliteStore(db) as store:
        state = load_state(store, SID)
        ended = of(store, SID, RunTerminal)
    assert [(t.reason, t.turns_used, t.total_tokens) for t in ended] == [("aborted", 8, 283005)]
    assert state.terminal is None and state.phase != "terminal"  # seq 48 started a run that has not ended
    assert result_of(state).status == "cancelled"  # the open run, interrupted (what `ls` says)

    _import(db, "--seal")  # the transcript's end closes its last run: a second run_terminal
    with SqliteStore(db) as store:
        state = load_state(store, SID)
        last = of(store, SID, RunTerminal)[-1]
    result = result_of(state)
    assert state.terminal == last
    assert (result.turns, result.tokens) == (last.turns_used, last.total_tokens)
