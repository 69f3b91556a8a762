"""The ``runs`` and ``tail`` commands, mounted on the main app with :func:`register`.

``runs`` lists agent runs (seed 002 ``AgentRunSnapshot``): durable state from the ``runs`` projection,
refined by live heartbeats of running kernels (durable outranks live, see :mod:`flightlog.live`), as a
table, a parent/child tree, or ``--json`` (a flat array in the seed wire format; parents are in each
snapshot). ``tail`` prints a session's events as they become durable, one narrated line each, from any
process. Thin: parse, call one library function, print.

Mounted by :mod:`flightlog.cli.root`::

    from .runs import register as register_runs
    register_runs(app, open_db)   # open_db(read_only: bool) -> ContextManager[Store]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import SessionNotFound
from ..narration import narrate, short, spent_of, state_word
from .console import console
from .options import (
    STALE_PROJECTION_NOTE,
    abandoned_notes,
    ago,
    count_option,
    session_arg,
    short_session,
    warn_diverged,
)

if TYPE_CHECKING:  # the read model and the store load inside the commands: `flightlog --version` stays fast
    from ..live import RunView
    from ..runs.context import ContextUse
    from ..runs.projection import RunNode, Undecodable
    from ..store.base import Store, StoredEvent

__all__ = ["register", "tail_line", "view_line"]

OpenDb = Callable[[bool], AbstractContextManager["Store"]]
"""``open_db(read_only)``: a context manager yielding an open store, closed on exit."""

_out = console()
_err = console(stderr=True)

RUN_STATES = (
    "queued",
    "initializing",
    "running",
    "waiting_model",
    "waiting_tool",
    "waiting_input",
    "paused",
    "stopping",
    "terminal",
)
"""``flightlog.runs.RunState``'s values (seed 002), for the options' help and checks without loading the read
model at start-up (``tests/test_cli_startup.py`` checks they agree)."""
RUN_SOURCES = ("direct", "workflow", "fleet", "core_job", "task")
"""``flightlog.runs.RunSource``'s values, as :data:`RUN_STATES`."""
RUN_OUTCOMES = ("completed", "failed", "cancelled", "interrupted", "budget_exhausted")
"""``flightlog.runs.TerminalOutcome``'s values (seed 002), as :data:`RUN_STATES`: the outcome of a terminal run."""
LEASE_S = 30.0
"""``flightlog.live.DEFAULT_LEASE_MS`` in seconds: ``runs --lease``'s default (checked as :data:`RUN_STATES`)."""
_STATES = ", ".join(RUN_STATES)
_SOURCES = ", ".join(RUN_SOURCES)
_OUTCOMES = ", ".join(RUN_OUTCOMES)


def register(app: typer.Typer, open_db: OpenDb) -> None:
    """Add ``runs`` and ``tail`` to ``app``; they open the database through ``open_db(read_only)``."""
    app.command("runs")(_runs_command(open_db))
    app.command("tail")(_tail_command(open_db))


# ─── runs ─────────────────────────────────────────────────────────────────────────────────────


def _choice(value: str | None, allowed: tuple[str, ...], hint: str) -> str | None:
    if value is not None and value not in allowed:
        word = state_word(value)  # ls prints a terminal run's outcome ("cancelled"): point at --outcome
        also = (
            f"; {word!r} is an outcome, use --outcome {word}"
            if hint == "--state" and word in RUN_OUTCOMES
            else ""
        )
        raise typer.BadParameter(f"{value!r} is not one of: {', '.join(allowed)}{also}", param_hint=hint)
    return value


def _resolve_parent(store: Store, parent: str | None) -> str | None:
    """A parent prefix resolved to a session id; an id matching no session (a process entry) as given."""
    if parent is None:
        return None
    try:
        return store.resolve_session(parent)
    except SessionNotFound as exc:
        if exc.matches:
            raise
        return parent


