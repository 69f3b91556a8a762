"""The README's first command, exactly as written, on a fresh copy of the repository and a fresh HOME.

The command is read from README.md (the first line of its first ``sh`` block), not repeated here, so the
test follows the README when the README changes. It runs in a copy of what a clone holds (the files git
tracks, plus new files not ignored) with a new HOME and no flightlog or XDG variables, so nothing of this
machine's flightlog state or of the suite's environment is reused; only pip's download cache is shared.
It waits for the command to finish (a generous bound against a hang, not a timing), then checks the exit
code and the demo's key lines.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
HANG_BOUND_S = 3600  # pip install + the whole demo on a slow, loaded machine; only a hang reaches it

KEY_LINES = [
    # part 1: imported transcripts, signed, verified, tampering found
    re.compile(r"^\s+ok\s+claude-code:\S+\s+\d+ events", re.M),
    re.compile(r"^\s+ok\s+codex:\S+\s+\d+ events", re.M),
    re.compile(r"^tampering detected at seq \d+; your database is untouched\.$", re.M),
    # part 2: the durable agent run across processes
    re.compile(r"-> exit 3: session \w+ suspended, waiting for approval", re.M),
    re.compile(r"-> killed \(exit -9\) after the intent was durable", re.M),
    re.compile(r"-> exit 0: completed after \d+ steps", re.M),
    re.compile(r"ran exactly once \(1 line in the account log\)", re.M),
    re.compile(r"replay server: served .*; 0 mismatches", re.M),
    re.compile(
        r"^one run, five processes, a suspension and a SIGKILL: the ledger holds all of it, once\.$", re.M
    ),
]


def first_command(readme: str) -> str:
    """The first line of the README's first ``sh`` code block."""
    match = re.search(r"^```sh\n(.*?)^```", readme, re.M | re.S)
    assert match, "README.md has no ```sh block"
    lines = [line for line in match.group(1).splitlines() if line.strip()]
    assert lines, "README.md's first ```sh block is empty"
    return lines[0]


def test_the_first_command_is_the_install_and_demo() -> None:
    command = first_command(README.read_text(encoding="utf-8"))
    assert command.startswith("python3 -m venv .venv && ")
    assert command.endswith("flightlog demo")


def fresh_copy(destination: Path) -> Path:
    """What a clone of the checkout holds: tracked files plus untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    names = [n for n in listed.stdout.decode().split("\0") if n]
    assert "README.md" in names and "pyproject.toml" in names
    for name in names:
        source = ROOT / name
        if not source.exists():  # deleted in the working tree, not yet committed
            continue
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return destination


def fresh_environment(home: Path) -> dict[str, str]:
    """This environment without flightlog's, XDG's and virtualenv variables, HOME replaced, and the test
    interpreter's directory off PATH; pip keeps its configuration (PIP_*) and its download cache."""
    cache = subprocess.run(
        [sys.executable, "-m", "pip", "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("FLIGHTLOG_", "XDG_", "PYTEST_"))
        and k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "COVERAGE_PROCESS_START")
    }
    own_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != own_bin)
    env["HOME"] = str(home)
    env["PIP_CACHE_DIR"] = cache
    return env


@pytest.mark.slow
def test_the_readme_first_command_runs_as_written(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.fail("git is needed to copy the checkout as a clone would hold it")
    command = first_command(README.read_text(encoding="utf-8"))
    checkout = fresh_copy(tmp_path / "flightlog")
    home = tmp_path / "home"
    home.mkdir()
    done = subprocess.run(
        ["sh", "-c", command],
        cwd=checkout,
        env=fresh_environment(home),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_BOUND_S,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"exit {done.returncode}\n{output[-6000:]}"
    missing = [p.pattern for p in KEY_LINES if not p.search(done.stdout)]
    assert not missing, f"missing demo lines {missing}\n{done.stdout[-6000:]}"
    assert (checkout / ".venv" / "bin" / "flightlog").exists()
    # The demo's ledger went where a new user's would: under the fresh HOME, nowhere else.
    assert [p.name for p in home.rglob("flightlog.db")] == ["flightlog.db"]
    shutil.rmtree(checkout / ".venv")  # passed: no need to keep a virtualenv per run in pytest's tmp dirs
