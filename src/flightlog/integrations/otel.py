"""OpenTelemetry export: any flightlog session as GenAI semantic-convention spans.

Install with ``pip install -e '.[otel]'`` in a clone (``pip install 'flightlog[otel]'`` once flightlog is
published; ``opentelemetry-sdk`` and the OTLP/HTTP exporter). Usage::

    from flightlog import open_store
    from flightlog.integrations.otel import export_otlp

    with open_store("agent.db") as store:
        export_otlp(store, "3f2a...", "http://localhost:4318")      # an OTLP/HTTP receiver

or ``flightlog export SESSION --otlp http://localhost:4318``; for spans as a kernel run goes, pass
``Kernel(store, agent, on_event=LiveExporter(exporter))``.

Spans (OpenTelemetry GenAI semantic conventions, ``gen_ai.*`` attributes; names as the conventions give them):

* ``invoke_agent [<agent>]``, one per activation of the session (from its first event, or a ``resumed``, to
  its ``run_terminal`` or ``suspended``, or its last event): ``gen_ai.operation.name`` ``invoke_agent``,
  ``gen_ai.conversation.id`` = the flightlog session id, ``gen_ai.agent.name`` (``run_started.agent_id``)
  when recorded, ``gen_ai.provider.name`` and ``gen_ai.request.model`` of its first model call.
* ``chat <model>``, one per ``llm_completed``, a child of its activation's span: from the event before it
  (the turn's ``checkpoint_taken``, written just before the model call) to the ``llm_completed`` row;
  ``gen_ai.provider.name`` (the provider replay's ``provider``, else the protocol's first word, e.g.
  ``openai`` of ``openai.responses``), ``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` /
  ``gen_ai.usage.output_tokens`` from the ``model_usage`` record written with it (tokens).
* ``execute_tool <tool>``, one per tool call that got a result, a child of the activation in which the result
  arrived: from its ``tool_requested`` row to its ``tool_completed`` (or ``tool_denied``) row;
  ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.type`` ``function``; an error result sets the
  span status to ERROR and ``error.type`` ``tool_error`` (``tool_denied``: ``denied``).

Times are the rows' ``recorded_at_ms`` (epoch ms, sent as ns), so an export made later shows when things
happened. Imported transcripts carry their import time there. Message content is sent only with
``capture_content=True``, as the conventions ask (content is opt-in): on ``chat`` spans
``gen_ai.input.messages`` (the history the model was sent, as :class:`flightlog.replay.Rebuilder` folds it
up to that call: compactions and rollbacks applied), ``gen_ai.output.messages`` (its answer) and
``gen_ai.system_instructions`` (``run_started.system_prompt``), each JSON text in the conventions' message
schema (``[{"role", "parts": [{"type": "text" | "reasoning" | "tool_call" | "tool_call_response", ...}]}]``);
on ``execute_tool`` spans ``gen_ai.tool.call.arguments`` and ``gen_ai.tool.call.result``. Every span also carries ``flightlog.seq``: the seq of the event that
ended it.

Source: OpenTelemetry semantic conventions for generative AI (``gen-ai-spans.md``, ``gen-ai-agent-spans.md``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..errors import install_hint

try:
    import requests  # the OTLP/HTTP exporter's HTTP client (a dependency of opentelemetry-exporter-otlp-proto-http)
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import Span, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the SDK
    raise ImportError(
        f"flightlog.integrations.otel needs the OpenTelemetry SDK: {install_hint('otel')}"
    ) from exc

from ..errors import ExportFailed, LedgerIntegrityError
from ..events import (
    Custom,
    LlmCompleted,
    Resumed,
    RunStarted,
    RunTerminal,
    SessionEvent,
    Suspended,
    ToolCompleted,
    ToolDenied,
    ToolRequested,
)
from ..messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from ..recorder import verify_session
from ..replay import Rebuilder
from ..sessions import iter_events
from ..store.base import Store, StoredEvent

__all__ = ["LiveExporter", "SpanBuilder", "export_otlp", "export_session", "otlp_exporter"]

_MS = 1_000_000
"""Nanoseconds per millisecond (OpenTelemetry times are epoch ns)."""
_TRACER = "flightlog"
_OTLP_LOGGER = "opentelemetry.exporter.otlp.proto.http.trace_exporter"  # the OTLP/HTTP span exporter's logger
log = logging.getLogger(__name__)


def _provider_name(protocol: str | None, provider: str | None) -> str | None:
    """``gen_ai.provider.name``: the recorded provider, else the protocol's first word (``openai.chat``)."""
    if provider:
        return provider
    return protocol.split(".", 1)[0] if protocol else None


