"""The Claude Code importer writes its commonest events into an ``import_file`` spool as bytes built from
their fields, without the models (issue 19; :mod:`flightlog.encoding`'s ``*_bytes``). Read without a
spool (a plain list) it builds the models. Both must give the same events and the same bytes, on every
sample and on a hostile transcript: a float in a native block and an image attachment (the byte writers
decline: models), lone surrogate escapes in ids and texts (the reader keeps them as escape text)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flightlog.encoding import canonical_bytes
from flightlog.importers import claude_code
from flightlog.importers.base import EventSpool, ImportWarning, spooled_events

SAMPLES = sorted((Path(__file__).parent / "data" / "samples" / "claude-code").glob("*.jsonl"))


def _hostile(tmp_path: Path) -> Path:
    """A transcript whose completion and prompt hold what the byte writers decline, and lone surrogate
    escapes in a call id, a result and a prompt."""
    records = [
        {
            "type": "user",
            "uuid": "u1",
            "sessionId": "s",
            "timestamp": "2026-01-01T00:00:00Z",
            "message": {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look \ud800"},
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                ],
            },
        },
        {
            "type": "assistant",
            "uuid": "a1",
            "parentUuid": "u1",
            "sessionId": "s",
            "timestamp": "2026-01-01T00:00:01Z",
            "message": {
                "id": "m1",
                "model": "claude",
                "usage": {"input_tokens": 3, "output_tokens": 1.5},
                "content": [
                    {"type": "thinking", "thinking": "hm", "signature": "sig", "score": 0.5},
                    {"type": "tool_use", "id": "t\ud800", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
        },
        {
            "type": "user",
            "uuid": "r1",
            "parentUuid": "a1",
            "sessionId": "s",
            "timestamp": "2026-01-01T00:00:02Z",
            "message": {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t\ud800",
                        "content": "out \udc00",
                        "is_error": True,
                    }
                ],
            },
        },
        {
            "type": "user",
            "uuid": "i1",
            "parentUuid": "r1",
            "sessionId": "s",
            "timestamp": "2026-01-01T00:00:03Z",
            "message": {"role": "user", "content": "[Request interrupted by user]"},
        },
    ]
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return path


def _both(path: Path) -> tuple[list[tuple[str, list[bytes], list[int | None]]], ...]:
    """Each session's key, event bytes and event times, read into a spool and into a list."""
    out = []
    spools = 0
    for spooled in (True, False):
        warnings: list[ImportWarning] = []
        if spooled:
            with spooled_events():
                sessions = claude_code.read(path, warnings)
        else:
            sessions = claude_code.read(path, warnings)
        rows = []
        for session in sessions:
            events = session.events
            if isinstance(events, EventSpool):  # a background task's child session is a plain list
                data = list(events.raw_range(None, None))
                spools += 1
            else:
                data = [canonical_bytes(e) for e in events]
            rows.append((session.key, data, list(session.event_times_ms)))
        out.append(rows)
    assert spools > 0  # the spooled read did spool
    return tuple(out)


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.name)
def test_spooled_bytes_equal_the_models_bytes_on_every_sample(path: Path) -> None:
    spooled, listed = _both(path)
    assert spooled == listed
    assert sum(len(data) for _, data, _ in spooled) > 0


def test_spooled_bytes_equal_the_models_bytes_where_the_writers_decline(tmp_path: Path) -> None:
    spooled, listed = _both(_hostile(tmp_path))
    assert spooled == listed
    kinds = [json.loads(b)["kind"] for _, data, _ in spooled for b in data]
    assert {"run_started", "llm_completed", "tool_requested", "tool_completed"} <= set(kinds)
