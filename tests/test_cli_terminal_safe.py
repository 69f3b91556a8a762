"""Recorded text never reaches a terminal as a control sequence: an imported transcript or a model's reply
holding ``ESC [ 2 J`` (clear screen), an OSC title/hyperlink, or a U+202E (right-to-left override) is printed by
``show``, ``ls``, ``tail`` and ``replay`` as ``[U+XXXX]``, and ``--json`` keeps the exact text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from flightlog import events as ev
from flightlog.cli.console import terminal_safe
from flightlog.recorder import Recorder
from flightlog.store import open_store

FLIGHTLOG = Path(sys.executable).parent / "flightlog"
HOSTILE = "a\x1b[2Jb \x1b]0;pwned\x07 \x9b31m \u202egnp.exe \u2066x\u2069"


def _run(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FLIGHTLOG), "--db", str(db), *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_show_ls_tail_print_controls_as_code_points(tmp_path: Path) -> None:
    db = tmp_path / "db.sqlite"
    with open_store(db) as store:
        rec = Recorder.create(store, session_id="hostile", task=HOSTILE)
        rec.append(ev.RunStarted(run_id="r1", goal=HOSTILE, criteria=[]))
    for args in (("show", "hostile"), ("ls",), ("tail", "hostile")):
        proc = _run(db, *args)
        assert proc.returncode == 0, proc.stderr
        assert "[U+001B][2J" in proc.stdout, args
        assert "[U+202E]gnp.exe" in proc.stdout, args
        for raw in ("\x1b", "\x07", "\x9b", "\u202e", "\u2066", "\u2069"):
            assert raw not in proc.stdout, (args, raw)
    proc = _run(db, "show", "hostile", "--json")
    assert proc.returncode == 0, proc.stderr
    first = json.loads(proc.stdout.splitlines()[0])
    assert first["event"]["goal"] == HOSTILE  # machine output keeps the exact recorded text


def test_emoji_codes_in_ids_and_text_print_as_written(tmp_path: Path) -> None:
    """rich turns ``:watch:`` into ⌚ unless told not to: `flightlog watch`'s own run id
    (``core_job:watch:<hex>``) printed as ``core_job⌚<hex>`` in ``ls``, ``show`` and ``runs``, and a
    message holding ``:rocket:`` lost its text."""
    db = tmp_path / "db.sqlite"
    sid, text = "core_job:watch:49484b80fbb9", "deploy :rocket: done, see :smile:"
    with open_store(db) as store:
        rec = Recorder.create(store, session_id=sid, task=text)
        rec.append(ev.RunStarted(run_id="r1", goal=text, criteria=[]))
    for args in (("show", sid), ("ls",), ("tail", sid), ("runs",), ("verify", sid)):
        proc = _run(db, *args)
        assert proc.returncode == 0, (args, proc.stderr)
        assert "\u231a" not in proc.stdout and "\U0001f680" not in proc.stdout, args
        if args[0] != "tail":  # tail prints the events only
            assert sid in proc.stdout, args
        if args[0] in ("show", "ls", "tail"):
            assert ":rocket:" in proc.stdout, args


def test_terminal_safe_keeps_ordinary_text() -> None:
    text = "naïve café — 日本語 👩‍👩‍👧 tab\there\nnext line [U+0041]"
    assert terminal_safe(text) == text


@given(st.text())
def test_terminal_safe_leaves_nothing_a_terminal_acts_on(text: str) -> None:
    safe = terminal_safe(text)
    for c in safe:
        o = ord(c)
        assert c in "\n\t" or not (o < 0x20 or 0x7F <= o <= 0x9F), repr(c)
        assert c not in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
