"""Agent specs, the ledger fold (incremental transcript = ``reconstruct``), and resume edge cases."""

from __future__ import annotations

from pathlib import Path

import pytest

from flightlog.events import Compressed, ContextRenewed, LlmCompleted, PageOut, RunStarted, ToolCompleted
from flightlog.kernel import Agent, AgentSpecError, Kernel, KernelError
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.spec import agent_from_dict, is_logical, load_agent, resolve
from flightlog.kernel.state import load_state
from flightlog.kernel.transcript import Transcript
from flightlog.messages import Message, ToolResult
from flightlog.recorder import Recorder
from flightlog.replay import provider_replay_seed, reconstruct
from flightlog.sessions import replay_session
from flightlog.store import SqliteStore

from . import cli_agents
from .helpers import agent, events, kernel

AGENTS = Path(cli_agents.__file__)


def test_specs_resolve_modules_files_and_factories() -> None:
    assert isinstance(load_agent("kernel.cli_agents:approval_agent"), Agent)
    assert load_agent(f"{AGENTS}:broken").name == "cli-broken"
    assert resolve("flightlog.kernel.scripted:ScriptedProvider") is ScriptedProvider
    assert is_logical("pkg.mod:agent") and not is_logical(f"{AGENTS}:agent") and not is_logical("a.toml")
    for bad, why in [
        ("nocolon", "expected module:attribute"),
        ("kernel.cli_agents:missing", "has no attribute"),
        ("kernel.cli_agents:not_an_agent", "names a int"),
        ("kernel.cli_agents:raising_factory", "its factory raised ValueError: sub-agent role must be"),
        ("/no/such/file.py:x", "cannot import"),
        ("/no/such/agent.toml", "No such file"),
    ]:
        with pytest.raises(AgentSpecError, match=why):
            load_agent(bad)


def test_agent_from_dict_validates() -> None:
    route = [{"ref": "flightlog.kernel.scripted:ScriptedProvider", "kwargs": {"model": "m1"}}]
    built = agent_from_dict({"name": "x", "route": route, "max_tokens": 100, "stream": True})
    assert built.route[0].model == "m1" and built.max_tokens == 100 and built.stream
    with pytest.raises(AgentSpecError, match="unknown keys: colour"):
        agent_from_dict({"name": "x", "route": route, "colour": "red"})
    with pytest.raises(AgentSpecError, match=r"unknown keys in \[budgets\]: token"):
        agent_from_dict({"name": "x", "route": route, "budgets": {"token": 1000}})  # a typo'd limit
    limited = agent_from_dict({"name": "x", "route": route, "budgets": {"tokens": 1000, "turns": 3}})
    assert limited.budgets.tokens == 1000 and limited.budgets.turns == 3
    with pytest.raises(AgentSpecError, match="give effect"):
        agent_from_dict({"name": "x", "route": route, "tools": [f"{AGENTS}:plain_lookup"]})
    with pytest.raises(AgentSpecError, match="max_retries must be"):
        agent_from_dict({"name": "x", "route": route, "max_retries": -1})
    with pytest.raises(AgentSpecError, match="not a ModelProvider"):
        agent_from_dict({"name": "x", "route": [f"{AGENTS}:NOTES"]})


def test_agent_definitions_are_checked() -> None:
    provider = ScriptedProvider([], by_turn=False)
    with pytest.raises(ValueError, match="at least one model provider"):
        Agent(name="a", route=[])
    with pytest.raises(TypeError, match="use @tool"):
        Agent(name="a", route=[provider], tools=[lambda: None])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="unique"):
        Agent(name="a", route=[provider], tools=[cli_agents.note, cli_agents.note])


def test_the_folded_history_equals_reconstruct_after_rollbacks_and_resumes(store: SqliteStore) -> None:
    script = [
        calls(call("echo", {"text": "a"}, id="1")),
        reply("x", protocol="other"),  # malformed: rolled back
        calls(call("echo", {"text": "b"}, id="2")),
        reply("done"),
    ]
    result = kernel(store, ScriptedProvider(script, by_turn=False)).run_sync("go")  # type: ignore[arg-type]
    state = load_state(store, result.session_id)
    assert state.history() == replay_session(store, result.session_id)
    pairs = list(enumerate(events(store, result.session_id)))
    assert state.native_seed("scripted") == [r for _s, r in provider_replay_seed(pairs, "scripted")]
    assert state.native_seed("openai.chat") is None


def test_the_transcript_fed_event_by_event_equals_reconstruct() -> None:
    started = RunStarted(run_id="r", goal="g")
    answer = LlmCompleted(turn=1, message=Message.text("assistant", "a"))
    result = ToolCompleted(turn=1, results=[ToolResult(call_id="c", output="o")])
    handoff = {"sha256:h": [Message.text("user", "handoff")]}
    for extra in (
        Compressed(turn=2, archived_seq_range=(1, 2), summary="s"),
        PageOut(turn=2, summary="p"),
        ContextRenewed(turn=2, sprint=1, handoff_ref="sha256:h"),
    ):
        pairs = list(enumerate([started, answer, result, extra, answer]))
        transcript = Transcript(handoff.get)
        seen = []
        for seq, event in pairs:
            transcript.feed(seq, event)
            seen.append(transcript.messages())
        assert seen == [reconstruct(pairs, at=seq, archive_loader=handoff.get) for seq, _e in pairs]
        assert transcript.native_seed("scripted") is None  # answer has no provider_replay


def test_resume_edge_cases(store: SqliteStore) -> None:
    done = kernel(store, ScriptedProvider([reply("x")], by_turn=False)).run_sync("go")
    n = len(events(store, done.session_id))
    again = kernel(store, ScriptedProvider([], by_turn=False)).resume_sync(done.session_id)
    assert again == done and len(events(store, done.session_id)) == n  # terminal: nothing written
    foreign = Recorder.create(store, session_id="imported")
    foreign.record_custom("anything", {})
    with pytest.raises(KernelError, match="no run_started"):
        Kernel(store, agent(ScriptedProvider([], by_turn=False))).resume_sync("imported")
