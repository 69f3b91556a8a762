"""aider chat history importer: one ``.aider.chat.history.md`` file → one :class:`ImportedSession`.

Source shape (aider ``aider/io.py``: ``append_chat_history``, ``user_input``, ``ai_output``,
``tool_output``/``tool_warning``/``tool_error``): a Markdown log aider appends to, in write order:

* ``# aider chat started at <YYYY-MM-DD HH:MM:SS>`` (local time, no zone) opens each launch of aider;
* the user's input: each line written as ``#### <line>`` followed by two spaces (``#### <blank>`` for an
  empty input);
* the model's reply: a blank line, the text, a blank line (edits are ``SEARCH/REPLACE`` or whole-file
  blocks inside the text; aider applies them itself, there are no tool calls);
* aider's own output: ``> <text>`` lines (two trailing spaces), e.g. ``> Tokens: 5,244 sent, 604
  received. Cost: $0.02 message, $0.02 session.``, ``> Applied edit to <file>``, ``> Commit <sha> <msg>``,
  ``> ^C KeyboardInterrupt``; the lines after a ``>`` line up to the next blank line continue it (aider
  prefixes only the first line of a multi-line output).

The writer cannot tell a model reply's own ``> quote`` or ``#### heading`` lines from aider's: like aider,
the importer reads them as aider's output or the user's input.

Reading: the file is read line by line (a BOM is stripped; invalid UTF-8 bytes are kept as ``\\udcXX``
escape text, warned with the line number). Mapping rules:

1. **Launches.** Each ``# aider chat started at`` line is ``Custom("aider.launch", {line, started_at})``;
   the model's context starts empty at each launch, so a launch after the first ends the open run
   (``completed``, or ``aborted`` after an interrupt) and emits ``Rollbacked(checkpoint_history_len=0)``.
2. **Prompts.** A user input (consecutive ``####`` lines, joined by newlines) starts a run:
   ``RunStarted(run_id="<key>:<line>", goal=<the input>)``. An input that is an aider command
   (``/add``, ``/diff``, ``/undo``...) is kept as ``Custom("aider.command", {line, text})``; ``/ask``,
   ``/code``, ``/architect`` and ``/chat-mode`` prompts and any text not starting with ``/`` are prompts.
3. **Replies.** The model's text after a prompt is ``LlmCompleted(turn=n, Message(role="assistant",
   content=[TextPart]))``.
4. **aider's output.** Each block of ``>`` lines is kept as ``Custom("aider.output", {line, text})``. A
   ``Tokens: <sent> sent, [<w> cache write, ][<h> cache hit, ]<received> received.`` report adds ``sent +
   received`` to the run (aider's counts; ``4.1k`` forms are rounded by aider and marked ``approximate``)
   and is kept as ``Custom("aider.tokens", {line, sent, received, cache_write?, cache_hit?, cost_message?,
   cost_session?, approximate})``. ``^C KeyboardInterrupt`` marks the run ``aborted``
   (``OperationCancelled(reason=user)``).
5. A line holding NUL bytes (never written by aider: a crashed writer's zero-filled block, trailing
   garbage) is kept as ``Custom("aider.unparsed_line", {line, text})`` and warned with its number.
6. **The end.** The last run ends ``completed`` when the model replied, ``aborted`` after an interrupt,
   else ``incomplete``. Lines before the first launch header are kept as ``Custom("aider.preamble")``.

**Growth.** aider appends to the same file at every launch and never writes that a chat ended, so the
session never ends by itself (only ``import --seal`` ends it). ``settled`` is the count of events emitted
before the end of the file: the open block (a reply may go on, a prompt may gain lines) and the last run
are recorded by a later import. In an incremental import (:func:`~flightlog.importers.base.tail_waits`) a
last line with no newline is left for a later import (warned with its number): a ``#`` that will become
``#### ...`` would otherwise close the prompt before it.

Session: ``key = "aider:<first launch's start time>"`` (aider writes no session id; the file name is the
same in every project); times stay unknown (aider writes local time without a zone); metadata:
``started_at`` (first launch), ``launches``, ``aider_version`` and ``model`` (from the launch notes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..events import CancellationReason, OperationCancelled, Rollbacked
from .base import ImportedSession, ImportWarning, JsonObj, tail_waits
from .chatlog import SessionBuilder, text_parts

__all__ = ["FORMAT", "VERSION", "looks_like", "looks_like_file", "read"]

FORMAT = "aider"
"""``ImportedSession.source_format`` of sessions from this importer."""

VERSION = "1"
"""Importer version recorded with each import; bump when the mapping changes."""

_PREFIX = "aider"
_HEADER = re.compile(r"^# aider chat started at (.+?)\s*$")
_TOKENS = re.compile(
    r"Tokens: (?P<body>.*?received)\.(?: Cost: \$(?P<msg>[\d.]+) (?:message|request), \$(?P<ses>[\d.]+) session\.)?"
)
_COUNT = re.compile(r"^([\d,.]+)(k?) (sent|cache write|cache hit|received)$")
_PROMPT_COMMANDS = ("/ask", "/code", "/architect", "/chat-mode", "/context")
_PROBE_BYTES = 64 * 1024


def looks_like(value: object) -> bool:
    """aider writes no JSON: no JSON record is an aider record (detection uses :func:`looks_like_file`)."""
    return False


def looks_like_file(path: Path) -> bool:
    """Whether the file's first 64 KiB hold an ``# aider chat started at`` line."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_PROBE_BYTES)
    except OSError:
        return False
    return re.search(rb"(?m)^# aider chat started at ", head) is not None


