"""The entropy watch: samples recomputed from the ledger, alerts at the turn the formula gives, actions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from flightlog.events import (
    Custom,
    EntropyAlert,
    EntropySample,
    PermissionRequested,
    Rollbacked,
    RunTerminal,
    SessionEvent,
    Suspended,
    ToolCompleted,
    ToolGated,
    ToolRequested,
)
from flightlog.kernel import approve, deny, pending, tool
from flightlog.kernel.entropy import (
    WINDOW_TURNS,
    EntropyTracker,
    EntropyWatch,
    compact_args,
    recompute_samples,
    turn_signature,
)
from flightlog.kernel.requests import check_session
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.messages import ToolCall, ToolResult
from flightlog.providers.base import ProviderError
from flightlog.store import SqliteStore

from .helpers import customs, events, kernel, of


@tool(effect="read_only")
def probe(path: str) -> str:
    """Look at a path that never exists (the looping agent's one idea)."""
    raise FileNotFoundError(path)


def looping_script(turns: int, *, fail_at: int | None = None) -> list[Any]:
    """The same failing call every turn (ids differ), one retryable provider failure before ``fail_at``."""
    script: list[Any] = []
    for t in range(1, turns + 1):
        if t == fail_at:
            script.append(ProviderError("upstream 503", retryable=True))
        script.append(calls(call("probe", {"path": "/missing"}, id=f"c{t}")))
    return script


def by_hand(turn: int, rollbacks: int, threshold: float) -> bool:
    """Upstream's formula for the looping run: streak = turn, every result failed, rho 0 (no window)."""
    repeat = min(1.0, (turn - 1) / 5)
    return 0.35 * repeat + 0.30 * 1.0 + 0.20 * 0.0 + 0.15 * min(1.0, rollbacks / 3) >= threshold


def test_a_looping_agent_trips_the_watch_at_the_turn_the_formula_gives(store: SqliteStore) -> None:
    expected = next(t for t in range(1, 20) if by_hand(t, rollbacks=1, threshold=0.65))
    assert expected == 6  # 0.35 * 1.0 + 0.30 + 0.15 / 3 = 0.70 (turn 5: 0.63)
    provider = ScriptedProvider([*looping_script(10, fail_at=2), reply("gave up")], by_turn=False)
    k = kernel(store, provider, tools=[probe], entropy_watch=EntropyWatch())
    result = k.run_sync("find the file")
    sid = result.session_id

    assert result.status == "suspended" and result.pending_calls == (f"entropy:{expected}",)
    ledger = events(store, sid)
    samples = of(store, sid, EntropySample)
    assert [s.turn for s in samples] == list(range(1, expected + 1))
    assert samples == recompute_samples(ledger)
    assert samples[-1] == EntropySample(
        turn=6,
        score=0.35 * 1.0 + 0.30 * 1.0 + 0.20 * 0.0 + 0.15 * (1 / 3),
        rho=0.0,
        repeat_pressure=1.0,
        failure_rate=1.0,
        rollbacks_in_window=1,
        window_turns=6,
    )
    assert samples[4].score < 0.65 <= samples[5].score
    assert of(store, sid, EntropyAlert) == [EntropyAlert(turn=6, score=samples[-1].score, threshold=0.65)]
    # The alert lands in the turn's tool_completed transaction, right after the sample.
    i = ledger.index(samples[-1])
    assert isinstance(ledger[i - 1], ToolCompleted) and ledger[i + 1] == of(store, sid, EntropyAlert)[0]
    # The action: a gate `pending` lists and `approve` decides, then a suspension.
    tail = ledger[ledger.index(of(store, sid, EntropyAlert)[0]) + 1 :]
    reason = "entropy 0.70 >= 0.65 at turn 6: approve to continue, deny to stop the run"
    assert tail[0] == Custom(custom_kind="entropy_action", payload={"turn": 6, "action": "ask"})
    assert tail[1] == ToolGated(turn=6, call_id="entropy:6", tool="entropy_watch", reason=reason)
    assert isinstance(tail[2], PermissionRequested) and tail[2].tool == "entropy_watch"
    assert tail[3] == Suspended(turn=6, reason="entropy_alert", pending_calls=["entropy:6"])
    waiting = pending(store, sid)
    assert [(p.call_id, p.tool, p.reason) for p in waiting] == [("entropy:6", "entropy_watch", reason)]

    approve(store, sid, "entropy:6", responder="ops")
    resumed = k.resume_sync(sid)
    assert resumed.status == "completed" and resumed.final_message == "gave up"
    after = of(store, sid, EntropySample)
    assert [s.turn for s in after] == list(range(1, 11))
    assert after == recompute_samples(events(store, sid))
    # Disarmed until a score falls below 0.65 - 0.1: the loop goes on above it, no second alert.
    assert len(of(store, sid, EntropyAlert)) == 1
    assert check_session(store, sid).ok


def test_a_denied_watch_gate_stops_the_run(store: SqliteStore) -> None:
    provider = ScriptedProvider([*looping_script(8), reply("never")], by_turn=False)
    k = kernel(store, provider, tools=[probe], entropy_watch=EntropyWatch(threshold=0.5))
    first = k.run_sync("find the file")
    expected = next(t for t in range(1, 20) if by_hand(t, rollbacks=0, threshold=0.5))
    assert expected == 4 and first.pending_calls == ("entropy:4",)
    deny(store, first.session_id, "entropy:4", responder="ops")
    stopped = k.resume_sync(first.session_id)
    assert stopped.status == "failed" and stopped.detail == "no_progress"
    assert customs(store, first.session_id, "entropy_action")[-1] == {
        "turn": 4,
        "action": "stop",
        "by": "operator",
    }
    assert of(store, first.session_id, RunTerminal)[-1].reason == "no_progress"


def test_the_stop_action_ends_the_run_at_the_alert(store: SqliteStore) -> None:
    provider = ScriptedProvider([*looping_script(8), reply("never")], by_turn=False)
    result = kernel(
        store, provider, tools=[probe], entropy_watch=EntropyWatch(threshold=0.5, action="stop")
    ).run_sync("find the file")
    sid = result.session_id
    assert result.status == "failed" and result.turns == 4
    assert customs(store, sid, "entropy_action") == [{"turn": 4, "action": "stop", "by": "watch"}]
    assert of(store, sid, RunTerminal) == [
        RunTerminal(reason="no_progress", turns_used=4, total_tokens=result.tokens)
    ]


def test_the_compact_action_archives_the_loop_and_continues(store: SqliteStore) -> None:
    script = [
        *looping_script(4),
        reply("summary: probed /missing four times, it never exists"),
        reply("stopped"),
    ]
    provider = ScriptedProvider(script, by_turn=False)
    result = kernel(
        store, provider, tools=[probe], entropy_watch=EntropyWatch(threshold=0.5, action="compact")
    ).run_sync("find the file")
    sid = result.session_id
    assert result.status == "completed" and result.final_message == "stopped"
    action = customs(store, sid, "entropy_action")
    assert len(action) == 1 and action[0]["turn"] == 4 and action[0]["action"] == "compact"
    assert action[0]["archived"] > 0
    started = customs(store, sid, "compaction_started")
    assert [s["trigger"] for s in started] == ["entropy"]
    assert check_session(store, sid).ok


def test_without_a_watch_samples_are_recorded_and_nothing_trips(store: SqliteStore) -> None:
    provider = ScriptedProvider([*looping_script(7), reply("done")], by_turn=False)
    result = kernel(store, provider, tools=[probe]).run_sync("find the file")
    assert result.status == "completed"
    assert len(of(store, result.session_id, EntropySample)) == 7
    assert of(store, result.session_id, EntropyAlert) == []


# ─── the pure fold ────────────────────────────────────────────────────────────────────────


def test_the_signature_renders_upstreams_compact_args() -> None:
    assert compact_args("") == "" and compact_args("{}") == "" and compact_args("null") == ""
    assert compact_args('{"b": 1, "a": "é"}') == '{"a":"é","b":1}'
    long = '{"path": "' + "x" * 60 + '"}'
    text = '{"path":"' + "x" * 60 + '"}'
    h = 0xCBF29CE484222325
    for byte in text.encode():
        h = ((h ^ byte) * 0x100000001B3) % 2**64
    assert compact_args(long) == f"{text[:48]}…#{(h ^ (h >> 32)) & 0xFFFFFFFF:08x}"
    assert compact_args("not json") == "not json"
    sig = turn_signature(
        [
            ToolCall(id="a", name="probe", arguments='{"p":1}'),
            ToolCall(id="b", name="page_in", arguments="{}"),
        ]
    )
    assert sig == 'probe({"p":1})'


calls_st = st.lists(st.sampled_from(["a", "b", "page_in"]), min_size=1, max_size=2)
turn_st = st.tuples(calls_st, st.lists(st.booleans(), max_size=3), st.integers(0, 3))


def _ledger(turns: list[tuple[list[str], list[bool], int]]) -> list[SessionEvent]:
    ledger: list[SessionEvent] = []
    n = 0
    for t, (names, errors, rollbacks) in enumerate(turns, start=1):
        ledger += [Rollbacked(turn=t, checkpoint_history_len=1) for _ in range(rollbacks)]
        calls_ = [ToolCall(id=f"{(n := n + 1)}", name=name, arguments="{}") for name in names]
        ledger.append(ToolRequested(turn=t, calls=calls_))
        results = [ToolResult(call_id=f"r{t}-{i}", output="x", is_error=e) for i, e in enumerate(errors)]
        ledger.append(ToolCompleted(turn=t, results=results))
    return ledger


@given(st.lists(turn_st, max_size=20))
def test_every_sample_is_in_range_and_a_fold_of_its_window(
    turns: list[tuple[list[str], list[bool], int]],
) -> None:
    ledger = _ledger(turns)
    samples = recompute_samples(ledger)
    assert [s.turn for s in samples] == list(range(1, len(turns) + 1))
    for i, sample in enumerate(samples):
        window = turns[max(0, i + 1 - WINDOW_TURNS) : i + 1]
        assert sample.window_turns == len(window)
        assert sample.rollbacks_in_window == sum(w[2] for w in window)
        totals = sum(len(w[1]) for w in window)
        assert sample.failure_rate == (sum(sum(w[1]) for w in window) / totals if totals else 0.0)
        assert 0.0 <= sample.repeat_pressure <= 1.0 and sample.rho == 0.0
        rollback_term = min(1.0, sample.rollbacks_in_window / 3)
        assert (
            sample.score == 0.35 * sample.repeat_pressure + 0.30 * sample.failure_rate + 0.15 * rollback_term
        )
        assert 0.0 <= sample.score <= 1.0


@given(st.lists(turn_st, min_size=1, max_size=12))
def test_an_alert_never_fires_twice_without_re_arming(turns: list[tuple[list[str], list[bool], int]]) -> None:
    watch = EntropyWatch(threshold=0.3, hysteresis=0.1, cooldown_turns=2)
    tracker = EntropyTracker(watch)
    fired: list[int] = []
    armed = True
    for event in _ledger(turns):
        if isinstance(event, ToolCompleted):
            produced = tracker.boundary(event.turn, event.results)
            tracker.feed(event)
            for extra in produced:
                tracker.feed(extra)
            sample = produced[0]
            assert isinstance(sample, EntropySample)
            if len(produced) == 2:
                assert armed and sample.score >= 0.3
                assert not fired or sample.turn - fired[-1] >= 2
                fired.append(sample.turn)
                armed = False
            elif sample.score < 0.3 - 0.1:
                armed = True
        else:
            tracker.feed(event)


# ─── the demo step and the example, from the CLI ──────────────────────────────────────────


def test_the_demo_step_catches_the_loop_and_a_steer_ends_it(store: SqliteStore) -> None:
    from io import StringIO

    from rich.console import Console

    from flightlog.cli.demo_watch import run_watch_demo

    buffer = StringIO()
    assert run_watch_demo(store, Console(file=buffer, width=200)) == 0
    out = buffer.getvalue()
    assert "entropy_alert at turn 6 (score 0.6500 >= 0.6): suspended" in out
    assert "the steer was disposed 'interrupt' at turn 7" in out
    assert "all reproduce: True" in out


def test_the_example_from_the_cli_suspends_is_steered_and_completes(db_path: Path) -> None:
    import importlib.util
    import json

    from typer.testing import CliRunner

    from flightlog.cli import app
    from flightlog.kernel import Agent

    example = Path(__file__).resolve().parents[2] / "examples" / "watch_agent.py"
    spec = importlib.util.spec_from_file_location("watch_agent_example", example)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert isinstance(module.agent, Agent) and module.agent.entropy_watch == EntropyWatch(threshold=0.6)

    cli = CliRunner()
    db = ["--db", str(db_path)]
    run = cli.invoke(app, [*db, "run", "flightlog.cli.demo_watch:agent", "--goal", "find it", "--json"])
    assert run.exit_code == 3, run.output
    sid = json.loads(run.stdout)["session_id"]
    listed = cli.invoke(app, [*db, "pending", "--json"])
    assert [row["call_id"] for row in json.loads(listed.stdout)] == ["entropy:6"]
    sent = cli.invoke(app, [*db, "signal", sid[:8], "--steer", "stop probing", "--as", "alice", "--json"])
    assert sent.exit_code == 0 and json.loads(sent.stdout)["urgency"] == "high"
    assert cli.invoke(app, [*db, "approve", sid, "entropy:6", "--as", "alice"]).exit_code == 0
    resumed = cli.invoke(app, [*db, "resume", sid, "--json"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["final_message"].startswith("I could not find the file")
    runs = cli.invoke(app, [*db, "runs", "--entropy"])
    assert runs.exit_code == 0 and "0.30 0.37 0.44 0.51 0.58 0.65!" in runs.stdout
    late = cli.invoke(app, [*db, "signal", sid, "--message", "late"])
    assert late.exit_code == 1 and f"session {sid}: signal refused" in late.stderr
