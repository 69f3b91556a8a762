"""Fleet commands: ``submit`` (queue a run), ``worker`` (drive queued runs), ``db copy`` (move a ledger).

Mounting, from :mod:`flightlog.cli.root` (``_mount``)::

    from .fleet import register as register_fleet
    register_fleet(app, open_db)     # adds `submit`, `worker`, and `copy` under the `db` group

``register`` finds the ``db`` sub-app among ``app``'s groups and adds ``copy`` to it; to mount it
explicitly instead, ``db_app.command("copy")(db_copy_command())``.

Exit codes: 0 done; 1 a store or ledger problem (one ``flightlog: error:`` line from the app's handler);
2 a usage error (bad spec, missing option).
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..narration import plural
from .console import console

if TYPE_CHECKING:  # the runtime imports these inside the commands: `flightlog --version` stays fast
    from ..fleet.worker import WorkerStats
    from ..kernel import RunResult
    from ..store import Store
    from ..store.base import LeaseClaim

__all__ = ["OpenDb", "db_copy_command", "register"]

OpenDb = Callable[[bool], AbstractContextManager["Store"]]
"""``open_db(read_only)``: a context manager yielding an open store, closed on exit."""

_out = console()
_err = console(stderr=True)


def register(app: typer.Typer, open_db: OpenDb) -> None:
    """Add ``submit`` and ``worker`` to ``app``, and ``copy`` to its ``db`` group when it has one."""
    app.command("submit")(_submit_command(open_db))
    app.command("worker")(_worker_command(open_db))
    for group in app.registered_groups:
        if group.name == "db" and group.typer_instance is not None:
            group.typer_instance.command("copy")(db_copy_command())


@contextmanager
def _opened(url: str | None, open_db: OpenDb, read_only: bool = False) -> Iterator[Store]:
    if url is None:
        with open_db(read_only) as store:
            yield store
        return
    from ..store import open_store
    from .options import check_new_db, say_created  # the same --db checks as the global option

    new = check_new_db(url, read_only=read_only)
    store = open_store(url, read_only=read_only)
    say_created(new)
    try:
        yield store
    finally:
        store.close()


def _submit_command(open_db: OpenDb) -> Callable[..., None]:
    def submit_cmd(
        spec: Annotated[
            str, typer.Argument(metavar="SPEC", help="Agent: module:attribute (every worker must import it).")
        ],
        goal: Annotated[str, typer.Option("--goal", help="The goal (first user message).")],
        criteria: Annotated[
            list[str] | None, typer.Option("--criteria", help="Acceptance criterion (repeatable).")
        ] = None,
        session: Annotated[str | None, typer.Option("--session", help="Session id to create.")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print {session_id, status} as JSON.")] = False,
    ) -> None:
        """Queue a run for the fleet (status queued); a `flightlog worker` picks it up."""
        from ..fleet import submit
        from ..integrity.notary import Notary
        from ..kernel.errors import AgentSpecError
        from ..kernel.spec import is_logical

        if not is_logical(spec):
            raise typer.BadParameter(
                "a fleet spec must be module:attribute (workers import it)", param_hint="SPEC"
            )
        with open_db(False) as store:
            try:
                sid = submit(store, spec, goal, criteria or (), session_id=session, notary=Notary.from_env())
            except AgentSpecError as exc:
                raise typer.BadParameter(str(exc), param_hint="SPEC") from None
        if json_out:
            sys.stdout.write(json.dumps({"session_id": sid, "status": "queued"}) + "\n")
        else:
            _out.print(f"{sid}  queued")

    return submit_cmd


def _worker_command(open_db: OpenDb) -> Callable[..., None]:
    def worker_cmd(
        db: Annotated[
            str | None,
            typer.Option(
                "--db",
                metavar="PATH|URL",
                help="The global --db (flightlog --db PATH|URL worker), also taken here for scripts that "
                "give it after the command; this one wins when both are given.",
                show_default=False,
            ),
        ] = None,
        concurrency: Annotated[int, typer.Option("--concurrency", "-c", help="Sessions at once.", min=1)] = 1,
        lease: Annotated[float, typer.Option("--lease", help="Lease length in seconds.", min=0.1)] = 30.0,
        poll: Annotated[float, typer.Option("--poll", help="Longest idle wait in seconds.", min=0.01)] = 1.0,
        idle_exit: Annotated[
            float | None, typer.Option("--idle-exit", help="Exit after this many idle seconds.", min=0.0)
        ] = None,
        max_sessions: Annotated[
            int | None, typer.Option("--max-sessions", help="Exit after claiming this many.", min=1)
        ] = None,
        json_out: Annotated[
            bool,
            typer.Option(
                "--json",
                help="JSON lines on stdout: one per claim ({event: claimed, ...}) and per result "
                "({event: result, ...}), then {event: stopped, ...} with the totals.",
            ),
        ] = False,
    ) -> None:
        """Claim queued and orphaned fleet runs and drive them, a line per claim and per result on stdout;
        SIGTERM/Ctrl-C stop claiming and drain."""
        from ..fleet import Worker
        from ..integrity.notary import Notary

        report = _WorkerReport(json_out)
        with _opened(db, open_db) as store:
            worker = Worker(
                store,
                concurrency=concurrency,
                lease_ttl_s=lease,
                poll_s=poll,
                notary=Notary.from_env(),
                on_claim=report.claimed,
                on_result=report.result,
            )
            _err.print(f"worker {worker.holder}: {plural(concurrency, 'slot')} on {store.url}")
            previous = _on_stop_signals(worker.stop)
            try:
                stats = worker.run(idle_exit_s=idle_exit, max_sessions=max_sessions)
            finally:
                _restore(previous)
        report.stopped(worker.holder, stats)

    return worker_cmd


class _WorkerReport:
    """The worker's lines: one per claimed run and per finished activation (stdout), and the totals."""

    def __init__(self, json_out: bool) -> None:
        self.json_out = json_out
        self._lock = threading.Lock()  # slots report from their own threads

    def _line(self, wire: dict[str, Any], text: str) -> None:
        with self._lock:
            if self.json_out:
                sys.stdout.write(json.dumps(wire, ensure_ascii=False) + "\n")
                sys.stdout.flush()
            else:
                _out.print(text)

    def claimed(self, claim: LeaseClaim) -> None:
        """``SID  claimed (queued)``, or ``... took over from HOLDER`` for a dead worker's run."""
        how = (
            f"took over from {claim.previous_holder}"
            if claim.previous_holder
            else f"claimed ({claim.status})"
        )
        wire = {"event": "claimed", **claim._asdict()}
        self._line(wire, f"{claim.session_id}  {how}")

    def result(self, result: RunResult) -> None:
        """``SID  completed after 2 steps, 812 tokens`` (with the detail when not completed): steps as ``runs``
        counts them (the run's model turns, ``RunResult.turns``)."""
        detail = f" ({result.detail})" if result.detail else ""
        text = (
            f"{result.session_id}  {result.status}{detail} after {plural(result.turns, 'step')}, "
            f"{plural(result.tokens, 'token')}"
        )
        self._line({"event": "result", **result.to_wire()}, text)

    def stopped(self, holder: str, stats: WorkerStats) -> None:
        """The totals: claimed, taken over, results by status, refused, errors (stderr; JSON on stdout)."""
        if self.json_out:
            wire = {"event": "stopped", "holder": holder, **dataclasses.asdict(stats)}
            self._line(wire, "")
            return
        results = ", ".join(f"{status} {count}" for status, count in sorted(stats.results.items())) or "none"
        _err.print(
            f"worker {holder}: claimed {stats.claimed}, took over {stats.takeovers}, results: {results}, "
            f"refused {stats.refused} (failed the full check), errors {stats.errors}"
        )


