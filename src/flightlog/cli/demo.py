"""``flightlog demo``: the main job end to end on bundled real transcripts.

1. Import the example transcripts shipped in ``flightlog/data/examples`` (a Claude Code session and a Codex
   CLI rollout; attribution in ``PROVENANCE.md`` beside them) with ``seal=True`` (``import --seal``): the
   demo states they are finished, so each records its last run's ``run_terminal`` and a seal, two events
   more than a plain ``flightlog import`` gives (it leaves them open), and the step says so. Re-running the
   demo does not import twice.
2. Verify every imported session's chain and tree head; with the user's notary (``flightlog demo`` passes
   it) the imports are signed and sealed, and verification also checks the signed checkpoints, the seal
   and the retained head.
3. List the imported sessions, newest first (as ``flightlog ls``).
4. Replay the Claude Code session (the messages a model would see).
5. Copy the database to a scratch file, flip one byte of one stored event there, and show that ``verify``
   names that sequence and that ``attach`` refuses to resume. The user's database is never touched.

6-11. The runtime, each step a module of its own recording into the same database: a durable kernel run
   across processes (:mod:`~flightlog.cli.demo_kernel`), a run outgrowing its context window
   (:mod:`~flightlog.cli.demo_context`), milestones and capabilities (:mod:`~flightlog.cli.demo_capabilities`),
   long-term memory (:mod:`~flightlog.cli.demo_memory`), a run tree (:mod:`~flightlog.cli.demo_subagents`),
   the entropy watch and signals (:mod:`~flightlog.cli.demo_watch`). ``flightlog demo --help`` lists them.
"""

from __future__ import annotations

import random
import sqlite3
import tempfile
from importlib import resources
from pathlib import Path

from rich.console import Console

from ..errors import LedgerIntegrityError
from ..importers import import_file
from ..integrity.notary import Notary
from ..integrity.verify import AuditReport, audit_session
from ..ledger import VerifyReport
from ..narration import plural, short, state_word, summarize_message
from ..recorder import Recorder, verify_session
from ..sessions import find_sessions, replay_session
from ..store import SqliteStore, Store
from .demo_capabilities import run_capabilities_demo
from .demo_context import run_context_demo
from .demo_kernel import run_kernel_demo
from .demo_memory import run_memory_demo
from .demo_subagents import run_subagents_demo
from .demo_watch import run_watch_demo

__all__ = ["example_transcripts", "list_step", "run_demo", "tamper_one_byte"]


def example_transcripts() -> list[Path]:
    """The bundled example transcript files (``*.jsonl``), sorted."""
    root = resources.files("flightlog") / "data" / "examples"
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".jsonl"))


def tamper_one_byte(db: Path, session_id: str, seq: int) -> None:
    """Flip one byte inside the stored bytes of event ``seq`` in ``db``, bypassing append-only triggers.

    This is what an attacker with file access can do; it exists for demos and tests of detection.
    """
    conn = sqlite3.connect(db)
    try:
        data = conn.execute(
            "SELECT event FROM events WHERE session_id = ? AND seq = ?", (session_id, seq)
        ).fetchone()[0]
        index = data.index(b'"kind"') + 2  # a byte inside the JSON, so the row stays plausible
        flipped = data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]
        conn.execute("DROP TRIGGER IF EXISTS events_no_update")
        conn.execute(
            "UPDATE events SET event = ? WHERE session_id = ? AND seq = ?", (flipped, session_id, seq)
        )
        conn.commit()
    finally:
        conn.close()


