"""Incremental import (issue 17 item 2): a session is keyed by the source's own identity; importing a
transcript that grew appends only what it gained, and the ledger is then byte for byte the one a single
import of the final file makes. A source that rewrote its past is refused, never forked; a torn last line
is waited for; sessions imported by older versions stay as they were."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flightlog.encoding import decode_stored
from flightlog.errors import ImportFormatError
from flightlog.events import Custom, RunStarted, SessionEvent
from flightlog.importers import FORMATS, identity_key, import_file
from flightlog.integrity.heads import HeadStore
from flightlog.integrity.keys import LogSigner
from flightlog.integrity.notary import Notary
from flightlog.integrity.verify import audit_session
from flightlog.recorder import Recorder
from flightlog.store import SqliteStore
from flightlog.store.base import ImportRecord, Store

SAMPLES = Path(__file__).parent / "data" / "samples"
GROWING = sorted((SAMPLES / "claude-code").glob("*.jsonl")) + sorted((SAMPLES / "codex").glob("*.jsonl"))


def ledger(store: Store, session_id: str) -> list[bytes]:
    """The session's event bytes after the ``import_source`` header (seq 0, which names the file's
    sha256 and so differs between imports of different bytes)."""
    return [row.event_bytes for row in store.read_events(session_id, start=1)]


def events_of(store: Store, session_id: str) -> list[SessionEvent]:
    return [decode_stored(row.event_bytes) for row in store.read_events(session_id)]


def line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, byte in enumerate(data) if byte == 0x0A]


def one_shot(tmp_path: Path, name: str, data: bytes) -> dict[str, list[bytes]]:
    """The ledgers a single import of ``data`` records, by session id."""
    folder = tmp_path / "once"
    folder.mkdir(exist_ok=True)
    source = folder / name
    source.write_bytes(data)
    with SqliteStore(folder / "db.sqlite") as store:
        import_file(store, source)
        return {s.session_id: ledger(store, s.session_id) for s in store.list_sessions()}


@pytest.mark.parametrize("sample", GROWING, ids=lambda p: p.name[:40])
def test_growing_file_appends_exactly_what_a_single_import_records(tmp_path: Path, sample: Path) -> None:
    """For split points across the file (every line of the small samples): import the first lines, then
    the whole file: every session's ledger equals the single import's, and the second import recorded
    only the difference."""
    data = sample.read_bytes()
    expected = one_shot(tmp_path, sample.name, data)
    ends = line_ends(data)
    splits = ends if len(ends) <= 60 else ends[:: max(1, len(ends) // 40)]
    source = tmp_path / sample.name
    for number, split in enumerate(splits):
        with SqliteStore(tmp_path / f"grow{number}.sqlite") as store:
            source.write_bytes(data[:split])
            try:
                first = import_file(store, source)
            except ImportFormatError:
                continue  # the first lines hold no session yet (no recognisable record)
            before = {sid: len(ledger(store, sid)) for sid in first.session_ids}
            source.write_bytes(data)
            second = import_file(store, source)
            # every session a single import records, byte for byte, in the session recording its key (a
            # sample whose file name is not its sessionId was keyed by the stem while its first lines named
            # no sessionId yet: that session is continued, never left behind beside a second one)
            recording = {sid: store.find_import(identity_key(sid)) for sid in expected}
            target = {sid: known.session_id for sid, known in recording.items() if known is not None}
            got = {sid: ledger(store, target[sid]) for sid in target}
            assert got == expected, f"split after byte {split}"
            assert len(list(store.list_sessions())) == len(expected), f"split after byte {split}"
            added = sum(len(got[sid]) - before.get(target[sid], -1) for sid in got)
            assert second.events == added  # nothing recorded twice
            assert set(second.continued) <= set(before)


def test_identical_bytes_again_are_a_duplicate_and_a_shorter_copy_adds_nothing(tmp_path: Path) -> None:
    sample = SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"
    data = sample.read_bytes()
    source = tmp_path / sample.name
    source.write_bytes(data)
    with SqliteStore(tmp_path / "db.sqlite") as store:
        first = import_file(store, source)
        assert import_file(store, source).duplicate
        older = tmp_path / "older" / sample.name
        older.parent.mkdir()
        older.write_bytes(data[: line_ends(data)[len(line_ends(data)) // 2]])
        again = import_file(store, older)  # a resume copy / an older copy of the same session
        assert again.session_ids[0] == first.session_ids[0] and again.events == 0
        assert [s.session_id for s in store.list_sessions()] == first.session_ids


def test_torn_last_line_is_waited_for_then_recorded_whole(tmp_path: Path) -> None:
    sample = SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"
    data = sample.read_bytes()
    ends = line_ends(data)
    cut = ends[10] + (ends[11] - ends[10]) // 2  # half of line 12
    source = tmp_path / sample.name
    source.write_bytes(data[:cut])
    with SqliteStore(tmp_path / "db.sqlite") as store:
        first = import_file(store, source)
        assert any(w.line == 12 and "torn last line" in w.reason for w in first.warnings)
        main = first.session_ids[0]
        kinds = [e.custom_kind for e in events_of(store, main) if isinstance(e, Custom)]
        assert "claude_code.unparsed_line" not in kinds
        source.write_bytes(data)
        import_file(store, source)
        assert ledger(store, main) == one_shot(tmp_path, sample.name, data)[main]


def test_a_source_that_rewrote_its_past_is_refused_naming_the_seq(tmp_path: Path) -> None:
    sample = SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"
    lines = sample.read_bytes().splitlines(keepends=True)
    source = tmp_path / sample.name
    source.write_bytes(b"".join(lines[:20]))
    with SqliteStore(tmp_path / "db.sqlite") as store:
        main = import_file(store, source).session_ids[0]
        before = ledger(store, main)
        prompt_seq = next(seq for seq, e in enumerate(events_of(store, main)) if isinstance(e, RunStarted))
        at = next(i for i, line in enumerate(lines) if json.loads(line).get("type") == "user")
        record = json.loads(lines[at])
        record["message"]["content"] = [{"type": "text", "text": "a different first prompt"}]
        lines[at] = json.dumps(record).encode() + b"\n"
        source.write_bytes(b"".join(lines))
        with pytest.raises(ImportFormatError, match=rf"{main} differs from this source at seq {prompt_seq} "):
            import_file(store, source)
        assert ledger(store, main) == before  # nothing recorded, no fork
        assert [s.session_id for s in store.list_sessions() if ":task:" not in s.session_id] == [main]


def test_sessions_imported_by_older_versions_stay_readable_and_are_not_continued(tmp_path: Path) -> None:
    """An older version recorded ``key`` whole (end-of-file events included, no identity row): a grown
    file goes to a new session ``key@<sha12>`` that supersedes it and is continued from then on."""
    sample = SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"
    data = sample.read_bytes()
    half = line_ends(data)[15]
    module = FORMATS["claude-code"]
    legacy_source = tmp_path / "legacy.jsonl"
    legacy_source.write_bytes(data[:half])
    with SqliteStore(tmp_path / "db.sqlite") as store:
        (old,) = [s for s in module.read(legacy_source, []) if s.parent_key is None]
        recorder = Recorder.create(store, session_id=old.key, source="import:claude-code")
        recorder.append_many([Custom(custom_kind="import_source", payload={}), *old.events])
        legacy = ledger(store, old.key)
        source = tmp_path / sample.name
        source.write_bytes(data[: line_ends(data)[25]])
        grown = import_file(store, source)
        new = grown.session_ids[0]
        assert new.startswith(f"{old.key}@") and new != old.key
        assert store.get_session(new).metadata["supersedes"] == old.key
        assert store.find_import(identity_key(old.key)) == ImportRecord(
            identity_key(old.key), new, "claude-code", module.VERSION, sample.name,
            store.find_import(identity_key(old.key)).imported_at_ms,  # type: ignore[union-attr]
        )  # fmt: skip
        source.write_bytes(data)
        assert import_file(store, source).continued == [new]
        assert ledger(store, old.key) == legacy  # untouched
        assert ledger(store, new) == one_shot(tmp_path, sample.name, data)[old.key]


def test_seal_records_the_end_and_growth_after_it_is_refused(tmp_path: Path) -> None:
    sample = SAMPLES / "codex" / "localpush_rollout-2026-02-23T20-34-25-019c8bfe.jsonl"
    data = sample.read_bytes()
    source = tmp_path / sample.name
    notary = Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"), every=4)
    source.write_bytes(data[: line_ends(data)[-3]])
    with SqliteStore(tmp_path / "db.sqlite") as store:
        main = import_file(store, source, notary=notary).session_ids[0]
        assert audit_session(store, main, keyring=notary.keyring, heads=notary.heads).ok
        kinds = [e.kind for e in events_of(store, main)]
        assert "session_sealed" not in [getattr(e, "custom_kind", None) for e in events_of(store, main)]
        assert kinds.count("run_started") > kinds.count("run_terminal")  # the last run is still open
        source.write_bytes(data)
        sealed = import_file(store, source, notary=notary, seal=True)
        assert sealed.continued == [main]
        events = events_of(store, main)
        assert isinstance(events[-1], Custom) and events[-1].custom_kind == "session_sealed"
        assert sum(isinstance(e, RunStarted) for e in events) == [e.kind for e in events].count(
            "run_terminal"
        )
        assert audit_session(store, main, keyring=notary.keyring, heads=notary.heads).ok
        more = b"".join(
            b'{"timestamp":"2026-02-23T22:00:0%dZ","type":"event_msg","payload":{"type":"user_message",'
            b'"message":"one more thing %d"}}\n' % (n, n)
            for n in range(4)
        )
        source.write_bytes(data + more)
        with pytest.raises(ImportFormatError, match="sealed as ended"):
            import_file(store, source, notary=notary)


def test_seal_of_a_session_holding_every_event_only_seals_it(tmp_path: Path) -> None:
    """``--seal`` when the recorded events are already all of the source's: a seal, nothing else."""
    sample = SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"
    source = tmp_path / sample.name
    source.write_bytes(sample.read_bytes())
    notary = Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"))
    with SqliteStore(tmp_path / "db.sqlite") as store:
        main = import_file(store, source, notary=notary, seal=True).session_ids[0]
        before = ledger(store, main)
        again = import_file(store, source, notary=notary, seal=True)
        assert again.duplicate and again.events == 0 and ledger(store, main) == before


