"""``FlightlogHistory``: a Pydantic AI agent's message history kept as a readable, signed flightlog ledger.

Install with ``pip install -e '.[pydantic-ai]'`` in a clone (``pip install 'flightlog[pydantic-ai]'`` once
flightlog is published). Usage::

    from pydantic_ai import Agent
    from flightlog.integrations.pydantic_ai import FlightlogHistory

    history = FlightlogHistory("user-42", "agent.db")          # a path, a URL or an open Store
    result = history.run_sync(Agent("openai:gpt-4o"), "Hello")  # runs on the recorded history, records the new
    later = history.run_sync(agent, "And then?")                # continues from the ledger, in any process

Pydantic AI's public extension points are its message history (``Agent.run(message_history=...)``,
``result.new_messages()``) and its ``ModelMessagesTypeAdapter``: :meth:`FlightlogHistory.record` appends
messages, :meth:`FlightlogHistory.messages` loads them back, validated by that adapter, and
:meth:`FlightlogHistory.run` / :meth:`FlightlogHistory.run_sync` do both around ``agent.run``.

Ledger layout (one flightlog session per history, id ``pydantic-ai:<session_id>``, source ``pydantic-ai``):
each message is recorded as the seed's readable events, so ``flightlog show`` and ``replay`` make sense of it,
plus, for requests, the exact Pydantic AI form:

* ``ModelRequest``: ``run_started`` (``goal`` = the user prompt's text, ``system_prompt`` = the system prompt
  parts or instructions) when it carries a user prompt; ``tool_completed`` with one result per
  ``ToolReturnPart`` / ``RetryPromptPart`` (the latter ``is_error``); then ``custom`` ``pydantic_ai.request``
  ``{"message": <the message as ModelMessagesTypeAdapter dumps it to JSON>}``.
* ``ModelResponse``: ``llm_completed`` (turn n, the text, thinking and tool calls as a flightlog message;
  ``provider_replay`` = ``{"protocol": "pydantic_ai", "provider", "model", "native_message": <the message as
  JSON>}``), ``custom`` ``model_usage`` (``turn``, ``model``, ``protocol``, ``input_tokens``,
  ``output_tokens``, ``total_tokens``; tokens) and, when it calls tools, ``tool_requested``.

A run through :meth:`FlightlogHistory.run` / :meth:`FlightlogHistory.run_sync` ends with ``run_terminal``
(``reason`` ``"completed"``, the run's responses as ``turns_used``, its input + output tokens as
``total_tokens``) and the session's status ``completed`` (``running`` again when a later record starts a
run), so ``flightlog runs`` and ``ls`` show it ended rather than running forever.

Loading folds the ``native_message`` of each ``llm_completed`` and the ``message`` of each
``pydantic_ai.request`` in seq order; the readable events are derived from them, never read back. Every
message of one :meth:`record` call is appended in one transaction, and with a notary a checkpoint over every
event is signed in it (a run's messages are recorded once, when it ends: that is when the history stops, as
``FlightlogSaver`` signs when a graph stops), so a history is signed with fewer than the cadence's events and
a re-chained ledger is refused by the next attach, not only by an audit.

Reading and writing verify first: the first write attaches a :class:`~flightlog.recorder.Recorder` (recomputing
the chain, and with the default notary the signatures and retained head; ``LedgerIntegrityError`` names the
first diverging seq), which takes authority over the session (bumps its epoch). A read before it
(:meth:`FlightlogHistory.messages`) verifies the same way but writes nothing, epoch included, and verifies
again only when the session's head moved. Several processes may write one history: a write that finds the session moved on (its
head or authority epoch changed) re-attaches before appending, and the store refuses an append that would
fork the chain.
"""

from __future__ import annotations

import asyncio
import functools
import os
import threading
import uuid
from collections.abc import Sequence
from typing import Any