def _runs_command(open_db: OpenDb) -> Callable[..., None]:
    def runs_cmd(
        state: Annotated[
            str | None, typer.Option("--state", help=f"Keep runs in this state: {_STATES}.")
        ] = None,
        outcome: Annotated[
            str | None,
            typer.Option(
                "--outcome", help=f"Keep terminal runs with this outcome: {_OUTCOMES} (aborted: cancelled)."
            ),
        ] = None,
        source: Annotated[
            str | None, typer.Option("--source", help=f"Keep runs of this source: {_SOURCES}.")
        ] = None,
        parent: Annotated[
            str | None, typer.Option("--parent", help="Keep the children of this run (id or unique prefix).")
        ] = None,
        tree: Annotated[bool, typer.Option("--tree", help="Show parent/child runs as a tree.")] = False,
        json_out: Annotated[
            bool, typer.Option("--json", help="Print a JSON array of seed 002 AgentRunSnapshot objects.")
        ] = False,
        rebuild: Annotated[
            bool, typer.Option("--rebuild", help="Recompute the runs projection from the ledgers first.")
        ] = False,
        abandoned: Annotated[
            bool,
            typer.Option(
                "--abandoned", help="Only in-flight runs with no heartbeat or event within the lease."
            ),
        ] = False,
        limit: Annotated[
            int | None,
            count_option("--limit", help="Show at most this many runs (most recently updated)."),
        ] = None,
        lease: Annotated[
            float, typer.Option("--lease", help="Heartbeat lease in seconds.", min=0.0)
        ] = LEASE_S,
        entropy: Annotated[
            bool, typer.Option("--entropy", help="Add each run's entropy score per turn (table and tree).")
        ] = False,
    ) -> None:
        """List agent runs, most recently updated first: state, outcome, budget and liveness (durable ledger,
        refined by live heartbeats)."""
        from ..kernel.rowheld import SETTLED_BY_ROW, held_in, listed_with_held
        from ..live import list_run_views, list_runs_json_live
        from ..runs import projection_ready, rebuild_projection
        from ..runs.projection import context_uses

        _choice(state, RUN_STATES, "--state")
        _choice(source, RUN_SOURCES, "--source")
        outcome = _choice(None if outcome is None else state_word(outcome), RUN_OUTCOMES, "--outcome")
        if outcome is not None:  # an outcome is a terminal run's (seed 002 TerminalSummary)
            if state not in (None, "terminal"):
                raise typer.BadParameter(
                    f"--outcome {outcome} lists terminal runs; it takes no --state {state}",
                    param_hint="--state",
                )
            state = "terminal"
        undecodable: Undecodable = []  # --rebuild's
        if rebuild:
            with open_db(False) as store:
                count = rebuild_projection(store, undecodable=undecodable)
            _err.print(f"rebuilt the runs projection from {count} session ledger(s)")
            for sid, exc in undecodable:  # named before the listing: it lacks these runs
                _err.print(
                    f"flightlog: warning: {sid}: not in the runs projection: {exc} (see `flightlog verify {sid}`)"
                )
        lease_ms = int(lease * 1000)
        unread: Undecodable = []  # a stale projection is folded: the sessions whose events do not decode
        unheld: Undecodable = []  # a run the row ended whose events do not decode: its wait is unknown
        with open_db(True) as store:
            if not projection_ready(store):
                _err.print(STALE_PROJECTION_NOTE)
            parent_id = _resolve_parent(store, parent)
            extra = (
                []
                if abandoned
                else held_in(store, state, source=source, parent=parent_id, undecodable=unheld)
            )
            if json_out and not abandoned and not extra and outcome is None:
                text = list_runs_json_live(
                    store,
                    state=state,
                    source=source,
                    parent=parent_id,
                    lease_ms=lease_ms,
                    limit=limit,
                    undecodable=unread,
                )
                if SETTLED_BY_ROW not in text:  # no run the row's status ended: nothing the ledger may hold
                    sys.stdout.write(text + "\n")
                    if rebuild:
                        _refuse_diverged(store)
                    if _warn_unread(unread + unheld) or undecodable:
                        raise typer.Exit(1)
                    return
                unread.clear()  # folded again below

            def fetch(most: int | None) -> list[RunView]:
                listed = list_run_views(
                    store,
                    state=state,
                    source=source,
                    parent=parent_id,
                    lease_ms=lease_ms,
                    abandoned_only=abandoned,
                    limit=most
                    if outcome is None
                    else None,  # the outcome is no indexed column: all, then cut
                    undecodable=unread,
                )
                if outcome is None:
                    return listed
                kept = [
                    v for v in listed if v.snapshot.terminal and v.snapshot.terminal.outcome.value == outcome
                ]
                return kept[:most]

            # the ledger's wait outranks the row; runs it leaves out do not shorten --limit's listing
            views, held = listed_with_held(store, fetch, state, extra, limit, undecodable=unheld)
            uses = {} if json_out else context_uses(store, [v.snapshot.run_id for v in views])
            scores = _entropy(store, views) if entropy else None
            waits = {} if json_out else _waits(store, views)
            notes = [] if json_out else abandoned_notes(store, views=views)
        if json_out:
            sys.stdout.write("[" + ",".join(v.snapshot.model_dump_json() for v in views) + "]\n")
        elif tree:
            _print_tree(views, uses, scores, waits)
        else:
            _print_table(views, uses, scores, waits)
        if notes:  # what to do about each abandoned run listed (resume a kernel run)
            sys.stdout.flush()
            for note in notes:
                _err.print(note)
        if rebuild:
            with open_db(True) as store:
                _refuse_diverged(store)
        else:
            _warn_held(open_db, held)
        if _warn_unread(unread + unheld) or undecodable:
            raise typer.Exit(1)

    return runs_cmd


