"""Crash torture: SIGKILL real processes running a side-effecting agent, resume each time.

A *zygote* subprocess imports flightlog once, then for each command forks a child that runs or resumes the
session (``torture_agent.child_main``). Forking keeps each iteration in the milliseconds instead of paying
interpreter start-up; every child is still a separate process with its own SQLite connection, killed
without any chance to clean up. A child dies one of two ways:

* by itself, at the n-th hit of a named crash point (``$FLIGHTLOG_TEST_CRASH_AT``, see
  :mod:`flightlog.testing.crashpoints`): just after a side effect's intent is durable (``effect.intent``),
  just after the tool ran (``effect.ran``), as the model call starts (``model.call``), before a
  ``COMMIT`` (``commit.before``), after an append committed (``append.committed``). Every session starts
  with one kill at each of the first three, so every run hits each window, however slow the machine;
* by the zygote, after a seeded random delay, wherever the child happens to be (extra coverage; nothing is
  counted on where these land).

After every kill the chain must verify and no line may have been appended twice; a kill at a named point
must leave the run exactly where that point is (an effect in doubt, a model call in flight). Each session is
driven to completion; then:

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
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from child_lines import read_line
from flightlog.kernel import Kernel, approve, deny, pending
from flightlog.kernel.state import load_state
from flightlog.recorder import verify_session
from flightlog.sessions import replay_session
from flightlog.store import open_store

from . import torture_agent
from .helpers import zygote_process

HERE = Path(__file__).parent
SEED = 20260601
MIN_KILLS = 100

ZYGOTE = r"""
import json, os, signal, sys, time, traceback
sys.path.insert(0, sys.argv[1])
import torture_agent  # warm: flightlog, pydantic, sqlite3 are imported once, before any fork
from flightlog.testing.crashpoints import ENV

out = sys.stdout
out.write("READY\n"); out.flush()
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            os.environ.pop(ENV, None)
            if job["crash_at"] is not None:
                os.environ[ENV] = job["crash_at"]
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

    def run(
        self, db: Path, sid: str, out: Path, mode: str, *, crash_at: str | None, delay: float | None
    ) -> dict[str, object]:
        """Fork a child for the session; it dies at ``crash_at``, or is killed after ``delay`` seconds."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        job = {"db": str(db), "sid": sid, "out": str(out), "mode": mode, "crash_at": crash_at, "delay": delay}
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        answer = read_line(self.proc, f"the zygote's answer to job {job}")
        assert answer, "zygote died"
        return json.loads(answer)  # type: ignore[no-any-return]


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    with zygote_process(tmp_path, ZYGOTE) as proc:
        yield Zygote(proc)
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


FIRST_KILLS = {
    "reconcile": ("model.call:1", "effect.intent:1", "effect.ran:1"),
    "plain": ("effect.intent:1", "effect.ran:1", "effect.ran:1"),
}
"""Each session's first children, so every session hits these windows whatever the machine's speed.
With ``reconcile``: turn 0's model call in flight; then (resumed) the first effect's intent durable, its
tool not run; then (resumed, reconciled as not done) that tool run, its completion not recorded. Without:
the first effect's intent durable; the next child suspends (in doubt) before any point, and the human
approves (the line is not there); the next runs it again and dies after the tool ran, so the human then
denies (it is there)."""
POINTS = ("effect.intent", "effect.ran", "model.call", "commit.before", "append.committed")
LANDS = {"model.call": "calling", "effect.intent": "tools+doubt", "effect.ran": "tools+doubt"}
"""Where a kill at a named point leaves the run (phase, ``+doubt`` with an intent without completion)."""


def _job(rng: random.Random, mode: str, child: int) -> tuple[str | None, float | None]:
    """The ``child``-th child of a session: its crash point, or a random delay for the zygote's SIGKILL."""
    if child < len(FIRST_KILLS[mode]):
        return FIRST_KILLS[mode][child], None
    if rng.random() < 0.5:
        return None, rng.uniform(0.0, 0.12)
    return f"{rng.choice(POINTS)}:{rng.randint(1, 4)}", None


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="the zygote forks its children (POSIX only)")
def test_sigkill_torture_side_effects_happen_exactly_once(tmp_path: Path, zygote: Zygote) -> None:
    rng = random.Random(SEED)
    reference = _reference(tmp_path)
    db = tmp_path / "torture.db"
    started = time.monotonic()
    kills, sessions, in_doubt, decisions = 0, 0, 0, Counter[str]()
    landed, at_point = Counter[str](), Counter[str]()

    def drive(sid: str, out: Path, mode: str) -> None:
        nonlocal kills, in_doubt
        for child in range(400):
            crash_at, delay = _job(rng, mode, child)
            answer = zygote.run(db, sid, out, mode, crash_at=crash_at, delay=delay)
            if answer["killed"]:
                kills += 1
                where = _check_after_kill(db, sid, out)
                landed[where] += 1
                if crash_at is not None:
                    point = crash_at.split(":")[0]
                    at_point[point] += 1
                    assert where == LANDS.get(point, where), f"{sid}: a kill at {crash_at} left {where}"
                continue
            assert crash_at is None or child >= len(FIRST_KILLS[mode]) or (mode, child) == ("plain", 1), (
                f"{sid}: child {child} never reached {crash_at}: {answer}"
            )
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

    for plain in range(2):
        sid, out = f"plain-{plain}", tmp_path / f"plain-{plain}.txt"
        drive(sid, out, "plain")
        assert _counts(out) == Counter(torture_agent.lines())
        with open_store(db, read_only=True) as store:
            assert verify_session(store, sid).ok
    elapsed = time.monotonic() - started
    print(
        f"\ntorture: {kills} SIGKILLs ({reconcile_kills} with reconcile over {sessions} sessions, "
        f"{kills - reconcile_kills} without over 2), {in_doubt} in-doubt suspensions "
        f"({dict(decisions)}), {elapsed:.1f}s; at named points: {dict(sorted(at_point.items()))}; "
        f"kills left the run in: {dict(sorted(landed.items()))}"
    )
    # Every session's first kills were at the named windows (``drive`` checked where each landed).
    assert at_point["model.call"] >= sessions
    assert at_point["effect.intent"] >= sessions + 2 and at_point["effect.ran"] >= sessions + 2
    # Without a reconciler each in-doubt effect suspended the run, and the human saw both cases: the
    # intent alone (approve: it runs) and the tool run without its completion (deny: it happened).
    assert decisions["approve"] >= 2 and decisions["deny"] >= 2
