"""``flightlog replay --max-part-bytes`` marks every part it cut once, in the text (``[cut to N of M bytes by
--max-part-bytes]``) and in ``--json`` (``"truncated": M``, the part's UTF-8 bytes before the cut; the text
itself carries no marker), under any cap; a cut thinking part loses its signature (it signs the whole
text). Before: a cap of 20 cut with no marker anywhere and kept the full signature; then a cut part read
``… [replay truncated] [cut from 3,661 bytes]`` (two markers, the first inside the JSON text too), the
system prompt was not cut, and the text view's own cut to 300 characters said nothing."""

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
        assert thinking["thinking"] == THINKING[: int(cap)]  # the first cap bytes, no marker inside
        assert answer["text"] == "é" * (int(cap) // 2)
        assert short == {"type": "text", "text": "ok"}  # not cut: no field
        text = _replay(db, "--max-part-bytes", cap)
        assert f"[cut to {cap} of 43 bytes by --max-part-bytes]" in text
        assert f"[cut to {int(cap) // 2 * 2} of 80 bytes by --max-part-bytes]" in text
        assert "ok…" not in text and TRUNCATION_SUFFIX not in text and text.count("[cut to") == 2
    whole = json.loads(_replay(db, "--json"))["messages"][1]["content"]
    assert whole[0]["signature"] == "sig" * 30 and all("truncated" not in part for part in whole)
    assert TRUNCATION_SUFFIX not in _replay(db)


PROMPT = "You are a careful assistant. " * 60  # 1,740 bytes, 1,739 characters once stripped
OUTPUT = "line of output\n" * 250  # 3,750 bytes


def _long(db: Path) -> None:
    from flightlog.events import ToolCompleted
    from flightlog.messages import ToolCall, ToolResult

    call = Message(role="assistant", content=[], tool_calls=[ToolCall(id="c1", name="ls", arguments="{}")])
    with SqliteStore(db) as store:
        recorder = Recorder.create(store, session_id="long", notary=None)
        recorder.append(RunStarted(run_id="r", goal="g", system_prompt=PROMPT))
        recorder.append(LlmCompleted(turn=1, message=call))
        recorder.append(ToolCompleted(turn=1, results=[ToolResult(call_id="c1", output=OUTPUT)]))


def test_the_cap_cuts_the_system_prompt_too_and_the_text_view_says_what_it_left_out(tmp_path: Path) -> None:
    db = tmp_path / "long.db"
    _long(db)
    doc = json.loads(
        runner.invoke(app, ["--db", str(db), "replay", "long", "--max-part-bytes", "500", "--json"]).stdout
    )
    assert doc["system_prompt"] == PROMPT[:500] and doc["system_prompt_truncated"] == len(PROMPT)
    (output,) = doc["messages"][2]["content"]
    assert output["output"] == OUTPUT[:500] and output["truncated"] == len(OUTPUT)
    whole = json.loads(runner.invoke(app, ["--db", str(db), "replay", "long", "--json"]).stdout)
    assert whole["system_prompt"] == PROMPT and "system_prompt_truncated" not in whole

    text = runner.invoke(app, ["--db", str(db), "replay", "long", "--max-part-bytes", "500"]).stdout
    lines = text.splitlines()
    prompt_line = lines[lines.index("[system prompt]") + 1]
    assert prompt_line.endswith(
        "… [300 of 500 characters shown; the part was cut to 500 of 1,740 bytes by --max-part-bytes]"
    )
    assert "of 3,750 bytes by --max-part-bytes]" in text and text.count("…") == 2
    plain = runner.invoke(app, ["--db", str(db), "replay", "long"]).stdout
    assert "… [300 of 1,739 characters shown; --json prints all]" in plain
    small = runner.invoke(app, ["--db", str(db), "replay", "long", "--max-part-bytes", "100"]).stdout
    assert "… [cut to 100 of 1,740 bytes by --max-part-bytes]" in small
    assert "… [cut to 100 of 3,750 bytes by --max-part-bytes]" in small
