"""Importing a long Claude Code transcript costs work proportional to its length (issue 19).

An interrupt used to list the pending calls by scanning every call the session had ever made, and a
tool result looked for its call by scanning every open call (interrupted calls stay open for good): both
made a long transcript's import quadratic. These tests count the elements the importer walks in its call
bookkeeping, never time it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from flightlog.events import OperationCancelled
from flightlog.importers import claude_code, jsondoc
from flightlog.importers.base import ImportWarning


class _Walked:
    """Counts elements yielded by iterating any :class:`_CountingDict`."""

    total = 0


class _CountingDict(dict[str, Any]):
    """A dict that counts every element an iteration over it yields."""

    def __iter__(self) -> Iterator[str]:
        for key in super().__iter__():
            _Walked.total += 1
            yield key

    def items(self) -> Any:
        return list(zip(iter(self), (self[key] for key in iter(self)), strict=True))

    def values(self) -> Any:
        return [self[key] for key in iter(self)]

    def keys(self) -> Any:
        return list(iter(self))


def _line(kind: str, uuid: str, parent: str | None, message: dict[str, Any]) -> str:
    return json.dumps(
        {
            "type": kind,
            "uuid": uuid,
            "parentUuid": parent,
            "sessionId": "s-linear",
            "timestamp": "2026-01-01T00:00:00.000Z",
            "message": message,
        }
    )


def _transcript(path: Path, rounds: int) -> None:
    """``rounds`` times: a prompt, a completion with two tool calls, the result of one, an interrupt
    (the other call pending then), then the other's late result (it stays pending until that result)."""
    lines: list[str] = []
    parent: str | None = None
    for n in range(rounds):
        ids = [f"p{n}", f"a{n}", f"r{n}", f"i{n}"]
        lines.append(_line("user", ids[0], parent, {"role": "user", "content": f"prompt {n}"}))
        calls = [
            {"type": "tool_use", "id": f"t{n}-{k}", "name": "Bash", "input": {"command": "ls"}}
            for k in (0, 1)
        ]
        lines.append(
            _line(
                "assistant",
                ids[1],
                ids[0],
                {"id": f"m{n}", "role": "assistant", "model": "m", "content": calls},
            )
        )
        result = {"type": "tool_result", "tool_use_id": f"t{n}-0", "content": "ok"}
        lines.append(_line("user", ids[2], ids[1], {"role": "user", "content": [result]}))
        interrupt = [{"type": "text", "text": "[Request interrupted by user for tool use]"}]
        lines.append(_line("user", ids[3], ids[2], {"role": "user", "content": interrupt}))
        late = {"type": "tool_result", "tool_use_id": f"t{n}-1", "content": "late", "is_error": True}
        lines.append(_line("user", f"l{n}", ids[3], {"role": "user", "content": [late]}))
        parent = f"l{n}"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _walked_for(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """(elements walked in the call bookkeeping, interrupts recorded) for importing ``path``."""
    original_init = claude_code._SessionBuilder.__init__
    original_book = jsondoc.CallBook.__init__

    def counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._calls = _CountingDict()
        self._pending = _CountingDict()

    def counting_book(self: Any, *args: Any, **kwargs: Any) -> None:
        original_book(self, *args, **kwargs)
        self._open = _CountingDict()

    monkeypatch.setattr(claude_code._SessionBuilder, "__init__", counting_init)
    monkeypatch.setattr(jsondoc.CallBook, "__init__", counting_book)
    _Walked.total = 0
    warnings: list[ImportWarning] = []
    sessions = claude_code.read(path, warnings)
    cancelled = sum(isinstance(e, OperationCancelled) for s in sessions for e in s.events)
    return _Walked.total, cancelled


def test_interrupts_and_results_walk_only_pending_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    _transcript(small, 100)
    _transcript(large, 400)
    walked_small, cancelled_small = _walked_for(small, monkeypatch)
    walked_large, cancelled_large = _walked_for(large, monkeypatch)
    assert (cancelled_small, cancelled_large) == (100, 400)
    # Linear: 4x the rounds walk at most ~4x the elements (a scan of every call per interrupt walks ~16x).
    assert walked_large <= 4 * walked_small + 8
    # And in absolute terms a small constant per round (one call is pending at each interrupt).
    assert walked_large <= 4 * 400


def test_pending_call_still_listed_at_interrupt(tmp_path: Path) -> None:
    """The bookkeeping change keeps the user-visible result: each interrupt names the call left pending."""
    path = tmp_path / "t.jsonl"
    _transcript(path, 3)
    sessions = claude_code.read(path, [])
    cancelled = [e for s in sessions for e in s.events if isinstance(e, OperationCancelled)]
    assert [e.pending_call_ids for e in cancelled] == [["t0-1"], ["t1-1"], ["t2-1"]]


def test_call_book_answer_does_not_scan_open_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """``CallBook.answer`` finds the earliest unanswered call of a native id without walking the others."""
    book = jsondoc.CallBook(lambda _reason, _line: None)
    book._open = _CountingDict()
    _Walked.total = 0
    for n in range(500):
        book.request(f"left-open-{n}", "Bash", n, "here")
    for n in range(500):
        book.request("same", "Bash", n, "here")
    answered = [book.answer("same") for _ in range(500)]
    assert [call.call_id for call in answered if call is not None][:3] == ["same", "same#2", "same#3"]
    assert book.answer("same") is None
    assert _Walked.total == 0
    assert len(book.pending()) == 500
