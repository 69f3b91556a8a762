"""``@tool``: JSON Schema from type hints and Google docstrings, validation, sync/async invocation."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from flightlog.kernel import Tool, ToolArgumentsError, tool
from flightlog.kernel.tools import parse_docstring, render_output

from .helpers import run


@tool(effect="read_only")
def search(
    query: str, paths: list[str], mode: Literal["fast", "full"] = "fast", limit: int = 10
) -> list[str]:
    """Search files for a query.

    Longer explanation that is also part of the description.

    Args:
        query: What to look for;
            may span lines.
        paths (list[str]): Where to look.
        mode: Search depth.
        limit: At most this many hits.

    Returns:
        The matching lines.
    """
    return [f"{query}@{p}" for p in paths][:limit]


def test_schema_comes_from_type_hints_and_the_docstring() -> None:
    assert isinstance(search, Tool)
    assert search.name == "search" and search.effect == "read_only"
    assert search.description == (
        "Search files for a query.\n\nLonger explanation that is also part of the description."
    )
    schema = search.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["query", "paths"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["query"] == {"type": "string", "description": "What to look for; may span lines."}
    assert props["paths"] == {"type": "array", "items": {"type": "string"}, "description": "Where to look."}
    assert props["mode"]["enum"] == ["fast", "full"] and props["mode"]["default"] == "fast"
    assert props["limit"] == {"type": "integer", "default": 10, "description": "At most this many hits."}
    spec = search.spec()
    assert (spec.name, spec.description, spec.parameters) == ("search", search.description, schema)


def test_docstring_parser_handles_types_continuations_and_other_sections() -> None:
    description, args = parse_docstring(
        """Summary.

        Args:
            a (int): One,
                continued.
            b: Two.

        Raises:
            ValueError: not an argument.
        """
    )
    assert description == "Summary."
    assert args == {"a": "One, continued.", "b": "Two."}
    assert parse_docstring(None) == ("", {})


def test_validation_coerces_types_and_reports_every_problem() -> None:
    @tool(effect="idempotent")
    def touch(path: Path, mode: int = 0o644) -> str:
        """Touch a file."""
        return f"{type(path).__name__}:{path}:{mode}"

    assert touch.validate({"path": "a/b"}) == {"path": Path("a/b"), "mode": 0o644}
    with pytest.raises(ToolArgumentsError) as info:
        touch.validate({"mode": "x", "extra": 1})
    text = str(info.value)
    assert "invalid arguments for touch" in text
    assert "path: Field required" in text and "mode:" in text and "extra:" in text
    assert run(touch.invoke({"path": "f"})) == "PosixPath:f:420"


def test_sync_tools_run_in_a_thread_async_tools_on_the_loop_inline_when_asked() -> None:
    seen: dict[str, bool] = {}

    @tool(effect="read_only")
    def threaded() -> str:
        """Where am I."""
        seen["threaded"] = threading.current_thread() is not threading.main_thread()
        return "t"

    @tool(effect="read_only", in_thread=False)
    def inline() -> str:
        """Where am I."""
        seen["inline"] = threading.current_thread() is threading.main_thread()
        return "i"

    @tool(effect="read_only")
    async def coroutine(delay: float = 0) -> str:
        """Async tool."""
        await asyncio.sleep(delay)
        return "a"

    assert run(threaded.invoke({})) == "t" and run(inline.invoke({})) == "i"
    assert run(coroutine.invoke({})) == "a"
    assert seen == {"threaded": True, "inline": True}


def test_bare_decorator_defaults_to_side_effect_and_the_tool_stays_callable() -> None:
    @tool
    def send(to: str) -> str:
        """Send."""
        return f"sent to {to}"

    assert send.effect == "side_effect" and send(to="x") == "sent to x"
    named = tool(effect="read_only", name="lookup", description="Look it up.")(lambda key: key)
    assert (named.name, named.description) == ("lookup", "Look it up.")


def test_bad_declarations_are_refused() -> None:
    with pytest.raises(ValueError, match="effect must be one of"):
        tool(effect="sometimes")(lambda: None)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="reconcile only applies"):
        tool(effect="read_only", reconcile=lambda intent: None)(lambda: None)

    def variadic(*args: int) -> None:
        """Nope."""

    with pytest.raises(TypeError, match="plain keyword parameter"):
        tool(variadic)


class _Point(BaseModel):
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        (None, ""),
        (3, "3"),
        ({"b": 1, "a": "é"}, '{"a":"é","b":1}'),
        (_Point(x=1, y=2), '{"x":1,"y":2}'),
        (Path("a/b"), '"a/b"'),
    ],
)
def test_outputs_render_as_text_or_compact_sorted_json(value: object, text: str) -> None:
    assert render_output(value) == text
