"""Start-up of the ``flightlog`` command loads only what the command tree needs (issue 19).

The web server, MCP client, provider SDKs, LangGraph and the agent runtime load inside the commands that
use them, so ``flightlog --version``, ``--help`` or a listing do not pay for them (nor fail to start when
an optional extra is broken). Checked on ``sys.modules`` of a fresh interpreter, not on a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "fastapi",
    "starlette",
    "uvicorn",
    "mcp",
    "openai",
    "anthropic",
    "langgraph",
    "flightlog.kernel.loop",
)


def _loaded_after(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_import_cli_loads_no_optional_stack() -> None:
    assert _heavy(_loaded_after("import flightlog.cli")) == []


def test_version_runs_without_loading_the_runtime() -> None:
    code = (
        "import sys\nfrom flightlog.cli import app\n"
        "try:\n    app(['--version'])\nexcept SystemExit as done:\n    assert done.code in (0, None), done.code"
    )
    assert _heavy(_loaded_after(code)) == []


def test_lazy_kernel_names_still_import() -> None:
    """``from flightlog.kernel import Kernel`` (PEP 562 lazy names) gives the real class."""
    loaded = _loaded_after("from flightlog.kernel import Kernel, tool\nassert Kernel.__name__ == 'Kernel'")
    assert "flightlog.kernel.loop" in loaded