def read(path: Path, warnings: list[ImportWarning]) -> list[ImportedSession]:
    """Read one chat history (see the module docstring)."""
    builder = _Builder(path, warnings)
    for number, line in _lines(path, warnings):
        builder.feed(number, line)
    return [builder.finish()]


def _lines(path: Path, warnings: list[ImportWarning]) -> list[tuple[int, str]]:
    """``(1-based number, text without the line break)`` of every line."""
    lines: list[tuple[int, str]] = []
    waits = tail_waits()
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, start=1):
            if number == 1:
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            if waits and not raw.endswith(b"\n"):
                # aider is still writing this line: what it becomes can change what the lines before it
                # close (a ``####`` line continues a prompt, a ``#`` starts a reply); a later import reads it
                warnings.append(
                    ImportWarning(path.name, number, "unfinished last line left for a later import")
                )
                break
            raw = raw.rstrip(b"\n").rstrip(b"\r")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("utf-8", "surrogateescape")
                bad = sum(1 for ch in text if "\udc80" <= ch <= "\udcff")
                text = "".join(f"\\u{ord(ch):04x}" if "\udc80" <= ch <= "\udcff" else ch for ch in text)
                warnings.append(
                    ImportWarning(
                        path.name, number, f"{bad} invalid UTF-8 byte(s) kept as \\udcXX escape text"
                    )
                )
            lines.append((number, text))
    return lines


def _strip_break(text: str) -> str:
    """A line without the two-space Markdown line break aider appends."""
    return text[:-2] if text.endswith("  ") else text.rstrip()


def _count(text: str) -> tuple[int, bool]:
    """aider's ``format_tokens`` text as a number and whether it was rounded (``4.1k``)."""
    number, kilo = text.replace(",", ""), False
    if number.endswith("k"):
        number, kilo = number[:-1], True
    value = float(number) * (1000 if kilo else 1)
    return round(value), kilo


@dataclass
class _Block:
    kind: str  # "user", "reply", "output"
    line: int
    lines: list[str] = field(default_factory=list)