def _on_stop_signals(stop: Callable[[], None]) -> dict[int, Any]:
    previous: dict[int, Any] = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, lambda *_: stop())
        except ValueError:  # not the main thread (tests): no handlers
            continue
    return previous


def _restore(previous: dict[int, Any]) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)


def _refuse_same_database(src: str, dst: str) -> Path | None:
    """Exit 2 (one ``flightlog: error:`` line) when SRC and DST open the same database (the same SQLite file,
    through any path, link or URL spelling; the same PostgreSQL URL); else the SQLite file DST names when
    it does not exist yet (the copy creates it), None otherwise."""
    from ..errors import FlightlogError
    from ..store import redact_url, sqlite_file

    try:
        a, b = sqlite_file(src), sqlite_file(dst)
    except FlightlogError as exc:
        _err.print(f"flightlog: error: {exc}")
        raise typer.Exit(2) from None
    if a is None or b is None or ":memory:" in (a, b):
        same = a is None and b is None and src == dst
    else:
        pa, pb = Path(a).resolve(), Path(b).resolve()
        same = pa == pb or (pa.exists() and pb.exists() and pa.samefile(pb))
    if same:
        _err.print(
            f"flightlog: error: db copy: SRC and DST are the same database ({redact_url(src)}); "
            "name another DST (a new file or an empty database)"
        )
        raise typer.Exit(2)
    return Path(b) if b is not None and b != ":memory:" and not Path(b).exists() else None


@contextmanager
def _remove_on_failure(created: Path | None) -> Iterator[None]:
    """On an exception, delete the SQLite file ``created`` (and its ``-wal`` / ``-shm``): the copy made it
    and holds nothing (it writes only once everything verifies). Never a file that existed before (None)."""
    try:
        yield
    except BaseException:
        if created is not None:
            for path in (created, Path(f"{created}-wal"), Path(f"{created}-shm")):
                path.unlink(missing_ok=True)
        raise