def test_seal_later_seals_a_session_whose_end_adds_no_event(tmp_path: Path) -> None:
    sample = SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl"
    source = tmp_path / sample.name
    source.write_bytes(b"".join(sample.read_bytes().splitlines(keepends=True)[:3]))  # records, no prompt yet
    notary = Notary.for_signer(LogSigner.generate("test.example/log"), HeadStore(tmp_path / "heads"))
    with SqliteStore(tmp_path / "db.sqlite") as store:
        main = import_file(store, source, notary=notary).session_ids[0]
        before = events_of(store, main)
        assert not any(isinstance(e, Custom) and e.custom_kind == "session_sealed" for e in before)
        sealed = import_file(store, source, notary=notary, seal=True)
        after = events_of(store, main)
        assert sealed.events == 1 and after[:-1] == before
        assert isinstance(after[-1], Custom) and after[-1].custom_kind == "session_sealed"
        assert audit_session(store, main, keyring=notary.keyring, heads=notary.heads).ok


def test_a_str_path_imports_like_a_path(tmp_path: Path) -> None:
    """`import_file(store, "x.jsonl")` and `import_paths(store, ["folder"])`, as a user types them, used to
    fail with AttributeError: 'str' object has no attribute 'is_dir'."""
    from flightlog.importers import import_paths

    source = SAMPLES / "claude-code" / "spotter_short.jsonl"
    with SqliteStore(tmp_path / "a.sqlite") as a, SqliteStore(tmp_path / "b.sqlite") as b:
        by_path = import_file(a, source)
        by_str = import_file(b, str(source))
        assert by_str.session_ids == by_path.session_ids and by_str.events == by_path.events
        [sid] = by_path.session_ids
        assert [r.event_bytes for r in a.read_events(sid)] == [r.event_bytes for r in b.read_events(sid)]
    with SqliteStore(tmp_path / "c.sqlite") as c:
        results = list(import_paths(c, [str(SAMPLES / "codex")]))
        assert {r.format for r in results} == {"codex"} and len(results) == 3


