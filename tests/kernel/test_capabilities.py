"""Capabilities mounted at run time (issue 14 item 4): MCP servers over real stdio, unmount mid-run,
remount on resume after SIGKILL, smuggling refused, the tool surface checked by ``replay --check``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from flightlog.events import CapabilityChanged, SessionEvent, ToolCompleted
from flightlog.integrity.grants import GrantPolicy, load_policy_signer, sign_grant
from flightlog.integrity.notary import USER_NOTARY
from flightlog.kernel import Agent, Kernel, Policy, Rule, approve, deny
from flightlog.kernel.capabilities import (
    CAPABILITY_CRASHED,
    CAPABILITY_FAILED,
    CAPABILITY_REFUSED,
    CAPABILITY_TOOLS,
    SkillPack,
)
from flightlog.kernel.mcp import McpServer
from flightlog.kernel.requests import check_requests, check_session
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore, Store

from .helpers import customs, echo, of, run

pytest.importorskip("mcp")

HERE = Path(__file__).parent
SERVER = str(HERE / "mcp_server.py")


def server(tmp_path: Path, **fields: Any) -> McpServer:
    env = {"NOTES_FILE": str(tmp_path / "notes.txt"), "STARTS_FILE": str(tmp_path / "starts.txt")}
    fields.setdefault("tools", ["echo", "add", "append_note", "crash"])
    fields.setdefault("effects", {"echo": "read_only", "add": "read_only", "crash": "idempotent"})
    return McpServer(id="t", command=sys.executable, args=[SERVER], env=env, **fields)


def tool_names(request: Any) -> list[str]:
    return [spec.name for spec in request.tools]


def changes(store: Store, sid: str) -> list[CapabilityChanged]:
    return of(store, sid, CapabilityChanged)


def outputs(store: Store, sid: str) -> list[tuple[str, bool]]:
    return [(r.output, r.is_error) for e in of(store, sid, ToolCompleted) for r in e.results]


def test_mcp_tools_are_called_through_a_real_stdio_server(store: SqliteStore, tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            calls(call("t__add", {"a": 2, "b": 3}, id="c1"), call("t__echo", {"text": "hi"}, id="c2")),
            calls(call("t__add", {"a": "two", "b": 3}, id="c3")),
            reply("done"),
        ],
        by_turn=False,
    )
    agent = Agent(name="mcp", route=[provider], tools=[echo], capabilities=[server(tmp_path)])
    result = run(Kernel(store, agent, notary=None).run("add", session_id="s1"))
    assert result.status == "completed"
    [mounted] = changes(store, "s1")
    assert mounted.change_kind == "mount" and mounted.capability_id == "t"
    assert mounted.added == [
        "McpServer:t",
        "Tool:t__echo",
        "Tool:t__add",
        "Tool:t__append_note",
        "Tool:t__crash",
    ]
    assert (mounted.mounted_by, mounted.mount_reason) == ("agent", "declared")
    # The server's own tools (run_shell, fail) are not in the allow list: refused and recorded.
    refused = {p["tool"]: p["reason"] for p in customs(store, "s1", CAPABILITY_REFUSED)}
    assert refused == {
        "t__run_shell": "not in the server's allow list",
        "t__fail": "not in the server's allow list",
        "t__block": "not in the server's allow list",
    }
    # The model saw the server's schema; the calls went through the server.
    first = provider.requests[0]
    assert tool_names(first) == ["echo", "t__echo", "t__add", "t__append_note", "t__crash"]
    add_spec = next(s for s in first.tools if s.name == "t__add")
    assert add_spec.parameters["properties"]["a"]["type"] == "integer"
    assert add_spec.description == "Add two integers."
    assert outputs(store, "s1")[:2] == [("5", False), ("hi", False)]
    # Arguments are validated against the server's JSON Schema before anything is sent.
    bad_output, bad_error = outputs(store, "s1")[2]
    assert (
        bad_error
        and "invalid arguments for t__add" in bad_output
        and "'two' is not of type 'integer'" in bad_output
    )
    tools_record = customs(store, "s1", CAPABILITY_TOOLS)[0]
    assert tools_record["source"] == {
        "transport": "stdio",
        "command": sys.executable,
        "args": [SERVER],
        "env_names": ["NOTES_FILE", "STARTS_FILE"],
    }
    assert {t["name"]: t["effect"] for t in tools_record["tools"]}["t__append_note"] == "side_effect"
    check = check_session(store, "s1")
    assert check.ok and check.checked == 3


def test_unmount_mid_run_removes_the_tools_from_the_next_request(store: SqliteStore, tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            calls(call("t__echo", {"text": "one"}, id="c1")),
            calls(call("t__echo", {"text": "two"}, id="c2")),
            reply("done"),
        ],
        by_turn=False,
    )
    agent = Agent(name="mcp", route=[provider], capabilities=[server(tmp_path)])
    holder: dict[str, Kernel] = {}

    def on_event(row: Any, event: SessionEvent) -> None:
        if isinstance(event, ToolCompleted) and event.turn == 1:
            holder["k"].unmount("t")  # from the host, while the run is going

    holder["k"] = Kernel(store, agent, notary=None, on_event=on_event)
    assert run(holder["k"].run("echo", session_id="s2")).status == "completed"
    _mount, unmount = changes(store, "s2")
    assert unmount.change_kind == "unmount" and unmount.turn == 1
    assert unmount.removed == [
        "McpServer:t",
        "Tool:t__echo",
        "Tool:t__add",
        "Tool:t__append_note",
        "Tool:t__crash",
    ]
    assert unmount.mounted_by is None and unmount.mount_reason is None  # upstream: only mounts carry them
    assert "t__echo" in tool_names(provider.requests[0])
    assert tool_names(provider.requests[1]) == []
    # The model called the tool anyway: not offered any more, so not run.
    assert outputs(store, "s2")[0] == ("one", False)
    second, is_error = outputs(store, "s2")[1]
    assert is_error and "unknown tool 't__echo'" in second
    assert check_session(store, "s2").ok


def test_smuggling_is_refused_by_policy_shadowing_and_the_allow_list(
    store: SqliteStore, tmp_path: Path
) -> None:
    provider = ScriptedProvider(
        [calls(call("run_shell", {"command": "rm -rf /"}, id="c1")), reply("ok")], by_turn=False
    )
    sneaky = server(tmp_path, tools=["*"], prefix="")  # no prefix: its `echo` would shadow the agent's
    policy = Policy(rules=[Rule(action="deny", tool="run_shell")])
    agent = Agent(name="mcp", route=[provider], tools=[echo], capabilities=[sneaky], policy=policy)
    assert run(Kernel(store, agent, notary=None).run("x", session_id="s3")).status == "completed"
    refused = {p["tool"]: p["reason"] for p in customs(store, "s3", CAPABILITY_REFUSED)}
    assert refused["echo"] == "would shadow a tool already offered"
    assert refused["run_shell"].startswith("denied by the agent's policy")
    offered = tool_names(provider.requests[0])
    assert "run_shell" not in offered and offered.count("echo") == 1
    [(output, is_error)] = outputs(store, "s3")
    assert is_error and "unknown tool 'run_shell'" in output
    # The agent's own echo is the one offered, not the server's.
    assert (
        next(s for s in provider.requests[0].tools if s.name == "echo").description == "Echo the text back."
    )


def test_a_signed_grant_keeps_server_tools_outside_it_off_the_surface(
    store: SqliteStore, tmp_path: Path
) -> None:
    grant = GrantPolicy(policy_id="mcp-test", tools_allow=["t__echo"], authority_epoch=0)
    provider = ScriptedProvider(
        [calls(call("t__add", {"a": 1, "b": 2}, id="c1")), reply("ok")], by_turn=False
    )
    agent = Agent(
        name="mcp",
        route=[provider],
        capabilities=[server(tmp_path)],
        grant=sign_grant(grant, load_policy_signer()),
    )
    assert run(Kernel(store, agent).run("x", session_id="g1")).status == "completed"
    refused = {p["tool"]: p["reason"] for p in customs(store, "g1", CAPABILITY_REFUSED)}
    assert refused["t__add"] == refused["t__append_note"] == "outside grant policy mcp-test"
    assert tool_names(provider.requests[0]) == ["t__echo"]
    [(output, is_error)] = outputs(store, "g1")
    assert is_error and "unknown tool 't__add'" in output


def test_a_policy_unlock_mounts_a_locked_skill_pack(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [calls(call("nothing", {}, id="c0")), calls(call("echo", {"text": "x"}, id="c1")), reply("ok")],
        by_turn=False,
    )

    def after_first_turn(state: Any) -> str | None:
        return "first turn done" if state.turn >= 1 else None

    pack = SkillPack("basics", [echo], locked=True, unlock_when=after_first_turn, version="1.0")
    agent = Agent(name="skills", route=[provider], capabilities=[pack])
    assert run(Kernel(store, agent, notary=None).run("x", session_id="u1")).status == "completed"
    [mounted] = changes(store, "u1")
    assert (mounted.turn, mounted.mounted_by, mounted.mount_reason, mounted.version) == (
        1,
        "policy",
        "first turn done",
        "1.0",
    )
    assert tool_names(provider.requests[0]) == [] and tool_names(provider.requests[1]) == ["echo"]


def test_replay_check_catches_a_tool_no_capability_change_explains(
    store: SqliteStore, tmp_path: Path
) -> None:
    provider = ScriptedProvider(
        [calls(call("t__echo", {"text": "a"}, id="c1")), reply("done")], by_turn=False
    )
    agent = Agent(name="mcp", route=[provider], capabilities=[server(tmp_path)])
    holder: dict[str, Kernel] = {}

    def on_event(row: Any, event: SessionEvent) -> None:
        if isinstance(event, ToolCompleted):
            holder["k"].unmount("t")

    holder["k"] = Kernel(store, agent, notary=None, on_event=on_event)
    run(holder["k"].run("x", session_id="s4"))
    pairs = [(row.seq, event) for row, event in iter_events(store, "s4")]
    assert check_requests(pairs).ok
    # Drop the unmount: the second request no longer offers tools the ledger says are mounted.
    tampered = [
        (seq, e) for seq, e in pairs if not (isinstance(e, CapabilityChanged) and e.change_kind == "unmount")
    ]
    check = check_requests(tampered)
    assert not check.ok and check.first is not None and check.first.turn == 2
    assert "not the surface the capability changes give" in check.first.reason


def test_skill_pack_mounted_from_the_host_at_the_next_boundary(store: SqliteStore) -> None:
    provider = ScriptedProvider(
        [calls(call("nothing", {}, id="c0")), calls(call("echo", {"text": "x"}, id="c1")), reply("done")],
        by_turn=False,
    )
    agent = Agent(name="skills", route=[provider], capabilities=[SkillPack("basics", [echo], locked=True)])
    holder: dict[str, Kernel] = {}

    def on_event(row: Any, event: SessionEvent) -> None:
        if event.kind == "llm_completed" and len(provider.requests) == 1:
            holder["k"].mount("basics")  # a locked capability the agent declares, by id

    holder["k"] = Kernel(store, agent, notary=None, on_event=on_event)
    assert run(holder["k"].run("x", session_id="s5")).status == "completed"
    [mounted] = changes(store, "s5")
    assert mounted.added == ["Skill:basics", "Tool:echo"] and mounted.turn == 1
    assert (mounted.mounted_by, mounted.mount_reason) == ("sdk:runtime", "dynamic_register")
    assert tool_names(provider.requests[0]) == [] and tool_names(provider.requests[1]) == ["echo"]
    assert outputs(store, "s5")[1] == ("x", False)
    assert check_session(store, "s5").ok


def test_a_crashed_server_is_recorded_and_restarted_on_resume(store: SqliteStore, tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            calls(call("t__crash", {}, id="c1")),
            calls(call("echo", {"text": "waiting"}, id="c2")),
            calls(call("t__echo", {"text": "back"}, id="c3")),
            reply("done"),
        ],
        by_turn=True,
    )
    policy = Policy(rules=[Rule(action="ask", tool="echo")])
    agent = Agent(name="mcp", route=[provider], tools=[echo], capabilities=[server(tmp_path)], policy=policy)
    first = run(Kernel(store, agent, notary=None).run("x", session_id="s6"))
    assert first.status == "suspended"
    # The crash call failed; the next boundary recorded the crash and unmounted the server.
    crashed = customs(store, "s6", CAPABILITY_CRASHED)
    assert len(crashed) == 1 and crashed[0]["capability"] == "McpServer:t"
    assert [c.change_kind for c in changes(store, "s6")] == ["mount", "unmount"]
    assert outputs(store, "s6")[0][1] is True
    assert "t__echo" not in tool_names(provider.requests[1])
    approve(store, "s6", "c2", notary=None)
    final = run(Kernel(store, agent, notary=None).resume("s6"))
    assert final.status == "completed"
    remount = changes(store, "s6")[-1]
    assert (remount.change_kind, remount.mounted_by, remount.mount_reason) == (
        "mount",
        "kernel",
        "restart_after_crash",
    )
    assert outputs(store, "s6")[-1] == ("back", False)
    assert len((tmp_path / "starts.txt").read_text().splitlines()) == 2
    assert check_session(store, "s6").ok


def test_a_server_sigkilled_mid_run_is_recorded_as_crashed(store: SqliteStore, tmp_path: Path) -> None:
    provider = ScriptedProvider(
        [
            calls(call("t__echo", {"text": "one"}, id="c1")),
            calls(call("t__echo", {"text": "two"}, id="c2")),
            calls(call("t__echo", {"text": "three"}, id="c3")),
            reply("done"),
        ],
        by_turn=False,
    )
    starts = tmp_path / "starts.txt"

    def on_event(row: Any, event: SessionEvent) -> None:
        if isinstance(event, ToolCompleted) and event.turn == 1:
            (pid,) = [int(line) for line in starts.read_text().splitlines()]
            os.kill(pid, signal.SIGKILL)  # the server dies between two turns

    agent = Agent(name="mcp", route=[provider], capabilities=[server(tmp_path)])
    assert (
        run(Kernel(store, agent, notary=None, on_event=on_event).run("x", session_id="k1")).status
        == "completed"
    )
    assert outputs(store, "k1")[0] == ("one", False)
    second, is_error = outputs(store, "k1")[1]
    assert is_error and "MCP server t" in second  # the call found the server gone
    [crash] = customs(store, "k1", CAPABILITY_CRASHED)
    assert crash["turn"] == 2 and crash["capability"] == "McpServer:t"
    assert [c.change_kind for c in changes(store, "k1")] == ["mount", "unmount"]
    assert "unknown tool 't__echo'" in outputs(store, "k1")[2][0]
    assert check_session(store, "k1").ok


@pytest.mark.parametrize("signed", [True, False], ids=["signed", "unsigned"])
def test_resume_runs_a_recorded_server_command_only_when_signed(
    store: SqliteStore, tmp_path: Path, signed: bool
) -> None:
    """A server mounted from the host (not declared by the agent): its command comes from the ledger."""
    script = [
        calls(call("nothing", {}, id="c0")),
        calls(call("echo", {"text": "wait"}, id="c1")),
        calls(call("t__echo", {"text": "b"}, id="c2")),
        reply("ok"),
    ]
    provider = ScriptedProvider(script, by_turn=True)
    policy = Policy(rules=[Rule(action="ask", tool="echo")])
    agent = Agent(name="mcp", route=[provider], tools=[echo], policy=policy)
    notary = USER_NOTARY if signed else None
    holder: dict[str, Kernel] = {}

    def on_event(row: Any, event: SessionEvent) -> None:
        if event.kind == "checkpoint_taken" and event.turn == 1:  # type: ignore[attr-defined]
            holder["k"].mount(server(tmp_path))  # applied at the next boundary

    holder["k"] = Kernel(store, agent, notary=notary, on_event=on_event)
    assert run(holder["k"].run("x", session_id="r1")).status == "suspended"
    approve(store, "r1", "c1", notary=notary)
    final = run(Kernel(store, agent, notary=notary).resume("r1"))
    starts = len((tmp_path / "starts.txt").read_text().splitlines())
    last = changes(store, "r1")[-1]
    if signed:
        # Started again from the ledger's command (without env values: only their names are recorded,
        # and this agent does not declare the server), and called.
        assert (last.change_kind, last.mounted_by, last.mount_reason) == ("mount", "kernel", "resume")
        assert starts == 1 and outputs(store, "r1")[-1] == ("b", False) and final.status == "completed"
    else:
        assert last.change_kind == "unmount" and starts == 1
        [failed] = customs(store, "r1", CAPABILITY_FAILED)
        assert "not covered by a verified signed checkpoint" in failed["error"]
        assert "unknown tool 't__echo'" in outputs(store, "r1")[-1][0]


def test_a_server_that_does_not_start_is_recorded_and_the_run_goes_on(
    store: SqliteStore, tmp_path: Path
) -> None:
    provider = ScriptedProvider([reply("fine without it")], by_turn=False)
    broken = McpServer(id="gone", command=str(tmp_path / "no-such-server"), timeout_s=60)
    agent = Agent(name="mcp", route=[provider], capabilities=[broken])
    assert run(Kernel(store, agent, notary=None).run("x", session_id="s8")).status == "completed"
    [failed] = customs(store, "s8", CAPABILITY_FAILED)
    assert failed["capability"] == "McpServer:gone" and "failed to start" in failed["error"]
    assert changes(store, "s8") == [] and tool_names(provider.requests[0]) == []


def _wait_for_line(
    stream: Any, pattern: str, timeout_s: float = 60.0
) -> tuple[re.Match[str], threading.Thread]:
    """Read ``stream`` (in a thread, to its end) until a line matches ``pattern``, bounded by ``timeout_s``;
    returns the match and the reader thread."""
    seen = threading.Event()
    lines: list[str] = []
    found: list[re.Match[str]] = []

    def read() -> None:
        for line in stream:
            lines.append(line)
            if not found and (match := re.search(pattern, line)):
                found.append(match)
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert seen.wait(timeout_s), f"no {pattern!r} from the server: {''.join(lines)}"
    return found[0], reader


def test_a_server_over_streamable_http(store: SqliteStore, tmp_path: Path) -> None:
    # Port 0: the server binds a free port and says which. (A port found free here and closed, then
    # passed to the server, could be taken in between by another process: then no server, and a wait.)
    proc = subprocess.Popen(
        [sys.executable, SERVER, "http", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    reader: threading.Thread | None = None
    try:
        running, reader = _wait_for_line(proc.stderr, r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
        port = int(running.group(1))
        provider = ScriptedProvider(
            [calls(call("h__add", {"a": 20, "b": 22}, id="c1")), reply("done")], by_turn=False
        )
        remote = McpServer(
            id="h", url=f"http://127.0.0.1:{port}/mcp", tools=["add"], effects={"add": "read_only"}
        )
        agent = Agent(name="http", route=[provider], capabilities=[remote])
        assert run(Kernel(store, agent, notary=None).run("add", session_id="h1")).status == "completed"
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if reader is not None:
            reader.join(timeout=30)  # it ends at the pipe's end, the process being gone
        assert proc.stderr is not None
        proc.stderr.close()
    [mounted] = changes(store, "h1")
    assert mounted.added == ["McpServer:h", "Tool:h__add"]
    assert customs(store, "h1", CAPABILITY_TOOLS)[0]["source"] == {
        "transport": "streamable_http",
        "url": f"http://127.0.0.1:{port}/mcp",
    }
    assert outputs(store, "h1") == [("42", False)]


def _killed_at_effect_ran(tmp_path: Path, sid: str) -> Path:
    """Run caps_agent.py in a child that SIGKILLs itself right after the MCP side effect ran."""
    db = tmp_path / "k.db"
    env = {**os.environ, "FLIGHTLOG_TEST_CRASH_AT": "effect.ran"}
    child = [sys.executable, str(HERE / "caps_agent.py"), str(db), sid, str(tmp_path)]
    done = subprocess.run(child, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == -9, done.stderr
    assert (tmp_path / "notes.txt").read_text().splitlines() == ["hello"]  # ran; completion never written
    return db


def _caps_agent(tmp_path: Path, **options: Any) -> Agent:
    sys.path.insert(0, str(HERE))
    try:
        from caps_agent import build  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(HERE))
    agent: Agent = build(tmp_path, **options)
    return agent


def test_resume_after_sigkill_remounts_the_server_and_keeps_effects_exactly_once(tmp_path: Path) -> None:
    db = _killed_at_effect_ran(tmp_path, "s7")
    notes = tmp_path / "notes.txt"
    with SqliteStore(db) as store:
        agent = _caps_agent(tmp_path)
        result = run(Kernel(store, agent).resume("s7"))
        # Remounted from the recorded command after the audit, then the in-doubt effect suspends the run.
        mounts = [c for c in changes(store, "s7") if c.change_kind == "mount"]
        assert [(c.mounted_by, c.mount_reason) for c in mounts] == [
            ("agent", "declared"),
            ("kernel", "resume"),
        ]
        assert len((tmp_path / "starts.txt").read_text().splitlines()) == 2
        assert result.status == "suspended" and result.detail == "effect_in_doubt"
        deny(store, "s7", result.pending_calls[0], reason="already done")
        final = run(Kernel(store, agent).resume("s7"))
        assert final.status == "completed"
        assert notes.read_text().splitlines() == ["hello"]  # never run twice
        assert check_session(store, "s7").ok


def test_an_in_doubt_mcp_effect_is_settled_by_its_reconciler(tmp_path: Path) -> None:
    db = _killed_at_effect_ran(tmp_path, "s9")
    with SqliteStore(db) as store:
        final = run(Kernel(store, _caps_agent(tmp_path, reconcile=True)).resume("s9"))
        assert final.status == "completed"
        assert (tmp_path / "notes.txt").read_text().splitlines() == ["hello"]
        assert outputs(store, "s9")[0] == ("1", False)  # the reconciled result, the note not appended again
