"""A count written as a float (attack on the runs projection): an appended event's projection folds the
event as given, a rebuild folds what its stored bytes decode to, and RFC 8785 writes a float with no
fraction below 1e21 as an integer literal (``100.0`` is stored as ``100``, ``-0.0`` as ``0``). A
``Custom`` payload the fold reads (``token_usage``, ``budget_configured``, ``budget_limits``,
``prompt_program_invoked``) carrying such a float must fold as its stored integer, so the projection equals
a rebuild: on main the append's fold refused ``100.0`` as no count while the rebuild counted ``100``."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from flightlog.encoding import canonical_bytes, decode_stored
from flightlog.events import Custom
from flightlog.recorder import Recorder
from flightlog.runs import rebuild_projection
from flightlog.store import SqliteStore

from .conftest import checkpoint, llm, started

NUMBER = (
    st.integers(min_value=-5, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([100.0, -0.0, 0.0, 7.5, 2.0**53 - 1, 2.0**53, 2.0**63, 2.0**64, 1e20, 1e21, 1e300])
)
KINDS = ["token_usage", "model_usage", "budget_configured", "budget_limits", "prompt_program_invoked"]
FIELDS = {
    "token_usage": ["total_tokens", "input_tokens", "output_tokens"],
    "model_usage": ["total_tokens", "input_tokens", "output_tokens"],
    "budget_configured": ["token_budget", "max_steps"],
    "budget_limits": ["tokens", "turns"],
}


def payload(kind: str, numbers: list[Any]) -> dict[str, Any]:
    if kind == "prompt_program_invoked":
        context = {
            "fill_tokens": numbers[0],
            "basis": "estimated",
            "tokens": numbers[1],
            "output_reserve": numbers[2],
        }
        return {"actor": "kernel", "turn": numbers[3], "model": "m", "context": context}
    return dict(zip(FIELDS[kind], numbers, strict=False))


def rows(store: SqliteStore) -> dict[str, Any]:
    return {run_id: (row.snapshot, row.fold) for run_id, row in store.get_run_rows(["s"]).items()}


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(KINDS), st.lists(NUMBER, min_size=4, max_size=4))
@example("token_usage", [100.0, 0, 0, 0])
@example("token_usage", [None, -0.0, 5.0, 0])
@example("budget_configured", [5000.0, 3.0, 0, 0])
@example("prompt_program_invoked", [10.0, 1000.0, 100.0, 1.0])
def test_a_count_written_as_a_float_folds_as_the_integer_it_is_stored_as(
    kind: str, numbers: list[Any]
) -> None:
    event = Custom(custom_kind=kind, payload=payload(kind, numbers))
    stored = decode_stored(canonical_bytes(event))
    with SqliteStore(":memory:") as store:
        recorder = Recorder.create(store, session_id="s")
        for before in (started(), checkpoint(), llm(1)):
            recorder.append(before)
        recorder.append(event)  # the projection folds the event given
        recorder.append(checkpoint())
        incremental = rows(store)
        rebuild_projection(store)  # folds what the bytes decode to
        assert rows(store) == incremental, (event.payload, stored.payload)