SUMMARY = b'{"type":"summary","summary":"Fix the build","leafUuid":"0f0e0d0c-1111-2222-3333-444455556666"}\n'


def test_a_file_imported_before_its_session_id_line_is_continued_not_duplicated(tmp_path: Path) -> None:
    """A Claude Code file whose first lines carry no ``sessionId`` is keyed by its stem; once it grew a
    line naming its session, an import continues the session recorded under the stem (one session, the
    same events a single import of the grown file records), and later imports find it by the new key."""
    sample = (SAMPLES / "claude-code" / "spotter_short.jsonl").read_bytes()
    source = tmp_path / "renamed-copy.jsonl"
    source.write_bytes(SUMMARY)
    with SqliteStore(tmp_path / "db.sqlite") as store:
        first = import_file(store, source)
        assert first.session_ids == ["claude-code:renamed-copy"]
        source.write_bytes(SUMMARY + sample)
        grown = import_file(store, source)
        assert grown.session_ids == ["claude-code:renamed-copy"] and grown.continued == [
            "claude-code:renamed-copy"
        ]
        assert [s.session_id for s in store.list_sessions()] == ["claude-code:renamed-copy"]
        sid = "claude-code:55604662-cf2a-4331-851a-ec234028f8ca"
        assert store.find_import(identity_key(sid)).session_id == "claude-code:renamed-copy"  # type: ignore[union-attr]
        # the transcript's own id, or a prefix of it, finds the session recorded under the stem
        assert store.resolve_session("5560") == store.resolve_session(sid) == "claude-code:renamed-copy"
        # and the row takes the task and creation time the transcript gives (the stub had neither)
        with SqliteStore(tmp_path / "once.sqlite") as once:
            import_file(once, source)
            whole = once.get_session(sid)
        row = store.get_session("claude-code:renamed-copy")
        assert whole.task and (row.task, row.created_at_ms) == (whole.task, whole.created_at_ms)
        assert row.metadata["created_from"] == "source"
        assert (
            ledger(store, "claude-code:renamed-copy")
            == one_shot(tmp_path, source.name, SUMMARY + sample)[sid]
        )
        source.write_bytes(SUMMARY + sample + SUMMARY.replace(b'6666"', b'6667"'))
        assert import_file(store, source).session_ids == ["claude-code:renamed-copy"]
        assert len(list(store.list_sessions())) == 1
        assert audit_session(store, "claude-code:renamed-copy").ok


