"""OpenTelemetry export against a real OTLP/HTTP receiver on loopback, decoding the protobuf it receives."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import logging
import socket
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from typer.testing import CliRunner

import flightlog
from flightlog.cli import app
from flightlog.errors import ExportFailed, LedgerIntegrityError, install_hint
from flightlog.importers import import_file
from flightlog.integrations.otel import (
    LiveExporter,
    export_otlp,
    export_session,
    otlp_endpoint,
    otlp_exporter,
)
from flightlog.kernel import Agent, Kernel, tool
from flightlog.kernel.scripted import ScriptedProvider, call, calls, reply
from flightlog.providers.base import Usage
from flightlog.store.base import Store

SAMPLES = Path(__file__).parents[1] / "data" / "samples"


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


class Receiver:
    """An OTLP/HTTP traces endpoint on 127.0.0.1: decodes each POST and keeps the spans."""

    def __init__(self, status: int = 200, first: Sequence[int] = (), retry_after: str | None = None) -> None:
        """``first``: the answers to the first requests (then ``status``); ``retry_after``: the
        ``Retry-After`` header sent with every answer (none by default)."""
        answers = list(first)
        self.spans: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self.resources: list[dict[str, Any]] = []
        self.received = threading.Event()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.paths.append(self.path)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for rs in request.resource_spans:
                    receiver.resources.append({a.key: _value(a.value) for a in rs.resource.attributes})
                    for ss in rs.scope_spans:
                        for span in ss.spans:
                            receiver.spans.append(
                                {
                                    "name": span.name,
                                    "trace_id": span.trace_id.hex(),
                                    "span_id": span.span_id.hex(),
                                    "parent": span.parent_span_id.hex(),
                                    "start": span.start_time_unix_nano,
                                    "end": span.end_time_unix_nano,
                                    "status": span.status.code,
                                    "attributes": {a.key: _value(a.value) for a in span.attributes},
                                }
                            )
                self.send_response(answers.pop(0) if answers else status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                receiver.received.set()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [s for s in self.spans if s["name"].split(" ")[0] == prefix]


@contextlib.contextmanager
def refused_url() -> Iterator[str]:
    """A loopback URL on a port bound and never listened on: Linux refuses every connection to it, and no
    other process can take the port while the test uses it (a closed receiver's port could be reused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as bound:
        bound.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{bound.getsockname()[1]}"


BUSY_TIMEOUT_S = 60.0
"""The exporter's time for a receiver that answers 503 at once with ``Retry-After: 0``: the exporter
retries it at once until its retries run out, in well under a second, so this only bounds a stalled
machine (a short timeout raced the answer: "no answer (timed out)" instead of the 503)."""


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with flightlog.open_store(str(tmp_path / "otel.db")) as s:
        yield s


@tool(effect="read_only")
def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return a + b


def _provider() -> ScriptedProvider:
    return ScriptedProvider(
        [
            calls(
                call("add", {"a": 1, "b": 2}, id="c1"),
                text="adding",
                usage=Usage(input_tokens=40, output_tokens=7),
                protocol="openai.chat",
                model="gpt-test",
            ),
            reply(
                "3", usage=Usage(input_tokens=55, output_tokens=2), protocol="openai.chat", model="gpt-test"
            ),
        ],
        model="gpt-test",
        protocol="openai.chat",
        by_turn=False,
    )


def _kernel(store: Store, **kw: Any) -> Kernel:
    async def no_sleep(_s: float) -> None:
        return None

    agent = Agent(name="adder", route=[_provider()], tools=[add], system_prompt="You add numbers.")
    return Kernel(store, agent, sleep=no_sleep, heartbeat_s=None, **kw)


def _check_run_spans(spans: list[dict[str, Any]], session_id: str, *, content: bool) -> None:
    roots = [s for s in spans if s["name"].startswith("invoke_agent")]
    assert len(roots) == 1
    root = roots[0]
    assert root["parent"] == ""
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert root["attributes"]["gen_ai.conversation.id"] == session_id
    assert root["attributes"]["gen_ai.request.model"] == "gpt-test"
    chats = [s for s in spans if s["name"].startswith("chat")]
    tools = [s for s in spans if s["name"].startswith("execute_tool")]
    assert [c["name"] for c in chats] == ["chat gpt-test", "chat gpt-test"]
    assert [t["name"] for t in tools] == ["execute_tool add"]
    for child in chats + tools:
        assert child["parent"] == root["span_id"] and child["trace_id"] == root["trace_id"]
        assert root["start"] <= child["start"] <= child["end"] <= root["end"]
    first, second = (c["attributes"] for c in chats)
    assert first["gen_ai.operation.name"] == "chat"
    assert first["gen_ai.provider.name"] == "scripted"  # what the provider replay records
    assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (40, 7)
    assert (second["gen_ai.usage.input_tokens"], second["gen_ai.usage.output_tokens"]) == (55, 2)
    tool_attrs = tools[0]["attributes"]
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert (tool_attrs["gen_ai.tool.name"], tool_attrs["gen_ai.tool.call.id"]) == ("add", "c1")
    assert chats[0]["end"] <= tools[0]["start"] <= tools[0]["end"] <= chats[1]["end"]
    if content:
        assert json.loads(tool_attrs["gen_ai.tool.call.arguments"]) == {"a": 1, "b": 2}
        assert tool_attrs["gen_ai.tool.call.result"] == "3"
        out = json.loads(second["gen_ai.output.messages"])
        assert out == [{"role": "assistant", "parts": [{"type": "text", "content": "3"}]}]
        # current semconv names: the input the model was sent, the run's system prompt apart
        sent = json.loads(second["gen_ai.input.messages"])
        assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
        assert sent[0]["parts"] == [{"type": "text", "content": "add 1 and 2"}]
        assert sent[1]["parts"][-1] | {"arguments": "?"} == {
            "type": "tool_call",
            "id": "c1",
            "name": "add",
            "arguments": "?",
        }
        assert sent[2]["parts"] == [{"type": "tool_call_response", "id": "c1", "response": "3"}]
        assert [m["role"] for m in json.loads(first["gen_ai.input.messages"])] == ["user"]
        (instructions,) = json.loads(first["gen_ai.system_instructions"])
        assert instructions == {"type": "text", "content": "You add numbers."}
    else:
        every = [k for s in spans for k in s["attributes"]]
        hidden = ("gen_ai.output.messages", "gen_ai.input.messages", "gen_ai.system_instructions")
        assert not any(k in every for k in (*hidden, "gen_ai.tool.call.arguments"))


@pytest.mark.parametrize("content", [False, True])
def test_a_kernel_run_arrives_as_genai_spans(store: Store, receiver: Receiver, content: bool) -> None:
    result = _kernel(store).run_sync("add 1 and 2")
    sent = export_otlp(store, result.session_id, receiver.url, capture_content=content)
    assert sent == len(receiver.spans) == 4
    assert receiver.paths == ["/v1/traces"]
    assert receiver.resources[0]["service.name"] == "flightlog"
    _check_run_spans(receiver.spans, result.session_id, content=content)
    rows = list(store.read_events(result.session_id))
    terminal = next(r for r in rows if r.kind == "run_terminal")
    root = receiver.named("invoke_agent")[0]
    assert (root["start"], root["end"]) == (rows[0].recorded_at_ms * 10**6, terminal.recorded_at_ms * 10**6)
    assert root["attributes"]["flightlog.seq"] == terminal.seq


def test_live_export_from_a_running_kernel(store: Store, receiver: Receiver) -> None:
    live = LiveExporter(otlp_exporter(receiver.url))
    result = asyncio.run(_kernel(store, on_event=live).run("add 1 and 2"))
    live.close()  # flushes the batch processor
    _check_run_spans(receiver.spans, result.session_id, content=False)


def test_cli_exports_an_imported_transcript(tmp_path: Path, receiver: Receiver) -> None:
    db = tmp_path / "imported.db"
    with flightlog.open_store(str(db)) as s:
        imported = import_file(s, SAMPLES / "claude-code" / "spotter_tool_heavy.jsonl")
    sid = imported.session_ids[0]
    result = CliRunner().invoke(app, ["--db", str(db), "export", sid, "--otlp", receiver.url])
    assert result.exit_code == 0, result.output
    assert f"to {receiver.url}" in result.stderr
    roots, chats, tools = (receiver.named(p) for p in ("invoke_agent", "chat", "execute_tool"))
    assert (len(roots), len(chats), len(tools)) == (2, 4, 6)  # two runs (run_started) in the file
    assert {r["attributes"]["gen_ai.conversation.id"] for r in roots} == {sid}
    by_id = {r["span_id"]: r for r in roots}
    for child in chats + tools:
        parent = by_id[child["parent"]]
        assert child["trace_id"] == parent["trace_id"]
        assert parent["start"] <= child["start"] <= child["end"] <= parent["end"]
    assert all(t["attributes"]["gen_ai.tool.name"] for t in tools)
    assert all(t["attributes"]["gen_ai.tool.call.id"] for t in tools)
    assert {c["attributes"].get("gen_ai.provider.name") for c in chats} == {"anthropic"}


def test_a_refusing_receiver_and_a_bad_url_are_errors(store: Store, tmp_path: Path) -> None:
    result = _kernel(store, notary=None).run_sync("add 1 and 2")
    refusing = Receiver(status=400)
    try:
        with pytest.raises(ExportFailed, match=refusing.url):
            export_otlp(store, result.session_id, refusing.url)
    finally:
        refusing.close()
    with pytest.raises(ValueError, match="http"):
        otlp_endpoint("localhost:4318")
    assert otlp_endpoint("http://h:4318/") == "http://h:4318/v1/traces"
    assert otlp_endpoint("http://h:4318/custom/traces") == "http://h:4318/custom/traces"


def _loud(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, bool]]:
    """Every record at WARNING or above: (logger, message, has a traceback)."""
    return [
        (r.name, r.getMessage(), r.exc_info is not None)
        for r in caplog.records
        if r.levelno >= logging.WARNING
    ]


