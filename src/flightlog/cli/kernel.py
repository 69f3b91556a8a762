"""Kernel commands: ``run``, ``resume``, ``pending``, ``approve``, ``deny``, ``abort``.

Mounting (the ``flightlog`` app adds them at top level, with its own ``--db`` handling)::

    from .kernel import register as register_kernel
    register_kernel(app, open_db)     # open_db(read_only: bool) -> context manager yielding a Store

``kernel_app`` is a standalone Typer app with the same commands and a ``--db`` option (env
``FLIGHTLOG_DB``), for embedding or tests.

Exit codes: **0** the run completed (or the command did its job); **1** the run failed, exhausted a budget
or was cancelled (stdout says which); **2** usage (bad spec, unknown session or call); **3** the run is
suspended, waiting for a human decision (``pending`` lists what waits; ``approve``/``deny`` then
``resume``; a sub-agent's session resumes its run tree from the root). Live progress (turns, tool calls, approvals awaited) goes to stderr; results to stdout
(``--json`` for machine-readable output).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from typer.core import TyperGroup

from ..errors import EventDecodeError, FlightlogError, SessionNotFound
from ..narration import narrate, plural, printable, short
from .console import console
from .options import error_lines, heads_ahead_lines, operator_option, session_arg, wrapped

if TYPE_CHECKING:  # imported inside the commands at run time: `flightlog --version` stays fast
    from ..events import SessionEvent
    from ..integrity.audit import Auditor
    from ..kernel import PendingCall, RunResult
    from ..kernel.records import Verdict
    from ..store import Store, StoredEvent

__all__ = ["EXIT_CODES", "OpenDb", "Progress", "kernel_app", "register"]

OpenDb = Callable[[bool], AbstractContextManager["Store"]]
"""``open_db(read_only)``: a context manager yielding an open store (closed on exit)."""

EXIT_CODES: dict[str, int] = {
    "completed": 0,
    "failed": 1,
    "budget_exhausted": 1,
    "cancelled": 1,
    "suspended": 3,
}
"""Exit code per run status (usage errors exit 2)."""

_QUIET_CUSTOM = frozenset(
    {"model_usage", "tool_decisions", "budget_limits", "provider_capability_evidence", "approval_decision"}
)


class Progress:
    """Live progress lines on stderr: one per interesting durable event (a recorder subscriber)."""

    def __init__(self, console: Console, session_hint: Callable[[], str]) -> None:
        self.console = console
        self._session = session_hint

    def __call__(self, row: StoredEvent, event: SessionEvent) -> None:
        from ..events import Custom

        if isinstance(event, Custom) and event.custom_kind in _QUIET_CUSTOM:
            return
        if event.kind in ("permission_resolved", "tool_argument_repaired") and not self.console.is_terminal:
            return
        style = {"tool_gated": "bold yellow", "suspended": "bold yellow", "rollbacked": "red"}.get(event.kind)
        self.console.print(f"[{row.seq:>4}] {narrate(event, row.session_id)}", style=style)
        if event.kind == "tool_gated":
            call_id = getattr(event, "call_id", "")
            self.console.print(
                f"       waiting for approval: flightlog approve {self._session()} {call_id}", style=style
            )


def _code(result: RunResult) -> int:
    return EXIT_CODES.get(result.status, 1)


def _listed(store: Store, result: RunResult) -> str:
    """The word ``ls`` prints for the session of a run that stopped ``cancelled`` without ending (no
    ``run_terminal``): ``paused`` once an abort or a cancel left it resumable (seed 002 ``Paused``; the
    kernel's :data:`~flightlog.kernel.result.RunStatus` calls it ``cancelled``), the row's word otherwise (a
    writer that took over: ``running``). Any other status is printed as it is."""
    from ..runs.projection import listed_word, resumable_sessions

    if result.status != "cancelled":
        return result.status
    record = store.get_session(result.session_id)
    return listed_word(record, no_run=(), resumable=resumable_sessions(store, [record]))


def _report(console: Console, result: RunResult, json_out: bool, word: str | None = None) -> None:
    """Print ``result`` (``--json``: its wire form); ``word`` is the status word to print (default the
    result's own; :func:`_listed` gives ``ls``'s for a stopped run)."""
    if json_out:
        sys.stdout.write(json.dumps(result.to_wire(), indent=2, ensure_ascii=False) + "\n")
        return
    detail = f" ({result.detail})" if result.detail else ""
    console.print(
        f"session {result.session_id}: {word or result.status}{detail} after {plural(result.turns, 'step')}, "
        f"{plural(result.tokens, 'token')}"
    )
    if word == "paused":
        console.print(f"  resumable: flightlog resume {result.session_id}")
    if result.final_message:
        console.print(result.final_message)
    if result.status == "suspended":
        if result.detail == "effect_in_doubt":
            from ..kernel.execution import IN_DOUBT_WARNING  # loaded already: the kernel ran

            console.print(f"  in doubt: {IN_DOUBT_WARNING}")
        for call_id in result.pending_calls:
            console.print(f"  waiting: {call_id}; decide with one of:")
            console.print(f"    flightlog approve {result.session_id} {call_id}")
            console.print(f"    flightlog deny {result.session_id} {call_id}")
        if not result.pending_calls and result.detail == "sub_agent_await":
            console.print("  waiting for its sub-agents: `flightlog pending` lists what they wait for")


def _wrong_session(message: str) -> NoReturn:
    """Refuse a command line that names a session this command does not act on (an integration's, whose
    app resumes it; an imported transcript): a usage mistake, one ``flightlog: error:`` line and exit 2, as
    README's exit-code paragraph lists it ("a session resumed elsewhere"), with no click "Invalid value:"
    prefix and no ``--help`` pointer (the message says what continues it)."""
    console(stderr=True).print(f"flightlog: error: {message}")
    raise typer.Exit(2)


def _in_doubt_lines(row: PendingCall, resume: str | None = None) -> list[str]:
    """``pending``'s block for an undecided in-doubt call, each line at most 100 columns for the usual
    ids (the arguments are cut to fit; a longer word is not broken): the call, then what in doubt means
    (:data:`~flightlog.kernel.execution.IN_DOUBT_WARNING`, as ``resume`` says it), then what each decision
    does with its command line; for a run killed mid-call (``run_abandoned``) or aborted mid-call
    (``run_paused``), no gate is open yet: the resume that settles it or opens it for those decisions
    (``resume``: its command, default ``flightlog resume ROOT``). The ``reason`` (the intent's key) is in
    ``--json``."""
    from ..kernel.execution import IN_DOUBT_WARNING  # loaded already: `pending` imported the kernel

    call = f"{row.session_id}  turn {row.turn}  {row.call_id}  {row.tool}"
    head = f"{call}({short(row.arguments, max(12, 98 - len(call)))})"
    if row.parent_session_id:
        head += f"  (sub-agent of {row.parent_session_id})"
    sid, root = row.session_id, row.root_session_id or row.session_id
    if row.run_abandoned or row.run_paused:
        from ..kernel.approvals import abandoned_in_doubt_words

        said, step = abandoned_in_doubt_words(root, paused=row.run_paused, resume=resume)
        todo = [f"  {step}"]
    else:
        said = f"the effect started, no completion is recorded; {IN_DOUBT_WARNING}"
        todo = [
            f"  approve runs it again: flightlog approve {sid} {row.call_id}",
            f"  deny marks it failed, never run again: flightlog deny {sid} {row.call_id}",
        ]
    return [
        head,
        *wrapped(f"  in doubt: {said}", indent="    "),
        *(line for part in todo for line in wrapped(part, indent="    ")),
    ]


def _say_loading(err: Console, spec: str, quiet: bool) -> None:
    """One stderr line before an agent spec is imported, on a terminal only (not with ``--quiet``): its
    module and the model SDK it builds (the Anthropic SDK alone: about 1.5 s of CPU) can keep ``run`` silent
    for seconds before its first progress line. Not in a pipe or a log, where nobody watches the wait and
    the line would only add noise before the progress lines that follow."""
    if not quiet and err.is_terminal:
        err.print(f"loading agent {spec} (importing its code and model SDK can take a few seconds)")


def _agent(spec: str) -> Any:
    from ..kernel.errors import AgentSpecError
    from ..kernel.spec import load_agent

    try:
        return load_agent(spec)
    except AgentSpecError as exc:
        raise typer.BadParameter(str(exc), param_hint="SPEC") from None


def register(app: typer.Typer, open_db: OpenDb) -> None:
    """Add the kernel commands to ``app`` (see the module docs); ``open_db(read_only)`` opens the store."""
    out = console()
    err = console(stderr=True)

    @app.command("run")
    def run_cmd(
        spec: Annotated[
            str,
            typer.Argument(metavar="SPEC", help="Agent: module:attribute, file.py:attribute or agent.toml."),
        ],
        goal: Annotated[str, typer.Option("--goal", help="The goal (first user message).")],
        criteria: Annotated[
            list[str] | None, typer.Option("--criteria", help="Acceptance criterion (repeatable).")
        ] = None,
        session: Annotated[str | None, typer.Option("--session", help="Session id to create.")] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live progress on stderr.")] = False,
    ) -> None:
        """Run an agent on a goal; exit 0 completed, 3 waiting for approval, 1 otherwise."""
        _say_loading(err, spec, quiet)
        from ..integrity.notary import Notary
        from ..kernel import Kernel
        from ..kernel.spec import is_logical

        agent = _agent(spec)
        metadata = {"agent_spec": spec} if is_logical(spec) else {}
        sid: list[str] = [session or "SESSION"]
        with open_db(False) as store:
            progress = None if quiet else Progress(err, lambda: sid[0])
            kernel = Kernel(store, agent, on_event=_capture_session(progress, sid), notary=Notary.from_env())
            result = kernel.run_sync(goal, criteria or (), session_id=session, metadata=metadata)
            word = _listed(store, result)
        _report(out, result, json_out, word)
        raise typer.Exit(_code(result))

    @app.command("resume")
    def resume_cmd(
        session: Annotated[str, session_arg()],
        spec: Annotated[
            str | None, typer.Option("--spec", help="Agent spec (default: the one recorded at run).")
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
        quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No live progress on stderr.")] = False,
    ) -> None:
        """Continue a session (after approvals, a crash or a cancel); exit codes as for ``run``.

        A run that has ended is not resumed: its status and the seq of its ``run_terminal`` are printed,
        with its result, and the exit code is its status's (0 completed, 1 failed or budget exhausted);
        no agent spec is needed or imported for it. An imported transcript (``flightlog import``/``watch``)
        records another agent's runs: once it passes the full check it is refused (exit 2), naming its
        format and file; a LangGraph thread or another integration's session likewise, naming what continues
        it (a tampered session of any source is refused as tampered, exit 1, before its source is read).

        The session must pass the full check ``flightlog audit`` makes before anything it names is
        imported: the recorded spec only as a signed ``module:attribute``."""
        from ..integrity.audit import Auditor, require_intact
        from ..integrity.notary import Notary
        from ..kernel import Kernel
        from ..kernel.approvals import imported_transcript, resume_hint, resumed_by_its_app
        from ..kernel.spec import spec_of_checked

        with open_db(False) as store:
            notary = Notary.from_env()
            auditor = Auditor.for_notary(notary)
            sid = _tree_root(store, store.resolve_session(session), err, auditor)
            report = require_intact(store, sid, auditor=auditor)  # before anything stored: its source too
            record = store.get_session(sid)
            source = record.source
            if resumed_by_its_app(source):  # no spec to give: its framework runs it, not the kernel
                _wrong_session(
                    f"session {sid} is a {source} session, run by its own app; it continues with "
                    f"{resume_hint(source, sid)}, not with flightlog resume"
                )
            imported = imported_transcript(record)
            if imported is not None:  # no agent spec to ask for, no run of the kernel's to report
                _wrong_session(f"{imported}; `flightlog show {sid}` shows what it recorded")
            if spec is None:
                spec = spec_of_checked(store, sid, report)  # the signed spec the check just covered
            ended = _ended(store, sid)  # read after the full check; no agent is imported for an ended run
            if ended is not None:
                result, seq = ended
                if not json_out:
                    out.print(
                        f"session {sid} has ended: {result.status} at seq {seq} (run_terminal); nothing to resume"
                    )
                _report(out, result, json_out)
                raise typer.Exit(_code(result))
            if not spec:
                raise typer.BadParameter(
                    "no agent spec recorded for this session (a run started from Python, "
                    "Kernel(...).run_sync, or from an agent.toml or a .py path records none); give "
                    f"--spec MODULE:ATTR, or resume it from Python: Kernel(store, agent).resume_sync({sid!r})"
                )
            progress = None if quiet else Progress(err, lambda: sid)
            _say_loading(err, spec, quiet)
            result = Kernel(store, _agent(spec), on_event=progress, notary=notary).resume_sync(sid)
            word = _listed(store, result)
        _report(out, result, json_out, word)
        raise typer.Exit(_code(result))

    @app.command("pending")
    def pending_cmd(
        session: Annotated[
            str | None,
            typer.Argument(
                metavar="SESSION",
                help="Only this session's run tree (a unique prefix names it): its waits and its sub-agents'.",
                show_default=False,
            ),
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="Print a JSON array.")] = False,
    ) -> None:
        """List tool calls waiting for a decision, and those decided (by whom) waiting for a resume; those
        of a run aborted while it waited (paused: approve or deny records a decision, resume continues it);
        an effect in doubt in a run that was killed mid-call (abandoned) or aborted mid-call (paused) too,
        which a resume settles or opens for a decision. Says first when acting on this store is refused (its retained heads are ahead)."""
        from ..kernel import pending
        from ..kernel.approvals import (
            abandoned_in_doubt,
            continue_hint,
            memory_waits,
            paused_in_doubt,
            resume_command,
        )

        undecodable: list[tuple[str, EventDecodeError]] = []
        with open_db(True) as store:
            sid = None if session is None else store.resolve_session(session)
            rows = pending(store, decided=True, undecodable=undecodable, paused=True)
            rows += abandoned_in_doubt(store, undecodable=undecodable)
            rows += paused_in_doubt(store, undecodable=undecodable)
            memory = memory_waits(store, undecodable)
            if sid is not None:  # its run tree's rows (a sub-agent's name its root)
                rows = [r for r in rows if sid in (r.session_id, r.root_session_id)]
                memory = [m for m in memory if m[0] == sid]
                undecodable = [u for u in undecodable if u[0] == sid]
            listed = dict.fromkeys([*(r.session_id for r in rows), *(sid for sid, _, _ in memory)])
            records = [store.get_session(sid) for sid in listed]
            for line in heads_ahead_lines(store, records):  # up front: approve would refuse what is listed
                err.print(line)
            for bad, exc in undecodable:  # listed without them: say so, exit 1 after the listing
                err.print(
                    f"flightlog: warning: {bad}: its waits cannot be read: {exc} (see `flightlog verify {bad}`)"
                )
            _warn_row_status(store, rows)
            _note_retired(store)
            hints = {
                sid: continue_hint(store, sid)
                for sid in {r.root_session_id or r.session_id for r in rows if r.decision is not None}
            }
            resumes = {  # a run killed, aborted mid-call or while it waited: its resume (--spec if it needs one)
                sid: resume_command(store, sid)
                for sid in {
                    r.root_session_id or r.session_id
                    for r in rows
                    if r.run_abandoned or r.run_paused or r.paused_wait
                }
            }
            elsewhere = _answered_elsewhere(store, rows)
        if json_out:
            waits = [_memory_row(sid, turn, query) for sid, turn, query in memory]
            calls = [{**r.to_wire(), "answer_in": elsewhere.get(r.session_id)} for r in rows]
            sys.stdout.write(json.dumps([*calls, *waits], indent=2, ensure_ascii=False) + "\n")
        else:
            _print_pending(rows, hints, elsewhere, not memory, resumes)
            for sid, turn, query in memory:
                out.print(
                    f"{sid}  turn {turn}  {query}  memory_query  [memory_retrieval] waiting for the memory "
                    f"service; once it answers: flightlog resume {sid}"
                )
        if undecodable:
            raise typer.Exit(1)

    def _memory_row(session_id: str, turn: int, query_id: str) -> dict[str, object]:
        """``pending --json``'s row of a run waiting for an asynchronous memory retrieval: a call row's keys,
        ``kind`` ``memory_retrieval``, ``call_id`` the query id (nothing to approve: resume once the service
        answers)."""
        return {
            "session_id": session_id,
            "turn": turn,
            "call_id": query_id,
            "tool": "memory_query",
            "arguments": "",
            "reason": "waiting for the memory service",
            "kind": "memory_retrieval",
            "decision": None,
            "decided_by": None,
            "parent_session_id": None,
            "root_session_id": session_id,
            "run_abandoned": False,
            "run_paused": False,
            "paused_wait": False,
            "answer_in": None,
        }

    def _answered_elsewhere(store: Store, rows: list[PendingCall]) -> dict[str, str]:
        """Session -> the call that answers its waits, for the listed sessions `approve`/`deny` cannot decide:
        a LangGraph thread's interrupt, answered by ``Command(resume=...)`` in the graph
        (:class:`~flightlog.kernel.errors.DecidedByItsRuntime`; the dashboard shows the same hint)."""
        from ..kernel.approvals import LANGGRAPH_SOURCE, resume_hint

        sources = {sid: store.get_session(sid).source for sid in {r.session_id for r in rows}}
        return {sid: resume_hint(src, sid) for sid, src in sources.items() if src == LANGGRAPH_SOURCE}

    def _print_pending(
        rows: list[PendingCall],
        hints: dict[str, str],
        elsewhere: dict[str, str],
        alone: bool = True,
        resumes: dict[str, str] | None = None,
    ) -> None:
        """``pending``'s text: one line per call (``hints``: each decided session's continue command;
        ``elsewhere``: where the waits of a session `approve` cannot decide are answered); ``alone``: nothing
        else waits (then an empty listing says so). An undecided in-doubt call is a block instead
        (:func:`_in_doubt_lines`; ``resumes``: each abandoned or paused run tree root's resume command)."""
        if not rows and alone:
            out.print("nothing is waiting for a decision")
        for row in rows:
            head = f"{row.session_id}  turn {row.turn}  {row.call_id}  {row.tool}({short(row.arguments, 60)})"
            tree = f"  (sub-agent of {row.parent_session_id})" if row.parent_session_id else ""
            if row.decision is None and row.session_id in elsewhere:
                out.print(
                    f"{head}  [{row.kind}] {short(row.reason, 60)}{tree}; answered where it runs, not here: "
                    f"{elsewhere[row.session_id]}"
                )
            elif row.decision is None and row.kind == "effect_in_doubt":
                resume = (resumes or {}).get(row.root_session_id or row.session_id)
                out.print_lines(_in_doubt_lines(row, resume))
                if row.paused_wait:
                    out.print_lines(wrapped(_paused_words(row, resume), indent="    "))
            elif row.decision is None:
                out.print(f"{head}  [{row.kind}] {short(row.reason, 60)}{tree}")
                if row.paused_wait:
                    resume = (resumes or {}).get(row.root_session_id or row.session_id)
                    out.print_lines(wrapped(_paused_words(row, resume), indent="    "))
            else:
                who = short(printable(row.decided_by or "?"), 80)
                paused = " (its run is paused)" if row.paused_wait else ""
                out.print(
                    f"{head}  [{row.kind}] {row.decision} by {who}; "
                    f"waiting for: {hints[row.root_session_id or row.session_id]}{paused}{tree}"
                )

    def _paused_words(row: PendingCall, resume: str | None = None) -> str:
        """What an open gate of a run an abort stopped while it waited (``paused_wait``) means, under its
        line: a decision is recorded now, the resume of its run tree continues it (``resume``: that command,
        ``--spec MODULE:ATTR`` when the run recorded no spec; default ``flightlog resume ROOT``)."""
        resume = resume or f"flightlog resume {row.root_session_id or row.session_id}"
        return (
            "  paused: `flightlog abort` stopped its run while it waited; approve or deny records a decision "
            f"now, then `{resume}` continues the run"
        )

    def _warn_row_status(store: Store, rows: list[PendingCall]) -> None:
        """One stderr line per listed session whose ``sessions`` row says it neither waits nor runs: the
        listing comes from its ledger, the row contradicts it (``flightlog verify`` says ``row_mismatch``).
        A paused run's call in doubt is not such a row: its ``cancelled`` is what lists it paused; a wait
        an abort closed (``paused_wait``) is listed from its ledger, and its row must say ``cancelled``."""
        from ..kernel.rowcheck import row_warning
        from ..store.base import RUNNABLE_STATUSES

        for row in {r.session_id: r for r in rows if not r.run_paused}.values():
            status = store.get_session(row.session_id).status
            if status != "cancelled" if row.paused_wait else status not in RUNNABLE_STATUSES:
                err.print(f"flightlog: warning: {row.session_id}: {row_warning(row.session_id, status)}")

    def _note_retired(store: Store) -> None:
        """When the store was retired by ``db copy`` (``open_db`` said where the ledger went, from the
        summary), one more stderr note from its verified record: what it lists is what the store held then
        (a wait may have been decided in the live store since), and a decision here is refused."""
        from ..integrity.keys import load_keyring
        from ..integrity.retirement import load_retirement

        retired = load_retirement(store, load_keyring())
        if retired is not None:
            err.print(
                f"flightlog: note: the waits listed are those this store held when retired ({retired.describe()}); "
                "the live store may have decided them since: decide there (approve/deny here refuse)"
            )

    @app.command("approve")
    def approve_cmd(
        session: Annotated[str, session_arg()],
        call: Annotated[str, typer.Argument(metavar="CALL", help="The call id (see `pending`).")],
        responder: Annotated[str, operator_option()] = "user",
        json_out: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
    ) -> None:
        """Approve a waiting call (an in-doubt effect: run it again). Then `resume` the session (a fleet run: a worker does)."""
        from ..kernel import approve
        from ..kernel.approvals import continue_hint

        _operator(err, responder)
        with open_db(False) as store:
            sid = store.resolve_session(session)
            verdict = _decide(lambda: approve(store, sid, call, responder=responder))
            hint = continue_hint(store, sid)
        if json_out:
            _decision_json(sid, verdict)
            return
        out.print(f"approved {call} of {sid}; continue with: {hint}")

    @app.command("deny")
    def deny_cmd(
        session: Annotated[str, session_arg()],
        call: Annotated[str, typer.Argument(metavar="CALL", help="The call id (see `pending`).")],
        reason: Annotated[str | None, typer.Option("--reason", help="Told to the model.")] = None,
        responder: Annotated[str, operator_option()] = "user",
        json_out: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
    ) -> None:
        """Deny a waiting call (an in-doubt effect: mark it failed). Then `resume` the session (a fleet run: a worker does)."""
        from ..kernel import deny
        from ..kernel.approvals import continue_hint

        _operator(err, responder)
        with open_db(False) as store:
            sid = store.resolve_session(session)
            verdict = _decide(lambda: deny(store, sid, call, responder=responder, reason=reason))
            hint = continue_hint(store, sid)
        if json_out:
            _decision_json(sid, verdict)
            return
        out.print(f"denied {call} of {sid}; continue with: {hint}")

    @app.command("abort")
    def abort_cmd(
        session: Annotated[str, session_arg()],
        requested_by: Annotated[
            str,
            typer.Option(
                "--as",
                help="Your operator name, recorded as abort_requested beside the abort (1-80 printable "
                "characters), as approve and deny record theirs.",
            ),
        ] = "user",
        json_out: Annotated[
            bool,
            typer.Option("--json", help="Print {session_id, aborted} as JSON (aborted false: had ended)."),
        ] = False,
    ) -> None:
        """Fence off a running writer of the session and cancel its pending operation: the run is paused
        (ls, runs and the dashboard say paused) until flightlog resume continues it. A session no flightlog
        kernel runs (a LangGraph thread, another integration's session, an import) is refused, exit 2,
        naming what works instead."""
        from ..kernel.abort import abort
        from ..kernel.errors import AbortRefused

        _operator(err, requested_by)
        with open_db(False) as store:
            sid = store.resolve_session(session)
            try:
                done = abort(store, sid, requested_by=requested_by)
            except AbortRefused as exc:  # the wrong command for this session, as `signal` to it is
                _wrong_session(str(exc))
        if json_out:
            sys.stdout.write(json.dumps({"session_id": sid, "aborted": done}) + "\n")
            return
        if not done:
            out.print(f"{sid} has already ended; nothing to abort")
            return
        out.print(f"aborted {sid}: its run is paused; continue it with: flightlog resume {sid}")


def _capture_session(
    progress: Progress | None, holder: list[str]
) -> Callable[[StoredEvent, SessionEvent], None]:
    """Wrap ``progress`` so the first event tells it the session id (for the approve hint)."""

    def on_event(row: StoredEvent, event: SessionEvent) -> None:
        holder[0] = row.session_id
        if progress is not None:
            progress(row, event)

    return on_event


def _tree_root(store: Store, sid: str, err: Console, auditor: Auditor) -> str:
    """The session ``resume`` drives: a kernel sub-agent's run-tree root (resuming it resumes the child
    from its own ledger, then the parent: :mod:`flightlog.kernel.subagents`), else ``sid`` itself. The way
    up follows only parent links the verified ledgers prove (:func:`~flightlog.kernel.subagents.tree_position`):
    a sub-agent whose row names no parent, or another one, is refused as tampered, never resumed as a root.

    Raises:
        LedgerIntegrityError: a session on the way up fails the full check (its parent link included).
        SessionBusy: as :func:`~flightlog.integrity.audit.require_intact`.
    """
    from ..kernel.subagents import tree_position

    metadata = store.get_session(sid).metadata
    if not (isinstance(metadata, dict) and "subagent" in metadata):
        return sid  # its own full check next still proves a parent its ledger names (a row edited to none)
    ancestors = tree_position(store, sid, auditor).ancestors
    root = ancestors[-1] if ancestors else sid
    if root != sid:
        err.print(f"{sid} is a sub-agent; resuming its run tree from {root}")
    return root


def _ended(store: Store, sid: str) -> tuple[RunResult, int] | None:
    """``(result, seq of its run_terminal)`` of a kernel run that has ended, else None (read from the ledger:
    call it only after the full check)."""
    from ..kernel.result import result_of
    from ..kernel.state import load_state

    state = load_state(store, sid)
    if state.terminal is None:
        return None
    seq = next(seq for seq, event in reversed(state.events) if event.kind == "run_terminal")
    return result_of(state), seq


def _operator(err: Console, name: str) -> None:
    """Refuse an operator name that breaks the rule (:func:`flightlog.kernel.approvals.operator_problem`):
    one stderr line naming ``--as``, exit 2, before the database is opened."""
    from ..kernel import operator_problem

    problem = operator_problem(name)
    if problem is not None:
        err.print(f"flightlog: error: --as: invalid operator name: {problem}")
        raise typer.Exit(2)


def _decide(action: Callable[[], Verdict]) -> Verdict:
    """Run ``approve``/``deny``: a call no gate waits on is a bad CALL (exit 2); a call of a session whose
    runtime answers it (a LangGraph interrupt, :class:`~flightlog.kernel.errors.DecidedByItsRuntime`) is the
    wrong command, not a problem with the data: one ``flightlog: error:`` line naming where it is answered,
    exit 2, as for ``resume`` of a session resumed elsewhere (README's exit-code paragraph)."""
    from ..kernel import NotPending
    from ..kernel.errors import DecidedByItsRuntime

    try:
        return action()
    except NotPending as exc:
        raise typer.BadParameter(str(exc), param_hint="CALL") from None
    except DecidedByItsRuntime as exc:
        _wrong_session(str(exc))


def _decision_json(session_id: str, verdict: Verdict) -> None:
    """One JSON object: session_id, call_id, gate, approved, responder, reason (null when none)."""
    wire = {
        "session_id": session_id,
        "call_id": verdict.call_id,
        "gate": verdict.gate,
        "approved": verdict.approved,
        "responder": verdict.responder,
        "reason": verdict.reason,
    }
    sys.stdout.write(json.dumps(wire, ensure_ascii=False) + "\n")


# ─── standalone app ───────────────────────────────────────────────────────────────────────────


class _Group(TyperGroup):
    """Standalone error mapping: one ``flightlog: error:`` line (a few for a refusal for the retained heads,
    :func:`~flightlog.cli.options.error_lines`); exit 2 for an unknown session, else 1."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except FlightlogError as exc:
            say = Console(stderr=True, highlight=False, markup=False, emoji=False)
            for line in error_lines(exc):
                say.print(line)
            raise typer.Exit(2 if isinstance(exc, SessionNotFound) else 1) from None


kernel_app = typer.Typer(
    cls=_Group,
    name="flightlog-kernel",
    help="Run agents durably: run, resume, pending, approve, deny, abort.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class _Db:
    path: str = ""


_db = _Db()


@kernel_app.callback()
def _options(
    db: Annotated[str | None, typer.Option("--db", help="Database path or URL [env FLIGHTLOG_DB].")] = None,
) -> None:
    _db.path = db or os.environ.get("FLIGHTLOG_DB", "flightlog.db")


@contextmanager
def _open_db(read_only: bool) -> Iterator[Store]:
    from ..store import open_store
    from .options import check_new_db, say_created  # the same --db checks as the flightlog app's

    new = check_new_db(_db.path, read_only=read_only)
    store = open_store(_db.path, read_only=read_only)
    say_created(new)
    try:
        yield store
    finally:
        store.close()


register(kernel_app, _open_db)
