"""What the installed package needs at run time: no pytest outside ``flightlog.testing.store_contract``,
and no silently unlocked compare-and-write of retained heads where the OS has no ``fcntl``."""

from __future__ import annotations

import ast
import fcntl
import logging
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import flightlog
from flightlog.errors import install_hint
from flightlog.events import Custom
from flightlog.integrity.heads import _file_lock
from flightlog.integrity.notary import Notary
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore

WALK = """
import importlib, pkgutil, sys
sys.modules["pytest"] = None  # as if pytest were not installed: importing it raises ImportError
import flightlog
failed = {}
for info in pkgutil.walk_packages(flightlog.__path__, "flightlog."):
    if info.name.rsplit(".", 1)[-1] == "__main__":
        continue  # runs the CLI
    try:
        importlib.import_module(info.name)
    except ImportError as exc:
        failed[info.name] = str(exc)
print(repr(failed))
"""


def test_no_module_but_the_pytest_suite_needs_pytest() -> None:
    """``flightlog.testing`` and everything else import without pytest (not a runtime dependency); the one
    pytest suite says which extra brings it."""
    done = subprocess.run(
        [sys.executable, "-c", WALK], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    failed = eval(done.stdout)  # a dict repr printed by the child above
    assert failed == {
        "flightlog.testing.store_contract": (
            "flightlog.testing.store_contract is a pytest suite: pip install 'flightlog[testing]' (from a "
            "checkout: pip install -e '.[testing]')"
        )
    }


def test_the_testing_extra_brings_pytest() -> None:
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text(encoding="utf-8")
    assert 'testing = ["pytest>=8"]' in text


def test_without_fcntl_retaining_a_head_fails_loudly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """It used to skip the lock silently (a racing process could overwrite a newer retained head). Now no
    head (the session's or the index log's) is written unlocked, and each failure is logged as one warning
    line naming the cause (retention runs after the commit, which it cannot undo)."""
    notary = Notary.from_env()
    with SqliteStore(tmp_path / "l.db") as store:
        rec = Recorder.create(store, session_id="s", notary=notary)
        rec.append(Custom(custom_kind="step", payload={}))
        ledger_id = store.ledger_id()
        before = notary.heads.path(ledger_id, "s")
        kept = before.read_bytes() if before.exists() else None
        monkeypatch.setitem(sys.modules, "fcntl", None)  # as on Windows: `import fcntl` raises ImportError
        with caplog.at_level(logging.WARNING, logger="flightlog"):
            rec.finish("completed")
    records = [r for r in caplog.records if "could not retain the" in r.getMessage()]
    assert {r.getMessage().split(" at size")[0] for r in records} == {
        "could not retain the head of session s",
        f"could not retain the index head of ledger {ledger_id}",
    }
    for record in records:
        assert record.levelno == logging.WARNING and record.exc_info is None
        assert "no file locking here" in record.getMessage() and "\n" not in record.getMessage()
    assert notary.heads.load_index(ledger_id) is None, "nothing retained without the lock"
    assert (before.read_bytes() if before.exists() else None) == kept, "the session head did not move"


def test_the_lock_excludes_another_holder(tmp_path: Path) -> None:
    """While one holder has the lock, another open of the lock file cannot take it (checked without
    waiting: a non-blocking attempt from another thread must fail)."""
    path = tmp_path / "heads" / ".index.lock"
    outcome: list[str] = []

    def try_lock() -> None:
        with path.open("a") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                outcome.append("blocked")
            else:
                outcome.append("acquired")

    with _file_lock(path):
        other = threading.Thread(target=try_lock)
        other.start()
        other.join(timeout=60)
    assert outcome == ["blocked"]
    try_lock()  # released after the block
    assert outcome == ["blocked", "acquired"]


def _messages(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """Every string literal of a module but its docstrings: (line, text), f-strings by their literal parts."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


def test_every_missing_extra_message_comes_from_install_hint() -> None:
    """A message for a missing extra gives both install commands from one helper (``install_hint``); no module
    spells a ``pip install`` of its own, and every extra a module names exists in pyproject.toml."""
    root = Path(flightlog.__file__).parent
    extras = set(
        tomllib.loads((root.parents[1] / "pyproject.toml").read_text("utf-8"))["project"][
            "optional-dependencies"
        ]
    )
    spelled, named = [], set()
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        spelled += [
            f"{path.name}:{line}"
            for line, text in _messages(tree)
            if "pip install" in text and path.name != "errors.py"
        ]
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "install_hint":
                [arg] = node.args
                assert isinstance(arg, ast.Constant), f"{path.name}:{node.lineno}: install_hint of a literal"
                named.add(arg.value)
    assert spelled == []
    assert named <= extras and len(named) >= 8, (named - extras, named)
    assert (
        install_hint("langgraph")
        == "pip install 'flightlog[langgraph]' (from a checkout: pip install -e '.[langgraph]')"
    )


def test_mcp_servers_without_the_extra_name_it() -> None:
    code = (
        "import asyncio, sys; sys.modules['mcp'] = None\n"
        "from flightlog.kernel.mcp import McpConnection, McpServer\n"
        "try:\n    asyncio.run(McpConnection(McpServer(id='s', command='true')).start())\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == f"MCP servers need the mcp SDK: {install_hint('mcp')}"
