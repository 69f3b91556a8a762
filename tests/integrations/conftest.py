"""Fixtures shared by the integration tests: a SQLite ledger file and a store open on it; what a LangGraph
thread's records may hold after an answer (:func:`resumes_after_answer`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import flightlog
from flightlog.store.base import Store


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """The path of a new SQLite ledger file."""
    return tmp_path / "lg.db"


@pytest.fixture
def store(db: Path) -> Iterator[Store]:
    """A store open on :func:`db`, closed after the test."""
    s = flightlog.open_store(str(db))
    yield s
    s.close()


def resumes_after_answer(kinds: Sequence[str]) -> int:
    """How many ``resumed`` records a LangGraph thread whose one answer is recorded (its
    ``permission_resolved``, among the thread's record ``kinds`` in ledger order) holds: 1 when the answer
    came before the run's last ``run_terminal``, else 0. LangGraph (durability "async") saves the answer's
    resume writes from its background thread, in any order with the checkpoints of the steps after it;
    after the one that ended the run the saver records the decision and does not resume the ended run."""
    (answered,) = [i for i, kind in enumerate(kinds) if kind == "permission_resolved"]
    return 1 if answered < max(i for i, kind in enumerate(kinds) if kind == "run_terminal") else 0
