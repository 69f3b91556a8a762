"""Claude Code background shell tasks become child runs of seed 002 source ``task``: on the real transcript
(tests/data/samples/claude-code/spotter_tool_heavy.jsonl starts ``mix phx.server`` in the background) and on
that transcript continued with the records Claude Code writes when the model reads, stops or is told about
the task (built here from the file's own lines)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.events import Custom, RunStarted, RunTerminal
from flightlog.importers import import_file
from flightlog.runs import list_runs
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore

SAMPLE = Path(__file__).parent / "data" / "samples" / "claude-code" / "spotter_tool_heavy.jsonl"
MAIN = "claude-code:d6e0bada-1959-4eec-a9d2-0bfade768d8f"
TASK = f"{MAIN}:task:bae407b"


def records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def background_calls(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Independent count: ``Bash`` tool_use blocks with ``run_in_background: true``, in plain json."""
    return [
        block
        for r in lines
        if r.get("type") == "assistant"
        for block in r["message"]["content"]
        if block.get("type") == "tool_use"
        and block["name"] == "Bash"
        and block["input"].get("run_in_background")
    ]


def continued(
    tmp_path: Path, name: str, tool: str, tool_input: dict[str, Any], result: str, **extra: Any
) -> Path:
    """The real transcript plus one assistant call and its result, shaped like the file's own lines."""
    lines = records()
    call_line = next(
        r
        for r in lines
        if r.get("type") == "assistant" and r["message"]["content"][0].get("type") == "tool_use"
    )
    result_line = next(
        r
        for r in lines
        if r.get("type") == "user"
        and isinstance(r["message"]["content"], list)
        and r["message"]["content"][0].get("type") == "tool_result"
    )
    last = lines[-1]
    call = copy.deepcopy(call_line)
    call.update(uuid=f"{name}-call", parentUuid=last["uuid"], timestamp="2026-02-10T23:10:00.000Z")
    call["message"]["id"] = f"msg_{name}"
    call["message"]["content"] = [
        {"type": "tool_use", "id": f"toolu_{name}", "name": tool, "input": tool_input}
    ]
    answer = copy.deepcopy(result_line)
    answer.update(uuid=f"{name}-result", parentUuid=call["uuid"], timestamp="2026-02-10T23:10:02.000Z")
    answer["message"]["content"] = [
        {
            "tool_use_id": f"toolu_{name}",
            "type": "tool_result",
            "content": result,
            "is_error": extra.get("is_error", False),
        }
    ]
    answer.pop("toolUseResult", None)
    path = tmp_path / SAMPLE.name
    text = SAMPLE.read_text(encoding="utf-8")
    path.write_text(text + json.dumps(call) + "\n" + json.dumps(answer) + "\n", encoding="utf-8")
    return path


def task_events(store: SqliteStore) -> list[Any]:
    return [event for _, event in iter_events(store, TASK)]


def test_the_real_background_shell_is_a_task_run_child_of_its_session(tmp_path: Path) -> None:
    calls = background_calls(records())
    with SqliteStore(tmp_path / "db.sqlite") as store:
        result = import_file(store, SAMPLE)
        assert result.session_ids[0] == MAIN and TASK in result.session_ids
        tasks = list_runs(store, source="task")
        events = task_events(store)
        session = next(s for s in store.list_sessions() if s.session_id == TASK)
        rows = list(store.read_events(TASK))
    assert len(tasks) == len(calls) == 1
    assert tasks[0].run_id == TASK and tasks[0].parent == MAIN
    started = [e for e in events if isinstance(e, RunStarted)]
    assert [s.goal for s in started] == [calls[0]["input"]["command"]]
    assert session.metadata["task_id"] == "bae407b" and session.metadata["started_by"] == calls[0]["id"]
    assert not [e for e in events if isinstance(e, RunTerminal)]  # the transcript never shows it ending
    result_time = next(
        r["timestamp"] for r in records() if r.get("toolUseResult", {}).get("backgroundTaskId")
    )
    assert rows[1].recorded_at_ms == session.created_at_ms  # the source's time of the start, not the import's
    assert result_time.startswith("2026-02-10T22:57:59")