def db_copy_command() -> Callable[..., None]:
    """The ``db copy SRC DST`` command function (mount it on the ``db`` group)."""

    def copy_cmd(
        src: Annotated[str, typer.Argument(metavar="SRC", help="Source store: path or URL.")],
        dst: Annotated[
            str, typer.Argument(metavar="DST", help="Destination store: path or URL (created/migrated).")
        ],
        offline: Annotated[
            bool, typer.Option("--offline", help="Do not ask witnesses (stored cosignatures only).")
        ] = False,
        json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
        record: Annotated[
            bool,
            typer.Option(
                "--record",
                help="Record the copy as a core_job run in the store that is live afterwards (default off: "
                "the copy then holds exactly the moved ledger, and any later write makes SRC a stale copy).",
            ),
        ] = False,
    ) -> None:
        """Move a ledger: every session (events verbatim, effects, artifacts, signed checkpoints, grants,
        imports, cosignatures), the index log and the long-term memories from SRC to DST, which takes SRC's ledger id. The copy is
        checked as `verify --all` checks before it commits; refuses if DST has any of the sessions or
        sessions of another ledger. Nothing is written unless everything verifies. SRC is then retired:
        read-only, refusing writes with a pointer to DST, verified as a stale copy (a record signed by your
        log key)."""
        from ..errors import FlightlogError
        from ..ops.dbcopy import copy_store
        from ..store import open_store, redact_url
        from ..store.sqlite import now_ms
        from .options import check_new_db, record_finished_job

        created = _refuse_same_database(src, dst)
        check_new_db(src, read_only=True, name="SRC")  # a mistyped SRC is not created (empty) and copied
        check_new_db(
            dst, read_only=False, name="DST"
        )  # nor a DST in a directory that does not exist (exit 2)
        started_ms = now_ms()
        goal = f"db copy to {redact_url(dst)}"
        with _remove_on_failure(created), open_store(src) as source, open_store(dst) as target:

            def progress(sid: str, events: int) -> None:
                if not json_out:
                    _err.print(f"staged {sid} ({plural(events, 'event')})")

            try:
                report = copy_store(source, target, on_session=progress, online=not offline)
            except FlightlogError as exc:
                if not record:
                    raise
                # the job is recorded in the source, which stays the live store (nothing was written)
                record_finished_job(
                    "db_copy", goal, started_at_ms=started_ms, reason="failed", done=0,
                    summary={"error": str(exc)[:300]}, db=src,
                )  # fmt: skip
                raise
        if record:
            live = dst if report.retired == "source" else src  # the job goes where the ledger goes on
            summary = {"sessions": len(report.sessions), "events": report.events, "retired": report.retired}
            record_finished_job(
                "db_copy", goal, started_at_ms=started_ms, reason="completed", done=len(report.sessions),
                summary=summary, db=live,
            )  # fmt: skip
        if json_out:
            wire = {
                "sessions": len(report.sessions),
                "events": report.events,
                "artifacts": report.artifacts,
                "effects": report.effects,
                "checkpoints": report.checkpoints,
                "ledger_id": report.ledger_id,
                "index_leaves": report.index_leaves,
                "index_checkpoints": report.index_checkpoints,
                "cosignatures": report.cosignatures,
                "memories": report.memories,
                "verified": report.verified,
                "index_verified": report.index_verified,
                "retired": report.retired,
                "retirement": report.retirement,
                "notes": report.notes,
            }
            sys.stdout.write(json.dumps(wire) + "\n")
            return
        for note, times in Counter(report.notes).items():  # one line per distinct note
            _err.print(f"note: {note}" + (f" (x{times})" if times > 1 else ""))
        ledger = f" of ledger {report.ledger_id}" if report.ledger_id else ""
        index = (
            f", index log of {plural(report.index_leaves, 'leaf')} ({report.index_checkpoints} signed checkpoint(s))"
            if report.index_verified
            else ""
        )
        _out.print(
            f"copied {len(report.sessions)} session(s){ledger}, {plural(report.events, 'event')}, {report.artifacts} "
            f"artifact(s), {report.effects} effect(s), {report.checkpoints} checkpoint(s){index}, "
            f"{report.cosignatures} cosignature(s), {plural(report.memories, 'memory record')}; all verified (chains, signed checkpoints, seals, "
            f"retained heads{', index log' if report.index_verified else ''}"
            f"{', memories byte for byte' if report.memories else ''})"
        )
        if report.retired == "source":
            _out.print(
                f"the source is now read-only: {report.retirement} (a record signed by your log key says so; "
                "it refuses writes and `verify` reports it as a stale copy once the ledger goes on)"
            )

    return copy_cmd
