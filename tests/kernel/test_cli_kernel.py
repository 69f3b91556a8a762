"""The kernel commands end to end (standalone ``kernel_app`` and mounted with ``register``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from flightlog.cli.kernel import EXIT_CODES, kernel_app, register
from flightlog.store import Store, open_store

from . import cli_agents, helpers

AGENTS = Path(cli_agents.__file__)
runner = CliRunner()
pytestmark = pytest.mark.usefixtures("fresh_notes")


def cli(db: Path, *args: str) -> tuple[int, str, str]:
    """The standalone ``kernel_app`` (not the whole ``flightlog`` CLI)."""
    return helpers.cli(db, *args, app=kernel_app)


def _session(out: str) -> str:
    return json.loads(out)["session_id"]


def test_exit_codes_are_documented() -> None:
    assert EXIT_CODES == {"completed": 0, "failed": 1, "budget_exhausted": 1, "cancelled": 1, "suspended": 3}


def test_run_approve_resume_with_a_dotted_spec(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    code, out, err = cli(db, "run", "kernel.cli_agents:approval_agent", "--goal", "take a note", "--json")
    assert code == 3, err
    result = json.loads(out)
    sid = result["session_id"]
    assert (result["status"], result["pending_calls"], result["detail"]) == ("suspended", ["n1"], "approval")
    assert "needs approval" in err and f"flightlog approve {sid} n1" in err  # live progress on stderr

    code, out, _ = cli(db, "pending", "--json")
    assert code == 0
    assert json.loads(out) == [
        {
            "session_id": sid,
            "turn": 2,
            "call_id": "n1",
            "tool": "note",
            "arguments": '{"text": "hello"}',
            "reason": "notes need a human",
            "kind": "approval",
            "decision": None,
            "decided_by": None,
            "parent_session_id": None,  # a top-level run: its own root
            "root_session_id": sid,
            "run_abandoned": False,  # a gate is open: approve/deny decide it now
            "run_paused": False,
            "paused_wait": False,  # its run was not aborted while it waited
            "answer_in": None,  # `approve` decides it (a LangGraph interrupt names its graph's call)
        }
    ]
    code, out, _ = cli(db, "pending")
    assert code == 0 and "n1" in out and "note(" in out

    code, out, _ = cli(db, "approve", sid[:8], "n1", "--as", "alice")
    assert code == 0 and f"flightlog resume {sid}" in out
    assert cli_agents.NOTES == []

    code, out, err = cli(db, "resume", sid[:8])  # the spec was recorded at run
    assert code == 0, err
    assert f"session {sid}: completed after 3 steps" in out and "noted and done" in out
    assert cli_agents.NOTES == ["hello"]
    code, out, _ = cli(db, "pending")
    assert "nothing is waiting" in out


def test_deny_and_resume_with_a_file_spec(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    spec = f"{AGENTS}:approval_agent"
    code, out, _ = cli(db, "run", spec, "--goal", "note", "--criteria", "one note", "--json", "-q")
    assert code == 3
    sid = _session(out)
    code, _, err = cli(db, "resume", sid)
    said = " ".join(err.split())
    assert code == 2 and "or from an agent.toml or a .py path records none); give --spec MODULE:ATTR" in said
    assert cli(db, "deny", sid, "n1", "--reason", "not today")[0] == 0
    code, out, _ = cli(db, "resume", sid, "--spec", spec, "--json")
    assert code == 0 and json.loads(out)["status"] == "completed"
    assert cli_agents.NOTES == []


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    assert cli(db, "run", "no_such_module:agent", "--goal", "x")[0] == 2
    assert cli(db, "run", "kernel.cli_agents:not_an_agent", "--goal", "x")[0] == 2
    assert cli(db, "run", "kernel.cli_agents:approval_agent")[0] == 2  # --goal missing
    code, out, _ = cli(db, "run", "kernel.cli_agents:approval_agent", "--goal", "x", "--json", "-q")
    sid = _session(out)
    code, _, err = cli(db, "approve", sid, "nope")
    assert code == 2 and "'nope'" in err and "waiting" in err
    code, _, err = cli(db, "resume", "ffffffff")
    assert code == 2 and "no session matches" in err


def test_failed_runs_exit_1_and_abort(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    code, out, _ = cli(db, "run", "kernel.cli_agents:broken", "--goal", "x")
    assert code == 1 and ": failed (provider_failure: down)" in out
    code, out, _ = cli(db, "run", "kernel.cli_agents:approval_agent", "--goal", "x", "--json", "-q")
    sid = _session(out)
    code, out, _ = cli(db, "abort", sid)
    assert code == 0 and f"aborted {sid}" in out
    with open_store(db) as store:
        assert store.get_session(sid).status == "cancelled"
    code, out, _ = cli(db, "run", "kernel.cli_agents:broken", "--goal", "x", "--json")
    code, out, _ = cli(db, "abort", _session(out))
    assert code == 0 and "already ended" in out


def test_toml_spec(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(
        f"""