from ..errors import install_hint

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        SystemPromptPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.messages import TextPart as PaiText
    from pydantic_ai.messages import ThinkingPart as PaiThinking
    from pydantic_ai.messages import ToolCallPart as PaiToolCall
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without Pydantic AI
    raise ImportError(
        f"flightlog.integrations.pydantic_ai needs Pydantic AI: {install_hint('pydantic-ai')}"
    ) from exc

from ..errors import SessionNotFound
from ..events import (
    Custom,
    Event,
    LlmCompleted,
    ProviderReplay,
    RunStarted,
    RunTerminal,
    ToolCompleted,
    ToolRequested,
)
from ..integrity.notary import USER_NOTARY, Notary, UserNotary, resolve_notary
from ..messages import ContentPart, Message, TextPart, ThinkingPart, ToolCall, ToolResult
from ..recorder import Recorder
from ..sessions import iter_events
from ..store.base import Store, StoredEvent
from ._stores import StoreHandle, read_view, still_current

__all__ = ["PROTOCOL", "REQUEST_KIND", "SESSION_PREFIX", "SOURCE", "FlightlogHistory", "session_id_for"]

SESSION_PREFIX = "pydantic-ai:"
"""Prefix of the flightlog session id; ``flightlog show <session_id>`` finds it after the colon."""
SOURCE = "pydantic-ai"
"""The ``source`` of the flightlog session row."""
PROTOCOL = "pydantic_ai"
"""``provider_replay.protocol`` of the ``llm_completed`` events: ``native_message`` is a Pydantic AI message."""
REQUEST_KIND = "pydantic_ai.request"
"""``custom_kind`` of the event holding a ``ModelRequest`` as JSON: ``{"message": ...}``."""
USAGE_KIND = "model_usage"
"""The kernel's usage record kind (``flightlog.kernel.budgets``), so usage reads the same everywhere."""


def session_id_for(session_id: str) -> str:
    """The flightlog session id holding the history ``session_id``: ``pydantic-ai:<session_id>``."""
    return SESSION_PREFIX + session_id


def _native(message: ModelMessage) -> Any:
    """The message as ``ModelMessagesTypeAdapter`` dumps it to JSON-compatible Python."""
    return ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]


def _prompt_text(part: UserPromptPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "\n".join(item for item in part.content if isinstance(item, str))


def _request_events(message: ModelRequest, turn: int) -> list[Event]:
    """The readable events of a request, then its exact form (module docstring)."""
    events: list[Event] = []
    prompts = [_prompt_text(p) for p in message.parts if isinstance(p, UserPromptPart)]
    system = [p.content for p in message.parts if isinstance(p, SystemPromptPart)]
    instructions = getattr(message, "instructions", None)
    results = [
        ToolResult(
            call_id=p.tool_call_id,
            output=p.model_response_str() if isinstance(p, ToolReturnPart) else p.model_response(),
            is_error=isinstance(p, RetryPromptPart),
        )
        for p in message.parts
        if isinstance(p, ToolReturnPart) or (isinstance(p, RetryPromptPart) and p.tool_name)
    ]
    if results:
        events.append(ToolCompleted(turn=turn, results=results))
    if prompts:
        prompt_system = "\n\n".join(system) or instructions or None
        events.append(
            RunStarted(run_id=uuid.uuid4().hex, goal="\n\n".join(prompts), system_prompt=prompt_system)
        )
    events.append(Custom(custom_kind=REQUEST_KIND, payload={"message": _native(message)}))
    return events


def _response_events(message: ModelResponse, turn: int) -> list[Event]:
    """``llm_completed``, ``model_usage`` and, when it calls tools, ``tool_requested``."""
    content: list[ContentPart] = []
    calls: list[ToolCall] = []
    for part in message.parts:
        if isinstance(part, PaiText):
            content.append(TextPart(text=part.content))
        elif isinstance(part, PaiThinking):
            content.append(ThinkingPart(thinking=part.content, signature=part.signature))
        elif isinstance(part, PaiToolCall):
            calls.append(
                ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_json_str())
            )
    provider = getattr(message, "provider_name", None)
    replay = ProviderReplay(
        protocol=PROTOCOL, provider=provider, model=message.model_name, native_message=_native(message)
    )
    events: list[Event] = [
        LlmCompleted(
            turn=turn,
            message=Message(role="assistant", content=content, tool_calls=calls),
            provider_replay=replay,
        )
    ]
    tokens_in, tokens_out = _tokens(message.usage)
    usage_payload = {
        "turn": turn,
        "model": message.model_name,
        "protocol": PROTOCOL,
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
    }
    events.append(Custom(custom_kind=USAGE_KIND, payload=usage_payload))
    if calls:
        events.append(ToolRequested(turn=turn, calls=calls))
    return events