def test_a_completed_read_of_the_output_ends_the_task_completed_with_its_output(tmp_path: Path) -> None:
    output = "<status>completed</status>\n\n<exit_code>0</exit_code>\n\n<stdout>\n[info] Running SpotterWeb.Endpoint\n</stdout>"
    path = continued(tmp_path, "read", "BashOutput", {"bash_id": "bae407b"}, output)
    with SqliteStore(tmp_path / "db.sqlite") as store:
        import_file(store, path)
        [task] = list_runs(store, source="task")
        events = task_events(store)
    assert task.state == "terminal" and task.terminal is not None and task.terminal.outcome == "completed"
    read = [e for e in events if isinstance(e, Custom) and e.custom_kind == "background_task.output"]
    assert read[0].payload["stdout"] == "[info] Running SpotterWeb.Endpoint"
    assert read[0].payload["call_id"] == "toolu_read"


@pytest.mark.parametrize(
    ("tool", "tool_input", "result", "outcome"),
    [
        (
            "KillShell",
            {"shell_id": "bae407b"},
            "Successfully killed shell: bae407b (mix phx.server)",
            "cancelled",
        ),
        ("BashOutput", {"bash_id": "bae407b"}, "<status>failed</status>\n<exit_code>1</exit_code>", "failed"),
        (
            "TaskOutput",
            {"task_id": "bae407b"},
            "<status>completed</status>\n<exit_code>2</exit_code>",
            "failed",
        ),
    ],
)
def test_a_stop_or_a_failure_ends_the_task_run(
    tmp_path: Path, tool: str, tool_input: dict[str, Any], result: str, outcome: str
) -> None:
    path = continued(tmp_path, "end", tool, tool_input, result)
    with SqliteStore(tmp_path / "db.sqlite") as store:
        import_file(store, path)
        [task] = list_runs(store, source="task")
    assert task.terminal is not None and task.terminal.outcome == outcome


def test_a_refused_stop_does_not_end_the_task(tmp_path: Path) -> None:
    path = continued(
        tmp_path, "kill", "KillShell", {"shell_id": "bae407b"}, "Shell bae407b is not running", is_error=True
    )
    with SqliteStore(tmp_path / "db.sqlite") as store:
        import_file(store, path)
        events = task_events(store)
    assert not [e for e in events if isinstance(e, RunTerminal)]
    assert [e.custom_kind for e in events if isinstance(e, Custom)] == [
        "import_source",
        "background_task.stop",
    ]


def test_runs_cli_lists_the_task_run_under_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLIGHTLOG_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("FLIGHTLOG_HEAD_DIR", str(tmp_path / "heads"))
    runner = CliRunner()
    db = str(tmp_path / "cli.db")
    assert runner.invoke(app, ["--db", db, "import", str(SAMPLE)]).exit_code == 0
    listed = runner.invoke(app, ["--db", db, "runs", "--json"])
    assert listed.exit_code == 0, listed.stderr
    runs = {r["run_id"]: r for r in json.loads(listed.stdout)}
    assert runs[TASK]["source"] == "task" and runs[TASK]["parent"] == MAIN
    assert runs[MAIN]["source"] == "direct"


CODEX = SAMPLE.parent.parent / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl"


