"""The OpenAI Agents SDK's own session tests, run against FlightlogSession (issue 16 item 2).

At test time the sdist of exactly the installed ``openai-agents`` is fetched from PyPI with pip (cached in
``$XDG_CACHE_HOME/flightlog-tests/``, else ``~/.cache/flightlog-tests/``, and reused; nothing of it is in this
repository), its session test files are found (``tests/memory/test_session*.py`` in 0.2x, ``tests/`` in older
releases) and run in one pytest subprocess with ``sdk_session_suite_plugin``: the tests' ``SQLiteSession``
builds a FlightlogSession, and the tests of SQLiteSession's internals are deselected by name, each with its
reason (the plugin's ``DESELECTED``). When the download fails the test fails under CI (``CI`` set, as
``.ci/run`` sets it) and is skipped otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.version import Version

from .sdk_session_suite_plugin import DESELECTED, REPORT_ENV

PLUGIN_DIR = Path(__file__).resolve().parent
SESSION_TESTS = ("test_session.py", "test_session_limit.py")
"""The SDK's session test files, by name; under ``tests/memory/`` (0.2x) or ``tests/`` (older)."""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "flightlog-tests" / "openai-agents-sdist"


def _download(release: str, cache: Path) -> Path:
    """The sdist of ``openai-agents==release`` in ``cache``, downloaded with pip when absent.

    Raises:
        RuntimeError: pip failed (its last output lines) or produced no sdist.
    """
    found = sorted(cache.glob(f"openai[-_]agents-{release}.tar.gz"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as staging:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:"]
        command += ["--disable-pip-version-check", "-d", staging, f"openai-agents=={release}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
        fetched = sorted(Path(staging).glob("*.tar.gz"))
        if done.returncode != 0 or not fetched:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            raise RuntimeError(
                f"pip download openai-agents=={release} failed (exit {done.returncode}): {tail}"
            )
        target = cache / fetched[0].name
        os.replace(fetched[0], target)  # atomic: a concurrent run sees the whole file or none
        return target


def _extract(sdist: Path, release: str) -> Path:
    """The sdist's ``pyproject.toml`` and ``tests/`` extracted next to it (once); returns the root."""
    root = sdist.parent / f"openai-agents-{release}"
    if (root / "pyproject.toml").exists():
        return root
    with tempfile.TemporaryDirectory(dir=sdist.parent) as staging, tarfile.open(sdist) as archive:
        members = [
            m
            for m in archive.getmembers()
            if m.name.count("/") >= 1
            and (m.name.split("/", 1)[1] == "pyproject.toml" or m.name.split("/", 1)[1].startswith("tests/"))
        ]
        if hasattr(tarfile, "data_filter"):
            archive.extractall(staging, members=members, filter="data")
        else:  # pragma: no cover - Python before 3.11.4
            archive.extractall(staging, members=members)
        (top,) = Path(staging).iterdir()
        try:
            os.replace(top, root)
        except OSError:  # another run extracted it meanwhile
            shutil.rmtree(top, ignore_errors=True)
    return root


def _session_test_files(root: Path) -> list[Path]:
    for folder in (root / "tests" / "memory", root / "tests"):
        files = [folder / name for name in SESSION_TESTS if (folder / name).exists()]
        if files:
            return files
    raise AssertionError(f"no {' or '.join(SESSION_TESTS)} under {root / 'tests'}")


def test_sdk_session_suite_passes_against_flightlog_session(tmp_path: Path) -> None:
    release = version("openai-agents")
    try:
        sdist = _download(release, _cache_dir())
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
        if os.environ.get("CI"):
            pytest.fail(f"the SDK's session tests are needed under CI: {exc}")
        pytest.skip(f"the SDK's session tests could not be fetched: {exc}")
    root = _extract(sdist, release)
    files = _session_test_files(root)
    report_path = tmp_path / "report.json"
    env = {
        **os.environ,
        REPORT_ENV: str(report_path),
        "PYTHONPATH": str(PLUGIN_DIR),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    command = [sys.executable, "-m", "pytest", "-p", "sdk_session_suite_plugin", "-p", "no:cacheprovider"]
    command += ["-q", "--rootdir", str(root), "--basetemp", str(tmp_path / "basetemp")]
    command += [str(f.relative_to(root)) for f in files]
    done = subprocess.run(
        command, cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    output = (done.stdout + done.stderr)[-8000:]
    assert report_path.exists(), output
    report = json.loads(report_path.read_text(encoding="utf-8"))

    assert report["stale"] == [], f"DESELECTED names no test of openai-agents {release}: {report['stale']}"
    assert done.returncode == 0, output
    outcomes = report["outcomes"]
    passed = [node for node, outcome in outcomes.items() if outcome == "passed"]
    assert sorted(outcomes) == sorted(set(report["collected"]) - set(report["deselected"])), output
    assert len(passed) == len(outcomes) > 0, {n: o for n, o in outcomes.items() if o != "passed"}
    deselected_names = {node.split("::")[-1].split("[")[0] for node in report["deselected"]}
    expected = {n for n, entry in DESELECTED.items() if Version(release) >= Version(entry.since)}
    assert expected <= deselected_names <= set(DESELECTED)
    print(f"openai-agents {release}: {len(passed)} passed, {len(report['deselected'])} deselected")
