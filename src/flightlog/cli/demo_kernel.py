"""``flightlog demo``, kernel part: one durable agent run across five processes, on a recorded conversation.

The agent (:func:`demo_agent`, spec ``flightlog.cli.demo_kernel:demo_agent``) asks "What is the largest city in
the user country?" of the real Anthropic SDK adapter, pointed at a loopback replay server that serves the
packaged cassette ``anthropic/thinking-tool-use-roundtrip`` (thinking with a signature, a tool call, the
answer). Its one tool, ``get_user_country``, is a billed lookup in an account service (a JSONL file in the
demo's work directory): a ``side_effect`` the policy asks a human about, with a ``reconcile`` that reads
the account service's log by the call's idempotency key.

Every step below is a separate ``python -m flightlog --db DB ...`` process on the caller's database:

1. ``run``: the model asks for the lookup; the run suspends (exit 3), waiting for approval.
2. ``pending``: another process lists the waiting call.
3. ``approve --as demo-operator``: another process decides.
4. ``resume``, killed with SIGKILL while the lookup is in flight: after its intent is durable and the
   lookup done (polled in the ledger and the account service's log), before its result is recorded.
5. ``resume`` in a new process: the lookup is in doubt, ``reconcile`` finds it in the account service's
   log, so it is recorded as done and not repeated; the model's second recorded answer completes the run.
6. The chain verifies, and the replayed transcript is printed.

Each process starts its own replay server with ``seek=True`` (the resumed ones continue at the recorded
interaction the session has reached) and a shared journal, so the demo can check that every request of
every process, the killed one included, matched the recording.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console

from ..events import Custom
from ..kernel import Agent, AgentSpecError, Policy, Rule, current_effect_key, tool
from ..narration import plural, summarize_message
from ..providers._sdk import INSTALL_HINT
from ..providers.replay_server import packaged_cassettes, replay_provider
from ..recorder import verify_session
from ..sessions import iter_events, replay_session
from ..store import SqliteStore, Store

__all__ = [
    "CASSETTE",
    "DEMO_DIR_ENV",
    "GOAL",
    "HOLD_ENV",
    "RESPONDER",
    "SPEC",
    "demo_agent",
    "get_user_country",
    "run_kernel_demo",
]

SPEC = "flightlog.cli.demo_kernel:demo_agent"
"""The agent spec the demo's processes run (recorded in the session, so ``resume`` needs no ``--spec``)."""
GOAL = "What is the largest city in the user country?"
"""The recorded conversation's first user message."""
CASSETTE = "anthropic/thinking-tool-use-roundtrip"
"""The packaged cassette (see :func:`~flightlog.providers.replay_server.packaged_cassettes`)."""
RESPONDER = "demo-operator"
"""Who approves the lookup (recorded in ``permission_resolved`` and ``approval_decision``)."""
DEMO_DIR_ENV = "FLIGHTLOG_DEMO_DIR"
"""Work directory of the demo agent: ``lookups.jsonl`` (the account service) and ``replay.jsonl``."""
HOLD_ENV = "FLIGHTLOG_DEMO_HOLD_S"
"""Seconds a lookup waits after it is done, before returning (the window for the SIGKILL)."""

# Generous ceilings, not timers: each wait polls for the state it needs and returns as soon as it is there; these
# only bound a demo that broke, so a slow, loaded machine never fails it (seen at load 16 with 30 s / 60 s).
_KILL_TIMEOUT_S = 600.0
_CHILD_TIMEOUT_S = 600.0
_HOLD_S = 3600.0  # the in-flight lookup outlives any wait above; the demo kills it as soon as it is seen


# ─── The demo agent (loaded by every child process) ─────────────────────────────────────────────


def _workdir() -> Path:
    return Path(os.environ.get(DEMO_DIR_ENV) or Path(tempfile.gettempdir()) / "flightlog-demo")


def _lookups_file(workdir: Path) -> Path:
    return workdir / "lookups.jsonl"


