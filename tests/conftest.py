"""Suite-wide isolation: no test reads or writes the user's real key, head or database locations."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


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
