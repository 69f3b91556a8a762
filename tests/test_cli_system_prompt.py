"""A run's system prompt (``run_started.system_prompt``) in ``flightlog show`` and ``flightlog replay --json``.

``show`` prints it once, labelled, under the ``run_started`` that sets it (a later run with the same prompt
does not repeat it, a changed one is shown again), its control characters inert as every recorded string the
CLI prints; ``replay --json`` gives it exactly, as :func:`flightlog.replay.system_prompt` does, beside the
messages (the dashboard shows the same prompt).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from flightlog import events as ev
from flightlog.messages import Message
from flightlog.recorder import Recorder
from flightlog.store import open_store

FLIGHTLOG = Path(sys.executable).parent / "flightlog"
HOSTILE = "You are terse.\n\x1b[2Jobey \u202egnp.exe"
OTHER = "You are verbose."


def _run(db: Path, *args: str) -> str:
    proc = subprocess.run(
        [str(FLIGHTLOG), "--db", str(db), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _session(db: Path) -> None:
    """seq 0 run_started (HOSTILE), 1 reply, 2 run_started (HOSTILE again), 3 reply, 4 run_started (OTHER)."""
    with open_store(db) as store:
        rec = Recorder.create(store, session_id="prompted", task="t")
        for run, prompt in (("r1", HOSTILE), ("r2", HOSTILE), ("r3", OTHER)):
            rec.append(ev.RunStarted(run_id=run, goal=f"goal {run}", criteria=[], system_prompt=prompt))
            if run != "r3":
                rec.append(ev.LlmCompleted(turn=1, message=Message.text("assistant", f"answer {run}")))
        Recorder.create(store, session_id="bare", task="t").append(
            ev.RunStarted(run_id="r", goal="g", criteria=[])
        )


def test_show_prints_each_prompt_once_labelled_and_inert(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    _session(db)
    lines = _run(db, "show", "prompted").splitlines()
    prompts = [(i, line.strip()) for i, line in enumerate(lines) if "system prompt:" in line]
    assert prompts == [
        (2, "system prompt: You are terse. [U+001B][2Jobey [U+202E]gnp.exe"),
        (7, "system prompt: You are verbose."),
    ]
    # each under the run that sets it; run r2 (seq 2, line 4) has the same prompt: not repeated
    assert ["run_started" in lines[i] for i in (1, 4, 6)] == [True, True, True]
    assert "\x1b" not in "\n".join(lines) and "\u202e" not in "\n".join(lines)
    assert "system prompt" not in _run(db, "show", "bare")


def test_replay_json_gives_the_prompt_as_of_the_seq(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    _session(db)
    head = json.loads(_run(db, "replay", "prompted", "--json"))
    assert head["system_prompt"] == OTHER
    at = json.loads(_run(db, "replay", "prompted", "--json", "--at", "3"))
    assert at["system_prompt"] == HOSTILE  # the exact recorded text: machine output is not escaped
    assert [m["role"] for m in at["messages"]] == ["user", "assistant", "user", "assistant"]
    assert json.loads(_run(db, "replay", "bare", "--json"))["system_prompt"] is None
    assert "[system prompt]" in _run(db, "replay", "prompted") and "You are verbose." in _run(
        db, "replay", "prompted"
    )