def _parts(message: Message) -> list[dict[str, Any]]:
    """A message's parts in the conventions' message schema: ``text``, ``reasoning``, ``tool_call``
    (``id``, ``name``, ``arguments``) and ``tool_call_response`` (``id``, ``response``); images are left out
    (their bytes are not in the event, only a reference)."""
    parts: list[dict[str, Any]] = []
    for part in message.content:
        if isinstance(part, TextPart):
            parts.append({"type": "text", "content": part.text})
        elif isinstance(part, ThinkingPart):
            parts.append({"type": "reasoning", "content": part.thinking})
        elif isinstance(part, ToolCallPart):
            parts.append({"type": "tool_call", "id": part.id, "name": part.name, "arguments": part.arguments})
        elif isinstance(part, ToolResultPart):
            parts.append({"type": "tool_call_response", "id": part.call_id, "response": part.output})
    for call in message.tool_calls:
        parts.append({"type": "tool_call", "id": call.id, "name": call.name, "arguments": call.arguments})
    return parts


def _messages(messages: list[Message]) -> str:
    """``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON text): ``[{"role", "parts"}]``."""
    return json.dumps([{"role": m.role, "parts": _parts(m)} for m in messages], ensure_ascii=False)


def _output_messages(message: Message) -> str:
    """``gen_ai.output.messages`` (JSON text): the one assistant message."""
    return _messages([message])


@dataclass
class _Chat:
    """A model call whose span waits for its ``model_usage`` (written in the same transaction)."""

    start_ms: int
    end_ms: int
    seq: int
    turn: int
    attributes: dict[str, Any]