def test_a_file_grown_in_two_steps_before_its_prompt_still_takes_the_task(tmp_path: Path) -> None:
    """As Claude Code writes a file: first a line with no ``sessionId``, then hook lines that carry it and a
    time but no prompt, then the prompt. The second import learns the time, the third the task; the row
    takes each (user pass, session 10: the task stayed empty)."""
    lines = (SAMPLES / "claude-code" / "spotter_short.jsonl").read_bytes().splitlines(keepends=True)
    source = tmp_path / "work-notes.jsonl"
    sid = "claude-code:work-notes"
    with SqliteStore(tmp_path / "db.sqlite") as store:
        for upto in (1, 3, len(lines)):
            source.write_bytes(b"".join(lines[:upto]))
            assert import_file(store, source).session_ids == [sid]
            if upto == 3:
                assert store.get_session(sid).metadata["created_from"] == "source"
        row = store.get_session(sid)
        with SqliteStore(tmp_path / "once.sqlite") as once:
            whole = once.get_session(import_file(once, source).session_ids[0])
        assert whole.task and (row.task, row.created_at_ms) == (whole.task, whole.created_at_ms)
        assert audit_session(store, sid).ok


def test_a_different_transcript_under_an_earlier_stem_key_is_refused_naming_the_seq(tmp_path: Path) -> None:
    """The session recorded under the stem is not this transcript's beginning: refused, nothing recorded."""
    sample = (SAMPLES / "claude-code" / "spotter_short.jsonl").read_bytes()
    source = tmp_path / "renamed-copy.jsonl"
    source.write_bytes(SUMMARY)
    with SqliteStore(tmp_path / "db.sqlite") as store:
        import_file(store, source)
        source.write_bytes(SUMMARY.replace(b"Fix the build", b"Another session") + sample)
        with pytest.raises(
            ImportFormatError, match=r"claude-code:renamed-copy differs from this source at seq 1 "
        ):
            import_file(store, source)
        assert [s.session_id for s in store.list_sessions()] == ["claude-code:renamed-copy"]
        assert store.find_import(identity_key("claude-code:55604662-cf2a-4331-851a-ec234028f8ca")) is None
