"""A resume never runs a side effect twice because a later holder record hides the process that runs it,
or because this process cannot read that process's ``/proc`` entries (attack pass atk4, session 19).

* b05: someone who can write the database appends one chain-valid ``external_effect_holder`` naming a dead
  pid of this host at the session's unsigned tail while the real holder's tool runs. The fold kept only the
  last holder, the resume took it for gone and ran the effect. Now every holder the ledger names counts.
* b02: ``/proc`` mounted ``hidepid=2``, the holder another user's: ``/proc/<pid>/stat`` and ``fd`` are
  hidden, and the holder was taken for ended. Now unreadable means unknown, and a holder whose pid exists
  is assumed to run.
* b12: holder and resume in a new pid namespace without its own ``/proc``: ``/proc/<pid>`` was the outer
  namespace's process. Now such a ``/proc`` is not read at all (``proc_is_own``); the live record decides,
  as where there is no ``/proc``.
* b09: a holder record with a member the kernel never writes passed the audit; now it is reported, the
  member named.

The b02 and b12 tests need root (a private mount namespace, a pid namespace) and ``unshare``; they are
skipped, saying why, without them (CI runs as root). Holders are real subprocesses whose tool waits for a
line on stdin; each resume ends (``HolderBusy`` after two 1 s leases) before the holder is let go.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

import flightlog
from child_lines import read_line
from flightlog.errors import HolderBusy
from flightlog.events import Custom
from flightlog.integrity.effects import EFFECT_MISMATCH, EffectFold
from flightlog.kernel import Kernel
from flightlog.kernel.running import runs_in
from flightlog.recorder import Recorder, intent_hash
from flightlog.runs.host import ProcessId, host_id, process_alive, this_process
from flightlog.store import SqliteStore

from .skew_agents import performed_keys, publishing_agent
from .test_takeover_holder import _dead_pid, holder

TESTS = Path(__file__).parents[1]
RUN_S = 120.0
"""Generous overall bound on a scenario run in a namespace (never expected to run out)."""


def _let_go(child: subprocess.Popen[str]) -> str:
    assert child.stdin is not None
    child.stdin.write("go\n")
    child.stdin.flush()
    return read_line(child, "the holder's run to end")


def test_a_later_holder_record_naming_a_dead_pid_does_not_hide_the_holder_that_runs_the_effect(
    tmp_path: Path,
) -> None:
    """b05: before, the resume believed the forged last holder (a dead pid: gone at once), reconciled
    ``not_done`` and ran the effect while the holder's tool ran; the holder then ran it too."""
    db, performed = tmp_path / "s.db", tmp_path / "performed"
    with holder(db, performed, 5.0) as child, SqliteStore(db) as store:
        forger = Recorder.attach(store, "s", notary=None, take_authority=False, retain=False)
        forged = ProcessId(host_id(), _dead_pid(), 1)
        forger.append(
            Custom(
                custom_kind="external_effect_holder", payload={"key": "s:1:p1", "holder": forged.to_wire()}
            )
        )
        kernel = Kernel(store, publishing_agent(performed, hold=False), notary=None)
        kernel.lease_ms = 1_000
        with pytest.raises(HolderBusy) as busy:
            kernel.resume_sync("s", handle_signals=False)
        assert performed_keys(performed) == []  # the resume did not run it while the holder's tool ran
        _let_go(child)
    assert performed_keys(performed) == ["s:1:p1"]
    assert f"pid {child.pid}" in str(busy.value)


def test_the_fold_keeps_every_holder_and_names_what_is_wrong_with_a_malformed_one() -> None:
    """Every well-formed holder before the completion is kept, in seq order, once each (``holder`` stays
    the last); a malformed holder's finding names the member at fault (b09: an extra member passed)."""
    first, second = ProcessId("h", 10, 5), ProcessId("h", 11, 6)
    body = {"tool": "t", "arguments": {}}
    fold = EffectFold()
    for seq, kind, payload in [
        (
            0,
            "external_effect_intent",
            {"key": "k", "intent_hash": intent_hash(body), "intent": body, "holder": first.to_wire()},
        ),
        (1, "external_effect_holder", {"key": "k", "holder": second.to_wire()}),
        (2, "external_effect_holder", {"key": "k", "holder": first.to_wire()}),
        (3, "external_effect_holder", {"key": "k", "holder": {**first.to_wire(), "x": 1}}),
        (4, "external_effect_holder", {"key": "k", "holder": {"host": "h", "pid": 5, "start": -1}}),
        (5, "external_effect_holder", {"key": "k"}),
        (
            6,
            "external_effect_intent",
            {"key": "m", "intent_hash": intent_hash(body), "intent": body, "holder": {"pid": 1, "start": 1}},
        ),
    ]:
        fold.feed(seq, Custom(custom_kind=kind, payload=payload))
    assert fold.effects["k"].holders == (first, second)
    assert fold.effects["k"].holder == first  # the last well-formed one
    assert [(d.seq, d.reason) for d in fold.problems] == [(s, EFFECT_MISMATCH) for s in (3, 4, 5, 6)]
    details = [d.detail for d in fold.problems]
    assert "unknown member(s) x" in details[0]
    assert "start is neither null nor a non-negative integer" in details[1]
    assert "holder is missing" in details[2]
    assert "external_effect_intent with a malformed holder (host is not a string)" in details[3]
    assert ProcessId.from_wire({**first.to_wire(), "x": 1}) is None
    assert ProcessId.from_wire({"host": "h", "pid": 3}) == ProcessId("h", 3, None)  # start absent: unknown