def _journal_file(workdir: Path) -> Path:
    return workdir / "replay.jsonl"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """The complete lines of a JSONL file another process may be appending to (a partial tail is skipped)."""
    if not path.exists():
        return []
    *complete, _tail = path.read_text(encoding="utf-8").split("\n")
    return [json.loads(line) for line in complete if line.strip()]


def _looked_up(key: str) -> str | None:
    """The country the lookup with idempotency key ``key`` returned, if the account service logged it."""
    for entry in _jsonl(_lookups_file(_workdir())):
        if entry.get("key") == key:
            return str(entry["country"])
    return None


def _reconcile_lookup(intent: dict[str, Any]) -> str | None:
    """After a crash: this call's recorded country if its lookup happened, None if it did not."""
    return _looked_up(current_effect_key() or "")


@tool(effect="side_effect", description="", reconcile=_reconcile_lookup)
def get_user_country() -> str:
    """Look the user's country up in the account service (billed and audited per call).

    The recorded request described the tool with an empty description, hence ``description=""``.
    """
    path = _lookups_file(_workdir())
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:  # the effect, stamped with the call's idempotency key
        fh.write(json.dumps({"key": current_effect_key(), "country": "Mexico"}) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    time.sleep(float(os.environ.get(HOLD_ENV) or 0))
    return "Mexico"


def demo_agent() -> Agent:
    """The demo agent on the recorded-replay provider (a ``seek`` replay server living as long as the process).

    Runs standalone too (``flightlog run flightlog.cli.demo_kernel:demo_agent --goal ...``): its work
    directory (``$FLIGHTLOG_DEMO_DIR``, default ``<tmp>/flightlog-demo``) is created when missing.

    Raises:
        AgentSpecError: the work directory cannot be created (the message names it and the variable).
    """
    workdir = _workdir()
    try:
        workdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise AgentSpecError(
            spec=SPEC,
            reason=f"cannot create the demo's work directory {workdir} ({exc.strerror or exc}); set "
            f"{DEMO_DIR_ENV} to a writable directory",
        ) from exc
    provider, _server = replay_provider(
        packaged_cassettes()[CASSETTE], seek=True, journal=_journal_file(workdir)
    )
    return Agent(
        name="demo-city-agent",
        route=[provider],
        tools=[get_user_country],
        policy=Policy(rules=(Rule("ask", effect="side_effect", reason="a billed lookup needs approval"),)),
    )


# ─── The demo ─────────────────────────────────────────────────────────────────────────────────


class _DemoFailed(Exception):
    """A step did not do what the demo expects (the message says what)."""


class _Demo:
    """The steps of :func:`run_kernel_demo` over one database file and one work directory."""

    def __init__(self, store: Store, db: str, workdir: Path, console: Console) -> None:
        self.store = store
        self.db = db
        self.workdir = workdir
        self.console = console
        self.env = {**os.environ, DEMO_DIR_ENV: str(workdir)}
        self.env.pop(HOLD_ENV, None)

    # ─── output ───────────────────────────────────────────────────────────────────────────────
    def say(self, text: str, *, style: str | None = None) -> None:
        """Print a line as is (no markup: narration contains brackets)."""
        self.console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)

    def show_child(self, text: str) -> None:
        """Indent a child's output (its live progress and result lines)."""
        for line in text.splitlines():
            if line.strip():
                self.say(f"     | {line}", style="dim")

    def command(self, args: list[str]) -> list[str]:
        """Print ``$ flightlog ARGS`` and return the child's argv."""
        self.say("   $ flightlog " + " ".join(shlex.quote(a) for a in args))
        return [sys.executable, "-m", "flightlog", "--db", self.db, *args]

    # ─── children ─────────────────────────────────────────────────────────────────────────────
    def flightlog(self, args: list[str], *, expect: int) -> str:
        """Run ``flightlog ARGS`` in a child process; its stdout when it exits ``expect``."""
        done = subprocess.run(
            self.command(args),
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=_CHILD_TIMEOUT_S,
            check=False,
        )
        self.show_child(done.stderr)
        if done.returncode != expect:
            self.show_child(done.stdout)
            raise _DemoFailed(f"exit code {done.returncode}, expected {expect}")
        return done.stdout

    def run(self) -> str:
        """Step 1: start the run; it suspends waiting for approval. Returns the session id."""
        self.say(
            "\n   a. run the agent (process 1): the model asks for the lookup, a side effect: wait for a human"
        )
        out = self.flightlog(["run", SPEC, "--goal", GOAL, "--json"], expect=3)
        result = json.loads(out)
        sid, calls = str(result["session_id"]), list(result["pending_calls"])
        self.say(f"   -> exit 3: session {sid} suspended, waiting for approval of {', '.join(calls)}")
        return sid

    def approve(self, sid: str) -> None:
        """Steps 2-3: list what waits and approve it, each from another process."""
        self.say("\n   b. list what waits (process 2)")
        rows = json.loads(self.flightlog(["pending", "--json"], expect=0))
        mine = [row for row in rows if row["session_id"] == sid]
        if len(mine) != 1:
            raise _DemoFailed(f"expected one pending call in {sid}, found {len(mine)}")
        row = mine[0]
        self.say(
            f"   -> {row['call_id']}  {row['tool']}({row['arguments']})  [{row['kind']}] {row['reason']}"
        )
        call_id = str(row["call_id"])
        self.say(f"\n   c. approve it (process 3) as {RESPONDER}")
        self.show_child(self.flightlog(["approve", sid, call_id, "--as", RESPONDER], expect=0))

    def crash(self, sid: str) -> str:
        """Step 4: resume, and SIGKILL the process while the lookup is in flight. Returns the effect key."""
        self.say("\n   d. resume (process 4) and kill it with SIGKILL while the lookup is in flight")
        argv = self.command(["resume", sid])
        env = {**self.env, HOLD_ENV: str(_HOLD_S)}
        with subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as child:
            try:
                key = self._wait_for_lookup(sid, child)
            finally:
                child.kill()  # SIGKILL: no cleanup, no last words in the ledger
                out, err = child.communicate()
                self.show_child(err)
                self.show_child(out)
        self.say(f"   -> killed (exit {child.returncode}) after the intent was durable and the lookup done")
        pending = [e.idempotency_key for e in self.store.pending_effects(sid)]
        if pending != [key]:
            raise _DemoFailed(f"expected the lookup {key} in doubt, found {pending}")
        self.say(f"   -> in doubt: intent {key} recorded, no completion")
        return key

    def _wait_for_lookup(self, sid: str, child: subprocess.Popen[str]) -> str:
        """Poll until the lookup's intent is durable and the account service logged it; its key."""
        deadline = time.monotonic() + _KILL_TIMEOUT_S
        while time.monotonic() < deadline:
            if child.poll() is not None:
                raise _DemoFailed(f"resume exited ({child.returncode}) before the lookup was in flight")
            for effect in self.store.pending_effects(sid):
                if self._logged(effect.idempotency_key):
                    return effect.idempotency_key
            time.sleep(0.02)
        raise _DemoFailed(f"the lookup was not in flight after {_KILL_TIMEOUT_S:.0f}s")

    def _logged(self, key: str) -> int:
        return sum(1 for entry in _jsonl(_lookups_file(self.workdir)) if entry.get("key") == key)

    def finish(self, sid: str, key: str) -> None:
        """Step 5: resume in a new process; the lookup reconciles as done and the run completes."""
        self.say("\n   e. resume again (process 5): reconcile settles the lookup, the run completes")
        out = json.loads(self.flightlog(["resume", sid, "--json"], expect=0))
        outcomes = [
            event.payload.get("outcome")
            for _row, event in iter_events(self.store, sid)
            if isinstance(event, Custom) and event.custom_kind == "effect_reconciled"
        ]
        if outcomes != ["completed"] or self._logged(key) != 1:
            raise _DemoFailed(f"lookup reconciled {outcomes}, logged {self._logged(key)} time(s)")
        self.say(
            f"   -> exit 0: {out['status']} after {plural(out['turns'], 'step')}, {out['tokens']} tokens"
        )
        self.say("   -> the lookup was reconciled as done and ran exactly once (1 line in the account log)")

    def check(self, sid: str) -> None:
        """Step 6: verify the chain, check the replay journal, print the replayed transcript."""
        self.say(f"\n   f. verify and replay the whole run (flightlog verify {sid}; flightlog replay {sid})")
        report = verify_session(self.store, sid)
        self.say(
            f"   {'ok' if report.ok else 'DIVERGES'}  {sid}  {report.events} events  root {report.root[:16]}"
        )
        if not report.ok:
            raise _DemoFailed("the chain does not verify")
        journal = _jsonl(_journal_file(self.workdir))
        mismatches = [entry for entry in journal if not entry.get("matched")]
        served = [f"#{entry['index']} to pid {entry['pid']}" for entry in journal if entry.get("matched")]
        self.say(f"   replay server: served {', '.join(served)}; {len(mismatches)} mismatches")
        if mismatches or [entry["index"] for entry in journal] != [0, 1]:
            raise _DemoFailed(f"the replay journal is not two clean requests: {journal}")
        for index, message in enumerate(replay_session(self.store, sid, max_part_bytes=300)):
            self.say(f"   [{index}] {message.role:<9} {summarize_message(message)}")


