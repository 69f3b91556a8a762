"""Human decisions on gated calls, from any process: list what waits, approve, deny.

A suspended run has exited; its gates live only in the ledger. ``approve``/``deny`` first run the full check
``flightlog audit`` makes (:func:`flightlog.integrity.audit.require_intact`: a session with a dropped seal, rolled back,
signed by another key or re-chained is refused, nothing is written), then attach to the session (taking
authority, so a writer still holding the old epoch is fenced off) and append, in one transaction signed by
the notary (the user's log key by default) so the decision is never in an unanchored tail:

* approve: ``permission_resolved(turn, approved=True, responder="user")`` and
  ``Custom("approval_decision", {turn, call_id, gate, approved, responder, policy_digest?})`` where
  ``responder`` there is the operator's name (``--as NAME``, default ``user``) and ``policy_digest`` the
  session's signed grant (:func:`flightlog.integrity.grants.session_policy_digest`), when it has one;
* deny: ``permission_resolved(turn, approved=False, responder="user")``, ``tool_denied(turn, call_id, tool_name,
  reason)`` and the ``approval_decision``.

Nothing runs here: a later ``Kernel.resume`` records ``resumed(approved=[...], denied=[...])`` and
executes the approved calls (for an in-doubt effect: approve runs it again, deny marks it failed).

**Operator names** (:func:`operator_problem`, one rule for the CLI, the Python API and the dashboard):
1 to :data:`MAX_OPERATOR` characters; none in Unicode general categories Cc, Cf, Cs, Co, Cn (controls,
format characters such as bidi overrides and zero-width marks, surrogates, private-use and unassigned
code points), Zl or Zp (line and paragraph separators); no space but U+0020, and none at either end; no
variation selector (U+FE00..U+FE0F, U+E0100..U+E01EF). A name is shown wherever a decision is (``show``,
``tail``, ``pending``, the dashboard), so what is recorded must read as what was typed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..decisions import denial_reason
from ..errors import EventDecodeError, SessionNotFound
from ..events import Custom, Event, PermissionResolved, ToolDenied, ToolGated
from ..integrity.audit import Auditor, require_intact
from ..integrity.authorship import IMPORT_SOURCE_PREFIX
from ..integrity.grants import session_policy_digest
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..narration import MAX_OPERATOR, operator_problem
from ..recorder import Recorder
from ..runs.projection import pass_over, resumable_sessions
from ..store.base import RUNNABLE_STATUSES, SessionRecord, Store
from .effects import effect_key
from .errors import DecidedByItsRuntime, InvalidOperator, NotPending
from .memory import waiting_query
from .records import APPROVAL_DECISION, GateKind, Verdict
from .rowcheck import session_may_wait, sessions_may_wait
from .state import KERNEL_SOURCE, Gate, KernelState, load_state

__all__ = [
    "IMPORT_SOURCE_PREFIX",
    "MAX_OPERATOR",
    "NO_SPEC_NOTE",
    "PendingCall",
    "abandoned_in_doubt",
    "abandoned_in_doubt_words",
    "approve",
    "check_operator",
    "continue_hint",
    "deny",
    "imported_transcript",
    "memory_waits",
    "operator_problem",
    "pending",
    "resume_command",
    "resume_hint",
    "resumed_by_its_app",
    "session_in_doubt",
    "tree_of",
    "waiting_calls",
]


def check_operator(name: str) -> str:
    """``name`` when it is a valid operator name (see :func:`operator_problem`).

    Raises:
        InvalidOperator: it is not; ``reason`` says why.
    """
    problem = operator_problem(name)
    if problem is not None:
        raise InvalidOperator(reason=problem)
    return name


@dataclass(frozen=True)
class PendingCall:
    """A call waiting for a human decision.

    Attributes:
        session_id: Its session.
        turn: Its turn.
        call_id: The model's call id (what ``approve``/``deny`` take).
        tool: Tool name.
        arguments: Repaired arguments as JSON text.
        reason: Why it waits (policy rule, or the in-doubt effect).
        kind: ``approval`` or ``effect_in_doubt``.
        decision: None while it waits for a decision; ``approved`` or ``denied`` once decided (the session
            then waits for a resume).
        decided_by: The operator name recorded with the decision (``approval_decision.responder``).
        parent_session_id: For a sub-agent's call (:mod:`flightlog.kernel.subagents`), the session that
            spawned it; None for a top-level run.
        root_session_id: For a sub-agent's call, the top of its run tree (the session to ``resume``); None
            for a top-level run (``to_wire`` then names the session itself).
        run_abandoned: An in-doubt call of a run nothing drives any more (killed or crashed mid-call:
            :func:`abandoned_in_doubt`): no gate is open yet, so ``approve``/``deny`` refuse it until a
            ``resume`` settles it (the tool's reconcile) or opens its gate.
        run_paused: An in-doubt call of a run ``flightlog abort`` stopped mid-call (paused, resumable:
            :func:`paused_in_doubt`): no gate is open either, and a ``resume`` settles it or opens its gate.
        paused_wait: A call of a run ``flightlog abort`` stopped while it waited (paused: the abort closed
            the wait, :meth:`~flightlog.kernel.state.KernelState.wait_closed`): its gate is still open, so
            ``approve``/``deny`` record a decision now (or it is one decided since the wait began), and
            ``flightlog resume`` continues the run (it waits again while a call is undecided).
    """

    session_id: str
    turn: int
    call_id: str
    tool: str
    arguments: str
    reason: str
    kind: GateKind
    decision: str | None = None
    decided_by: str | None = None
    parent_session_id: str | None = None
    root_session_id: str | None = None
    run_abandoned: bool = False
    run_paused: bool = False
    paused_wait: bool = False

    def to_wire(self) -> dict[str, object]:
        """JSON-ready dict (the CLI's ``pending --json`` rows)."""
        return {
            "session_id": self.session_id,
            "turn": self.turn,
            "call_id": self.call_id,
            "tool": self.tool,
            "arguments": self.arguments,
            "reason": self.reason,
            "kind": self.kind,
            "decision": self.decision,
            "decided_by": self.decided_by,
            "parent_session_id": self.parent_session_id,
            "root_session_id": self.root_session_id or self.session_id,
            "run_abandoned": self.run_abandoned,
            "run_paused": self.run_paused,
            "paused_wait": self.paused_wait,
        }


def pending(
    store: Store,
    session_id: str | None = None,
    *,
    decided: bool = False,
    undecodable: list[tuple[str, EventDecodeError]] | None = None,
    paused: bool = False,
) -> list[PendingCall]:
    """Calls waiting for a decision, across sessions or in one session, decided from each session's
    ledger (its events folded: :func:`~flightlog.kernel.state.load_state`), never from the ``sessions``
    row's status, which no hash covers (a row edited to ``completed`` hides no wait; ``flightlog verify``
    reports it as ``row_mismatch``, :mod:`flightlog.kernel.rowcheck`).

    Across sessions, a session whose row says ``suspended`` is folded; any other only when its stored
    events may hold a wait (:func:`~flightlog.kernel.rowcheck.sessions_may_wait`: the store's events holding
    the wait mark, then at most three rows decoded per session that ever suspended), so a store of
    finished runs is not folded. A wait an ``abort`` closed (the run paused: its gates stay open, ``approve``
    and ``deny`` decide them, ``flightlog resume`` continues it) is listed for its own ``session_id``, and
    across sessions with ``paused``; its rows have ``paused_wait`` set.

    Args:
        store: The store.
        session_id: One session (default: every session whose ledger waits).
        decided: Also list the calls of those sessions already decided in this suspension (waiting for a
            resume), with ``decision`` and ``decided_by`` set.
        undecodable: Across sessions, when given: a session whose stored events do not decode (a tampered
            or corrupt row) is added here as ``(session id, error naming the seq)`` and the other sessions
            are still listed; when None, that error propagates.
        paused: Across sessions, also list the waits an abort closed (``flightlog pending`` does; the
            dashboard's approvals queue, through :func:`waiting_calls`, does not).

    Returns:
        One entry per open gate (then, with ``decided``, per decided call), sessions oldest first, gates in
        request order.

    Raises:
        EventDecodeError: a stored event does not decode (names its seq), unless ``undecodable`` is given
            for a listing across sessions.
    """
    if session_id is not None:
        state = load_state(store, session_id)
        if state.phase != "suspended":
            return []
        gates = _calls(store, state, decided)
        return [replace(c, paused_wait=True) for c in gates] if state.wait_closed() else gates
    found: list[PendingCall] = []
    records = list(store.list_sessions())
    try:  # after the listing: a session that moved since is folded as it is now
        may: set[str] | None = sessions_may_wait(store)
    except EventDecodeError:
        if undecodable is None:
            raise
        may = None  # one session's rows do not decode: decide each session on its own, to name it
    for record in records:
        try:
            calls = waiting_calls(
                store,
                record,
                decided=decided,
                may_wait=None if may is None else record.session_id in may,
                closed=paused,
            )
        except EventDecodeError as exc:
            pass_over(undecodable, record.session_id, exc)
            continue
        found.extend(calls or ())
    return found


def waiting_calls(
    store: Store,
    record: SessionRecord,
    *,
    decided: bool = False,
    may_wait: bool | None = None,
    closed: bool = False,
) -> list[PendingCall] | None:
    """What :func:`pending` lists for one session across sessions, or None when its ledger holds no
    open wait (the dashboard's approvals queue asks this per session, so it lists what ``flightlog
    pending`` lists).

    The session is folded when its row says ``suspended`` or its stored events may hold a wait
    (:func:`~flightlog.kernel.rowcheck.session_may_wait`); never decided from the row alone. A wait an
    ``abort`` closed is None here unless ``closed`` (then its rows have ``paused_wait`` set).

    Args:
        store: The store.
        record: The session's row (``session_id``; ``status`` and ``head_seq`` only choose what is read).
        decided: Also list the calls already decided in this suspension (``decision``, ``decided_by``).
        may_wait: :func:`~flightlog.kernel.rowcheck.session_may_wait`'s answer when the caller has it
            (:func:`~flightlog.kernel.rowcheck.sessions_may_wait` for a whole store, read after
            ``record``); None: read it here.
        closed: Also answer a wait an ``abort`` closed (the run paused), ``paused_wait`` set on its rows.

    Returns:
        None (no open wait), else one entry per open gate (then, with ``decided``, per decided call),
        in request order; an empty list is a wait whose every gate is decided (it waits for a resume).

    Raises:
        SessionNotFound: the session is gone.
        EventDecodeError: a stored event does not decode (names its seq).
    """
    if record.status != "suspended" and not (
        session_may_wait(store, record) if may_wait is None else may_wait
    ):
        return None
    state = load_state(store, record.session_id)
    if state.phase != "suspended":
        return None
    if state.wait_closed():  # the run is paused: listed when asked for (``flightlog pending``)
        return (
            [replace(c, paused_wait=True) for c in _calls(store, state, decided, record)] if closed else None
        )
    return _calls(store, state, decided, record)


def _calls(
    store: Store, state: KernelState, decided: bool, record: SessionRecord | None = None
) -> list[PendingCall]:
    sid = state.session_id
    rows = [
        PendingCall(sid, gate.turn, gate.call_id, gate.tool, gate.arguments, gate.reason, gate.kind)
        for gate in state.gates.values()
    ]
    if decided:
        rows.extend(_decided(state))
    parent, root = tree_of(store, sid, record=record)
    if parent is not None:
        rows = [replace(row, parent_session_id=parent, root_session_id=root) for row in rows]
    return rows


ABANDONED_IN_DOUBT = (
    "effect_in_doubt: its run was killed or crashed mid-call (abandoned: nothing has driven it within the "
    "lease): the intent is recorded, no completion"
)
"""The ``reason`` of an :func:`abandoned_in_doubt` row."""


def abandoned_in_doubt(
    store: Store,
    *,
    undecodable: list[tuple[str, EventDecodeError]] | None = None,
    lease_ms: int | None = None,
) -> list[PendingCall]:
    """In-doubt calls of kernel runs that nothing drives any more, before any resume: a side effect whose
    ``external_effect_intent`` the ledger holds without its ``external_effect_completed``, in the run's
    current turn, its call still unanswered, in a run the read model finds abandoned
    (:func:`flightlog.live.list_run_views`: a state a process drives, and no heartbeat or event within the
    lease). A live run's call in flight is not listed: its tool is running. Each row has ``kind``
    ``effect_in_doubt`` and ``run_abandoned`` set: no gate is open, so a ``resume`` comes first (it settles
    the call with the tool's reconcile, or suspends the run on it for approve/deny).

    Args:
        store: The store.
        undecodable: A session whose stored events do not decode is added here (and passed over); None:
            the error propagates.
        lease_ms: The liveness lease (default :data:`flightlog.live.DEFAULT_LEASE_MS`).

    Returns:
        One row per such call, sessions in the read model's order, calls in plan order.

    Raises:
        EventDecodeError: a stored event does not decode and ``undecodable`` is None.
    """
    from ..live import DEFAULT_LEASE_MS, list_run_views

    views = list_run_views(
        store, abandoned_only=True, lease_ms=lease_ms or DEFAULT_LEASE_MS, undecodable=undecodable
    )
    rows: list[PendingCall] = []
    for sid in dict.fromkeys(view.snapshot.run_id for view in views):
        try:
            record = store.get_session(sid)
        except SessionNotFound:  # a run id that names no session (a fleet run)
            continue
        if record.source != KERNEL_SOURCE:
            continue
        try:
            state = load_state(store, sid)
        except EventDecodeError as exc:
            pass_over(undecodable, sid, exc)
            continue
        calls = _unfinished_effects(state)
        parent, root = tree_of(store, sid, record=record)
        rows.extend(
            replace(c, parent_session_id=parent, root_session_id=root) if parent else c for c in calls
        )
    return rows


PAUSED_IN_DOUBT = (
    "effect_in_doubt: its run was aborted mid-call (paused: `flightlog abort` fenced its writer off): the "
    "intent is recorded, no completion"
)
"""The ``reason`` of a :func:`paused_in_doubt` row."""


def paused_in_doubt(
    store: Store,
    *,
    records: Sequence[SessionRecord] | None = None,
    undecodable: list[tuple[str, EventDecodeError]] | None = None,
) -> list[PendingCall]:
    """In-doubt calls of kernel runs ``flightlog abort`` stopped mid-call (paused: the row says
    ``cancelled`` and the run has not ended, :func:`flightlog.runs.projection.resumable_sessions`, as
    ``ls`` and ``runs`` say ``paused``): a side effect whose ``external_effect_intent`` the ledger holds
    without its ``external_effect_completed``, in the run's current turn, its call unanswered (the same
    fold as :func:`abandoned_in_doubt`). Each row has ``kind`` ``effect_in_doubt``, ``reason``
    :data:`PAUSED_IN_DOUBT` and ``run_paused`` set: no gate is open, so a ``resume`` comes first (the tool's
    reconcile settles it, or the run stops on it for approve/deny).

    Args:
        store: The store.
        records: The sessions to look among (default: every session); only kernel ones are folded.
        undecodable: A session whose stored events do not decode is added here (and passed over); None:
            the error propagates.

    Returns:
        One row per such call, sessions in ``records``' order, calls in plan order.

    Raises:
        EventDecodeError: a stored event does not decode and ``undecodable`` is None.
    """
    from .state import KERNEL_SOURCE

    kernel = [r for r in (store.list_sessions() if records is None else records) if r.source == KERNEL_SOURCE]
    try:
        paused = resumable_sessions(store, kernel)
    except EventDecodeError:  # a stale projection folds them: decide each on its own, to name the one
        if undecodable is None:
            raise
        paused = set()
        for record in kernel:
            try:
                paused |= resumable_sessions(store, [record])
            except EventDecodeError as exc:
                pass_over(undecodable, record.session_id, exc)
    rows: list[PendingCall] = []
    for record in (r for r in kernel if r.session_id in paused):
        try:
            calls = _unfinished_effects(load_state(store, record.session_id))
        except EventDecodeError as exc:
            pass_over(undecodable, record.session_id, exc)
            continue
        parent, root = tree_of(store, record.session_id, record=record)
        rows.extend(
            replace(
                c,
                reason=PAUSED_IN_DOUBT,
                run_abandoned=False,
                run_paused=True,
                parent_session_id=parent,
                root_session_id=root if parent else None,
            )
            for c in calls
        )
    return rows


def abandoned_in_doubt_words(
    root_session_id: str, *, paused: bool = False, resume: str | None = None
) -> tuple[str, str]:
    """What an :func:`abandoned_in_doubt` call (``paused``: a :func:`paused_in_doubt` one) means and what
    to do, as ``pending`` and the dashboard's session page and approvals queue say it: ``(said, todo)``,
    ``said`` ending with :data:`~flightlog.kernel.execution.IN_DOUBT_WARNING`, ``todo`` naming ``resume``
    (default ``flightlog resume ROOT``, the run tree's root, which a resume drives; :func:`resume_command`
    gives it for a store: ``--spec`` for a run that recorded no agent spec) and what approve and deny do
    once it stops on the call."""
    from .execution import IN_DOUBT_WARNING

    how = "aborted mid-call (paused)" if paused else "killed mid-call"
    said = (
        f"its run was {how}: the effect started, no completion is recorded, and nothing "
        f"drives the run; {IN_DOUBT_WARNING}"
    )
    todo = (
        f"nothing to approve yet: `{resume or f'flightlog resume {root_session_id}'}` settles it (the tool's "
        "reconcile) or stops on it for a decision: approve runs it again, deny marks it failed"
    )
    return said, todo


NO_SPEC_NOTE = (
    "the run recorded no agent spec, as a run started from Python does: name its agent, or resume it from "
    "Python with Kernel(store, agent).resume_sync(session_id)"
)
"""Why :func:`resume_command` names ``--spec``: said after it wherever a hint names that command."""


def resume_command(store: Store, session_id: str) -> str:
    """The command that continues the kernel run ``session_id`` (give its run tree's root):
    ``flightlog resume SESSION``, or, when its ledger records no agent spec
    (:func:`flightlog.kernel.spec.records_spec`: a run started from Python), ``flightlog resume SESSION
    --spec MODULE:ATTR`` (without it ``resume`` refuses: :data:`NO_SPEC_NOTE` says why).

    Raises:
        SessionNotFound: no such session.
    """
    from .spec import records_spec

    if records_spec(store, session_id):
        return f"flightlog resume {session_id}"
    return f"flightlog resume {session_id} --spec MODULE:ATTR"


def session_in_doubt(store: Store, session_id: str) -> list[PendingCall]:
    """The current turn's calls of one kernel session whose effect intent has no completion (what
    :func:`abandoned_in_doubt` lists for it, without asking whether its run is abandoned: the caller knows),
    ``run_abandoned`` set; [] for a session of another source, a suspended or ended run.

    Raises:
        SessionNotFound: no such session.
        EventDecodeError: a stored event does not decode.
    """

    if store.get_session(session_id).source != KERNEL_SOURCE:
        return []
    return _unfinished_effects(load_state(store, session_id))


def _unfinished_effects(state: KernelState) -> list[PendingCall]:
    """The current turn's planned calls whose effect intent has no completion in ``state``'s ledger."""
    if state.phase in ("terminal", "suspended"):
        return []
    started = {key for key, effect in state.effects.effects.items() if not effect.completed}
    rows = []
    for plan in state.plans:
        if effect_key(state.session_id, state.turn, plan.call_id) not in started:
            continue
        arguments = (
            "" if plan.arguments is None else json.dumps(plan.arguments, sort_keys=True, ensure_ascii=False)
        )
        rows.append(
            PendingCall(
                state.session_id,
                state.turn,
                plan.call_id,
                plan.tool,
                arguments,
                ABANDONED_IN_DOUBT,
                "effect_in_doubt",
                run_abandoned=True,
            )
        )
    return rows


def tree_of(store: Store, session_id: str, *, record: SessionRecord | None = None) -> tuple[str | None, str]:
    """``(parent_session_id, root_session_id)`` of a session, following ``parent_session_id`` up (a
    sub-agent's parent is recorded on its session row; see :mod:`flightlog.kernel.subagents`). ``record``:
    the session's row when the caller has it (not read again).

    Raises:
        SessionNotFound: no such session.
    """
    parent = (record or store.get_session(session_id)).parent_session_id
    root, seen = session_id, {session_id}
    up = parent
    while up is not None and up not in seen:
        seen.add(up)
        root = up
        try:
            up = store.get_session(up).parent_session_id
        except SessionNotFound:
            break
    return parent, root


def _decided(state: KernelState) -> list[PendingCall]:
    """The calls decided since the wait the session is in began (its ``approval_decision`` records; a wait a
    resume re-opened after an abort began at its first ``suspended``: ``KernelState.current_wait``), with
    the gate each one closed (``tool_gated``: tool, turn, reason)."""
    wait = state.current_wait()
    if not wait:
        return []
    start = wait[0][0]
    gated = {e.call_id: e for _, e in state.events if isinstance(e, ToolGated)}
    plans = {plan.call_id: plan for plan in state.plans}
    rows = []
    for _, event in state.events[start:]:
        if not (isinstance(event, Custom) and event.custom_kind == APPROVAL_DECISION):
            continue
        payload = event.payload if isinstance(event.payload, dict) else {}
        verdict, turn = Verdict.from_wire(payload), int(payload.get("turn", state.turn))  # folded already
        gate = gated.get(verdict.call_id)
        plan = plans.get(verdict.call_id)
        arguments = ""
        if plan is not None and plan.arguments is not None:
            arguments = json.dumps(plan.arguments, sort_keys=True, ensure_ascii=False)
        rows.append(
            PendingCall(
                state.session_id,
                turn,
                verdict.call_id,
                gate.tool if gate is not None else (plan.tool if plan is not None else ""),
                arguments,
                gate.reason if gate is not None else "",
                verdict.gate,
                decision="approved" if verdict.approved else "denied",
                decided_by=verdict.responder,
            )
        )
    return rows


HUMAN = "user"
"""``permission_resolved.responder`` of every human decision (seed 000: ``"user" | "policy_gate"``)."""


LANGGRAPH_SOURCE = "langgraph"
"""``Session.source`` of a LangGraph thread (``flightlog.integrations.langgraph.SOURCE``; the kernel does not
import the integrations): its interrupts are answered in the graph, never by :func:`approve`/:func:`deny`."""

AGENTS_SDK_SOURCE = "openai-agents"
"""``Session.source`` of an OpenAI Agents SDK session (``flightlog.integrations.openai_agents.SOURCE``): a
decision recorded here is applied to the SDK's ``RunState`` by ``FlightlogSession.resume``."""


PYDANTIC_AI_SOURCE = "pydantic-ai"
"""``Session.source`` of a Pydantic AI history (``flightlog.integrations.pydantic_ai.SOURCE``): its app runs it."""

_RESUMED_BY_ITS_APP = {
    AGENTS_SDK_SOURCE: "FlightlogSession.resume(state) in the Agents SDK app",
    LANGGRAPH_SOURCE: "graph.invoke(Command(resume=...), config) in the LangGraph app",
    PYDANTIC_AI_SOURCE: "FlightlogHistory.run(agent, prompt) in the Pydantic AI app",
}


def resume_hint(source: str, session_id: str, *, fleet: bool = False) -> str:
    """How a session continues once its decisions are recorded, for the CLI and the dashboard: ``flightlog
    resume SESSION`` for the kernel's own runs, a fleet worker for a fleet run a worker may claim
    (``fleet``: see :func:`continue_hint`), the framework's call for an integration's session (its app
    resumes it: see :func:`resumed_by_its_app`)."""
    if fleet:
        return f"a fleet worker, which resumes {session_id} by itself (`flightlog worker` starts one)"
    return _RESUMED_BY_ITS_APP.get(source, f"flightlog resume {session_id}")


def continue_hint(store: Store, session_id: str) -> str:
    """:func:`resume_hint` for the run tree of ``session_id``: its root (:func:`tree_of`), which a resume
    drives. A fleet run (a lease row, :mod:`flightlog.fleet`) whose status a worker claims (``queued``,
    ``running``, ``suspended``: ``RUNNABLE_STATUSES``) is resumed by a worker once a decision lands in it
    or in a sub-agent (``Store.wake_lease``), so the hint names the worker; an aborted one (``cancelled``)
    no worker claims: ``flightlog resume`` (with ``--spec MODULE:ATTR`` and :data:`NO_SPEC_NOTE` for a
    kernel run whose ledger records no agent spec: :func:`resume_command`).

    Raises:
        SessionNotFound: no such session.
    """
    _, root = tree_of(store, session_id)
    session = store.get_session(root)
    fleet = session.status in RUNNABLE_STATUSES and store.get_lease(root) is not None
    if fleet or session.source != KERNEL_SOURCE:
        return resume_hint(session.source, root, fleet=fleet)
    command = resume_command(store, root)
    return command if command == f"flightlog resume {root}" else f"{command} ({NO_SPEC_NOTE})"


def resumed_by_its_app(source: str) -> bool:
    """Whether a session of ``source`` is an integration's (LangGraph, Agents SDK, Pydantic AI), which its
    framework runs and resumes: ``flightlog resume`` has no agent spec for it."""
    return source in _RESUMED_BY_ITS_APP


def imported_transcript(record: SessionRecord) -> str | None:
    """Why the kernel cannot resume ``record``'s session when it is an imported transcript, else None.

    An import (``flightlog import``/``watch``: source ``import:FORMAT``) records what another agent did, with
    that agent's ``run_started``/``run_terminal`` events; the kernel has no agent, grant or state of its own
    to continue it from, and must not append a kernel run to it. The reason names the format and the file
    it came from (the import's provenance: ``source_name`` in the session metadata)."""
    if not record.source.startswith(IMPORT_SOURCE_PREFIX):
        return None
    meta = record.metadata if isinstance(record.metadata, dict) else {}
    name = meta.get("source_name")
    origin = f" from {name}" if isinstance(name, str) and name else ""
    fmt = record.source[len(IMPORT_SOURCE_PREFIX) :] or "?"
    return (
        f"session {record.session_id} is an imported {fmt} transcript{origin} (source {record.source}), "
        "not a kernel run: the kernel cannot resume it"
    )


def approve(
    store: Store,
    session_id: str,
    call_id: str,
    *,
    responder: str = "user",
    notary: Notary | UserNotary | None = USER_NOTARY,
) -> Verdict:
    """Approve a gated call (for an in-doubt effect: allow running it again).

    Args:
        responder: The operator's name, recorded in ``approval_decision`` (rule: :func:`operator_problem`).
        notary: Signs the decision and supplies the keys and retained heads the full check trusts
            (default :data:`~flightlog.integrity.notary.USER_NOTARY`, the user's; None: unsigned, checked
            against the user's keys).

    Raises:
        InvalidOperator: ``responder`` breaks the operator-name rule (nothing is read or written).
        NotPending: the session is not suspended on ``call_id`` (unknown, or already decided).
        DecidedByItsRuntime: the session is a LangGraph thread (answered by ``Command(resume=...)``).
        SessionNotFound: no such session.
        LedgerIntegrityError: the session fails the full check (nothing is written).
    """
    return _decide(store, session_id, call_id, approved=True, responder=responder, reason=None, notary=notary)


def deny(
    store: Store,
    session_id: str,
    call_id: str,
    *,
    responder: str = "user",
    reason: str | None = None,
    notary: Notary | UserNotary | None = USER_NOTARY,
) -> Verdict:
    """Deny a gated call (for an in-doubt effect: mark it failed, never run it again).

    Args:
        responder: The operator's name, recorded in ``approval_decision`` (rule: :func:`operator_problem`).
        reason: Told to the model (default ``denied by <responder>``).
        notary: As for :func:`approve`.

    Raises:
        InvalidOperator: ``responder`` breaks the operator-name rule (nothing is read or written).
        NotPending: the session is not suspended on ``call_id`` (unknown, or already decided).
        DecidedByItsRuntime: the session is a LangGraph thread (answered by ``Command(resume=...)``).
        SessionNotFound: no such session.
        LedgerIntegrityError: the session fails the full check (nothing is written).
    """
    return _decide(
        store, session_id, call_id, approved=False, responder=responder, reason=reason, notary=notary
    )


def _open_gate(store: Store, state: KernelState, session_id: str, call_id: str) -> Gate:
    gate = state.gates.get(call_id) if state.phase == "suspended" else None
    if gate is None:
        verdict = state.verdict("approval", call_id) or state.verdict("effect_in_doubt", call_id)
        decided = None
        if verdict is not None:
            decided = f"{'approved' if verdict.approved else 'denied'} by {verdict.responder}"
        unsettled = decided is None and any(c.call_id == call_id for c in _unfinished_effects(state))
        resume = resume_command(store, tree_of(store, session_id)[1]) if unsettled else None
        raise NotPending(
            session_id=session_id, call_id=call_id, decided=decided, unsettled=unsettled, resume=resume
        )
    return gate


def _decide(
    store: Store,
    session_id: str,
    call_id: str,
    *,
    approved: bool,
    responder: str,
    reason: str | None,
    notary: Notary | UserNotary | None,
) -> Verdict:
    check_operator(responder)
    signer = resolve_notary(notary)
    require_intact(store, session_id, auditor=Auditor.for_notary(signer))  # before reading any gate
    source = store.get_session(session_id).source
    if source == LANGGRAPH_SOURCE:  # name the gate asked for, when one waits on it (read, nothing written)
        state = load_state(store, session_id)
        gate = state.gates.get(call_id) if state.phase == "suspended" else None
        waiting = None if gate is None else f"{gate.tool} {call_id}"
        answer_in = resume_hint(source, session_id)
        raise DecidedByItsRuntime(session_id=session_id, source=source, answer_in=answer_in, waiting=waiting)
    # Check the gate before attaching: attaching takes authority, which would fence a run still going.
    state = load_state(store, session_id)
    _open_gate(store, state, session_id, call_id)
    recorder = Recorder.attach(store, session_id, notary=signer)
    if recorder.next_seq != len(state.events):  # someone appended in between: decide on the new state
        state = load_state(store, session_id)
    gate = _open_gate(store, state, session_id, call_id)
    if not approved and reason is None:
        reason = denial_reason(responder)
    verdict = Verdict(call_id, gate.kind, approved, responder, reason)
    # Seed 000: responder is "user" for a human decision ("policy_gate" for automatic ones); the operator's
    # name goes into the approval_decision record beside it.
    events: list[Event] = [PermissionResolved(turn=gate.turn, approved=approved, responder=HUMAN)]
    if not approved:
        events.append(ToolDenied(turn=gate.turn, call_id=call_id, tool_name=gate.tool, reason=reason or ""))
    # a session running under a signed grant names it in the decision (policy_digest)
    events.append(verdict.to_event(gate.turn, policy_digest=session_policy_digest(store, session_id)))
    with recorder.atomic():
        recorder.append_many(events)
        recorder.checkpoint()  # no-op without a notary
        parent, root = tree_of(store, session_id)
        if parent is not None:  # a fleet worker parked the tree's root on its own head: wake it
            store.wake_lease(root)
    return verdict


def memory_waits(
    store: Store, undecodable: list[tuple[str, EventDecodeError]] | None = None
) -> list[tuple[str, int, str]]:
    """``(session_id, turn, query id)`` of every run waiting for an asynchronous memory retrieval, sessions in
    listing order: what ``flightlog pending`` adds after the calls waiting for a decision. Found as
    :func:`pending` finds waits (the sessions whose ledger may wait, folded; a wait
    an ``abort`` closed is left out).

    Args:
        store: The store.
        undecodable: When given, a session whose stored events do not decode is added here as ``(session id,
            error naming the seq)`` (unless already there) and the others are still listed; when None, that
            error propagates.

    Raises:
        EventDecodeError: a stored event of a folded session does not decode (names its seq), unless
            ``undecodable`` is given.
    """
    records = list(store.list_sessions())
    try:
        may: set[str] | None = sessions_may_wait(store)
    except EventDecodeError:
        if undecodable is None:
            raise
        may = None  # one session's rows do not decode: fold the sessions whose row says suspended
    found: list[tuple[str, int, str]] = []
    for record in records:
        sid = record.session_id
        if (sid not in may) if may is not None else record.status != "suspended":
            continue
        try:
            state = load_state(store, sid)
        except EventDecodeError as exc:
            if undecodable is None:
                raise
            if all(known != sid for known, _exc in undecodable):
                undecodable.append((sid, exc))
            continue
        query = waiting_query(state)
        if query is not None and not state.wait_closed():
            found.append((sid, state.turn, query))
    return found