@dataclass
class SpanBuilder:
    """Fold a session's events, in seq order, into spans on ``tracer`` (module docstring: the mapping).

    Feed every row with :meth:`feed` (a recorder subscriber's signature), then call :meth:`finish`. Spans
    are ended as soon as what ends them is fed, so a live feed exports them as the run goes.

    Args:
        tracer: Where spans are started (an SDK tracer; its processors export them).
        capture_content: Also record message text, tool arguments and results (opt-in).
    """

    tracer: trace.Tracer
    capture_content: bool = False
    _root: Span | None = None
    _root_ms: int = 0
    _last_ms: int = 0
    _last_seq: int = -1
    _agent: str | None = None
    _chat: _Chat | None = None
    _calls: dict[str, tuple[int, str, str]] = field(default_factory=dict)  # call_id -> (ms, name, args)
    _root_keys: set[str] = field(default_factory=set)
    _session_id: str = ""
    _children: int = 0
    _history: Rebuilder = field(default_factory=Rebuilder)  # the model's input so far (content only)
    _system: str | None = None
    spans: int = 0

    def feed(self, row: StoredEvent, event: SessionEvent) -> None:
        """Fold one durable row and its decoded event."""
        ms = row.recorded_at_ms
        if self._chat is not None and not _is_usage(event, self._chat.turn):
            self._end_chat({})
        if isinstance(event, RunStarted):
            self._agent, self._system = event.agent_id, event.system_prompt
        if self._last_seq < 0 or (isinstance(event, RunStarted | Resumed) and not self._empty_root()):
            self._open_root(row)  # an activation starts; events after its end open none by themselves
        elif isinstance(event, RunStarted) and self._root is not None and self._agent:
            self._root.update_name(f"invoke_agent {self._agent}")  # the preamble before run_started
            self._root.set_attribute("gen_ai.agent.name", self._agent)
        self._fold(row, event, ms)
        if self.capture_content:
            self._history.feed(row.seq, event)
        self._last_ms, self._last_seq = ms, row.seq
        if isinstance(event, RunTerminal | Suspended) and self._root is not None:
            if isinstance(event, RunTerminal):
                self._root.set_attribute("flightlog.run.reason", event.reason)
            self._end_root(ms, row.seq)

    def finish(self) -> int:
        """End what is still open at the last event fed; returns the number of spans made."""
        if self._chat is not None:
            self._end_chat({})
        if self._root is not None:
            self._end_root(self._last_ms, self._last_seq)
        return self.spans

    # ─── one mapper per event kind ─────────────────────────────────────────────────────────
    def _fold(self, row: StoredEvent, event: SessionEvent, ms: int) -> None:
        if isinstance(event, LlmCompleted):
            self._on_llm(row, event)
        elif isinstance(event, Custom) and self._chat is not None and _is_usage(event, self._chat.turn):
            self._on_usage(event.payload)
        elif isinstance(event, ToolRequested):
            for call in event.calls:
                self._calls[call.id] = (ms, call.name, call.arguments)
        elif isinstance(event, ToolCompleted):
            for result in event.results:
                error = "tool_error" if result.is_error else None
                self._tool_span(result.call_id, ms, row.seq, error, result.output)
        elif isinstance(event, ToolDenied):
            self._tool_span(event.call_id, ms, row.seq, "denied", None)

    def _on_llm(self, row: StoredEvent, event: LlmCompleted) -> None:
        replay = event.provider_replay
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        provider = _provider_name(replay.protocol, replay.provider) if replay else None
        if provider:
            attributes["gen_ai.provider.name"] = provider
        if replay and replay.model:
            attributes["gen_ai.request.model"] = replay.model
        if self.capture_content:
            attributes["gen_ai.input.messages"] = _messages(self._history.messages())
            attributes["gen_ai.output.messages"] = _output_messages(event.message)
            if self._system:
                attributes["gen_ai.system_instructions"] = json.dumps(
                    [{"type": "text", "content": self._system}], ensure_ascii=False
                )
        start = self._last_ms if self._last_seq >= 0 else row.recorded_at_ms
        self._chat = _Chat(start, row.recorded_at_ms, row.seq, event.turn, attributes)

    def _on_usage(self, payload: Mapping[str, Any]) -> None:
        extra: dict[str, Any] = {}
        for key in ("input_tokens", "output_tokens"):
            if isinstance(payload.get(key), int):
                extra[f"gen_ai.usage.{key}"] = payload[key]
        if isinstance(payload.get("model"), str):
            extra.setdefault("gen_ai.request.model", payload["model"])
        assert self._chat is not None
        if "gen_ai.provider.name" not in self._chat.attributes:
            provider = _provider_name(payload.get("protocol"), None)
            if provider:
                extra["gen_ai.provider.name"] = provider
        self._end_chat(extra)

    def _end_chat(self, extra: dict[str, Any]) -> None:
        chat, self._chat = self._chat, None
        assert chat is not None
        root = self._parent(chat.start_ms)
        attributes = {**extra, **chat.attributes}  # the provider replay's model wins over the usage record's
        for key in ("gen_ai.provider.name", "gen_ai.request.model"):
            if key in attributes and key not in self._root_keys:  # the activation's first model call
                root.set_attribute(key, attributes[key])
                self._root_keys.add(key)
        model = attributes.get("gen_ai.request.model")
        self._span(f"chat {model}" if model else "chat", chat.start_ms, chat.end_ms, chat.seq, attributes)

    def _tool_span(self, call_id: str, ms: int, seq: int, error: str | None, output: str | None) -> None:
        start, name, arguments = self._calls.pop(call_id, (ms, "", ""))
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if name:
            attributes["gen_ai.tool.name"] = name
        if error:
            attributes["error.type"] = error
        if self.capture_content:
            attributes["gen_ai.tool.call.arguments"] = arguments
            if output is not None:
                attributes["gen_ai.tool.call.result"] = output
        span = self._span(
            f"execute_tool {name}" if name else "execute_tool", start, ms, seq, attributes, end=False
        )
        if error:
            span.set_status(Status(StatusCode.ERROR, error))
        span.end(end_time=ms * _MS)

    # ─── spans ─────────────────────────────────────────────────────────────────────────────
    def _empty_root(self) -> bool:
        """An activation span is open and has no child yet (only records before the run started)."""
        return self._root is not None and self._children == 0

    def _open_root(self, row: StoredEvent) -> None:
        """Start an activation's ``invoke_agent`` span at ``row`` (ending the open one at the row before)."""
        if self._root is not None:
            self._end_root(self._last_ms, self._last_seq)
        self._session_id = row.session_id
        self._start_root(row.recorded_at_ms)

    def _start_root(self, ms: int) -> Span:
        attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": self._session_id}
        if self._agent:
            attributes["gen_ai.agent.name"] = self._agent
        name = f"invoke_agent {self._agent}" if self._agent else "invoke_agent"
        self._root = self.tracer.start_span(name, attributes=attributes, start_time=ms * _MS)
        self._root_ms = ms
        self._root_keys = set()
        self._children = 0
        self.spans += 1
        return self._root

    def _parent(self, ms: int) -> Span:
        """The open activation span; a model call or tool result after an activation ended (no
        ``resumed`` recorded, as in some imports) opens a new one at ``ms``."""
        return self._root if self._root is not None else self._start_root(ms)

    def _end_root(self, ms: int, seq: int) -> None:
        root, self._root = self._root, None
        assert root is not None
        root.set_attribute("flightlog.seq", seq)
        root.end(end_time=max(ms, self._root_ms) * _MS)

    def _span(
        self, name: str, start_ms: int, end_ms: int, seq: int, attributes: dict[str, Any], *, end: bool = True
    ) -> Span:
        context = trace.set_span_in_context(self._parent(start_ms))
        span = self.tracer.start_span(
            name,
            context=context,
            kind=trace.SpanKind.CLIENT
            if attributes["gen_ai.operation.name"] == "chat"
            else trace.SpanKind.INTERNAL,
            attributes={**attributes, "flightlog.seq": seq},
            start_time=start_ms * _MS,
        )
        self.spans += 1
        self._children += 1
        if end:
            span.end(end_time=max(end_ms, start_ms) * _MS)
        return span


