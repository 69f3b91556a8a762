"""Suite-wide settings.

Isolation: no test reads or writes the user's real key, head or database locations. The variables are set
when pytest loads this file, before any fixture of any scope runs (module-scoped fixtures run before
function-scoped autouse ones), and are inherited by every subprocess a test starts. Each test then gets
fresh directories of its own.

Ctrl-C: the README's test command ignored the first one when it landed in a test that runs a kernel with
its default signal handling (``run_sync``/``resume_sync``, ``handle_signals=True``: the kernel cancels its
run cleanly, as it should for an application, and the test fails) or inside a pydantic serializer (pydantic
turns the KeyboardInterrupt into a ``PydanticSerializationError``, the test fails); the suite then went on
with the next test. ``_ctrl_c_stops_the_suite`` notes every SIGINT during a test (its own handler, and a
wrapper around the kernel's) and raises KeyboardInterrupt after the test, so the session stops at the
first Ctrl-C; a test marked ``own_sigint`` sends SIGINT to itself (the kernel's handling under test) and
is left alone.

Hypothesis: the ``flightlog`` profile (loaded here, so it applies to every property test) has no
per-example ``deadline`` and no ``too_slow`` health check. Both time the machine, not the code: on a slow,
loaded machine an example or its data generation may take longer than Hypothesis's 200 ms default, and the
test would fail for that alone. Speed is measured in ``bench/``, never in tests.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
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


@pytest.fixture(autouse=True)
def _ctrl_c_stops_the_suite(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """A Ctrl-C the test did not let through (see the module docs) stops the session after it."""
    if (
        request.node.get_closest_marker("own_sigint")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    from flightlog.events import CancellationReason
    from flightlog.kernel import signals

    pressed = threading.Event()

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        pressed.set()
        raise KeyboardInterrupt

    real = signals.install_signal_handlers

    def install(cancel: Callable[[CancellationReason], None]) -> Callable[[], None]:
        def on_signal(reason: CancellationReason) -> None:
            if reason is CancellationReason.USER:
                pressed.set()
            cancel(reason)

        uninstall = real(on_signal)

        def restore() -> None:
            uninstall()  # asyncio puts back signal.default_int_handler, not the handler it replaced
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, on_sigint)

        return restore

    previous = signal.signal(signal.SIGINT, on_sigint)
    monkeypatch.setattr(signals, "install_signal_handlers", install)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    # a Ctrl-C that reached pytest already stopped the session (its fixtures are torn down after it)
    if pressed.is_set() and request.session.exitstatus != pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt(
            "Ctrl-C during the test (a kernel run or a library took it); stopping the suite"
        )


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