name = "from-toml"
system_prompt = "be careful"
max_retries = 1
tools = ["{AGENTS}:note", {{ref = "{AGENTS}:plain_lookup", effect = "read_only"}}]
route = [{{ref = "{AGENTS}:make_provider"}}]

[budgets]
tokens = 1000
prices = {{input_per_1k = 0.001, output_per_1k = 0.002}}

[policy]
default = "allow"
[[policy.rules]]
action = "deny"
tool = "note"
reason = "read-only day"
"""
    )
    db = tmp_path / "k.db"
    code, out, err = cli(db, "run", str(tmp_path / "agent.toml"), "--goal", "x", "--json")
    assert code == 0, err
    assert json.loads(out)["final_message"] == "noted and done" and cli_agents.NOTES == []
    (tmp_path / "bad.toml").write_text('name = "x"\nroute = []\n')
    assert cli(db, "run", str(tmp_path / "bad.toml"), "--goal", "x")[0] == 2


def test_register_mounts_the_commands_on_another_app(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    opened: list[bool] = []

    @contextmanager
    def open_db(read_only: bool) -> Iterator[Store]:
        opened.append(read_only)
        store = open_store(db, read_only=read_only)
        try:
            yield store
        finally:
            store.close()

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """A host app."""

    register(app, open_db)
    result = runner.invoke(app, ["run", "kernel.cli_agents:approval_agent", "--goal", "x", "-q"])
    assert result.exit_code == 3
    assert runner.invoke(app, ["pending", "--json"]).exit_code == 0
    assert opened == [False, True]
    names = {c.name for c in app.registered_commands}
    assert names == {"run", "resume", "pending", "approve", "deny", "abort"}


def _approval_refs(db: Path, sid: str) -> list[tuple[str, str | None]]:
    from flightlog.runs import list_runs

    with open_store(str(db)) as store:
        (run,) = [r for r in list_runs(store) if r.run_id == sid]
    return [(r.reference, r.label) for r in run.refs if r.kind.value == "approval"]


def test_runs_show_one_approval_per_gated_call_closed_by_an_abort(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    code, out, _ = cli(db, "run", "kernel.cli_agents:approval_agent", "--goal", "note", "--json", "-q")
    sid = _session(out)
    assert code == 3 and _approval_refs(db, sid) == [(f"approval:{sid}:n1", "note: pending")]
    assert cli(db, "abort", sid)[0] == 0
    assert _approval_refs(db, sid) == [(f"approval:{sid}:n1", "note: cancelled")]
    # `pending` lists its gate, still open, marked as a wait the abort closed (the run is paused)
    (row,) = json.loads(cli(db, "pending", "--json")[1])
    assert (row["session_id"], row["call_id"], row["decision"], row["paused_wait"]) == (sid, "n1", None, True)
    # the run stays resumable: its call can still be decided, and the resume runs it
    assert cli(db, "approve", sid, "n1", "--as", "alice")[0] == 0
    code, out, err = cli(db, "resume", sid, "--json", "-q")
    assert code == 0 and json.loads(out)["status"] == "completed", err
    assert _approval_refs(db, sid) == [(f"approval:{sid}:n1", "note: approved")]


def test_resume_of_an_aborted_wait_reopens_it_exit_3(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    code, out, _ = cli(db, "run", "kernel.cli_agents:approval_agent", "--goal", "note", "--json", "-q")
    sid = _session(out)
    assert cli(db, "abort", sid)[0] == 0
    code, out, err = cli(db, "resume", sid)
    assert code == EXIT_CODES["suspended"] == 3, err
    assert f"session {sid}: suspended (approval)" in out and "  waiting: n1; decide with one of:\n" in out
    # the two decisions as commands that paste as they are (not `approve|deny SESSION CALL`)
    commands = [line.strip() for line in out.splitlines() if line.strip().startswith("flightlog ")]
    assert commands == [f"flightlog approve {sid} n1", f"flightlog deny {sid} n1"]
    assert "waiting for approval: flightlog approve" in err  # the re-opened gate, live on stderr
    with open_store(db) as store:
        assert store.get_session(sid).status == "suspended"
    assert [row["call_id"] for row in json.loads(cli(db, "pending", "--json")[1])] == ["n1"]
    assert _approval_refs(db, sid) == [(f"approval:{sid}:n1", "note: pending")]
    assert cli(db, "approve", sid, "n1")[0] == 0
    code, out, err = cli(db, "resume", sid, "--json", "-q")
    assert code == 0 and json.loads(out)["status"] == "completed", err
    assert cli_agents.NOTES == ["hello"]


def test_resume_of_an_ended_toml_run_says_it_has_ended(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text(
        f"""