def _is_usage(event: SessionEvent, turn: int) -> bool:
    """Is ``event`` the ``model_usage`` record of the model call of ``turn``?"""
    return (
        isinstance(event, Custom)
        and event.custom_kind == "model_usage"
        and isinstance(event.payload, dict)
        and event.payload.get("turn") == turn
    )


class _Collect(SpanProcessor):
    """Keeps every ended span, to hand them to an exporter in one call whose result is checked."""

    def __init__(self) -> None:
        self.spans: list[ReadableSpan] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.spans.append(span)


def _resource(service_name: str) -> Resource:
    return Resource.create({"service.name": service_name})


def export_session(
    store: Store,
    session_id: str,
    exporter: SpanExporter,
    *,
    capture_content: bool = False,
    service_name: str = "flightlog",
    url: str = "",
) -> int:
    """Export one stored session's spans through ``exporter`` in one call, after verifying the session.

    Args:
        store: The store.
        session_id: The session (exact id).
        exporter: Any OpenTelemetry ``SpanExporter`` (:func:`otlp_exporter` for OTLP/HTTP).
        capture_content: Also send message text, tool arguments and results (opt-in).
        service_name: The resource's ``service.name``.
        url: Where the exporter sends, for the error message.

    Returns:
        The number of spans exported.

    Raises:
        SessionNotFound: no such session.
        LedgerIntegrityError: the session does not verify (nothing exported), naming the first seq.
        ExportFailed: the exporter reported a failure (the receiver refused, or could not be reached).
    """
    report = verify_session(store, session_id)
    if not report.ok:
        first = report.divergences[0]
        raise LedgerIntegrityError(session_id=session_id, seq=first.seq, reason=first.reason)
    collected = _Collect()
    provider = TracerProvider(resource=_resource(service_name))
    provider.add_span_processor(collected)
    builder = SpanBuilder(provider.get_tracer(_TRACER), capture_content=capture_content)
    for row, event in iter_events(store, session_id, stop=report.events):
        builder.feed(row, event)
    builder.finish()
    provider.shutdown()
    if isinstance(exporter, _OtlpExporter):  # the receiver's answer or the connection error, not a log line
        result, error = exporter.attempt(collected.spans)
    else:
        result, error = exporter.export(collected.spans), None
    if result is not SpanExportResult.SUCCESS:
        where = url or (exporter.endpoint if isinstance(exporter, _OtlpExporter) else type(exporter).__name__)
        raise ExportFailed(url=where, reason=error or "the exporter reported a failure")
    return len(collected.spans)


