"""``flightlog replay --max-part-bytes`` marks every part it cut, in the text (``[cut from N bytes]``) and
in ``--json`` (``"truncated": N``, the part's UTF-8 bytes before the cut), even under a cap too small for
the in-text suffix; a cut thinking part loses its signature (it signs the whole text). Before: a cap of 20
cut with no marker anywhere and kept the full signature."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.events import LlmCompleted, RunStarted
from flightlog.messages import Message, TextPart, ThinkingPart
from flightlog.recorder import Recorder
from flightlog.replay import TRUNCATION_SUFFIX
from flightlog.store import SqliteStore

runner = CliRunner()
THINKING = "let me think about the whole question first"  # 43 bytes
ANSWER = "é" * 40  # 80 bytes


def _recorded(db: Path) -> None:
    message = Message(
        role="assistant",
        content=[
            ThinkingPart(thinking=THINKING, signature="sig" * 30),
            TextPart(text=ANSWER),
            TextPart(text="ok"),
        ],
    )
    with SqliteStore(db) as store:
        recorder = Recorder.create(store, session_id="cuts", notary=None)
        recorder.append(RunStarted(run_id="r", goal="g"))
        recorder.append(LlmCompleted(turn=1, message=message))


def _replay(db: Path, *args: str) -> str:
    result = runner.invoke(app, ["--db", str(db), "replay", "cuts", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_cut_part_is_marked_in_the_json_and_the_text_under_any_cap(tmp_path: Path) -> None:
    db = tmp_path / "cuts.db"
    _recorded(db)
    for cap in ("20", "30"):  # 20: below the 22-byte in-text suffix
        content = json.loads(_replay(db, "--max-part-bytes", cap, "--json"))["messages"][1]["content"]
        thinking, answer, short = content
        assert (thinking["truncated"], answer["truncated"]) == (43, 80), cap
        assert "signature" not in thinking or thinking["signature"] is None
        assert len(thinking["thinking"].encode()) <= int(cap) and len(answer["text"].encode()) <= int(cap)
        assert short == {"type": "text", "text": "ok"}  # not cut: no field
        text = _replay(db, "--max-part-bytes", cap)
        assert "[cut from 43 bytes]" in text and "[cut from 80 bytes]" in text
        assert "ok [cut" not in text
    whole = json.loads(_replay(db, "--json"))["messages"][1]["content"]
    assert whole[0]["signature"] == "sig" * 30 and all("truncated" not in part for part in whole)
    assert TRUNCATION_SUFFIX not in _replay(db)