def _warn_unread(unread: Undecodable) -> bool:
    """After the listing: one stderr line per session left out because its stored events do not decode (a
    stale projection's fold, :func:`flightlog.runs.compute_runs`, or a run the row ended whose ledger may
    wait, :func:`flightlog.kernel.rowheld.held_by_ledger`); whether there was any."""
    sys.stdout.flush()
    for sid, exc in dict(unread).items():  # once a session
        _err.print(f"flightlog: warning: {sid}: not listed: {exc} (see `flightlog verify {sid}`)")
    return bool(unread)


def _warn_held(open_db: OpenDb, held: set[str]) -> None:
    """One stderr line per listed run whose ``sessions`` row ended it while its ledger waits (listed in the
    state its events give: :func:`flightlog.kernel.rowheld.held_by_ledger`), as ``flightlog pending`` warns."""
    from ..kernel.rowcheck import row_warning

    if not held:
        return
    sys.stdout.flush()
    with open_db(True) as store:
        for sid in sorted(held):
            _err.print(f"flightlog: warning: {sid}: {row_warning(sid, store.get_session(sid).status)}")


def _refuse_diverged(store: Store) -> None:
    """After ``--rebuild`` (which folds the stored bytes of every session) and the listing: check each
    folded session's chain, and its ``sessions`` row against the verified ledger (``row_mismatch``: a row
    that ends a run whose ledger waits); one warning per session that fails, naming its first divergent
    seq, and exit 1, as ``show``, ``replay`` and ``export`` do."""
    from ..runs import folded_sessions

    sys.stdout.flush()
    if warn_diverged(store, folded_sessions(store), rows=True):
        raise typer.Exit(1)


def _liveness(view: RunView, now: int) -> str:
    if view.abandoned:
        return f"abandoned (last seen {ago(view.last_seen_ms, now)})"
    if view.live is not None:
        return f"live ({ago(view.live.heartbeat_at_ms, now)})"
    return ""


def _duration(ms: int | None) -> str:
    if ms is None:
        return "-"
    return f"{ms / 1000:.1f}s" if ms < 60_000 else f"{ms // 60_000}m{(ms % 60_000) // 1000:02d}s"