def run_demo(store: Store, console: Console, *, notary: Notary | None = None) -> int:
    """Run the demo against ``store``, printing to ``console``; returns the exit code (0 when all as expected).

    Args:
        store: The database to import into.
        console: Where to print.
        notary: Sign and seal the imports and check signatures (None: chains and tree heads only).
    """
    console.print(f"flightlog demo — database {store.url}\n")
    console.print("1. import the bundled example transcripts, sealed (as `flightlog import --seal`)")
    console.print(
        "   the demo states they are finished: each gets its last run's end and a seal (2 events more"
        " than a plain `flightlog import` of the same files, which leaves them open: interrupted, not sealed)"
    )
    session_ids: list[str] = []
    for path in example_transcripts():
        result = import_file(store, path, notary=notary, seal=True)  # a finished transcript
        session_ids.extend(result.session_ids)
        note = "already imported" if result.duplicate else plural(result.events, "event")
        console.print(f"   {path.name}  ->  {result.session_ids[0]}  ({result.format}, {note})")
    console.print("\n2. verify every chain (RFC 8785 bytes, sha256 chain, RFC 9162 tree head)")
    for sid in session_ids:
        report: VerifyReport | AuditReport = (
            verify_session(store, sid)
            if notary is None
            else audit_session(store, sid, keyring=notary.keyring, heads=notary.heads)
        )
        summary = f"\n      {report.summary()}" if isinstance(report, AuditReport) else ""
        console.print(
            f"   {'ok' if report.ok else 'DIVERGES'}  {sid}  {plural(report.events, 'event')}  root {report.root[:16]}"
            + summary
        )
        if not report.ok:
            return 1
    list_step(store, session_ids, console)
    claude = next((s for s in session_ids if s.startswith("claude-code:")), session_ids[0])
    console.print(f"\n4. replay {claude} (the transcript a model would be given)")
    for index, message in enumerate(replay_session(store, claude, max_part_bytes=400)):
        console.print(f"   [{index:>2}] {message.role:<9} {summarize_message(message)}")
    code = _tamper_step(store, claude, console, notary)
    if code:
        return code
    # The runtime's steps, numbered in order; each prints its own one-line header and returns 0 when it went
    # as expected (a new step is one entry here).
    steps = (
        run_kernel_demo,
        run_context_demo,
        run_capabilities_demo,
        run_memory_demo,
        run_subagents_demo,
        run_watch_demo,
    )
    for number, step in enumerate(steps, start=6):
        console.print(f"\n{number}. ", end="")
        code = step(store, console)
        if code:
            return code
    return 0


def list_step(store: Store, session_ids: list[str], console: Console) -> None:
    """Step 3: the sessions of ``session_ids`` (those the demo imported; the rest of the database is not
    listed, so the step stays a few lines), newest first as ``flightlog ls`` lists them
    (:func:`flightlog.sessions.find_sessions`: creation time, then id, descending), one line each: id,
    status word, events, task cut to 50 characters."""
    console.print("\n3. list sessions (newest first, as `flightlog ls`)")
    wanted = set(session_ids)
    for record in find_sessions(store):
        if record.session_id in wanted:
            console.print(
                f"   {record.session_id}  {state_word(record.status):<10} {record.events:>4} events  "
                f"{short(record.task, 50)}"
            )


def _refusal_headline(exc: LedgerIntegrityError) -> str:
    """What step 5 prints for ``attach``'s refusal, in one short line under the verify lines it agrees with:
    the first divergent seq and its reason, the count of the others. Not the advice on restored copies
    the full message carries (about 900 characters): the scratch copy shares the demo database's retained
    heads only because the demo made it, not because a user restored one."""
    from ..integrity.heads import HEADS_AHEAD

    found = exc.reason.partition(f"; {HEADS_AHEAD}")[0]
    where = f" at seq {exc.seq}" if exc.seq is not None else ""
    more = f" (+{len(exc.divergences) - 1} more divergent)" if len(exc.divergences) > 1 else ""
    return f"refused{where}: {found}{more}; a tampered ledger is never resumed"


def _tamper_step(store: Store, session_id: str, console: Console, notary: Notary | None) -> int:
    record = store.get_session(session_id)
    seq = random.Random(session_id).randrange(1, record.events)
    console.print(f"\n5. flip one byte of event {seq} in a scratch copy of the database")
    if not isinstance(store, SqliteStore) or store.path == ":memory:":
        console.print("   (skipped: the tamper demo needs a SQLite file database)")
        return 0
    with tempfile.TemporaryDirectory(prefix="flightlog-demo-") as folder:
        scratch = Path(folder) / "scratch.db"
        source = sqlite3.connect(store.path)
        target = sqlite3.connect(scratch)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
        tamper_one_byte(scratch, session_id, seq)
        copy = SqliteStore(scratch)
        try:
            if notary is None:
                divergences = verify_session(copy, session_id).divergences
            else:
                divergences = audit_session(
                    copy, session_id, keyring=notary.keyring, heads=notary.heads
                ).divergences
            for d in divergences:
                console.print(f"   verify: seq {d.seq}: {d.reason}")
            try:
                Recorder.attach(copy, session_id, notary=notary)
                console.print("   attach: accepted a tampered ledger (unexpected)")
                return 1
            except LedgerIntegrityError as exc:
                console.print(f"   attach: {_refusal_headline(exc)}")
        finally:
            copy.close()
    caught = any(d.seq == seq and d.reason == "hash_mismatch" for d in divergences)
    console.print(
        f"\n{'tampering detected at seq ' + str(seq) if caught else 'tampering NOT detected'}; "
        "your database is untouched."
    )
    return 0 if caught else 1