def _database(store: Store) -> str | None:
    """The file the children can open, or None (only a SQLite file is shared between processes)."""
    if isinstance(store, SqliteStore) and store.path != ":memory:":
        return str(Path(store.path).resolve())
    return None


def run_kernel_demo(store: Store, console: Console, *, workdir: str | Path | None = None) -> int:
    """Run the kernel demo (module docs) against ``store``; returns 0 when every step went as expected.

    Args:
        store: The database (a SQLite file: the child processes open it too). Other stores skip the demo.
        console: Where the steps are printed.
        workdir: Where the account service's log and the replay journal go (default: a temporary
            directory, removed afterwards).

    Returns:
        0 on success (or when skipped), 1 when a step failed (the output says which and why).
    """
    db = _database(store)
    title = "durable agent run: a recorded Claude conversation, the real Anthropic SDK, five processes"
    console.print(title, markup=False, highlight=False, soft_wrap=True)
    missing = [name for name in ("anthropic", "yaml") if importlib.util.find_spec(name) is None]
    if db is None or missing:
        why = "a SQLite file database" if db is None else f"{INSTALL_HINT} (missing: {', '.join(missing)})"
        console.print(f"   (skipped: the kernel demo needs {why})", markup=False, soft_wrap=True)
        return 0
    with ExitStack() as stack:
        if workdir is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="flightlog-kernel-demo-"))
        folder = Path(workdir)
        folder.mkdir(parents=True, exist_ok=True)
        _journal_file(folder).unlink(missing_ok=True)  # this run's requests only
        demo = _Demo(store, db, folder, console)
        demo.say(f"   agent {SPEC}, cassette {CASSETTE}, account service {_lookups_file(folder)}")
        try:
            sid = demo.run()
            demo.approve(sid)
            key = demo.crash(sid)
            demo.finish(sid, key)
            demo.check(sid)
        except (_DemoFailed, subprocess.TimeoutExpired, ValueError, KeyError) as exc:
            demo.say(f"\nkernel demo failed: {exc}", style="bold red")
            return 1
    console.print(
        "\none run, five processes, a suspension and a SIGKILL: the ledger holds all of it, once.",
        markup=False,
        soft_wrap=True,
    )
    return 0