def view_line(view: RunView, now: int, context: ContextUse | None = None) -> list[str]:
    """The table cells of one run: id, state (`` (abandoned)`` after it when its heartbeat lapsed:
    ``running (abandoned)``, as the dashboard's session page and runs list write it), outcome, tokens, steps,
    duration, context use (fill of the latest model call / usable window, ``-`` when none was recorded),
    parent, liveness, detail (the terminal
    detail, seed 002 ``TerminalSummary.detail``, whole: at most 120 characters, such as a failed run's
    ``failed: provider_failure: <the provider's error>``; a stored reason that spells the outcome another
    way, ``aborted``, as its term: ``narration.state_word``)."""
    s = view.snapshot
    terminal = s.terminal
    return [
        s.run_id,
        s.state.value + (" (abandoned)" if view.abandoned else ""),
        terminal.outcome.value if terminal else "",
        str(s.budget.tokens_used) if s.budget.tokens_used is not None else "-",
        str(s.budget.steps_taken) if s.budget.steps_taken is not None else "-",
        _duration(s.budget.duration_ms),
        context.label() if context is not None else "-",
        s.parent or "",
        _liveness(view, now),
        short(state_word(terminal.detail), 120) if terminal and terminal.detail else "",
    ]


_HEADERS = ("run", "state", "outcome", "tokens", "steps", "duration", "context", "parent", "live", "detail")
_RIGHT = frozenset({"tokens", "steps", "duration", "context"})
_LIVE = _HEADERS.index("live")
_DETAIL = _HEADERS.index("detail")

Uses = dict[str, "ContextUse"]


def _entropy(store: Store, views: list[RunView]) -> dict[str, str]:
    """Per run: its ``entropy_sample`` scores, oldest turn first, ``!`` after a turn whose score alerted."""
    from ..events import EntropyAlert, EntropySample
    from ..sessions import iter_events

    cells: dict[str, str] = {}
    for view in views:
        run_id = view.snapshot.run_id
        scores: dict[int, str] = {}
        for _row, event in iter_events(store, run_id):
            if isinstance(event, EntropySample):
                scores[event.turn] = f"{event.score:.2f}"
            elif isinstance(event, EntropyAlert):
                scores[event.turn] = scores.get(event.turn, "") + "!"
        cells[run_id] = " ".join(scores.values()) or "-"
    return cells


def _waits(store: Store, views: list[RunView]) -> dict[str, str]:
    """Per waiting run (``waiting_input``/``paused``): what it waits for, from its folded ledger
    (:func:`flightlog.kernel.memory.wait_detail`); the detail column of a run that has no terminal detail. A
    LangGraph thread's interrupt is answered in the graph, not by ``approve`` (``pending`` says so too): its
    detail names that call instead of ``flightlog pending``. A kernel run's resume is the command
    ``pending`` names (``--spec MODULE:ATTR`` when it recorded no agent spec), of its run tree's root."""
    from ..errors import EventDecodeError
    from ..kernel.approvals import (
        LANGGRAPH_SOURCE,
        continue_hint,
        resume_command,
        resume_hint,
        tree_of,
    )
    from ..kernel.memory import wait_detail
    from ..kernel.state import KERNEL_SOURCE, load_state

    found: dict[str, str] = {}
    for view in views:
        if view.snapshot.state.value not in ("waiting_input", "paused"):
            continue
        run_id = view.snapshot.run_id
        source = store.get_session(run_id).source
        answered_in = resume_hint(source, run_id) if source == LANGGRAPH_SOURCE else None
        resume = waits_for = None
        if source == KERNEL_SOURCE:
            resume = resume_command(store, tree_of(store, run_id)[1])
            waits_for = continue_hint(store, run_id)
        try:
            detail = wait_detail(load_state(store, run_id), answered_in, resume=resume, waits_for=waits_for)
        except EventDecodeError as exc:  # what it waits for is unknown: say why, the listing goes on
            detail = f"wait unknown: seq {exc.seq} does not decode (see flightlog verify)"
        if detail is not None:
            found[view.snapshot.run_id] = detail
    return found