def test_a_failed_live_export_logs_one_line_naming_the_endpoint_and_the_error(
    store: Store, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receiver answering 503 (a transient failure the OTLP exporter retries): the run goes on and the one
    line logged names the endpoint and the receiver's answer, with no traceback. The OpenTelemetry exporter
    logged a line per retry, none naming the endpoint, then "Failed to export spans batch due to timeout,
    max retries or shutdown." without the error."""
    # one batch, sent at close(): not a second one when a slow run outlasts the processor's 5 s delay
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", str(int(BUSY_TIMEOUT_S * 1000)))
    busy = Receiver(status=503, retry_after="0")
    try:
        live = LiveExporter(otlp_exporter(busy.url, timeout_s=BUSY_TIMEOUT_S))
        caplog.set_level(logging.DEBUG, logger="opentelemetry")
        result = _kernel(store, notary=None, on_event=live).run_sync("add 1 and 2")
        live.close()
    finally:
        busy.close()
    assert result.status == "completed" and busy.spans  # the spans reached it; it answered 503
    requests = len(busy.paths)
    batch = len(busy.spans) // requests
    assert requests >= 2 and len(busy.spans) == batch * requests  # retried: the same batch each time
    endpoint = otlp_endpoint(busy.url)
    assert _loud(caplog) == [
        (
            "flightlog.integrations.otel",
            f"OTLP export of {batch} span(s) to {endpoint} failed: HTTP 503 Service Unavailable "
            f"({requests} requests)",
            False,
        )
    ]


def test_a_failed_export_raises_with_the_error_and_logs_nothing(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """``export_session`` (``export_otlp``, ``flightlog export --otlp``) raises one ``ExportFailed`` naming the receiver's answer or
    the connection error (it said "the exporter reported a failure"), and logs nothing beside it."""
    sid = _kernel(store, notary=None).run_sync("add 1 and 2").session_id
    busy = Receiver(status=503, retry_after="0")
    try:
        with pytest.raises(ExportFailed) as answered:
            export_session(store, sid, otlp_exporter(busy.url, timeout_s=BUSY_TIMEOUT_S), url=busy.url)
    finally:
        busy.close()
    assert answered.value.url == busy.url
    assert answered.value.reason == f"HTTP 503 Service Unavailable ({len(busy.paths)} requests)"
    with refused_url() as gone, pytest.raises(ExportFailed) as refused:
        # 0.5 s: the retry's backoff (>= 0.8 s) does not fit; a refused connect answers at once
        export_session(store, sid, otlp_exporter(gone, timeout_s=0.5))
    assert refused.value.url == otlp_endpoint(gone)  # no url given: the exporter's endpoint
    assert refused.value.reason.startswith("cannot connect: ") and "refused" in refused.value.reason
    assert "Max retries" not in refused.value.reason and " object at 0x" not in refused.value.reason
    closed = otlp_exporter(gone)
    closed.shutdown()  # nothing is sent: what the exporter said is the reason
    with pytest.raises(ExportFailed, match="Exporter already shutdown, ignoring batch"):
        export_session(store, sid, closed)
    assert _loud(caplog) == []


def test_a_diverging_session_is_not_exported(tmp_path: Path, receiver: Receiver) -> None:
    import sqlite3

    db = tmp_path / "bad.db"
    with flightlog.open_store(str(db)) as s:
        sid = _kernel(s, notary=None).run_sync("add 1 and 2").session_id
    raw = sqlite3.connect(db)
    raw.execute("DROP TRIGGER IF EXISTS events_no_update")
    raw.execute(
        "UPDATE events SET event = CAST(? AS BLOB) WHERE session_id = ? AND seq = 3", (b'{"x":1}', sid)
    )
    raw.commit()
    raw.close()
    with flightlog.open_store(str(db)) as s, pytest.raises(LedgerIntegrityError) as refused:
        export_otlp(s, sid, receiver.url)
    assert refused.value.seq == 3 and receiver.spans == []


@pytest.mark.parametrize(
    ("module", "sdk", "extra"),
    [
        ("otel", "opentelemetry", "otel"),
        ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("openai_agents", "agents", "openai-agents"),
        ("openai_agents_tracing", "agents", "openai-agents"),
        ("langgraph", "langgraph", "langgraph"),
    ],
)
def test_a_missing_extra_is_named(module: str, sdk: str, extra: str) -> None:
    import subprocess
    import sys

    blocked = (
        ("langgraph", "langchain_core") if sdk == "langgraph" else (sdk,)
    )  # LangGraph's extra brings both
    code = (
        f"import sys; sys.modules.update(dict.fromkeys({blocked!r}))\n"
        f"try:\n    import flightlog.integrations.{module}\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert install_hint(extra) in out  # both install commands, the extra named


def test_a_receiver_that_cannot_be_reached_fails_the_export_at_the_first_request(tmp_path: Path) -> None:
    """``export_otlp`` / ``flightlog export --otlp`` to a port nothing listens on: one request, no retries
    (the OpenTelemetry exporter retried a refused connection for ~8 s, silently), one line naming the
    endpoint, exit 1; a long-lived exporter still retries a connection that fails."""
    db = tmp_path / "one.db"
    with flightlog.open_store(str(db)) as s:
        sid = _kernel(s, notary=None).run_sync("add 1 and 2").session_id
    with refused_url() as gone:
        with flightlog.open_store(str(db)) as s:
            with pytest.raises(ExportFailed) as refused:
                export_otlp(s, sid, gone)
            assert refused.value.url == gone and "refused" in refused.value.reason
            assert refused.value.reason.endswith("(1 request)")
            with pytest.raises(ExportFailed) as retried:  # the default (LiveExporter's): retried within 2 s
                export_session(s, sid, otlp_exporter(gone, timeout_s=2.0))
            assert not retried.value.reason.endswith("(1 request)")
        result = CliRunner().invoke(app, ["--db", str(db), "export", sid, "--otlp", gone])
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"flightlog: error: export to {gone}: cannot connect: ")
    assert line.endswith("(1 request)")


def test_a_busy_receiver_is_retried_saying_so_once_and_a_give_up_names_it(tmp_path: Path) -> None:
    """A receiver answering 429/503: ``export --otlp`` retried silently for up to 10 s. It now says once, on
    stderr, what the receiver answered and that it retries (then succeeds when the receiver recovers); one
    still busy when the time is up fails the export with one line naming the URL and its last answer."""
    db = tmp_path / "busy.db"
    with flightlog.open_store(str(db)) as s:
        sid = _kernel(s, notary=None).run_sync("add 1 and 2").session_id
    recovers = Receiver(first=[429, 503])
    try:
        result = CliRunner().invoke(app, ["--db", str(db), "export", sid, "--otlp", recovers.url])
    finally:
        recovers.close()
    assert result.exit_code == 0, result.stderr
    endpoint = otlp_endpoint(recovers.url)
    assert result.stderr.strip().splitlines() == [
        f"flightlog: note: OTLP receiver {endpoint} answered HTTP 429 Too Many Requests; "
        "retrying for up to 10 s",
        f"sent {len(recovers.spans) // 3} spans of {sid} to {recovers.url}",
    ]
    assert len(recovers.paths) == 3  # answered 429, 503, then 200: the same spans each time
    said: list[str] = []
    busy = Receiver(status=503)
    try:
        with flightlog.open_store(str(db)) as s, pytest.raises(ExportFailed) as gave_up:
            export_otlp(s, sid, busy.url, timeout_s=4.0, on_retry=said.append)  # 1 s to the 1st retry
    finally:
        busy.close()
    assert said == [
        f"OTLP receiver {otlp_endpoint(busy.url)} answered HTTP 503 Service Unavailable; retrying for up to 4 s"
    ]
    assert (
        str(gave_up.value)
        == f"export to {busy.url}: HTTP 503 Service Unavailable ({len(busy.paths)} requests)"
    )
    assert len(busy.paths) >= 2


def test_export_otlp_without_the_extra_says_so_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    db = tmp_path / "one.db"
    with flightlog.open_store(str(db)) as s:
        sid = _kernel(s, notary=None).run_sync("add 1 and 2").session_id
    code = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "from flightlog.cli import main\n"
        f"sys.argv = ['flightlog', '--db', {str(db)!r}, 'export', {sid!r}, '--otlp', 'http://127.0.0.1:9']\n"
        "main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [f"flightlog: error: --otlp needs: {install_hint('otel')}"]


def test_a_receiver_that_never_answers_is_named_without_urllib3s_wording(tmp_path: Path) -> None:
    """A receiver that takes the connection and never answers: the error said ``ReadTimeout:
    HTTPConnectionPool(...): Read timed out. (read timeout=9.999982595443726)`` (user pass, session 10);
    it now says ``no answer within N s (timed out)``, naming the endpoint as the other failures do."""
    import socket

    with flightlog.open_store(str(tmp_path / "mute.db")) as s:
        sid = _kernel(s, notary=None).run_sync("add 1 and 2").session_id
        mute = socket.socket()
        mute.bind(("127.0.0.1", 0))
        mute.listen(4)  # the kernel completes the handshake; nothing ever reads or answers
        url = f"http://127.0.0.1:{mute.getsockname()[1]}"
        try:
            with pytest.raises(ExportFailed) as silent:
                export_otlp(s, sid, url, timeout_s=1.0)
        finally:
            mute.close()
    assert silent.value.url == url
    assert "no answer within" in silent.value.reason and "timed out" in silent.value.reason
    assert "read timeout=" not in silent.value.reason and "HTTPConnectionPool" not in silent.value.reason
