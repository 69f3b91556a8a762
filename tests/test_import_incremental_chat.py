"""Incremental import of the chat-log formats that grow (issue 17 items 2 and 4): a Gemini CLI JSONL chat
(rewinds and ``$set.messages`` included), a legacy Gemini CLI JSON chat rewritten in place, and aider's
``.aider.chat.history.md``. Importing the first lines, then the whole file, records exactly what one
import of the final file records; the session stays open; a rewrite of the past is refused naming the seq;
``flightlog watch`` follows a Gemini chat folder by default."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from flightlog.encoding import decode_stored
from flightlog.errors import ImportFormatError, StoreUnavailable
from flightlog.events import Rollbacked, RunTerminal
from flightlog.importers import import_file
from flightlog.importers.watch import Watcher
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.store import SqliteStore
from flightlog.store.base import Store

SAMPLES = Path(__file__).parent / "data" / "samples"
GEMINI = SAMPLES / "gemini-cli" / "session-2026-12-02T06-04-a3f1c2d4.jsonl"
GEMINI_SESSION = "gemini-cli:a3f1c2d4-5b6e-4f70-8a91-b2c3d4e5f607"
LEGACY = SAMPLES / "gemini-cli" / "session-2026-12-02T06-05-7c1e9a40.json"
AIDER = SAMPLES / "aider" / "aider_chat_history_excerpt.md"
TIMEOUT_S = 60.0


def ledger(store: Store, session_id: str) -> list[bytes]:
    """The session's event bytes after the ``import_source`` header (it names the file's sha256)."""
    return [row.event_bytes for row in store.read_events(session_id, start=1)]


def one_shot(tmp_path: Path, name: str, data: bytes) -> dict[str, list[bytes]]:
    folder = tmp_path / "once"
    folder.mkdir(exist_ok=True)
    (folder / name).write_bytes(data)
    with SqliteStore(folder / f"db{len(data)}.sqlite") as store:
        import_file(store, folder / name)
        return {s.session_id: ledger(store, s.session_id) for s in store.list_sessions()}


def with_set_messages() -> bytes:
    """The Gemini sample with a ``$set.messages`` (history rewritten: the first two messages kept, a new
    one after them) and two more messages after it, as gemini-cli writes a compressed history."""
    lines = GEMINI.read_bytes().splitlines(keepends=True)
    messages = [json.loads(line) for line in lines if b'"timestamp"' in line and line.startswith(b'{"id"')]
    extra = {"id": "f0000000-0000-4000-8000-000000000001", "timestamp": "2026-12-02T06:09:00.000Z"}
    summary = {**extra, "type": "user", "content": [{"text": "Summary of the chat so far."}]}
    reply = {
        "id": "f0000000-0000-4000-8000-000000000002",
        "timestamp": "2026-12-02T06:09:01.000Z",
        "type": "gemini",
        "content": "Understood.",
    }
    tail = [
        {"$set": {"messages": [*messages[:2], summary], "lastUpdated": "2026-12-02T06:09:00.500Z"}},
        reply,
        {**reply, "tokens": {"input": 10, "output": 2, "total": 12}},  # the last message rewritten in place
        {
            "id": "f0000000-0000-4000-8000-000000000003",
            "timestamp": "2026-12-02T06:09:02.000Z",
            "type": "user",
            "content": [{"text": "Thanks."}],
        },
    ]
    return b"".join(lines) + b"".join(json.dumps(r).encode() + b"\n" for r in tail)


def line_splits(data: bytes) -> list[int]:
    """Every line boundary, and one byte into every line (a line still being written)."""
    ends = [i + 1 for i, byte in enumerate(data) if byte == 0x0A]
    return sorted({*ends, *(end + 1 for end in ends[:-1]), 1})


def assert_grows_like_one_import(tmp_path: Path, name: str, data: bytes) -> int:
    """Import ``data[:split]`` then ``data`` for every split: the ledgers equal one import of ``data``,
    the second import recorded only the difference, the first left the session open. Returns how many
    splits held a session."""
    expected = one_shot(tmp_path, name, data)
    source = tmp_path / name
    tried = 0
    for number, split in enumerate(line_splits(data)):
        with SqliteStore(tmp_path / f"grow{number}.sqlite") as store:
            source.write_bytes(data[:split])
            try:
                first = import_file(store, source, live=True)
            except ImportFormatError:
                continue  # no recognisable record yet
            tried += 1
            before = {sid: len(ledger(store, sid)) for sid in first.session_ids}
            source.write_bytes(data)
            second = import_file(store, source)
            got = {sid: ledger(store, sid) for sid in expected}
            assert got == expected, f"split after byte {split}"
            assert second.events == sum(len(got[sid]) - before.get(sid, -1) for sid in got)
            if split == len(data):
                assert second.duplicate  # the same bytes again
            else:  # appended to the open session, never a new copy
                assert second.continued == first.session_ids, f"split after byte {split}"
    return tried


@pytest.mark.parametrize(
    ("name", "data"),
    [
        (GEMINI.name, GEMINI.read_bytes()),
        ("session-set-messages.jsonl", with_set_messages()),
        (AIDER.name, AIDER.read_bytes()),
    ],
    ids=["gemini-jsonl", "gemini-set-messages", "aider"],
)
def test_a_growing_chat_log_appends_exactly_what_one_import_records(
    tmp_path: Path, name: str, data: bytes
) -> None:
    lines = data.count(b"\n")
    assert assert_grows_like_one_import(tmp_path, name, data) >= lines


def test_rollbacks_of_a_gemini_chat_are_appended_after_what_was_recorded(tmp_path: Path) -> None:
    """The rewind and the ``$set.messages`` arrive after their history was recorded: each is a new
    ``Rollbacked`` event, and the events recorded before it stay (no seq rewritten)."""
    data = with_set_messages()
    source = tmp_path / "session-set-messages.jsonl"
    cut = data.rindex(b"\n", 0, data.index(b'{"$set": {"messages"')) + 1
    with SqliteStore(tmp_path / "db.sqlite") as store:
        source.write_bytes(data[:cut])
        (sid,) = import_file(store, source).session_ids
        before = ledger(store, sid)
        source.write_bytes(data)
        import_file(store, source)
        after = ledger(store, sid)
    assert after[: len(before)] == before
    new = [decode_stored(raw) for raw in after[len(before) :]]
    assert any(isinstance(e, Rollbacked) for e in new)
    assert sum(isinstance(decode_stored(raw), Rollbacked) for raw in after) >= 2  # the sample's $rewindTo too


def test_a_gemini_chat_never_ends_by_itself_and_seal_ends_it(tmp_path: Path) -> None:
    notary = Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"))
    source = tmp_path / GEMINI.name
    source.write_bytes(GEMINI.read_bytes())
    with SqliteStore(tmp_path / "db.sqlite") as store:
        (sid,) = import_file(store, source, notary=notary).session_ids
        events = [decode_stored(raw) for raw in ledger(store, sid)]
        assert not any(getattr(e, "custom_kind", None) == "session_sealed" for e in events)
        assert not isinstance(events[-1], RunTerminal)  # the last message and the run's end wait
        sealed = import_file(store, source, notary=notary, seal=True)
        assert sealed.continued == [sid]
        events = [decode_stored(raw) for raw in ledger(store, sid)]
        assert getattr(events[-1], "custom_kind", None) == "session_sealed"
        assert isinstance(events[-2], RunTerminal)


def legacy_with(messages: list[Any]) -> bytes:
    document = json.loads(LEGACY.read_bytes())
    return json.dumps({**document, "messages": messages}, indent=2).encode()


def test_a_legacy_gemini_document_rewritten_in_place_grows_and_a_changed_past_is_refused(
    tmp_path: Path,
) -> None:
    messages = json.loads(LEGACY.read_bytes())["messages"]
    whole = legacy_with(messages)
    expected = one_shot(tmp_path, LEGACY.name, whole)
    source = tmp_path / LEGACY.name
    for count in range(1, len(messages)):
        with SqliteStore(tmp_path / f"grow{count}.sqlite") as store:
            source.write_bytes(legacy_with(messages[:count]))
            first = import_file(store, source)
            source.write_bytes(whole)
            assert import_file(store, source).continued == first.session_ids
            assert {sid: ledger(store, sid) for sid in expected} == expected, f"{count} messages first"
    # A rewrite that deletes an earlier message (a rewind of the legacy file): refused, naming the seq.
    with SqliteStore(tmp_path / "rewritten.sqlite") as store:
        source.write_bytes(whole)
        (sid,) = import_file(store, source).session_ids
        recorded = ledger(store, sid)
        source.write_bytes(legacy_with([messages[0], *messages[2:], *messages[-1:]]))
        with pytest.raises(ImportFormatError, match=r"differs from this source at seq \d+"):
            import_file(store, source)
        assert ledger(store, sid) == recorded  # nothing recorded, nothing forked


# ── flightlog watch follows Gemini's chat folder by default ──


def watched_ledger(db: Path, session_id: str) -> list[bytes] | None:
    try:
        store = SqliteStore(db, read_only=True)
    except StoreUnavailable:
        return None
    with store:
        if not any(s.session_id == session_id for s in store.list_sessions()):
            return None
        return ledger(store, session_id)


def wait_for(check: Callable[[], Any], what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        if check():
            return
        if proc.poll() is not None:
            raise AssertionError(f"watch exited ({proc.returncode}) before {what}")
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_watch_follows_a_growing_gemini_chat_in_its_default_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    chat = home / ".gemini" / "tmp" / "c6604f1e" / "chats" / GEMINI.name
    chat.parent.mkdir(parents=True)
    db = tmp_path / "db.sqlite"
    data = GEMINI.read_bytes()
    lines = data.splitlines(keepends=True)
    env = {
        **os.environ,
        "HOME": str(home),
        "FLIGHTLOG_KEY_DIR": str(tmp_path / "keys"),
        "FLIGHTLOG_HEAD_DIR": str(tmp_path / "heads"),
    }
    log = tmp_path / "watch.log"
    with log.open("wb") as output:
        watch = subprocess.Popen(
            [sys.executable, "-m", "flightlog", "--db", str(db), "watch", "--interval", "0.05"],
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    written = 0
    try:
        for count in (4, 9, 10, 17, len(lines)):  # appended as gemini-cli appends, several lines at a time
            with chat.open("ab") as fh:
                fh.write(b"".join(lines[written:count]))
            written = count
            want = one_shot(tmp_path, GEMINI.name, b"".join(lines[:count]))[GEMINI_SESSION]
            wait_for(lambda want=want: watched_ledger(db, GEMINI_SESSION) == want, f"line {count}", watch)
    finally:
        watch.terminate()
        watch.wait(timeout=TIMEOUT_S)
    assert "refus" not in log.read_text().lower(), log.read_text()


# ── OpenHands V1: a conversation folder that grows ──

OPENHANDS_V1 = SAMPLES / "openhands-v1" / "cd94562403b9487ebdd4018e3f531dfd"


def v1_copy(target: Path, count: int, *, usage: bool = True) -> Path:
    """The sample conversation with its first ``count`` event files (``usage=False``: base_state.json
    holds no token usage yet, as the SDK saves it after the event files)."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(OPENHANDS_V1, target)
    for extra in sorted((target / "events").glob("event-*.json"))[count:]:
        extra.unlink()
    if not usage:
        state = json.loads((target / "base_state.json").read_bytes())
        state["stats"] = {"usage_to_metrics": {}}
        (target / "base_state.json").write_text(json.dumps(state))
    return target