def _print_table(
    views: list[RunView],
    uses: Uses,
    entropy: dict[str, str] | None = None,
    waits: dict[str, str] | None = None,
) -> None:
    """Aligned columns, never truncated (ids are long; pipes and narrow terminals must keep them whole);
    ``waits``: the detail of runs that wait (:func:`_waits`), in full."""
    from ..live import wall_ms

    if not views:
        _out.print("(no runs)")
        return
    now = wall_ms()
    headers = (*_HEADERS, "entropy") if entropy is not None else _HEADERS
    lines = [
        view_line(view, now, uses.get(view.snapshot.run_id))
        + ([entropy[view.snapshot.run_id]] if entropy else [])
        for view in views
    ]
    for view, line in zip(views, lines, strict=True):
        if not line[_DETAIL] and (waiting := (waits or {}).get(view.snapshot.run_id)):
            line[_DETAIL] = waiting
    rows = [list(headers), *lines]
    widths = [max(len(row[i]) for row in rows) for i in range(len(headers))]
    right = [name in _RIGHT for name in headers]
    _out.print_lines(  # one write per thousand lines: rich's print per line was most of the time at 100k runs
        "  ".join(
            cell.rjust(width) if flush else cell.ljust(width)
            for flush, cell, width in zip(right, row, widths, strict=True)
        ).rstrip()
        for row in rows
    )


def _tree_tokens(node: RunNode) -> int | None:
    """Tokens a run and every listed descendant used (their ``tokens_used``); None when it has no listed
    descendant that reports any (then there is nothing to add to its own figure)."""
    below = [t for child in node.children if (t := _tree_tokens(child) or child.snapshot.budget.tokens_used)]
    if not below:
        return None
    return (node.snapshot.budget.tokens_used or 0) + sum(below)


def _tokens_cell(own: int | None, limit: int | None, tree: int | None) -> str:
    """``tokens <own>/<limit>`` or ``tokens <own> (no limit)`` (:func:`~flightlog.narration.spent_of`),
    then, when listed sub-agents used tokens too (a sub-agent's grant comes out of its parent's budget:
    :mod:`flightlog.kernel.delegation`), `` (with sub-agents <tree>/<limit>[, <n> over])``, or with no
    limit ``tokens <own> (no limit; with sub-agents <tree>)``."""
    if tree is None:
        return f"tokens {spent_of(own, limit)}"
    spent = "-" if own is None else str(own)
    if limit is None:
        return f"tokens {spent} (no limit; with sub-agents {tree})"
    over = f", {tree - limit} over" if tree > limit else ""
    return f"tokens {spent}/{limit} (with sub-agents {tree}/{limit}{over})"


TREE_DETAIL_CHARS = 80
"""Characters of a terminal run's detail a ``runs --tree`` line shows (the table shows 120)."""


def _label(
    view: RunView,
    now: int,
    context: ContextUse | None,
    tree_tokens: int | None = None,
    wait: str | None = None,
) -> str:
    """A tree line: spent/limit (a sub-agent's limits are its grant), ``(no limit)`` where the run records
    none, as the dashboard shows it; a run whose listed sub-agents used tokens also shows the tree's total
    against its limit (:func:`_tokens_cell`); last, ``detail: <text>``, the terminal detail (seed 002
    ``TerminalSummary.detail``, such as ``failed: provider_failure: <error>``) cut to
    :data:`TREE_DETAIL_CHARS`, when it says more than the outcome already in the line, or for a run that
    waits, ``wait`` (:func:`_waits`: ``waiting for a decision on <call ids> (flightlog pending)``), as the
    table's detail column gives it, cut to 120 characters as that column cuts a terminal detail."""
    cells = view_line(view, now, context)
    budget = view.snapshot.budget
    parts = [
        cells[0],
        cells[1] + (f" ({cells[2]})" if cells[2] else ""),
        _tokens_cell(budget.tokens_used, budget.token_budget, tree_tokens),
        f"steps {spent_of(budget.steps_taken, budget.max_steps)}",
    ]
    if context is not None:
        parts.append(f"context {cells[6]}")
    if cells[_LIVE]:
        parts.append(cells[_LIVE])
    terminal = view.snapshot.terminal
    if terminal and terminal.detail and state_word(terminal.detail) != terminal.outcome.value:
        parts.append(f"detail: {short(state_word(terminal.detail), TREE_DETAIL_CHARS)}")
    elif wait:
        parts.append(short(wait, 120))
    return "  ".join(parts)


