"""``examples/city_agent.py`` on the recorded-replay provider: in-process through the API, and from the CLI
(run → exit 3, approve from another process, resume → exit 0); plus the machinery it relies on: the replay
server's ``seek`` mode and journal, the ``is_error: false`` tolerance, ``current_effect_key`` and specs
resolved from the working directory."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from flightlog.events import Custom
from flightlog.kernel import (
    Agent,
    AgentSpecError,
    Kernel,
    approve,
    current_effect_key,
    load_agent,
    pending,
)
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.kernel.tools import tool
from flightlog.providers.anthropic import AnthropicProvider
from flightlog.providers.cassette import load_cassette
from flightlog.providers.replay_match import normalise_body
from flightlog.providers.replay_server import MISMATCH_STATUS, ReplayServer, packaged_cassettes
from flightlog.recorder import verify_session
from flightlog.sessions import iter_events, replay_session
from flightlog.store import SqliteStore, Store

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "city_agent.py"
CASSETTE = packaged_cassettes()["anthropic/thinking-tool-use-roundtrip"]
CALL = "toolu_01YGzqpRE16Vricda3Aqcejo"
ANSWER = (
    "Based on the information that you're from Mexico, the largest city in your country is **Mexico City**"
)


def _load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("city_agent_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


city_agent = _load_example()


def _kinds(store: Store, sid: str) -> list[str]:
    return [
        f"custom:{e.custom_kind}" if isinstance(e, Custom) else e.kind for _row, e in iter_events(store, sid)
    ]


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def lookups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lookups.jsonl"
    monkeypatch.setenv("CITY_AGENT_LOOKUPS", str(path))
    monkeypatch.delenv("CITY_AGENT_HOLD_S", raising=False)
    monkeypatch.delenv("FLIGHTLOG_REPLAY_JOURNAL", raising=False)
    return path


# ─── The example, in-process ─────────────────────────────────────────────────────────────────────


async def _activation(store: Store, journal: Path, session: str | None) -> tuple[Any, ReplayServer]:
    """Run (session None) or resume with a fresh agent and replay server, as a new process would."""
    agent, server = city_agent.build(journal)
    try:
        kernel = Kernel(store, agent)
        result = await (kernel.run(city_agent.GOAL) if session is None else kernel.resume(session))
        model = agent.route[0]
        assert isinstance(model, AnthropicProvider)
        await model.aclose()
    finally:
        server.close()
    return result, server


def test_the_example_runs_suspends_and_resumes_on_the_recording(tmp_path: Path, lookups: Path) -> None:
    journal = tmp_path / "replay.jsonl"
    with SqliteStore(tmp_path / "k.db") as store:
        first, first_server = asyncio.run(_activation(store, journal, None))
        assert (first.status, first.pending_calls, first.detail) == ("suspended", (CALL,), "approval")
        (waiting,) = pending(store)
        assert (waiting.tool, waiting.arguments, waiting.kind) == ("get_user_country", "{}", "approval")
        assert not lookups.exists()  # nothing ran before the approval

        approve(store, first.session_id, CALL, responder="alice")
        second, second_server = asyncio.run(_activation(store, journal, first.session_id))

        assert second.status == "completed" and second.final_message.startswith(ANSWER)
        assert verify_session(store, second.session_id).ok
        kinds = _kinds(store, second.session_id)
        assert kinds.count("llm_completed") == 2
        assert kinds[-2:] == ["run_terminal", "custom:session_sealed"]  # signed and sealed by default
        assert (
            kinds.count("custom:external_effect_intent")
            == kinds.count("custom:external_effect_completed")
            == 1
        )
        messages = replay_session(store, second.session_id)
        assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    # The resumed process's server started at #0 and skipped to the interaction the session had reached.
    first_server.assert_clean(all_served=False)
    second_server.assert_clean(all_served=False)
    assert second_server.remaining == 1  # only the deny branch, after the recording: not taken
    assert (first_server.served, first_server.skipped) == (1, [])
    assert (second_server.served, second_server.skipped) == (1, [0])
    assert [(e["index"], e["matched"], e["skipped"]) for e in _jsonl(journal)] == [
        (0, True, []),
        (1, True, [0]),
    ]
    # The lookup ran once, stamped with its idempotency key.
    assert _jsonl(lookups) == [{"key": f"{first.session_id}:1:{CALL}", "country": "Mexico"}]


# ─── The example, from the CLI in separate processes ───────────────────────────────────────────


def _flightlog_command() -> list[str]:
    """The console script when installed (its sys.path lacks the working directory, as for a user)."""
    script = shutil.which("flightlog", path=str(Path(sys.executable).parent))
    return [script] if script else [sys.executable, "-m", "flightlog"]


def _cli(db: Path, env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [*_flightlog_command(), "--db", str(db), *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def test_the_example_from_the_cli_exits_3_then_0(tmp_path: Path, lookups: Path) -> None:
    db, journal = tmp_path / "cli.db", tmp_path / "replay.jsonl"
    env = {**os.environ, "FLIGHTLOG_REPLAY_JOURNAL": str(journal)}
    code, out, err = _cli(db, env, "run", "examples.city_agent:agent", "--goal", city_agent.GOAL, "--json")
    assert code == 3, err
    sid = json.loads(out)["session_id"]
    assert f"flightlog approve {sid} {CALL}" in err

    code, out, err = _cli(db, env, "pending", "--json")
    assert code == 0, err
    assert [(row["session_id"], row["call_id"]) for row in json.loads(out)] == [(sid, CALL)]

    code, out, err = _cli(db, env, "approve", sid, CALL)
    assert code == 0, err
    code, out, err = _cli(db, env, "resume", sid, "--json")  # the spec recorded at run time
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "completed" and result["final_message"].startswith(ANSWER)

    code, out, err = _cli(db, env, "verify", sid)
    assert code == 0 and out.startswith("ok"), err
    code, out, err = _cli(db, env, "replay", sid)
    assert code == 0 and "-> get_user_country" in out and "Mexico City" in out, err
    assert [(e["index"], e["matched"]) for e in _jsonl(journal)] == [(0, True), (1, True)]
    assert len({e["pid"] for e in _jsonl(journal)}) == 2
    assert len(_jsonl(lookups)) == 1


@pytest.mark.parametrize("deny", [["--as", "bob", "--reason", "not now"], []], ids=["reason", "defaults"])
def test_the_example_denied_from_the_cli_completes_without_the_lookup(
    tmp_path: Path, lookups: Path, deny: list[str]
) -> None:
    """The run's own output invites `deny`; the recording has only the approve path, so a denial then
    resume failed (HTTP 599, 'Mexico' != 'denied by bob: ...') and sealed the session failed (user pass,
    session 16). The example's written deny branch answers any operator and reason; the lookup never runs."""
    db, journal = tmp_path / "cli.db", tmp_path / "replay.jsonl"
    env = {**os.environ, "FLIGHTLOG_REPLAY_JOURNAL": str(journal)}
    code, out, err = _cli(db, env, "run", "examples.city_agent:agent", "--goal", city_agent.GOAL, "--json")
    assert code == 3, err
    sid = json.loads(out)["session_id"]
    code, out, err = _cli(db, env, "deny", sid, CALL, *deny)
    assert code == 0, err
    code, out, err = _cli(db, env, "resume", sid, "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["status"] == "completed"
    assert result["final_message"].startswith("I couldn't look up your country: the lookup was denied.")
    code, out, err = _cli(db, env, "verify", sid)
    assert code == 0 and out.startswith("ok"), err
    code, out, err = _cli(db, env, "replay", sid, "--check")
    assert code == 0 and "all reproduce" in out, err
    assert [(e["index"], e["matched"]) for e in _jsonl(journal)] == [(0, True), (2, True)]
    assert not lookups.exists()  # denied: the billed lookup never ran


def test_the_deny_branch_is_compared_with_the_denial_text_set_aside_only() -> None:
    """:func:`denial_as_recorded` replaces only a denied tool result's text; other bodies pass unchanged."""
    denied = {
        "messages": [
            {
                "role": "user",
                "content": [{"type": "tool_result", "is_error": True, "content": "denied by x: y"}],
            }
        ]
    }
    body = json.dumps(denied).encode()
    assert json.loads(city_agent.denial_as_recorded(body))["messages"][0]["content"][0]["content"] == (
        city_agent.DENIAL_PLACEHOLDER
    )
    failed = json.dumps(denied).replace("denied by x: y", "KeyError: boom").encode()
    assert city_agent.denial_as_recorded(failed) == failed  # a tool error is no denial: compared as sent
    assert city_agent.denial_as_recorded(b"not json") == b"not json"


# ─── The replay server: seek mode, journal, tolerated is_error ─────────────────────────────────


def _post(url: str, body: Any) -> int:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            return int(response.status)
    except urllib.error.HTTPError as error:
        with error:
            error.read()
            return error.code


def test_seek_serves_the_interaction_a_request_matches_and_only_moves_forward(tmp_path: Path) -> None:
    first, second = (i.request.body for i in load_cassette(CASSETTE))
    journal = tmp_path / "journal.jsonl"
    with ReplayServer.from_cassette(CASSETTE, seek=True, journal=journal) as server:
        url = server.root_url + "/v1/messages"
        assert _post(url, second) == 200  # a resumed process: skips #0
        assert (server.served, server.skipped, server.remaining) == (1, [0], 0)
        assert _post(url, first) == MISMATCH_STATUS  # never backwards
        assert [m.index for m in server.mismatches] == [2]
    entries = _jsonl(journal)
    assert [(e["index"], e["matched"], e["skipped"]) for e in entries] == [(1, True, [0]), (2, False, [])]
    assert entries[1]["differences"] == ["no recorded interaction left (2 served)"]
    assert {e["pid"] for e in entries} == {os.getpid()}


def test_without_seek_a_later_interaction_is_a_mismatch() -> None:
    second = load_cassette(CASSETTE)[1].request.body
    with ReplayServer.from_cassette(CASSETTE) as server:
        assert _post(server.root_url + "/v1/messages", second) == MISMATCH_STATUS
        assert (server.served, server.skipped, server.remaining) == (0, [], 2)


def test_seek_still_refuses_a_request_no_interaction_matches() -> None:
    tampered = json.loads(json.dumps(load_cassette(CASSETTE)[1].request.body))
    tampered["messages"][2]["content"][0]["content"] = "Canada"
    with ReplayServer.from_cassette(CASSETTE, seek=True) as server:
        assert _post(server.root_url + "/v1/messages", tampered) == MISMATCH_STATUS
        (mismatch,) = server.mismatches
        # The request follows interaction #1's conversation furthest (it is #1's body with one answer
        # changed), so the mismatch names #1 and the difference, not #0's wholly different body.
        assert mismatch.index == 1 and server.served == 0
        assert mismatch.differences == (
            "$.messages[2].content[0].content[0].text: recorded 'Mexico' != sent 'Canada'",
        )


def test_anthropic_tool_result_is_error_false_is_the_default() -> None:
    def body(**extra: Any) -> dict[str, Any]:
        block = {"type": "tool_result", "tool_use_id": "t", "content": "ok", **extra}
        return {"messages": [{"role": "user", "content": [block]}]}

    assert normalise_body(body(is_error=False), "/v1/messages", "vcrpy") == normalise_body(
        body(), "/v1/messages", "vcrpy"
    )
    assert normalise_body(body(is_error=True), "/v1/messages", "vcrpy") != normalise_body(
        body(), "/v1/messages", "vcrpy"
    )


# ─── current_effect_key and specs from the working directory ───────────────────────────────────


def test_current_effect_key_is_the_calls_key_in_the_tool_only(tmp_path: Path) -> None:
    seen: list[str | None] = []

    @tool(effect="side_effect")
    def act() -> str:
        """Do something once."""
        seen.append(current_effect_key())
        return "done"

    @tool(effect="read_only")
    def look() -> str:
        """Look."""
        seen.append(current_effect_key())
        return "seen"

    provider = ScriptedProvider(
        [calls(call("act", {}, id="c1"), call("look", {}, id="c2")), reply("ok")], by_turn=False
    )
    with SqliteStore(tmp_path / "k.db") as store:
        result = Kernel(store, Agent(name="a", route=[provider], tools=[act, look])).run_sync("go")
    assert result.status == "completed"
    assert seen == [f"{result.session_id}:1:c1", None]
    assert current_effect_key() is None


def test_a_dotted_spec_resolves_from_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "local_agents_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mine.py").write_text(
        "from flightlog.kernel import Agent, ScriptedProvider\n"
        "agent = Agent(name='local', route=[ScriptedProvider([])])\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    try:
        assert load_agent("local_agents_pkg.mine:agent").name == "local"
        assert sys.path[0] == str(tmp_path)
        with pytest.raises(AgentSpecError, match="cannot import"):
            load_agent("local_agents_pkg.missing:agent")
    finally:
        for name in ("local_agents_pkg", "local_agents_pkg.mine"):
            sys.modules.pop(name, None)


def test_a_missing_module_elsewhere_does_not_touch_sys_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", os.getcwd())])
    before = list(sys.path)
    with pytest.raises(AgentSpecError, match="cannot import"):
        load_agent("no_such_agents_here.mod:agent")
    assert sys.path == before