def test_without_a_proc_of_this_pid_namespace_a_live_pid_is_unknown_and_a_dead_one_ended() -> None:
    """Where ``/proc`` is not this namespace's (or absent), neither the start time nor the mark is read
    from it: a process whose pid exists is unknown (None), one whose pid is free has ended (False)."""
    me, dead = this_process(), _dead_pid()
    with mock.patch("flightlog.runs.host.os.readlink", return_value="1"):  # /proc/self: not our pid
        assert this_process().start is None
        with subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.readline()"], stdin=subprocess.PIPE
        ) as p:
            assert process_alive(ProcessId(me.host, p.pid, me.start)) is None
            assert runs_in(p.pid, "s:1:p1") is None
            assert p.stdin is not None
            p.stdin.close()
        assert process_alive(ProcessId(me.host, dead, me.start)) is False
        assert runs_in(dead, "s:1:p1") is False


def _need(*tools: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to make a mount or pid namespace (unshare); CI runs as root")
    for name in tools:
        if shutil.which(name) is None:
            pytest.skip(f"needs {name} (util-linux) on PATH")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user (nobody) can write: a pytest ``tmp_path`` is root's alone."""
    path = Path(tempfile.mkdtemp(prefix="flightlog-hidepid-"))
    path.chmod(0o777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _as_nobody_under_hidepid(tmp: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run this Python with ``argv`` as user nobody in a private mount namespace whose ``/proc`` is mounted
    ``hidepid=2`` (other users' processes hidden); this interpreter's prefix is bind-mounted into ``tmp``
    (root's home, where it may live, is closed to nobody). Its environment is emptied but for ``HOME`` (``tmp``),
    ``PATH`` and ``PYTHONPATH``: the test's own (its key directory among it) is root's."""
    prefix, python = Path(sys.base_prefix), Path(os.path.realpath(sys.executable))
    inner = tmp / "py" / python.relative_to(prefix)
    paths = [
        str(Path(flightlog.__file__).parents[1]),
        str(TESTS),
        *[p for p in sys.path if "site-packages" in p],
    ]
    script = (
        f'mkdir -p "{tmp}/py" && mount --bind "{prefix}" "{tmp}/py" && mount -t proc -o hidepid=2 proc /proc && '
        f'exec setpriv --reuid=65534 --regid=65534 --clear-groups env -i HOME="{tmp}" PATH=/usr/bin:/bin PYTHONPATH="{os.pathsep.join(paths)}" '
        f'"{inner}" "$@"'
    )
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", script, "sh", *argv],
        capture_output=True,
        text=True,
        timeout=RUN_S,
        cwd="/tmp",
        check=False,
    )


def test_a_holder_hidden_by_hidepid_is_assumed_to_run(shared_dir: Path) -> None:
    """b02: before, the hidden ``/proc/<pid>/stat`` made ``process_alive`` False and the hidden ``fd``
    made ``runs_in`` False: the resume (another user) ran the effect while the holder's tool ran."""
    _need("unshare", "setpriv", "mount")
    probe = _as_nobody_under_hidepid(shared_dir, "-c", "import flightlog.kernel; print('ok')")
    if probe.stdout.strip() != "ok":
        pytest.skip(f"cannot run as nobody under hidepid=2 here: {probe.stderr.strip()[-300:]}")
    db, performed = shared_dir / "s.db", shared_dir / "performed"
    with holder(db, performed, 0.2) as child:
        for path in shared_dir.iterdir():
            if path.is_file():
                path.chmod(0o666)  # the database and its WAL: nobody resumes it
        resumed = _as_nobody_under_hidepid(shared_dir, "-m", "kernel.holder_resume", str(db), str(performed))
        during = performed_keys(performed)
        ended = _let_go(child)
    assert during == [], resumed
    assert performed_keys(performed) == ["s:1:p1"]
    assert resumed.stdout.startswith("resume raised: HolderBusy"), (resumed.stdout, resumed.stderr[-800:])
    assert f"pid {child.pid}" in resumed.stdout
    assert ended == "ended completed\n"


def test_in_a_pid_namespace_without_its_own_proc_the_live_record_decides(tmp_path: Path) -> None:
    """b12: before, the holder's intent recorded the start of the outer process with its pid number, and the
    resume judged the holder by that process: it ran the effect while the holder's tool ran. Now the start
    is recorded unknown, ``/proc`` is not read, and the holder's heartbeated live record keeps the resume
    waiting (``HolderBusy``)."""
    _need("unshare")
    probe = subprocess.run(["unshare", "-p", "-f", "true"], capture_output=True, text=True, timeout=RUN_S)
    if probe.returncode != 0:
        pytest.skip(f"cannot make a pid namespace here: {probe.stderr.strip()[-300:]}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        ["unshare", "-p", "-f", "--kill-child", sys.executable, "-m", "kernel.pidns_holder", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=RUN_S,
        env=env,
        check=False,
    )
    lines = run.stdout.splitlines()
    assert lines[:2] == ["proc_self_is_getpid False", "start None"], (run.stdout, run.stderr[-800:])
    assert lines[2].startswith("resume raised: HolderBusy"), (run.stdout, run.stderr[-800:])
    assert lines[3:] == ["holder: ended completed", "performed: s:1:p1"], (run.stdout, run.stderr[-800:])