def _tokens(usage: Any) -> tuple[int, int]:
    """(input, output) tokens of a response's usage, under Pydantic AI's current or older field names."""
    tokens_in = int(getattr(usage, "input_tokens", None) or getattr(usage, "request_tokens", 0) or 0)
    tokens_out = int(getattr(usage, "output_tokens", None) or getattr(usage, "response_tokens", 0) or 0)
    return tokens_in, tokens_out


def _run_terminal(messages: Sequence[ModelMessage]) -> RunTerminal:
    """The end of the run whose new messages are ``messages``: its responses and their tokens."""
    responses = [m for m in messages if isinstance(m, ModelResponse)]
    return RunTerminal(
        reason="completed",
        turns_used=len(responses),
        total_tokens=sum(sum(_tokens(m.usage)) for m in responses),
    )


class FlightlogHistory:
    """A Pydantic AI message history stored as a hash-chained, signed flightlog session.

    Args:
        session_id: Any string; the ledger session is ``pydantic-ai:<session_id>``.
        store: An open :class:`~flightlog.store.base.Store` (left open by :meth:`close`), or a path or URL for
            :func:`flightlog.open_store`, opened on first use and closed by :meth:`close`.
        notary: Sign checkpoints and verify them on attach. Default
            :data:`~flightlog.integrity.notary.USER_NOTARY`: the user's log key, as ``flightlog run`` signs; None
            keeps an unsigned chain.

    Thread-safe (one lock). Errors beyond those named on each method: ``LedgerIntegrityError`` (the stored
    chain, a signature or the retained head diverges; names the seq), ``StoreUnavailable``.
    """

    def __init__(
        self,
        session_id: str,
        store: Store | str | os.PathLike[str],
        *,
        notary: Notary | UserNotary | None = USER_NOTARY,
    ) -> None:
        self.session_id = session_id
        self.ledger_session_id = session_id_for(session_id)
        self._stores = StoreHandle(store)
        self._notary = resolve_notary(notary)
        self._lock = threading.Lock()
        self._recorder: Recorder | None = None  # the writer, attached by the first write
        self._view: Recorder | None = None  # what reads before it verified (integrations._stores.read_view)

    # ─── Pydantic AI's history ───────────────────────────────────────────────────────────────
    def messages(self) -> list[ModelMessage]:
        """The recorded messages, oldest first, as ``ModelMessagesTypeAdapter`` validates them (pass them as
        ``agent.run(..., message_history=...)``); [] for a history never written."""
        with self._lock:
            rec = self._viewed()
            if rec is None:
                return []
            native: list[Any] = []
            for _row, event in iter_events(rec.store, self.ledger_session_id, stop=rec.next_seq):
                if isinstance(event, LlmCompleted) and event.provider_replay is not None:
                    if event.provider_replay.protocol == PROTOCOL:
                        native.append(event.provider_replay.native_message)
                elif isinstance(event, Custom) and event.custom_kind == REQUEST_KIND:
                    native.append(event.payload["message"])
            return list(ModelMessagesTypeAdapter.validate_python(native))

    def record(self, messages: Sequence[ModelMessage]) -> list[StoredEvent]:
        """Append ``messages`` (e.g. ``result.new_messages()``) in one transaction, with a notary signing a
        checkpoint over every event in the same transaction; returns the rows written.

        Raises:
            EncodingError: a message is not representable as RFC 8785 JSON (names the field); nothing written.
        """
        return self._record(messages, end_run=False)

    def _record(self, messages: Sequence[ModelMessage], *, end_run: bool) -> list[StoredEvent]:
        """:meth:`record`; ``end_run`` adds the ``run_terminal`` of the run whose new messages these are."""
        if not messages:
            return []
        with self._lock:
            store = self._open_store()
            try:
                with store.transaction():
                    rec = self._attached(create=True)
                    assert rec is not None
                    turn = self._turns(rec)
                    events: list[Event] = []
                    for message in messages:
                        if isinstance(message, ModelResponse):
                            turn += 1
                            events += _response_events(message, turn)
                        else:
                            events += _request_events(message, turn)
                    if end_run:
                        events.append(_run_terminal(messages))
                    rows = rec.append_many(events)
                    if end_run or any(isinstance(e, RunStarted) for e in events):
                        store.set_session_status(
                            self.ledger_session_id, "completed" if end_run else "running"
                        )
                    rec.checkpoint()  # no-op without a notary
                    return rows
            except BaseException:
                self._recorder = None  # a session row or attach made in the block rolled back with it
                raise

    async def run(self, agent: Any, user_prompt: Any = None, **kwargs: Any) -> Any:
        """``await agent.run(user_prompt, message_history=<recorded>, **kwargs)``, then record its new
        messages and the run's end (``run_terminal``); returns the run's result. Store work runs in a worker
        thread."""
        history = await asyncio.to_thread(self.messages)
        result = await agent.run(user_prompt, message_history=history or None, **kwargs)
        await asyncio.to_thread(functools.partial(self._record, result.new_messages(), end_run=True))
        return result

    def run_sync(self, agent: Any, user_prompt: Any = None, **kwargs: Any) -> Any:
        """:meth:`run` for synchronous code, in a new event loop that is closed after (``asyncio.run``;
        ``agent.run_sync`` leaves its loop open). Not from inside a running event loop."""
        return asyncio.run(self.run(agent, user_prompt, **kwargs))

    def close(self) -> None:
        """Closes the store when this object opened it. Idempotent."""
        with self._lock:
            self._stores.close()
            self._recorder = self._view = None

    # ─── internals (self._lock held) ──────────────────────────────────────────────────────────
    def _open_store(self) -> Store:
        return self._stores.get()

    def _viewed(self) -> Recorder | None:
        """What a read folds: the writer when nobody moved the session on since it attached, else the
        session verified again for reading (:func:`~flightlog.integrations._stores.read_view`: no epoch
        bump, nothing written; kept while the session's head stays); None when it was never written."""
        store = self._open_store()
        for rec in (self._recorder, self._view):
            if rec is not None and still_current(store, rec):
                return rec
        self._view = read_view(store, self.ledger_session_id, self._notary)
        return self._view

    def _attached(self, *, create: bool = False) -> Recorder | None:
        """The recorder, (re-)attached when another writer moved the session on; None when it does not exist
        (created, with its session row, when ``create``)."""
        store = self._open_store()
        rec = self._recorder
        if rec is not None:
            head = store.get_session(self.ledger_session_id).head_seq + 1
            if head == rec.next_seq and store.authority_epoch(self.ledger_session_id) == rec.epoch:
                return rec
        try:
            rec = Recorder.attach(store, self.ledger_session_id, notary=self._notary)
        except SessionNotFound:
            if not create:
                return None
            rec = Recorder.create(
                store,
                session_id=self.ledger_session_id,
                task=f"Pydantic AI history {self.session_id}",
                source=SOURCE,
                metadata={"session_id": self.session_id},
                notary=self._notary,
            )
        self._recorder = rec
        return rec

    def _turns(self, rec: Recorder) -> int:
        """How many responses are recorded (the turn of the last one)."""
        turns = 0
        for _row, event in iter_events(rec.store, self.ledger_session_id, stop=rec.next_seq):
            if isinstance(event, LlmCompleted):
                turns = max(turns, event.turn)
        return turns