def otlp_endpoint(url: str) -> str:
    """The traces endpoint for ``url``: ``/v1/traces`` appended when the URL has no path (as the
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` rule), else the URL as given.

    Raises:
        ValueError: not an ``http``/``https`` URL with a host.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--otlp {url!r}: give an http(s) URL of an OTLP/HTTP receiver")
    return url.rstrip("/") + "/v1/traces" if parts.path in ("", "/") else url


def otlp_exporter(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
    retry_unreachable: bool = True,
    on_retry: Callable[[str], None] | None = None,
) -> SpanExporter:
    """An OTLP/HTTP (protobuf) span exporter for ``url`` (see :func:`otlp_endpoint`); ``timeout_s`` seconds.

    The OpenTelemetry exporter retries a transient failure (HTTP 429/502/503/504, a refused connection)
    until ``timeout_s`` runs out, logging a line per attempt. Here a failed export logs one warning on the
    ``flightlog.integrations.otel`` logger instead, naming the endpoint, the receiver's last answer or the
    connection error, and the requests sent (the OpenTelemetry exporter's own lines for it are dropped);
    :func:`export_session` raises :class:`~flightlog.errors.ExportFailed` with the same text.

    ``retry_unreachable=False`` (a one-shot export, :func:`export_otlp`) fails at the first request that
    cannot connect (``requests``' ``ConnectionError``: refused, unknown host, connect timeout, TLS or proxy
    failure) instead of retrying it for the whole ``timeout_s`` (~8 s of silence for the default 10 s); a
    receiver's transient answer is still retried. Keep the default for a long-lived exporter
    (:class:`LiveExporter`), which should ride out a receiver's restart.

    ``on_retry`` is called once per export, when the exporter sends its first retry, with one line naming
    the endpoint, what the previous request got and how long retries may go on, e.g. ``OTLP receiver
    http://127.0.0.1:4318/v1/traces answered HTTP 429 Too Many Requests; retrying for up to 10 s``
    (``flightlog export --otlp`` prints it on stderr). It is called on the exporting thread; an exception it
    raises propagates out of the export.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = otlp_endpoint(url)

    def retrying(outcome: str) -> None:
        said = outcome if outcome.startswith("cannot connect") else f"answered {outcome}"
        if on_retry is not None:
            on_retry(f"OTLP receiver {endpoint} {said}; retrying for up to {timeout_s:g} s")

    session = _ObservedSession(
        fail_unreachable=not retry_unreachable, on_retry=retrying if on_retry is not None else None
    )
    inner = OTLPSpanExporter(
        endpoint=endpoint, headers=dict(headers or {}), timeout=timeout_s, session=session
    )
    return _OtlpExporter(inner, endpoint, session)


class _ObservedSession(requests.Session):
    """A ``requests.Session`` that keeps, per thread, what each request of the current export got: the
    status line of the response, or the exception (raised on as before); the first request sent after one
    (a retry) calls ``on_retry`` with what that one got, once per export."""

    def __init__(
        self, *, fail_unreachable: bool = False, on_retry: Callable[[str], None] | None = None
    ) -> None:
        super().__init__()
        self._local = threading.local()
        self.fail_unreachable = fail_unreachable
        self.on_retry = on_retry

    def outcomes(self) -> list[str]:
        """This thread's outcomes since :meth:`reset` (oldest first)."""
        found: list[str] = getattr(self._local, "outcomes", [])
        return found

    def reset(self) -> None:
        self._local.outcomes = []

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        outcomes = self.outcomes()
        if len(outcomes) == 1 and self.on_retry is not None:  # the export's first retry: say why, once
            self.on_retry(outcomes[0])
        try:
            response = super().send(request, **kwargs)
        except Exception as exc:
            if isinstance(exc, requests.exceptions.ConnectionError):
                self.outcomes().append(f"cannot connect: {_connect_failure(exc)}")
            elif isinstance(exc, requests.exceptions.Timeout):  # not urllib3's "(read timeout=9.99998...)"
                timeout = kwargs.get("timeout")
                within = f" within {float(timeout):.0f} s" if isinstance(timeout, int | float) else ""
                self.outcomes().append(f"no answer{within} (timed out)")
            else:
                self.outcomes().append(f"{type(exc).__name__}: {exc}")
            if self.fail_unreachable and isinstance(exc, requests.exceptions.ConnectionError):
                # not a connection error to the OpenTelemetry exporter, so it does not retry it
                raise _Unreachable(str(exc)) from exc
            raise
        self.outcomes().append(f"HTTP {response.status_code} {response.reason or ''}".rstrip())
        return response


def _connect_failure(exc: Exception) -> str:
    """Why a request could not connect, without urllib3's wrapping: ``requests`` raises a ConnectionError
    around urllib3's ``MaxRetryError`` ("Max retries exceeded with url: ...", although its own retries are
    off) around the socket error (``reason``: "Failed to establish a new connection: [Errno 111] Connection
    refused", after the connection object's repr)."""
    cause = exc.args[0] if exc.args else exc
    text = str(getattr(cause, "reason", cause))
    head, sep, rest = text.partition(">: ")  # "<urllib3.connection.HTTPConnection object at 0x...>: "
    return rest if sep and head.startswith("<") else text


class _Unreachable(Exception):
    """A request that could not connect, raised past the OpenTelemetry exporter's retries
    (:func:`otlp_exporter` with ``retry_unreachable=False``)."""


class _Quiet(logging.Filter):
    """Drops the records one thread logs (the OTLP exporter's per-attempt lines of an export it runs),
    keeping their messages in :attr:`dropped`."""

    def __init__(self) -> None:
        super().__init__()
        self.thread = threading.get_ident()
        self.dropped: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        if record.thread != self.thread:
            return True
        self.dropped.append(record.getMessage())
        return False


class _OtlpExporter(SpanExporter):
    """:func:`otlp_exporter`'s exporter: the OpenTelemetry OTLP/HTTP one, reporting a failed export once."""

    def __init__(self, inner: SpanExporter, endpoint: str, session: _ObservedSession) -> None:
        self.inner, self.endpoint, self._session = inner, endpoint, session

    def attempt(self, spans: Sequence[ReadableSpan]) -> tuple[SpanExportResult, str | None]:
        """Export ``spans``; the result and, on failure, what went wrong (one line: the last answer or
        error, and how many requests were sent), with nothing logged."""
        self._session.reset()
        quiet, logger = _Quiet(), logging.getLogger(_OTLP_LOGGER)
        logger.addFilter(quiet)
        try:
            result = self.inner.export(spans)
        except _Unreachable:  # an exporter release that lets the session's error out of export()
            result = SpanExportResult.FAILURE
        finally:
            logger.removeFilter(quiet)
        if result is SpanExportResult.SUCCESS:
            return result, None
        outcomes = self._session.outcomes()
        if not outcomes:  # nothing sent (a batch it could not encode, an exporter shut down): what it said
            return result, quiet.dropped[-1] if quiet.dropped else "the exporter reported a failure"
        tries = f"{len(outcomes)} requests" if len(outcomes) > 1 else "1 request"
        return result, f"{outcomes[-1]} ({tries})"

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export ``spans`` (the ``SpanExporter`` call a span processor makes); a failure is logged as one
        warning naming the endpoint and the error (:func:`otlp_exporter`)."""
        result, error = self.attempt(spans)
        if error is not None:
            log.warning("OTLP export of %d span(s) to %s failed: %s", len(spans), self.endpoint, error)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def export_otlp(
    store: Store,
    session_id: str,
    url: str,
    *,
    capture_content: bool = False,
    headers: Mapping[str, str] | None = None,
    timeout_s: float = 10.0,
    on_retry: Callable[[str], None] | None = None,
) -> int:
    """:func:`export_session` to an OTLP/HTTP receiver at ``url``; returns the number of spans sent.

    A receiver that cannot be connected to fails the export at the first request (no retries:
    :func:`otlp_exporter`'s ``retry_unreachable=False``); a transient answer (HTTP 429/502/503/504 for the
    OpenTelemetry exporter) is retried for up to ``timeout_s`` seconds (the exporter's backoff, or the
    receiver's ``Retry-After`` when that fits in what is left). ``on_retry`` gets one line when the first
    retry starts (:func:`otlp_exporter`); a receiver still busy when the time is up fails the export with
    ``ExportFailed`` naming ``url``, its last answer and the requests sent.

    Raises:
        ValueError: ``url`` is not an http(s) URL.
        SessionNotFound, LedgerIntegrityError, ExportFailed: as :func:`export_session`.
    """
    exporter = otlp_exporter(
        url, headers=headers, timeout_s=timeout_s, retry_unreachable=False, on_retry=on_retry
    )
    try:
        return export_session(store, session_id, exporter, capture_content=capture_content, url=url)
    finally:
        exporter.shutdown()


class LiveExporter:
    """A recorder subscriber that exports spans while a run goes: ``Kernel(..., on_event=LiveExporter(e))``.

    Each span is handed to a ``BatchSpanProcessor`` on ``exporter`` as soon as the event that ends it is
    durable (a ``chat`` span when its usage record commits, an ``invoke_agent`` span at ``run_terminal`` or
    ``suspended``). Call :meth:`close` when the run is over: it ends what is open and flushes.

    Args:
        exporter: Any ``SpanExporter`` (:func:`otlp_exporter`).
        capture_content: Also send message text, tool arguments and results (opt-in).
        service_name: The resource's ``service.name``.
    """

    def __init__(
        self, exporter: SpanExporter, *, capture_content: bool = False, service_name: str = "flightlog"
    ) -> None:
        self._provider = TracerProvider(resource=_resource(service_name))
        self._provider.add_span_processor(BatchSpanProcessor(exporter))
        self._builders: dict[str, SpanBuilder] = {}
        self._capture = capture_content

    def __call__(self, row: StoredEvent, event: SessionEvent) -> None:
        """Fold one committed event (the :data:`~flightlog.recorder.Subscriber` signature)."""
        builder = self._builders.get(row.session_id)
        if builder is None:
            tracer = self._provider.get_tracer(_TRACER)
            builder = self._builders[row.session_id] = SpanBuilder(tracer, capture_content=self._capture)
        builder.feed(row, event)

    def close(self) -> None:
        """End every open span at its session's last event, export everything and stop."""
        for builder in self._builders.values():
            builder.finish()
        self._provider.force_flush()
        self._provider.shutdown()
