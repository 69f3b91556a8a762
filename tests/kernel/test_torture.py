"""Crash torture: SIGKILL real processes running a side-effecting agent at random points, resume each time.

A *zygote* subprocess imports flightlog once, then for each command forks a child that runs or resumes the
session (``torture_agent.child_main``), sleeps a random delay (seeded RNG) and SIGKILLs the child if it is
still running. Forking keeps each iteration in the milliseconds instead of paying interpreter start-up,
which is what makes >= 100 kills fit the time budget; every child is still a separate process with its own
SQLite connection, killed without any chance to clean up.

After every kill the chain must verify and no line may have been appended twice. Each session is driven to
completion; then:

* with ``reconcile``: every side effect happened exactly once, the chain verifies, and the replayed
  transcript (``flightlog.replay.reconstruct``; rolled-back parts ignored) equals the transcript of an
  uninterrupted run;
* without it: a kill between intent and completion leaves the run *suspended as in doubt* (never a silent
  re-run). The test plays the human: it looks at the file and denies (it happened) or approves (it did
  not), then goes on killing. At the end every effect happened exactly once too.

Durability: ``synchronous=FULL`` (the default). A SIGKILL is not a power loss, so NORMAL would also do; FULL
is kept so the test exercises the default configuration.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from flightlog.kernel import Kernel, approve, deny, pending
from flightlog.kernel.state import load_state
from flightlog.recorder import verify_session
from flightlog.sessions import replay_session
from flightlog.store import open_store

from . import torture_agent

HERE = Path(__file__).parent
SEED = 20260601
MIN_KILLS = 100

ZYGOTE = r"""
import json, os, signal, sys, time, traceback
sys.path.insert(0, sys.argv[1])
import torture_agent  # warm: flightlog, pydantic, sqlite3 are imported once, before any fork

out = sys.stdout
out.write("READY\n"); out.flush()
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            code = torture_agent.child_main(job["db"], job["sid"], job["out"], job["mode"])
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    if job["delay"] is not None:
        time.sleep(job["delay"])
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    out.write(json.dumps({"killed": killed, "code": code}) + "\n"); out.flush()
"""


@dataclass
class Zygote:
    proc: subprocess.Popen[str]

    def run(self, db: Path, sid: str, out: Path, mode: str, delay: float | None) -> dict[str, object]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        job = {"db": str(db), "sid": sid, "out": str(out), "mode": mode, "delay": delay}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        assert answer, "zygote died"
        return json.loads(answer)  # type: ignore[no-any-return]


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    script = tmp_path / "zygote.py"
    script.write_text(ZYGOTE)
    with (
        (tmp_path / "zygote.err").open("w") as err,
        subprocess.Popen(
            [sys.executable, str(script), str(HERE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        ) as proc,
    ):
        assert proc.stdout is not None and proc.stdout.readline() == "READY\n"
        yield Zygote(proc)
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
    errors = (tmp_path / "zygote.err").read_text()
    assert "Traceback" not in errors, errors


def _reference(tmp_path: Path) -> list[object]:
    """The transcript of an uninterrupted run."""
    with open_store(tmp_path / "reference.db") as store:
        agent = torture_agent.build(tmp_path / "reference.txt", reconcile=True, pause_s=0)
        result = Kernel(store, agent).run_sync(torture_agent.GOAL, session_id="reference")
        assert result.status == "completed"
        return list(replay_session(store, "reference"))


def _counts(out: Path) -> Counter[str]:
    return Counter(out.read_text().splitlines()) if out.exists() else Counter()


def _check_after_kill(db: Path, sid: str, out: Path) -> str:
    """The invariants after a kill; returns where the kill left the run (phase, ``+doubt`` if in doubt)."""
    assert max(_counts(out).values(), default=0) <= 1, _counts(out)
    with open_store(db) as store:  # writable: a kill may have landed before the schema existed
        if not any(s.session_id == sid for s in store.list_sessions()):
            return "not started"
        assert verify_session(store, sid).ok
        doubt = "+doubt" if store.pending_effects(sid) else ""
        return load_state(store, sid).phase + doubt


def _decide_in_doubt(db: Path, sid: str, out: Path) -> str:
    """Play the human on an in-doubt suspension: deny when the line is there, approve when it is not."""
    with open_store(db) as store:
        (waiting,) = pending(store, sid)
        assert waiting.kind == "effect_in_doubt"
        line = json.loads(waiting.arguments)["line"]
        if _counts(out)[line]:
            deny(store, sid, waiting.call_id, reason="the line is in the file")
            return "deny"
        approve(store, sid, waiting.call_id)
        return "approve"


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="the zygote forks its children (POSIX only)")
def test_sigkill_torture_side_effects_happen_exactly_once(tmp_path: Path, zygote: Zygote) -> None:
    rng = random.Random(SEED)
    reference = _reference(tmp_path)
    db = tmp_path / "torture.db"
    started = time.monotonic()
    kills, sessions, in_doubt, decisions, landed = 0, 0, 0, Counter[str](), Counter[str]()

    def drive(sid: str, out: Path, mode: str) -> None:
        nonlocal kills, in_doubt
        for _ in range(400):
            answer = zygote.run(db, sid, out, mode, delay=rng.uniform(0.0, 0.12))
            if answer["killed"]:
                kills += 1
                landed[_check_after_kill(db, sid, out)] += 1
                continue
            if answer["code"] == 3:  # suspended: an effect is in doubt (plain mode only)
                assert mode == "plain"
                in_doubt += 1
                assert max(_counts(out).values(), default=0) <= 1  # suspended, not re-run
                decisions[_decide_in_doubt(db, sid, out)] += 1
                continue
            assert answer["code"] == 0, answer
            return
        with open_store(db) as store:
            state = load_state(store, sid)
        pytest.fail(f"session {sid} never completed: {len(state.events)} events, phase {state.phase}")

    while kills < MIN_KILLS:
        sid, out = f"reconcile-{sessions}", tmp_path / f"reconcile-{sessions}.txt"
        drive(sid, out, "reconcile")
        sessions += 1
        assert _counts(out) == Counter(torture_agent.lines())  # every effect exactly once
        with open_store(db, read_only=True) as store:
            assert verify_session(store, sid).ok
            assert replay_session(store, sid) == reference
            effects = store.pending_effects(sid)
            assert effects == []
    reconcile_kills = kills

    plain = 0
    while in_doubt < 2 and plain < 20:
        sid, out = f"plain-{plain}", tmp_path / f"plain-{plain}.txt"
        drive(sid, out, "plain")
        plain += 1
        assert _counts(out) == Counter(torture_agent.lines())
        with open_store(db, read_only=True) as store:
            assert verify_session(store, sid).ok
    elapsed = time.monotonic() - started
    print(
        f"\ntorture: {kills} SIGKILLs ({reconcile_kills} with reconcile over {sessions} sessions, "
        f"{kills - reconcile_kills} without over {plain}), {in_doubt} in-doubt suspensions "
        f"({dict(decisions)}), {elapsed:.1f}s; kills left the run in: {dict(sorted(landed.items()))}"
    )
    assert reconcile_kills >= MIN_KILLS and in_doubt >= 1
    assert landed["tools+doubt"] >= 5 and landed["calling"] >= 5  # the kills hit the interesting windows