def codex_with_terminal(tmp_path: Path, exit_line: str) -> Path:
    """The real rollout with a background terminal in its last turn, in the records' own shapes: an
    ``exec_command`` left running (``Process running with session ID``) and a ``write_stdin`` poll."""
    lines = [json.loads(line) for line in CODEX.read_text(encoding="utf-8").splitlines()]
    call = next(r for r in lines if r["payload"].get("type") == "function_call")
    output = next(r for r in lines if r["payload"].get("type") == "function_call_output")
    at = max(i for i, r in enumerate(lines) if r["payload"].get("type") == "reasoning")
    stamp = lines[at]["timestamp"]

    def pair(call_id: str, name: str, arguments: dict[str, Any], text: str) -> list[dict[str, Any]]:
        asked = copy.deepcopy(call)
        asked["timestamp"] = stamp
        asked["payload"].update(call_id=call_id, name=name, arguments=json.dumps(arguments))
        answered = copy.deepcopy(output)
        answered["timestamp"] = stamp
        answered["payload"].update(call_id=call_id, output=text)
        return [asked, answered]

    started = "Chunk ID: 1a2b3c\nWall time: 1.0009 seconds\nProcess running with session ID 4242\nOutput:\n"
    added = pair("call_bg", "exec_command", {"cmd": "npm run dev", "yield_time_ms": 1000}, started)
    added += pair("call_poll", "write_stdin", {"session_id": 4242, "chars": ""}, exit_line)
    lines[at:at] = added
    path = tmp_path / CODEX.name
    path.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("exit_line", "outcome"),
    [
        (
            "Chunk ID: 4d5e6f\nWall time: 0.0000 seconds\nProcess exited with code 0\nOutput:\nready",
            "completed",
        ),
        ("Chunk ID: 4d5e6f\nWall time: 0.0000 seconds\nProcess exited with code 9\nOutput:\nboom", "failed"),
    ],
)
def test_a_codex_background_terminal_is_a_task_run(tmp_path: Path, exit_line: str, outcome: str) -> None:
    path = codex_with_terminal(tmp_path, exit_line)
    with SqliteStore(tmp_path / "db.sqlite") as store:
        result = import_file(store, path)
        main = result.session_ids[0]
        [task] = list_runs(store, source="task")
        events = [event for _, event in iter_events(store, task.run_id)]
    assert task.run_id == f"{main}:task:4242" and task.parent == main
    assert task.terminal is not None and task.terminal.outcome == outcome
    assert [e.goal for e in events if isinstance(e, RunStarted)] == ["npm run dev"]
    polls = [e.payload for e in events if isinstance(e, Custom) and e.custom_kind == "background_task.output"]
    assert [p["call_id"] for p in polls] == ["call_poll"] and polls[0]["output"] == exit_line


def test_the_finder_skips_only_events_that_cannot_matter() -> None:
    """Walking a spool, the finder decodes only the tool results that answer a watched call and the texts
    holding a notification (issue 19); the child runs equal those found walking the same events in a list,
    with ids that need escaping, an id reused by another tool (forgets the call) and by a background one."""
    from flightlog.events import SessionEvent, ToolCompleted, ToolRequested
    from flightlog.importers.background import task_sessions
    from flightlog.importers.base import EventSpool, ImportedSession
    from flightlog.messages import ToolCall, ToolResult

    def bash(call_id: str, background: bool) -> ToolCall:
        arguments = {"command": "mix phx.server", "run_in_background": background}
        return ToolCall(id=call_id, name="Bash", arguments=json.dumps(arguments))

    def result(call_id: str, output: str, is_error: bool = False) -> ToolCompleted:
        return ToolCompleted(turn=1, results=[ToolResult(call_id=call_id, output=output, is_error=is_error)])

    def started(task_id: str) -> str:
        return f"Command running in background with ID: {task_id}"

    note = "<task-notification><task-id>{}</task-id><status>completed</status></task-notification>"
    events: list[SessionEvent] = [
        RunStarted(run_id="r", goal="go"),
        ToolRequested(turn=1, calls=[bash('a"b\\c', True), bash("plain", False)]),
        result('a"b\\c', started("t1")),
        result("plain", started("t9")),  # not in the background: no task
        ToolRequested(turn=1, calls=[ToolCall(id="k", name="KillShell", arguments='{"shell_id": "t1"}')]),
        result("k", f'the output names "call_id":"{started("t1")}"'),
        ToolRequested(turn=1, calls=[bash("re", True)]),
        ToolRequested(turn=1, calls=[ToolCall(id="re", name="Read", arguments="{}")]),  # forgets "re"
        result("re", started("t2")),
        ToolRequested(turn=1, calls=[ToolCall(id="re", name="Read", arguments="{}")]),
        ToolRequested(turn=1, calls=[bash("re", True)]),  # watched again
        result("re", started("t3")),
        RunStarted(run_id="r2", goal=note.format("t3")),
        Custom(custom_kind="claude_code.x", payload={"text": note.format("t9")}),
        ToolRequested(turn=1, calls=[ToolCall(id="o", name="BashOutput", arguments='{"bash_id": "t3"}')]),
        result("o", "<status>running</status><stdout>ok</stdout>"),
    ]
    spool = EventSpool()
    try:
        for event in events:
            spool.append(event)
        times: list[int | None] = list(range(len(events)))
        found = {
            kind: task_sessions(ImportedSession("s", "t", "claude-code", held, event_times_ms=times))
            for kind, held in (("list", events), ("spool", spool))
        }
    finally:
        spool.close()
    assert [s.key for s in found["list"]] == ["s:task:t1", "s:task:t3"]
    for listed, spooled in zip(found["list"], found["spool"], strict=True):
        assert (spooled.key, spooled.metadata, spooled.event_times_ms) == (
            listed.key,
            listed.metadata,
            listed.event_times_ms,
        )
        assert list(spooled.events) == list(listed.events)
    kinds = [[getattr(e, "custom_kind", e.kind) for e in s.events] for s in found["list"]]
    assert kinds == [
        ["run_started", "background_task.stop", "run_terminal"],
        ["run_started", "background_task.notification", "background_task.output", "run_terminal"],
    ]


