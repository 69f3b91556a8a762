"""A scripted agent as the docs write it (``ScriptedProvider([...])``, default settings) survives a
``kill -9`` and a resume in a fresh process without asking again for what it already did.

Found by a new-user pass: with the provider answering by call count, a resumed process started its script
over, asked for the gated ``deploy`` again under the same call id and ran its side effect once more. The
provider now answers by the request's turn by default (``by_turn=False`` is the opt-in call-count mode).
Everything here runs the real CLI in real subprocesses; the kill is a SIGKILL while a tool runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from flightlog.events import ToolRequested
from flightlog.store import open_store

from .helpers import of

TIMEOUT_S = 120.0

AGENT = textwrap.dedent(
    '''
    import os, pathlib, time
    from flightlog.kernel import Agent, Policy, Rule, tool
    from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply

    WORK = pathlib.Path(os.environ["WORK"])

    @tool(effect="side_effect")
    def deploy(service: str) -> str:
        """Deploy a service.

        Args:
            service: Service name.
        """
        with open(WORK / "deploys.log", "a") as f:
            f.write(service + "\\n")
        return f"deployed {service}"

    @tool(effect="read_only")
    def status(service: str) -> str:
        """Status of a service.

        Args:
            service: Service name.
        """
        if os.environ.get("HOLD"):
            (WORK / "in-status").write_text("x")
            time.sleep(600)  # the test kills the process here
        return f"{service}: healthy"

    model = ScriptedProvider([
        calls(call("deploy", {"service": "api"}, id="d1")),
        calls(call("status", {"service": "api"}, id="s1")),
        reply("api deployed and healthy."),
    ])
    agent = Agent(name="deployer", route=[model], tools=[deploy, status],
                  policy=Policy(rules=(Rule("ask", effect="side_effect", reason="deploys need a human"),)))
    '''
)


def _env(work: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HOLD"}
    env["PYTHONPATH"] = os.pathsep.join([str(work), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**env, "WORK": str(work), **extra}


def _flightlog(work: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flightlog", "--db", str(work / "agent.db"), *args],
        capture_output=True,
        text=True,
        env=_env(work, **extra),
        cwd=work,
        timeout=TIMEOUT_S,
    )


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_a_default_scripted_agent_resumed_after_sigkill_completes_without_repeating_a_side_effect(
    tmp_path: Path,
) -> None:
    (tmp_path / "myagent.py").write_text(AGENT)
    ran = _flightlog(tmp_path, "run", "myagent:agent", "--goal", "deploy api", "--json", "-q")
    assert ran.returncode == 3, ran.stderr
    sid = json.loads(ran.stdout)["session_id"]
    assert _flightlog(tmp_path, "approve", sid, "d1", "--as", "bob").returncode == 0

    # resume: the deploy runs, then the read-only status tool blocks; kill -9 there
    killed = subprocess.Popen(
        [sys.executable, "-m", "flightlog", "--db", str(tmp_path / "agent.db"), "resume", sid, "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(tmp_path, HOLD="1"),
        cwd=tmp_path,
    )
    try:
        _wait_for(tmp_path / "in-status", killed)
        killed.send_signal(signal.SIGKILL)
        killed.communicate(timeout=TIMEOUT_S)
    finally:
        if killed.poll() is None:
            killed.kill()
            killed.wait()
    assert killed.returncode == -signal.SIGKILL
    assert (tmp_path / "deploys.log").read_text() == "api\n"

    # a fresh process resumes from the ledger: the model is asked for turn 3, not for the script's start
    resumed = _flightlog(tmp_path, "resume", sid, "--json", "-q")
    assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
    result = json.loads(resumed.stdout)
    assert (result["status"], result["turns"]) == ("completed", 3)
    assert result["final_message"] == "api deployed and healthy."
    assert (tmp_path / "deploys.log").read_text() == "api\n"  # the side effect ran once
    with open_store(tmp_path / "agent.db") as store:
        requested = [c.id for event in of(store, sid, ToolRequested) for c in event.calls]
    assert requested == ["d1", "s1"]  # each call asked for once, never again under the same id