def _print_tree(
    views: list[RunView],
    uses: Uses,
    entropy: dict[str, str] | None = None,
    waits: dict[str, str] | None = None,
) -> None:
    """One line per run (:func:`_label`; ``waits``: what each waiting run waits for, :func:`_waits`),
    children indented under their parent with tree guides; children whose parent the listing left out
    (``--limit``, a filter) under a ``(parent ID not listed)`` line, not drawn as roots."""
    from ..live import wall_ms
    from ..runs import build_tree, unlisted_parents

    if not views:
        _out.print("(no runs)")
        return
    now = wall_ms()
    by_id = {v.snapshot.run_id: v for v in views}

    def walk(node: RunNode, prefix: str, last: bool, root: bool) -> None:
        guide = "" if root else ("└── " if last else "├── ")
        run_id = node.snapshot.run_id
        extra = f"  entropy {entropy[run_id]}" if entropy else ""
        label = _label(by_id[run_id], now, uses.get(run_id), _tree_tokens(node), (waits or {}).get(run_id))
        _out.print(prefix + guide + label + extra)
        inner = prefix if root else prefix + ("    " if last else "│   ")
        for index, child in enumerate(node.children):
            walk(child, inner, index == len(node.children) - 1, False)

    for parent, nodes in unlisted_parents(build_tree([v.snapshot for v in views])):
        if parent is None:
            walk(nodes[0], "", True, True)
            continue
        _out.print(f"(parent {parent} not listed)")
        for index, node in enumerate(nodes):
            walk(node, "", index == len(nodes) - 1, False)


# ─── tail ─────────────────────────────────────────────────────────────────────────────────────


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%H:%M:%S")


def tail_line(row: StoredEvent, text: str, *, as_json: bool) -> str:
    """One ``tail`` output line (no newline): ``seq time kind narration``, or a JSON object with the
    stored event embedded verbatim."""
    if as_json:
        head = json.dumps(
            {"seq": row.seq, "kind": row.kind, "recorded_at_ms": row.recorded_at_ms, "text": text}
        )
        return head[:-1] + ',"event":' + row.event_bytes.decode("utf-8") + "}"
    return f"{row.seq:>6}  {_clock(row.recorded_at_ms)}  {row.kind:<24} {text}"


def _tail_command(open_db: OpenDb) -> Callable[..., None]:
    def tail_cmd(
        session: Annotated[str, session_arg()],
        follow: Annotated[
            bool,
            typer.Option("--follow", "-f", help="Keep printing new events until the run ends (or Ctrl-C)."),
        ] = False,
        json_out: Annotated[
            bool,
            typer.Option("--json", help="One JSON object a line: seq, kind, recorded_at_ms, text, event."),
        ] = False,
        interval: Annotated[
            float, typer.Option("--interval", help="Seconds between polls with --follow.", min=0.01)
        ] = 0.2,
    ) -> None:
        """Print a session's events as they become durable, one narrated line each (from any process);
        then check the chain: a session that fails verification gets a warning naming the seq, exit 1."""
        from ..live import follow_events

        with open_db(True) as store:
            session_id = store.resolve_session(session)
            try:
                # wait_for_events wakes on commit where the backend can (PostgreSQL LISTEN/NOTIFY) and polls
                # elsewhere; either way the interval bounds the wait, and the caller re-reads after it.
                def wait(seconds: float, sid: str = session_id) -> None:
                    store.wait_for_events(seconds, session_id=sid)

                events = follow_events(store, session_id, follow=follow, poll_s=interval, sleep=wait)
                who = session_id if json_out else short_session(store, session_id)  # as show's timeline
                for row, event in events:
                    line = tail_line(row, narrate(event, who), as_json=json_out)
                    if json_out:
                        sys.stdout.write(line + "\n")
                    else:
                        _out.print(line)
                    sys.stdout.flush()
            except KeyboardInterrupt:
                return
            from .options import refuse_quietly_diverged  # the root app's check, as for show and replay

            refuse_quietly_diverged(store, session_id)  # what was printed must verify, or exit 1 saying so

    return tail_cmd