def test_the_finder_decodes_only_requests_that_can_change_what_it_watches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Walking a spool, a ``tool_requested`` event is decoded only when a call has a watched name or reuses
    a watched call's id (issue 19): requests of other tools with fresh ids are read in their bytes only,
    and the tasks found equal those of the same events in a list."""
    from flightlog.events import SessionEvent, ToolCompleted, ToolRequested
    from flightlog.importers import base
    from flightlog.importers.background import task_sessions
    from flightlog.importers.base import EventSpool, ImportedSession
    from flightlog.messages import ToolCall, ToolResult

    def call(call_id: str, name: str, arguments: str = "{}") -> ToolRequested:
        return ToolRequested(turn=1, calls=[ToolCall(id=call_id, name=name, arguments=arguments)])

    background = json.dumps({"command": "sleep 9", "run_in_background": True})
    events: list[SessionEvent] = [
        call("r1", "Read", '{"note": "\\"name\\":\\"Bash\\""}'),  # the name only inside a string: skipped
        call("b", "Bash", background),  # a watched name: decoded
        call("g", "Grep"),  # skipped
        call("fg", "Bash", '{"command": "ls"}'),  # Bash, not in the background: skipped
        call("esc", "Bash", '{"command": "sleep 1", "run_in_backgroun\\u0064": true}'),  # decoded
        ToolCompleted(turn=1, results=[ToolResult(call_id="b", output="running in background with ID: t1")]),
        call("b", "Read"),  # reuses a watched id: decoded (forgets "b")
        call("r2", "Read"),  # skipped
    ]
    decoded: list[str] = []
    real = base.decode_stored

    def counting(data: bytes, **kwargs: object) -> SessionEvent:
        event = real(data)
        if isinstance(event, ToolRequested):
            decoded.append(event.calls[0].id)
        return event

    spool = EventSpool()
    try:
        for event in events:
            spool.append(event)
        monkeypatch.setattr(base, "decode_stored", counting)
        spooled = task_sessions(ImportedSession("s", "t", "claude-code", spool))
    finally:
        spool.close()
    listed = task_sessions(ImportedSession("s", "t", "claude-code", events))
    assert decoded == ["b", "esc", "b"]
    assert [s.key for s in spooled] == [s.key for s in listed] == ["s:task:t1"]
    assert [list(s.events) for s in spooled] == [list(s.events) for s in listed]