@pytest.mark.parametrize("usage", [True, False], ids=["usage-saved", "usage-lagging"])
def test_an_openhands_v1_conversation_grows_event_file_by_event_file(tmp_path: Path, usage: bool) -> None:
    total = len(list((OPENHANDS_V1 / "events").glob("event-*.json")))
    with SqliteStore(tmp_path / "whole.sqlite") as store:
        (sid,) = import_file(store, v1_copy(tmp_path / "whole" / OPENHANDS_V1.name, total)).session_ids
        expected = {sid: ledger(store, sid)}
        events = [decode_stored(raw) for raw in expected[sid]]
        assert not isinstance(events[-1], RunTerminal)  # open: the base_state record and the end wait
    for count in range(1, total):
        with SqliteStore(tmp_path / f"grow{count}.sqlite") as store:
            folder = v1_copy(tmp_path / "grow" / OPENHANDS_V1.name, count, usage=usage)
            first = import_file(store, folder)
            folder = v1_copy(folder, total)
            second = import_file(store, folder)
            assert second.continued == first.session_ids, f"{count} event files first"
            assert {s: ledger(store, s) for s in expected} == expected, f"{count} event files first"


def test_watch_sees_an_openhands_v1_event_file_with_base_state_unchanged(tmp_path: Path) -> None:
    total = len(list((OPENHANDS_V1 / "events").glob("event-*.json")))
    folder = v1_copy(tmp_path / "conversations" / OPENHANDS_V1.name, total - 1)
    with SqliteStore(tmp_path / "db.sqlite") as store:
        watcher = Watcher(store, [tmp_path / "conversations"])
        (first,) = watcher.poll()
        assert first.result is not None and first.result.events > 0
        assert import_file(store, folder).duplicate
        assert watcher.poll() == []
        last = sorted((OPENHANDS_V1 / "events").glob("event-*.json"))[-1]
        shutil.copy(last, folder / "events" / last.name)  # base_state.json unchanged
        (again,) = watcher.poll()
        assert again.result is not None and again.result.continued == first.result.session_ids
        assert again.result.events > 0
