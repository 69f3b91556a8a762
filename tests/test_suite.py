"""The suite's own settings (tests/conftest.py): what keeps it passing on a slow, loaded machine."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def test_property_tests_never_time_the_machine() -> None:
    """No per-example deadline (Hypothesis's default is 200 ms) and no ``too_slow`` health check."""
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check
