"""Suite-wide settings.

Isolation: no test reads or writes the user's real key, head or database locations. The variables are set
when pytest loads this file, before any fixture of any scope runs (module-scoped fixtures run before
function-scoped autouse ones), and are inherited by every subprocess a test starts. Each test then gets
fresh directories of its own.

Hypothesis: the ``flightlog`` profile (loaded here, so it applies to every property test) has no
per-example ``deadline`` and no ``too_slow`` health check. Both time the machine, not the code: on a slow,
loaded machine an example or its data generation may take longer than Hypothesis's 200 ms default, and the
test would fail for that alone. Speed is measured in ``bench/``, never in tests.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from flightlog.store.sqlite import SqliteStore

_SUITE_HOME = tempfile.mkdtemp(prefix="flightlog-tests-")
for _name, _sub in (
    ("FLIGHTLOG_KEY_DIR", "keys"),
    ("FLIGHTLOG_HEAD_DIR", "heads"),
    ("FLIGHTLOG_DB", "default.db"),
):
    os.environ[_name] = os.path.join(_SUITE_HOME, _sub)
os.environ.pop("FLIGHTLOG_LOG_KEY", None)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the suite-wide fallback directory (it leaked one ``/tmp/flightlog-tests-*`` per run). A
    process a test left running may still write into it: what it leaves is not the suite's to report."""
    shutil.rmtree(_SUITE_HOME, ignore_errors=True)


settings.register_profile("flightlog", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("flightlog")


@pytest.fixture(autouse=True)
def _isolated_user_dirs(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    home = tmp_path_factory.mktemp("user")
    monkeypatch.setenv("FLIGHTLOG_KEY_DIR", str(home / "keys"))
    monkeypatch.setenv("FLIGHTLOG_HEAD_DIR", str(home / "heads"))
    monkeypatch.setenv("FLIGHTLOG_DB", str(home / "default.db"))
    monkeypatch.delenv("FLIGHTLOG_LOG_KEY", raising=False)
    yield


SAMPLES = Path(__file__).parent / "data" / "samples"
"""Real transcripts of every import format (``tests/data/samples/<format>/``, see its PROVENANCE.md)."""


@pytest.fixture(scope="module")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteStore]:
    """A store holding every sample transcript the importers take whole (one session each; a fragment
    its format's tests wrap first is skipped), shared by a module's tests: treat it as read-only."""
    from flightlog.errors import ImportFormatError
    from flightlog.importers import FORMATS, import_file
    from flightlog.store.sqlite import SqliteStore  # here: after the isolation variables above are set

    with SqliteStore(tmp_path_factory.mktemp("samples") / "samples.db") as store:
        imported = 0
        for path in sorted(SAMPLES.rglob("*")):
            fmt = path.relative_to(SAMPLES).parts[0]
            if fmt in FORMATS and path.is_file() and path.suffix in {".jsonl", ".json", ".traj", ".md"}:
                try:
                    import_file(store, path, format=fmt)
                except ImportFormatError:  # a fragment its format's tests wrap first: not a transcript
                    continue
                imported += 1
        assert imported >= 8
        yield store
