"""The everyday read commands import only what they use (a new user's finding: ``flightlog ls`` spent
0.7 s of 1.16 s importing the kernel runtime and the integrity audit through ``flightlog.kernel``).

Pinned on what is imported, never on a time: each command runs in a fresh interpreter and the test reads
``sys.modules`` after it. Before: ``ls`` loaded ``flightlog.integrity.audit`` and ``flightlog.kernel.state``
(``kernel/__init__`` bound ``abort`` eagerly; ``kernel.rowcheck`` imported the fold and the audit report),
``show`` the audit too.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from flightlog.events import RunStarted, RunTerminal
from flightlog.recorder import Recorder
from flightlog.store import open_store

_PROBE = """
import json, sys
from flightlog.cli import main
sys.argv = ["flightlog", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""

HEAVY = (
    "flightlog.integrity.audit",
    "flightlog.kernel.state",
    "flightlog.kernel.loop",
    "flightlog.kernel.abort",
)
"""What ``ls``, ``show`` and the ``--help`` of the read commands need none of."""


def _loaded(db: Path, *args: str) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, "--db", str(db), *args], capture_output=True, text=True, timeout=120
    )
    said = json.loads(done.stderr.strip().splitlines()[-1])
    assert said["code"] in (0, None), done.stderr
    return set(said["modules"])


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "f.db"
    with open_store(str(path)) as store:
        recorder = Recorder.create(store, session_id="s1", task="t")
        recorder.append(RunStarted(run_id="r1", goal="g"))
        recorder.append(RunTerminal(reason="completed", turns_used=0, total_tokens=0))
        recorder.finish("completed")
    return path


@pytest.mark.parametrize(
    "args",
    [["ls"], ["show", "s1"], ["ls", "--help"], ["runs", "--help"], ["show", "--help"], ["pending", "--help"]],
    ids=" ".join,
)
def test_a_read_command_does_not_import_the_runtime(db: Path, args: list[str]) -> None:
    loaded = _loaded(db, *args)
    assert "flightlog.cli" in loaded
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_verify_loads_the_audit_but_not_the_runtime(db: Path) -> None:
    loaded = _loaded(db, "verify", "s1")
    assert "flightlog.integrity.verify" in loaded
    assert not loaded & {"flightlog.kernel.loop", "flightlog.kernel.abort", "flightlog.kernel.state"}


def test_kernel_abort_is_still_the_function_after_its_module_loads() -> None:
    """``abort`` loads lazily now; importing its submodule must not hide the function behind the module."""
    code = (
        "import flightlog.kernel as k, flightlog.kernel.abort as m\n"
        "from flightlog.kernel import abort\n"
        "import types, sys\n"
        "assert callable(k.abort) and not isinstance(k.abort, types.ModuleType), k.abort\n"
        "assert abort is k.abort is sys.modules['flightlog.kernel.abort'].abort\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
