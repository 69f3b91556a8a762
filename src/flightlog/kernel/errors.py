"""Errors of the agent runtime.

::

    FlightlogError
    `-- KernelError
        +-- NotPending(LookupError)        session_id, call_id: no open gate for this call
        +-- InvalidOperator(ValueError)    reason: an operator name breaks the rule (approvals)
        +-- AgentSpecError(ValueError)     spec, reason: an agent spec cannot be loaded
        +-- CommandRefused(ValueError)     command, construct: not one plain command (kernel.shell)
        +-- SignalRefused                  session_id, reason: a signal to a finished run (kernel.attention)
        |   `-- NoSignalReader             source: no flightlog kernel runs the session, nothing reads it
        +-- AbortRefused                   session_id, source, reason: no flightlog kernel runs the session
                                           (kernel.abort), so an abort would stop nothing
        `-- OutsideCeiling(PermissionError) value, reason: a path or command outside the grant, found
                                           when the tool opens or runs it (kernel.confine)

``FatalToolError`` is not a flightlog error: tools raise it to say "this turn cannot go on", and the
kernel answers with a ``rollbacked(reason=FatalToolError)`` (see :mod:`flightlog.kernel.tools`).
"""

from __future__ import annotations

from ..errors import FlightlogError
from ..events import FATAL_RESULT_PREFIX

__all__ = [
    "FATAL_RESULT_PREFIX",
    "AbortRefused",
    "AgentSpecError",
    "CommandRefused",
    "DecidedByItsRuntime",
    "FatalToolError",
    "InvalidOperator",
    "KernelError",
    "NoSignalReader",
    "NotPending",
    "OutsideCeiling",
    "SignalRefused",
]


class KernelError(FlightlogError):
    """Base of the errors the kernel raises on purpose."""


class NotPending(KernelError, LookupError):
    """No gate of this session waits for a decision on ``call_id`` (never gated, or already decided)."""

    session_id: str
    call_id: str

    def __init__(
        self,
        *,
        session_id: str,
        call_id: str,
        decided: str | None = None,
        unsettled: bool = False,
        resume: str | None = None,
    ) -> None:
        """``decided``: how the call was already decided while its wait is still the current one (e.g.
        ``"approved by alice"``), said in the message; None when it was never gated or the run moved on.
        ``unsettled``: the call's effect has an intent and no completion and no gate is open (its run was
        killed or aborted mid-call, or is still running it): the message says a resume comes first, ``resume``
        (:func:`~flightlog.kernel.approvals.resume_command`: ``--spec MODULE:ATTR`` for a run that recorded
        no agent spec; default ``flightlog resume SESSION``)."""
        if decided:
            reason = f"call {call_id!r} was already {decided}; it no longer waits for a decision"
        elif unsettled:
            reason = (
                f"call {call_id!r} is in doubt (its effect started, no completion is recorded) but no gate is "
                f"open yet: if its run was killed or aborted, `{resume or f'flightlog resume {session_id}'}` settles it or "
                "stops on it for approve/deny"
            )
        else:
            reason = f"no call {call_id!r} is waiting for a decision"
        super().__init__(f"session {session_id}: {reason}", session_id=session_id, call_id=call_id)


class DecidedByItsRuntime(KernelError, ValueError):
    """The session's gates belong to another runtime that flightlog records but does not drive: a LangGraph
    thread's ``interrupt()`` is answered by ``Command(resume=...)`` in the graph, which the saver records with
    who answered (:mod:`flightlog.integrations.langgraph`). A decision appended here would never reach the
    graph, so none is written."""

    session_id: str
    source: str
    waiting: str | None
    answer_in: str

    def __init__(self, *, session_id: str, source: str, answer_in: str, waiting: str | None = None) -> None:
        """``answer_in``: the call that answers it, as ``pending --json`` gives it
        (:func:`~flightlog.kernel.approvals.resume_hint`: ``graph.invoke(Command(resume=...), config) in the
        LangGraph app``); ``waiting``: the gate named, ``"<tool> <call id>"``, when one waits on the call
        asked for."""
        there = f"; {waiting} waits there" if waiting else ""
        super().__init__(
            f"session {session_id} is a LangGraph thread: answer its interrupt with {answer_in} "
            f"(the saver records the answer and who gave it){there}; nothing was written",
            session_id=session_id,
            source=source,
            waiting=waiting,
            answer_in=answer_in,
        )


class InvalidOperator(KernelError, ValueError):
    """An operator name (``approve --as NAME``) breaks the rule of
    :func:`flightlog.kernel.approvals.operator_problem`; ``reason`` says how (never echoes the raw name)."""

    reason: str

    def __init__(self, *, reason: str) -> None:
        super().__init__(f"operator name: {reason}", reason=reason)


