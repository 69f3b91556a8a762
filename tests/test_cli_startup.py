"""Start-up of the ``flightlog`` command loads only what the command tree needs (issue 19).

The web server, MCP client, provider SDKs, LangGraph and the agent runtime load inside the commands that
use them, so ``flightlog --version``, ``--help`` or a listing do not pay for them (nor fail to start when
an optional extra is broken). Checked on ``sys.modules`` of a fresh interpreter, not on a timing.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def test_import_flightlog_loads_no_models_store_or_recorder() -> None:
    """The package root is lazy (PEP 562): importing it (as every ``flightlog.*`` import does) loads neither
    pydantic, the event models, the store nor the recorder."""
    loaded = _loaded_after("import flightlog")
    heavy = ("pydantic", "flightlog.events", "flightlog.store", "flightlog.recorder", "flightlog.runs")
    assert sorted(m for m in loaded if m in heavy) == []


def test_every_public_name_of_the_root_is_the_defining_modules_object() -> None:
    code = (
        "import importlib, flightlog\n"
        "for name in flightlog.__all__:\n"
        "    home = flightlog._HOMES.get(name)\n"
        "    value = getattr(flightlog, name)\n"
        "    assert home is None or value is getattr(importlib.import_module(home, 'flightlog'), name), name\n"
        "from flightlog import Recorder, open_store, StoreError\n"
        "try:\n    flightlog.no_such_name\nexcept AttributeError as e:\n    assert 'no_such_name' in str(e)\n"
        "else:\n    raise SystemExit('no AttributeError')\n"
    )
    assert "flightlog.recorder" in _loaded_after(code)


def test_a_recorder_keeps_the_runs_projection_current_whatever_was_imported(tmp_path: Path) -> None:
    """No import side effect registers the ``runs`` projector any more: a process that imports only the
    recorder and a store still writes the run's row in the append's transaction."""
    db = tmp_path / "r.db"
    code = (
        "import sys\n"
        "from flightlog.recorder import Recorder\n"
        "from flightlog.store.sqlite import SqliteStore\n"
        "from flightlog.events import RunStarted\n"
        "assert 'flightlog.runs' not in sys.modules\n"
        f"store = SqliteStore({str(db)!r})\n"
        "rec = Recorder.create(store, session_id='s1', task='t')\n"
        "rec.append(RunStarted(run_id='s1', goal='t'))\n"
        "rows = store.get_run_rows(['s1'])\n"
        "assert rows['s1'].last_seq == 0, rows\n"
        "store.close()\n"
    )
    assert "flightlog.runs.projection" in _loaded_after(code)


CORE = ("pydantic", "flightlog.events", "flightlog.store", "flightlog.recorder", "flightlog.importers")


def test_version_loads_no_event_models_store_or_importers() -> None:
    """``flightlog --version`` (and building the command tree) loads typer and rich, not the models: every
    command module imports the store, the read model and the runtime inside its commands."""
    code = (
        "from flightlog.cli import app\n"
        "try:\n    app(['--version'])\nexcept SystemExit as done:\n    assert done.code in (0, None), done.code"
    )
    loaded = _loaded_after(code)
    assert sorted(m for m in loaded if any(m == c or m.startswith(c + ".") for c in CORE)) == []


def test_the_clis_copies_of_model_constants_agree_with_the_models() -> None:
    """The command tree states a few values of the models for its help texts (so start-up need not load
    them); each must equal the model's own."""
    from flightlog.cli.root import IMPORT_FORMATS
    from flightlog.cli.runs import LEASE_S, RUN_SOURCES, RUN_STATES
    from flightlog.importers import FORMATS
    from flightlog.live import DEFAULT_LEASE_MS
    from flightlog.runs import RunSource, RunState

    assert tuple(FORMATS) == IMPORT_FORMATS
    assert tuple(s.value for s in RunState) == RUN_STATES
    assert tuple(s.value for s in RunSource) == RUN_SOURCES
    assert LEASE_S == DEFAULT_LEASE_MS / 1000


def test_console_version_loads_no_command_line_and_prints_what_the_option_prints() -> None:
    """``flightlog --version`` (``flightlog.cli.main``) answers before typer, rich or a command module load,
    with the bytes the root's ``--version`` option prints through typer."""
    code = "import sys\nsys.argv[1:] = ['--version']\nfrom flightlog.cli import main\nmain()"
    loaded = _loaded_after(code)
    assert sorted(m for m in loaded if m.split(".")[0] in ("typer", "click", "rich")) == []
    assert "flightlog.cli.root" not in loaded
    fast = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    option = subprocess.run(
        [sys.executable, "-c", "from flightlog.cli import app\napp(['--version'])"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert option.returncode == 0 and fast == option.stdout
    assert fast.startswith("flightlog ") and fast.endswith("\n")


def test_console_version_into_a_closed_pipe_exits_141_quietly() -> None:
    code = "import sys\nsys.argv[1:] = ['--version']\nfrom flightlog.cli import main\nmain()"
    with subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        assert proc.wait(timeout=120) == 141
        assert proc.stderr.read() == b""