name = "from-toml"
tools = ["{AGENTS}:note", {{ref = "{AGENTS}:plain_lookup", effect = "read_only"}}]
route = [{{ref = "{AGENTS}:make_provider"}}]
"""
    )
    db = tmp_path / "k.db"
    code, out, err = cli(db, "run", str(tmp_path / "agent.toml"), "--goal", "x", "--json", "-q")
    assert code == 0, err
    sid = _session(out)
    with open_store(db) as store:
        (last,) = [row.seq for row in store.read_events(sid) if row.kind == "run_terminal"]  # a seal follows
    code, out, err = cli(db, "resume", sid)  # an agent.toml run records no spec: none is needed to say so
    assert code == EXIT_CODES["completed"] == 0, err
    assert f"session {sid} has ended: completed at seq {last} (run_terminal); nothing to resume" in out
    assert "--spec" not in out + err and "noted and done" in out
    code, out, _ = cli(db, "resume", sid, "--json")
    assert code == 0 and json.loads(out)["status"] == "completed"
    code, out, err = cli(db, "run", "kernel.cli_agents:broken", "--goal", "x", "--json", "-q")
    failed = _session(out)
    code, out, err = cli(db, "resume", failed)
    assert code == EXIT_CODES["failed"] == 1 and f"session {failed} has ended: failed at seq" in out, err


def test_a_provider_failing_at_import_is_a_spec_error_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The openai SDK refuses to build a client without a key, when the agent's module is imported: the run
    is refused as a bad SPEC (exit 2) with the SDK's message, which names OPENAI_API_KEY (new-user pass)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    agent_file = tmp_path / "keyless.py"
    agent_file.write_text(
        "from flightlog.kernel import Agent\n"
        "from flightlog.providers.openai_chat import OpenAIChatProvider\n"
        'agent = Agent(name="keyless", route=[OpenAIChatProvider("gpt-4o")])\n'
    )
    code, out, err = cli(tmp_path / "k.db", "run", f"{agent_file}:agent", "--goal", "hi")
    assert code == 2 and out == "", err
    said = " ".join(err.split())
    assert "importing" in said and "a model provider failed" in said and "OPENAI_API_KEY" in said
