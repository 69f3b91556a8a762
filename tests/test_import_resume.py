"""Claude Code resume copies (issue 17 item 2): ``claude --resume`` writes a new transcript (new
``sessionId``) whose first records are copies of the resumed session's (same ``uuid`` and ``timestamp``).
Imported through ``flightlog import`` of the folder, the copied turns and tokens are counted once, the
new session names the one it continues, its replay still holds the copied history, and importing again
adds nothing."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from flightlog.cli import app
from flightlog.events import Custom
from flightlog.sessions import iter_events
from flightlog.store import SqliteStore

runner = CliRunner()
SAMPLES = Path(__file__).parent / "data" / "samples" / "claude-code"
PAIRS = ["spotter_tool_heavy.jsonl", "spotter_subagent_parent.jsonl"]
NEW_ID = (
    "ffffffff-0000-4000-8000-000000000001"  # sorts after the samples' ids: the folder import reads it last
)
NEW_USAGE = {"input_tokens": 7, "cache_read_input_tokens": 100, "output_tokens": 3}


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def resumed_copy(original: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What Claude Code writes on ``--resume``: every record again under the new ``sessionId`` (same
    ``uuid``, same ``timestamp``), then the new prompt and the model's answer, then one more prompt (so
    the new run is closed and its counts are settled)."""
    copied = [{**r, "sessionId": NEW_ID} if "sessionId" in r else dict(r) for r in original]
    last = [r["uuid"] for r in copied if isinstance(r.get("uuid"), str) and not r.get("isSidechain")][-1]

    def line(kind: str, uuid: str, parent: str, message: dict[str, Any], at: str) -> dict[str, Any]:
        return {"parentUuid": parent, "isSidechain": False, "userType": "external", "sessionId": NEW_ID,
                "type": kind, "uuid": uuid, "timestamp": at, "message": message}  # fmt: skip

    prompt = line("user", "00000000-0000-4000-8000-00000000000a", last,
                  {"role": "user", "content": "resumed: and now?"}, "2030-01-01T00:00:00.000Z")  # fmt: skip
    answer = line("assistant", "00000000-0000-4000-8000-00000000000b", prompt["uuid"],
                  {"id": "msg_resumed_1", "role": "assistant", "model": "claude-sonnet-4-5",
                   "content": [{"type": "text", "text": "done"}], "usage": NEW_USAGE},
                  "2030-01-01T00:00:01.000Z")  # fmt: skip
    bye = line("user", "00000000-0000-4000-8000-00000000000c", answer["uuid"],
               {"role": "user", "content": "thanks"}, "2030-01-01T00:00:02.000Z")  # fmt: skip
    return [*copied, prompt, answer, bye]


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def main_counts(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """Independent count of a transcript's main-chain completions and their tokens: distinct records
    (by ``uuid``), assistant lines grouped by ``message.id`` (the latest usage of each), usage summed
    over input, cache creation, cache read and output tokens."""
    seen: set[str] = set()
    usage: dict[str, dict[str, Any]] = {}
    for r in rows:
        if r.get("uuid") in seen or r.get("type") != "assistant" or r.get("isSidechain"):
            continue
        seen.add(r["uuid"])
        message = r["message"]
        usage[message["id"]] = message.get("usage") or usage.get(message["id"]) or {}
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    return len(usage), sum(int(u.get(k) or 0) for u in usage.values() for k in keys)


def runs(db: Path) -> dict[str, dict[str, Any]]:
    result = runner.invoke(app, ["--db", str(db), "runs", "--json"])
    assert result.exit_code == 0, result.output
    return {r["run_id"]: r for r in json.loads(result.output) if r["run_id"].startswith("claude-code:")}


def totals(snapshots: dict[str, dict[str, Any]], prefix: str = "claude-code:") -> tuple[int, int]:
    chosen = [r["budget"] for key, r in snapshots.items() if key.startswith(prefix)]
    return sum(b.get("steps_taken") or 0 for b in chosen), sum(b.get("tokens_used") or 0 for b in chosen)


def import_folder(db: Path, folder: Path, *, seal: bool = True) -> str:
    """``flightlog import [--seal] <folder>`` (sealed: the runs the files end in are closed and counted)."""
    result = runner.invoke(app, ["--db", str(db), "import", *(["--seal"] if seal else []), str(folder)])
    assert result.exit_code == 0, result.output
    return result.output


def tamper_goal(db: Path, session_id: str) -> None:
    """Edit the stored bytes of the session's ``run_started`` (its goal), as an attacker with the file would."""
    raw = sqlite3.connect(db)
    with raw:
        raw.execute("DROP TRIGGER IF EXISTS events_no_update")
        raw.execute(
            'UPDATE events SET event = CAST(REPLACE(CAST(event AS TEXT), \'"goal":"\', \'"goal":"X\') AS BLOB) '
            "WHERE session_id = ? AND kind = 'run_started'",
            (session_id,),
        )
    raw.close()


@pytest.mark.parametrize("sample", PAIRS)
def test_resume_copy_is_counted_once_names_its_origin_and_replays(tmp_path: Path, sample: str) -> None:
    original = records(SAMPLES / sample)
    old_id = next(r["sessionId"] for r in original if r.get("sessionId"))
    resumed = resumed_copy(original)
    alone, folder = tmp_path / "alone", tmp_path / "project"
    alone.mkdir()
    folder.mkdir()
    write(alone / f"{old_id}.jsonl", original)
    write(folder / f"{old_id}.jsonl", original)
    write(folder / f"{NEW_ID}.jsonl", resumed)

    import_folder(tmp_path / "alone.db", alone)
    steps_a, tokens_a = totals(runs(tmp_path / "alone.db"))
    import_folder(tmp_path / "both.db", folder)
    snapshots = runs(tmp_path / "both.db")

    # Every distinct record counted once: the pair adds exactly the new completion to the original.
    assert totals(snapshots) == (steps_a + 1, tokens_a + sum(NEW_USAGE.values()))
    own_steps, own_tokens = main_counts(original)
    assert totals(snapshots, f"claude-code:{old_id}") == (own_steps, own_tokens) or any(
        key.startswith(f"claude-code:{old_id}:") for key in snapshots
    )
    old_main = snapshots[f"claude-code:{old_id}"]["budget"]
    assert (old_main.get("steps_taken"), old_main.get("tokens_used")) == (own_steps, own_tokens)
    new_key = f"claude-code:{NEW_ID}"
    new_main = snapshots[new_key]["budget"]
    assert (new_main.get("steps_taken"), new_main.get("tokens_used")) == (1, sum(NEW_USAGE.values()))

    with SqliteStore(tmp_path / "both.db") as store:
        record = store.get_session(new_key)
        assert record.metadata["resumed_from"] == f"claude-code:{old_id}"
        marks = [e for _, e in iter_events(store, new_key) if isinstance(e, Custom)]
        starts = [e.payload for e in marks if e.custom_kind == "claude_code.resume_copy"]
        assert starts and starts[0]["recorded_in"] == f"claude-code:{old_id}"
        assert [e for e in marks if e.custom_kind == "claude_code.resume_copy_end"]
        before = [(s.session_id, s.head_hash) for s in store.list_sessions() if s.source != "core_job"]

    # Replay of the resumed session holds the copied history (the model was sent it), then the new turn.
    old_replay = runner.invoke(app, ["--db", str(tmp_path / "both.db"), "replay", f"claude-code:{old_id}"])
    new_replay = runner.invoke(app, ["--db", str(tmp_path / "both.db"), "replay", new_key])
    assert old_replay.exit_code == 0 and new_replay.exit_code == 0, new_replay.output
    assert "resumed: and now?" in new_replay.output
    first_prompt = next(
        r for r in original if r.get("type") == "user" and isinstance(r["message"]["content"], str)
    )
    assert first_prompt["message"]["content"][:40] in new_replay.output

    # Importing the folder again adds nothing.
    again = import_folder(tmp_path / "both.db", folder)
    assert "already imported" in again
    assert runs(tmp_path / "both.db") == snapshots
    with SqliteStore(tmp_path / "both.db") as store:
        assert [
            (s.session_id, s.head_hash) for s in store.list_sessions() if s.source != "core_job"
        ] == before


def test_resumed_file_imported_first_still_counts_each_record_once(tmp_path: Path) -> None:
    """The other order (the resumed file imported before the original): the original's runs are then
    the copies (of the resumed session, which recorded them first); the totals are the same."""
    original = records(SAMPLES / "spotter_tool_heavy.jsonl")
    old_id = next(r["sessionId"] for r in original if r.get("sessionId"))
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    write(first / f"{NEW_ID}.jsonl", resumed_copy(original))
    write(second / f"{old_id}.jsonl", original)
    import_folder(tmp_path / "db", first)
    import_folder(tmp_path / "db", second)
    steps, tokens = main_counts(original)
    assert totals(runs(tmp_path / "db")) == (steps + 1, tokens + sum(NEW_USAGE.values()))
    with SqliteStore(tmp_path / "db") as store:
        metadata = store.get_session(f"claude-code:{old_id}").metadata
        assert metadata["copy_of"] == f"claude-code:{NEW_ID}" and "resumed_from" not in metadata


def test_a_growing_resumed_file_keeps_its_copy_decision(tmp_path: Path) -> None:
    """The resumed transcript imported while it grows (cut after the copy, then whole): the second
    import appends only the new events, and the ledger equals a single import's."""
    original = records(SAMPLES / "spotter_tool_heavy.jsonl")
    old_id = next(r["sessionId"] for r in original if r.get("sessionId"))
    resumed = resumed_copy(original)
    folder = tmp_path / "p"
    folder.mkdir()
    write(folder / f"{old_id}.jsonl", original)
    write(folder / f"{NEW_ID}.jsonl", resumed[: len(original) + 1])
    import_folder(tmp_path / "grown.db", folder, seal=False)
    write(folder / f"{NEW_ID}.jsonl", resumed)
    import_folder(tmp_path / "grown.db", folder, seal=False)
    import_folder(tmp_path / "once.db", folder, seal=False)
    key = f"claude-code:{NEW_ID}"
    with SqliteStore(tmp_path / "grown.db") as grown, SqliteStore(tmp_path / "once.db") as once:
        assert grown.get_session(key).metadata["resumed_from"] == f"claude-code:{old_id}"
        assert [r.event_bytes for r in grown.read_events(key, start=1)] == [
            r.event_bytes for r in once.read_events(key, start=1)
        ]


def test_a_session_that_fails_the_audit_is_not_trusted_as_the_origin(tmp_path: Path) -> None:
    """The stored original is tampered with before the resumed file is imported: it is not trusted, so
    the copied runs are recorded as new (and counted), with a warning naming the session."""
    original = records(SAMPLES / "spotter_tool_heavy.jsonl")
    old_id = next(r["sessionId"] for r in original if r.get("sessionId"))
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    write(first / f"{old_id}.jsonl", original)
    write(second / f"{NEW_ID}.jsonl", resumed_copy(original))
    import_folder(tmp_path / "db", first)
    tamper_goal(tmp_path / "db", f"claude-code:{old_id}")
    result = runner.invoke(app, ["--db", str(tmp_path / "db"), "import", "--seal", str(second)])
    assert result.exit_code == 0, result.output
    assert f"also in claude-code:{old_id}, which fails the audit" in result.output
    steps, tokens = main_counts(original)
    new_main = runs(tmp_path / "db")[f"claude-code:{NEW_ID}"]["budget"]
    assert (new_main.get("steps_taken"), new_main.get("tokens_used")) == (
        steps + 1,
        tokens + sum(NEW_USAGE.values()),
    )
    with SqliteStore(tmp_path / "db") as store:
        assert "resumed_from" not in store.get_session(f"claude-code:{NEW_ID}").metadata


def test_the_candidates_audit_checks_the_index_log_once_and_refuses_what_require_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """User pass (session 10): with hundreds of candidate sessions an import re-read the whole index log
    once per candidate (``require_intact`` each: 17 of 22 s). ``Auditor.require_each`` checks it once and
    answers, session by session, what :func:`require_intact` answers, a tampered session included."""
    from flightlog.errors import LedgerIntegrityError
    from flightlog.integrity import audit

    folder = tmp_path / "f"
    folder.mkdir()
    original = records(SAMPLES / "spotter_tool_heavy.jsonl")
    ids = [f"0000000{n}-0000-4000-8000-000000000000" for n in range(3)]
    for sid in ids:
        write(folder / f"{sid}.jsonl", [{**r, "sessionId": sid} if "sessionId" in r else r for r in original])
    import_folder(tmp_path / "db", folder)
    tamper_goal(tmp_path / "db", f"claude-code:{ids[1]}")
    calls = []
    real = audit.audit_index
    monkeypatch.setattr(audit, "audit_index", lambda *a, **k: calls.append(1) or real(*a, **k))
    sessions = [f"claude-code:{sid}" for sid in ids]
    with SqliteStore(tmp_path / "db") as store:
        each = dict(audit.Auditor.from_env().require_each(store, sessions))
        assert len(calls) == 1
        for sid in sessions:
            try:
                expected: object = audit.require_intact(store, sid).ok
            except LedgerIntegrityError as exc:
                expected = (exc.seq, exc.reason)
            got = each[sid]
            assert (
                got.ok if not isinstance(got, LedgerIntegrityError) else (got.seq, got.reason)
            ) == expected
        assert isinstance(each[sessions[1]], LedgerIntegrityError)
        assert not isinstance(each[sessions[0]], LedgerIntegrityError)