class _Builder(SessionBuilder):
    def __init__(self, path: Path, warnings: list[ImportWarning]) -> None:
        super().__init__(path, warnings, _PREFIX)
        self.block: _Block | None = None
        self.blank = True
        self.launches: list[str] = []
        self.preamble: list[str] = []
        self.replied = False
        self.aborted = False
        self.notes: JsonObj = {}

    # ── lines → blocks ──

    def feed(self, number: int, line: str) -> None:
        header = _HEADER.match(line)
        if "\x00" in line:
            self.close()
            self.warn_line(number, "kept byte-exact: a line with NUL bytes (a crashed writer's block)")
            self.record("unparsed_line", {"line": number, "text": line})
            self.blank = True
            return
        if header:
            self.close()
            self.launch(number, header.group(1))
        elif line.startswith("#### ") or line == "####":
            if self.block is None or self.block.kind != "user":
                self.close()
                self.block = _Block("user", number)
            self.block.lines.append(_strip_break(line[5:]))
        elif line.startswith("> ") or line == ">":
            if self.block is None or self.block.kind != "output" or self.blank:
                self.close()
                self.block = _Block("output", number)
            self.block.lines.append(_strip_break(line[2:]))
        elif not line.strip():
            if self.block is not None and self.block.kind == "reply":
                self.block.lines.append("")
            elif self.block is not None:
                self.close()
        elif not self.launches:
            self.preamble.append(line)
        elif self.block is not None and self.block.kind == "output" and not self.blank:
            self.block.lines.append(line)  # a multi-line output continues (rule: first line prefixed only)
        else:
            if self.block is None or self.block.kind != "reply":
                self.close()
                self.block = _Block("reply", number)
            self.block.lines.append(line)
        self.blank = not line.strip()

    def close(self) -> None:
        block, self.block = self.block, None
        if block is None:
            return
        text = "\n".join(block.lines).strip("\n")
        if block.kind == "user":
            self.on_user(block.line, text)
        elif block.kind == "reply":
            self.on_reply(block.line, text)
        else:
            self.on_output(block.line, text)

    # ── blocks → events ──

    def launch(self, number: int, started: str) -> None:
        """Rule 1."""
        if self.launches:
            self.end()
            self.emit(Rollbacked(turn=self.turn, checkpoint_history_len=0))
        elif self.preamble:
            self.record("preamble", {"text": "\n".join(self.preamble)})
        self.launches.append(started)
        self.record("launch", {"line": number, "started_at": started})

    def on_user(self, number: int, text: str) -> None:
        """Rule 2."""
        if text == "<blank>":
            text = ""
        command = text.split(maxsplit=1)[0] if text.startswith("/") else ""
        if command and command not in _PROMPT_COMMANDS:
            self.record("command", {"line": number, "text": text})
            return
        self.end()
        self.start_run(f"{self.key()}:{number}", text)

    def on_reply(self, number: int, text: str) -> None:
        """Rule 3."""
        if self.run is None:
            self.start_run(f"{self.key()}:{number}", "")
        self.complete(text_parts(text), [], where=f"line {number}", line=number)
        self.replied = True

    def on_output(self, number: int, text: str) -> None:
        """Rule 4."""
        self.record("output", {"line": number, "text": text})
        for line in text.splitlines():
            self.note(line)
            tokens = _TOKENS.search(line)
            if tokens:
                self.on_tokens(number, tokens)
            if "^C KeyboardInterrupt" in line and self.run is not None:
                if not self.aborted:
                    self.emit(
                        OperationCancelled(
                            turn=self.turn, operation_id=self.run.run_id, reason=CancellationReason.USER
                        )
                    )
                self.aborted = True

    def note(self, line: str) -> None:
        if line.startswith("Aider v") and "aider_version" not in self.notes:
            self.notes["aider_version"] = line.removeprefix("Aider ").strip()
        for prefix in ("Main model: ", "Model: ", "Models: "):
            if line.startswith(prefix) and "model" not in self.notes:
                self.notes["model"] = line.removeprefix(prefix).split(" with ")[0].strip()

    def on_tokens(self, number: int, found: re.Match[str]) -> None:
        report: JsonObj = {"line": number}
        approximate = False
        for piece in found.group("body").split(", "):
            count = _COUNT.match(piece.strip())
            if count is None:
                continue
            value, rounded = _count(count.group(1) + count.group(2))
            approximate = approximate or rounded
            report[count.group(3).replace(" ", "_")] = value
        if found.group("msg"):
            report["cost_message"] = float(found.group("msg"))
            report["cost_session"] = float(found.group("ses"))
        report["approximate"] = approximate
        self.record("tokens", report)
        self.add_tokens(int(report.get("sent", 0)) + int(report.get("received", 0)))

    def end(self) -> None:
        if self.run is None:
            return
        reason = "aborted" if self.aborted else "completed" if self.replied else "incomplete"
        self.end_run(reason)
        self.replied = self.aborted = False

    # ── the session ──

    def key(self) -> str:
        return f"{FORMAT}:{self.launches[0] if self.launches else self.path.name}"

    def finish(self) -> ImportedSession:
        # Everything emitted so far follows from the lines read; what the end of the file closes below (the
        # open block, the last run) is not settled: aider appends to the file at every launch.
        settled = len(self.events)
        self.close()
        if not self.launches and self.preamble:
            self.record("preamble", {"text": "\n".join(self.preamble)})
        if self.run is None and not self.events:
            self.start_run(f"{self.key()}:end", "")
        self.end()
        metadata = {
            "started_at": self.launches[0] if self.launches else None,
            "launches": len(self.launches),
            **self.notes,
        }
        return self.session(self.key(), FORMAT, metadata=metadata, settled=settled)