class AgentSpecError(KernelError, ValueError):
    """An agent spec (``module:attribute`` or a TOML file) cannot be loaded; ``reason`` says why."""

    spec: str
    reason: str

    def __init__(self, *, spec: str, reason: str) -> None:
        super().__init__(f"agent spec {spec!r}: {reason}", spec=spec, reason=reason)


class CommandRefused(KernelError, ValueError):
    """A shell command string is not one plain command of literal words (:mod:`flightlog.kernel.shell`).

    ``construct`` names the first shell construct found: "a redirection (>, >>, <, 2>, &>, >&)", "a
    parameter expansion ($VAR)", "command chaining (&&, ||)", ...
    """

    command: str
    construct: str

    def __init__(self, *, command: str, construct: str) -> None:
        super().__init__(
            f"command {command!r}: {construct} is refused (only one plain command of literal words runs)",
            command=command,
            construct=construct,
        )


class SignalRefused(KernelError):
    """A signal cannot be queued for this session: its run has finished, it is not a kernel run, or the
    text is empty (:func:`flightlog.kernel.attention.send_signal`)."""

    session_id: str
    reason: str

    def __init__(self, *, session_id: str, reason: str) -> None:
        super().__init__(
            f"session {session_id}: signal refused: {reason}", session_id=session_id, reason=reason
        )


class NoSignalReader(SignalRefused):
    """A signal to a session no flightlog kernel runs (an integration's, whose framework runs it; an
    imported transcript; anything else not of source ``kernel``): the kernel is the only runtime that reads
    the signal queue, at its turn boundaries, so a queued signal would never be delivered. ``reason`` says
    what the session is and what works instead (for a LangGraph thread, the graph's own interrupt and
    ``Command`` API); the CLI reports it as a usage mistake (exit 2), as ``resume`` of such a session."""

    source: str

    def __init__(self, *, session_id: str, source: str, reason: str) -> None:
        FlightlogError.__init__(
            self,
            f"session {session_id}: signal refused: {reason}",
            session_id=session_id,
            reason=reason,
            source=source,
        )


class AbortRefused(KernelError):
    """An abort of a session no flightlog kernel runs (an integration's, whose app runs it; an imported
    transcript; anything else not of source ``kernel``): its writer takes no notice of the kernel's fence
    and nothing reads the ``operation_cancelled`` an abort records, so nothing would stop; raised only once
    the session passed the full check (a tampered one is refused as tampered, whatever its row's source);
    nothing is written and the authority epoch is not bumped, unless a writer kept the session busy
    through the first check (:func:`flightlog.kernel.abort.abort`). ``reason`` says
    what the session is and what works instead (:func:`flightlog.kernel.abort.no_abort_target`); the CLI
    reports it as a usage mistake (exit 2), as a signal to such a session."""

    session_id: str
    source: str
    reason: str

    def __init__(self, *, session_id: str, source: str, reason: str) -> None:
        super().__init__(
            f"session {session_id}: abort refused: {reason}",
            session_id=session_id,
            source=source,
            reason=reason,
        )


class OutsideCeiling(KernelError, PermissionError):
    """A path or command a tool was about to open or run lies outside the session's grant.

    Raised by :mod:`flightlog.kernel.confine` at the moment of use (a symlink leading out, a component
    swapped while opening, a command outside ``command_prefixes``); nothing was opened or run.
    """

    value: str
    reason: str

    def __init__(self, *, value: str, reason: str) -> None:
        super().__init__(f"{value!r}: {reason}", value=value, reason=reason)


class FatalToolError(Exception):
    """Raised by a tool when the turn cannot go on (corrupt state, lost invariant, broken environment).

    The kernel stops executing the turn's remaining calls, records
    ``rollbacked(reason=FatalToolError(tool_name, error))`` (history back to the turn's checkpoint) and
    then retries the turn, telling the model ``The previous step failed (`<tool>`: <error>). Please try a
    different approach.`` (a ``kernel_note``), or ends the run, per ``Agent.on_fatal_tool_error``. A turn in which a
    ``side_effect`` call already completed is not rolled back (that would hide a done effect from the model,
    whose retry would do it again): it is committed with the fatal call's result
    ``FatalToolError: <error>`` (each concurrent call that raised one: its own) and ``not executed``
    results for the calls it stopped before they started
    (:mod:`flightlog.kernel.execution`). Any other exception a tool raises becomes an ``is_error`` tool
    result the model sees.
    """
