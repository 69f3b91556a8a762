"""A loopback HTTP server that replays a VCR cassette to the official SDKs, one interaction per request.

Point an SDK adapter's ``base_url`` at :attr:`ReplayServer.base_url` and every request it makes is checked
against the next recorded request (method, path, JSON body; the tolerated differences are listed in
:mod:`flightlog.providers.replay_match`). A match is answered with the recorded response exactly: status,
headers, body bytes (gzip kept gzip, server-sent events as recorded). A mismatch is answered with status
599 and a JSON body listing the differences, and is recorded in :attr:`ReplayServer.mismatches` so a test
can assert none happened; the expected interaction is not consumed.

Usage::

    with ReplayServer.from_cassette("tests/data/provider/anthropic/thinking-tool-use-roundtrip.yaml") as server:
        provider = AnthropicProvider("claude-sonnet-4-0", api_key="replay", base_url=server.base_url)
        ...
    server.assert_clean()

or, for the kernel and the demo, :func:`replay_provider`, which also configures the adapter from the
cassette (protocol, model, recorded request options; see :func:`cassette_profile`)::

    provider, server = replay_provider(packaged_cassettes()["anthropic/thinking-tool-use-roundtrip"])
    with server:
        response = await provider.complete(request)  # the kernel's ModelRequest
        await provider.aclose()
    server.assert_clean()

**Resuming midway (``seek=True``).** A durable agent run spans processes: the run that stops to wait for
an approval, and the ``resume`` that continues it (possibly after a crash), each build their own adapter
and so their own loopback server, which starts at the cassette's first interaction. The resumed process's
first request is the one the session has reached (interaction #1, #2...), not #0. With ``seek=True`` a
request that does not match the next interaction is compared with the later ones, in order; the first
that matches is served and the ones before it are *skipped* (listed in :attr:`ReplayServer.skipped`:
another process served them). The position only moves forward, and a request that matches no remaining
interaction is still a 599 mismatch, reported (answer, :attr:`ReplayServer.mismatches`, journal) against the
interaction it diverged at: the remaining one whose conversation it follows furthest, not the position
(#0 in a process that just started). Each request of a recorded conversation carries its history (or the
id of the previous response), so it matches the interaction recorded at that point and no other: the
conversation, not a counter, says where a process continues.

**Compared as (``compare_as=function``).** A cassette may hold a branch written for an example rather than
recorded, whose request has a placeholder where the live request carries free text (who denied a call, and
why). ``compare_as`` maps each live body (bytes) to the body compared with the recorded ones (the answer,
:attr:`ReplayServer.received` and the journal are unaffected); nothing is rewritten without it.

**Journal (``journal=path``).** Every answered request is also appended as one JSON line to ``journal``
(``{"pid", "index", "matched", "skipped", "differences"}``; ``index`` is the interaction served, or the
one expected on a mismatch), so the requests of every process of a run (crashed ones included) can be
checked afterwards for mismatches. A journal that cannot be written is refused when the server is made
(``OSError`` naming the path and the reason: no directory, a directory in its place, no write permission).
A write that fails later (the path replaced, the disk full) serves nothing: the request is answered with a
599 ``replay_journal`` error naming the path and the OS error, the position does not move, and
:meth:`ReplayServer.assert_clean` reports it as a mismatch.

The server binds ``127.0.0.1`` on a free port (stdlib :class:`http.server.ThreadingHTTPServer`) and never
opens an outbound connection.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from .base import Capabilities, ModelProvider
from .cassette import Interaction, load_cassette
from .replay_match import request_differences, shared_history

__all__ = [
    "MISMATCH_STATUS",
    "Mismatch",
    "ReplayServer",
    "RequestProfile",
    "cassette_profile",
    "packaged_cassettes",
    "protocol_of",
    "replay_provider",
]

MISMATCH_STATUS = 599
"""Status of the answer to a request that does not match the recorded one."""

_API_ROOTS: Mapping[str, str] = {"api.openai.com": "/v1", "openrouter.ai": "/api/v1"}
"""Base-URL path per recorded host: the OpenAI SDK's base URL includes ``/v1`` (OpenRouter's, an OpenAI-
compatible endpoint, is ``https://openrouter.ai/api/v1``); Anthropic's includes none."""


@dataclass(frozen=True)
class Mismatch:
    """A request the cassette did not expect.

    Attributes:
        index: The index of the interaction that was expected (the one after the last served).
        method: The live method.
        path: The live path.
        differences: What differed (see :func:`~flightlog.providers.replay_match.request_differences`).
    """

    index: int
    method: str
    path: str
    differences: tuple[str, ...]


@dataclass
class _State:
    """Mutable replay position, guarded by ``lock`` (handler threads share it)."""

    served: int = 0
    position: int = 0
    skipped: list[int] = field(default_factory=list)
    mismatches: list[Mismatch] = field(default_factory=list)
    received: list[Any] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ReplayServer:
    """Serves recorded interactions, in order, to whatever connects to :attr:`base_url`.

    A context manager: entering starts the server (if not running), leaving stops it. Thread-safe.

    Attributes:
        interactions: The recorded interactions, in order.
        api_root: Path prefix of :attr:`base_url` (``/v1`` for OpenAI cassettes, "" otherwise).
    """

    def __init__(
        self,
        interactions: Sequence[Interaction],
        *,
        api_root: str = "",
        seek: bool = False,
        journal: str | Path | None = None,
        compare_as: Callable[[bytes], bytes] | None = None,
    ) -> None:
        """Prepare (not start) a server for ``interactions``.

        Args:
            interactions: Recorded interactions, served in this order.
            api_root: Path prefix added to :attr:`base_url`.
            seek: Let a request skip ahead to the first later interaction it matches (a process resuming
                a recorded conversation midway; see the module docs).
            journal: Append one JSON line per answered request to this file (see the module docs); its
                directory must exist.
            compare_as: Maps a live request body to the body compared with the recorded requests (see the
                module docs); called in the handler thread; what it raises fails that request only.

        Raises:
            FileNotFoundError: ``journal``'s directory does not exist (checked here, so a run fails
                before its first request instead of each request failing inside the server).
            IsADirectoryError: ``journal`` is a directory.
            PermissionError: ``journal`` (or, when it does not exist yet, its directory) cannot be written.
        """
        if journal is not None:
            _check_journal(Path(journal))
        self.interactions = list(interactions)
        self.api_root = api_root
        self.seek = seek
        self.journal = Path(journal) if journal is not None else None
        self.compare_as = compare_as
        self._state = _State()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_cassette(
        cls, path: str | Path, *, seek: bool = False, journal: str | Path | None = None
    ) -> ReplayServer:
        """A server for a cassette file, its :attr:`api_root` chosen from the recorded host.

        Args:
            path: A VCR cassette (either dialect).
            seek: See :class:`ReplayServer` (skip ahead to the interaction a request matches).
            journal: See :class:`ReplayServer` (one JSON line per answered request).

        Returns:
            The (not yet started) server; use it as a context manager.

        Raises:
            ImportError: ``pyyaml`` is missing.
            OSError: The file cannot be read.
            ValueError: The file is not a cassette.
        """
        interactions = load_cassette(path)
        host = interactions[0].request.host if interactions else ""
        return cls(interactions, api_root=_API_ROOTS.get(host, ""), seek=seek, journal=journal)

    # ─── Lifecycle ───────────────────────────────────────────────────────────────────────────────

    def start(self) -> ReplayServer:
        """Bind 127.0.0.1 on a free port and serve in a daemon thread (no-op when already running)."""
        if self._httpd is None:
            self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
            self._httpd.daemon_threads = True
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, args=(0.05,), name="replay-server", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and release the port (no-op when not running)."""
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ─── Observations ────────────────────────────────────────────────────────────────────────────

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>``.

        Raises:
            RuntimeError: The server is not running.
        """
        if self._httpd is None:
            raise RuntimeError("replay server is not running (use it as a context manager or call start())")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """The SDK base URL: :attr:`root_url` plus :attr:`api_root` (e.g. ``http://127.0.0.1:5123/v1``)."""
        return self.root_url + self.api_root

    @property
    def served(self) -> int:
        """Number of interactions served (matched) so far."""
        with self._state.lock:
            return self._state.served

    @property
    def remaining(self) -> int:
        """Number of recorded interactions after the last one served (skipped ones do not count)."""
        with self._state.lock:
            return len(self.interactions) - self._state.position

    @property
    def skipped(self) -> list[int]:
        """Indices of the interactions a ``seek`` jumped over (served by another process), in order."""
        with self._state.lock:
            return list(self._state.skipped)

    @property
    def mismatches(self) -> list[Mismatch]:
        """Every mismatched request so far, in arrival order (a copy)."""
        with self._state.lock:
            return list(self._state.mismatches)

    @property
    def received(self) -> list[Any]:
        """Every request body received so far (decoded JSON, or text when not JSON), in order (a copy)."""
        with self._state.lock:
            return list(self._state.received)

    def assert_clean(self, *, all_served: bool = True) -> None:
        """Raise unless no request mismatched (and, by default, no interaction is left after the last served).

        Interactions a ``seek`` skipped are not held against the server: another process served them.

        Raises:
            AssertionError: With the mismatches' differences, or the number of unserved interactions.
        """
        mismatches = self.mismatches
        if mismatches:
            lines = [f"#{m.index} {m.method} {m.path}: " + "; ".join(m.differences) for m in mismatches]
            raise AssertionError("replay mismatches:\n" + "\n".join(lines))
        if all_served and self.remaining:
            raise AssertionError(f"{self.remaining} recorded interaction(s) never requested")

    # ─── Request handling (handler threads) ──────────────────────────────────────────────────────

    def _answer(self, method: str, target: str, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        url = urlsplit(target)
        state = self._state
        with state.lock:
            state.received.append(_decoded(body))
            body = self.compare_as(body) if self.compare_as is not None else body
            index = state.position
            if index >= len(self.interactions):
                problems = [f"no recorded interaction left ({len(self.interactions)} served)"]
            else:
                problems = self._differences(index, method, url.path, url.query, body)
            found = index if not problems else self._seek(index + 1, method, url.path, url.query, body)
            if found is None and self.seek and index < len(self.interactions):
                index = self._diverged_at(
                    index, method, url.path, body
                )  # not the position this process is at
                problems = self._differences(index, method, url.path, url.query, body)
            try:  # journaled before the state moves: a failed write serves nothing
                if found is None:
                    self._log(index, matched=False, skipped=[], differences=problems)
                else:
                    self._log(found, matched=True, skipped=list(range(index, found)), differences=[])
            except OSError as exc:
                failed = _journal_failed(self.journal, exc)
                state.mismatches.append(Mismatch(index, method, url.path, tuple(failed)))
                return _mismatch_answer(index, failed, "replay_journal")
            if found is None:
                state.mismatches.append(Mismatch(index, method, url.path, tuple(problems)))
                return _mismatch_answer(index, problems)
            state.skipped.extend(range(index, found))
            state.position = found + 1
            state.served += 1
        response = self.interactions[found].response
        return response.status, response.reason, list(response.headers), response.body

    def _differences(self, index: int, method: str, path: str, query: str, body: bytes) -> list[str]:
        expected = self.interactions[index]
        return request_differences(
            expected.request, expected.dialect, method=method, path=path, query=query, body=body
        )

    def _seek(self, start: int, method: str, path: str, query: str, body: bytes) -> int | None:
        """With ``seek``: the first interaction from ``start`` on that the request matches, else None."""
        if not self.seek:
            return None
        for index in range(start, len(self.interactions)):
            if not self._differences(index, method, path, query, body):
                return index
        return None

    def _diverged_at(self, start: int, method: str, path: str, body: bytes) -> int:
        """With ``seek``, for a request no interaction matches: the one from ``start`` on it diverged at, the
        one whose conversation it follows furthest (:func:`~flightlog.providers.replay_match.shared_history`;
        the earliest on a tie, so ``start`` when it follows none). A resumed process starts at #0, so its
        position alone would name #0 for a request that left the recording at #3 (a signal's message)."""
        best, reach = start, -1
        for index in range(start, len(self.interactions)):
            expected = self.interactions[index]
            shared = shared_history(expected.request, expected.dialect, method=method, path=path, body=body)
            if shared > reach:
                best, reach = index, shared
        return best

    def _log(self, index: int, *, matched: bool, skipped: list[int], differences: list[str]) -> None:
        if self.journal is None:
            return
        entry = {
            "pid": os.getpid(),
            "index": index,
            "matched": matched,
            "skipped": skipped,
            "differences": differences,
        }
        with self.journal.open("a", encoding="utf-8") as fh:  # one short O_APPEND write per line
            fh.write(json.dumps(entry) + "\n")


def _decoded(body: bytes) -> Any:
    text = body.decode("utf-8", errors="replace")
    try:
        return json.loads(text) if text else None
    except ValueError:
        return text


def _check_journal(journal: Path) -> None:
    """Refuse a journal the server could not append to, naming it (:class:`ReplayServer`'s ``Raises``)."""
    parent = journal.absolute().parent
    if not parent.is_dir():
        raise FileNotFoundError(
            f"replay journal {journal}: no directory {parent} (create it, or pass another journal path)"
        )
    if journal.is_dir():
        raise IsADirectoryError(f"replay journal {journal}: {os.strerror(errno.EISDIR)} (give a file path)")
    target = journal if journal.exists() else parent
    if not os.access(target, os.W_OK):
        raise PermissionError(
            f"replay journal {journal}: {os.strerror(errno.EACCES)} ({target} is not writable)"
        )


def _journal_failed(journal: Path | None, exc: OSError) -> list[str]:
    """The one difference a failed journal write reports (path and OS error), as a mismatch's."""
    return [f"replay journal {journal}: not written: {exc.strerror or exc}; nothing was served"]


def _mismatch_answer(
    index: int, problems: list[str], kind: str = "replay_mismatch"
) -> tuple[int, str, list[tuple[str, str]], bytes]:
    payload = {
        "error": {
            "type": kind,
            "message": f"request does not match recorded interaction #{index}: " + "; ".join(problems)
            if kind == "replay_mismatch"
            else "; ".join(problems),
            "differences": problems,
        }
    }
    headers = [("Content-Type", "application/json"), ("x-should-retry", "false")]
    return MISMATCH_STATUS, "Replay Mismatch", headers, json.dumps(payload).encode("utf-8")


def _handler_for(server: ReplayServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            status, reason, headers, payload = server._answer(self.command, self.path, body)
            self.send_response(status, reason or None)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
            self.wfile.flush()

        do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

        def log_message(self, format: str, *args: Any) -> None:
            """Silence per-request logging."""

    return _Handler


# ─── Configuring an adapter from a cassette ──────────────────────────────────────────────────────


def protocol_of(path: str) -> str:
    """The wire protocol a request path belongs to.

    Args:
        path: A URL path such as ``/v1/messages``.

    Returns:
        ``anthropic.messages``, ``openai.chat`` or ``openai.responses``.

    Raises:
        ValueError: The path belongs to none of them.
    """
    for suffix, protocol in (
        ("/messages", "anthropic.messages"),
        ("/chat/completions", "openai.chat"),
        ("/responses", "openai.responses"),
    ):
        if path.endswith(suffix):
            return protocol
    raise ValueError(f"no provider protocol serves {path!r}")


_TRANSCRIPT_KEYS: Mapping[str, frozenset[str]] = {
    "anthropic.messages": frozenset({"model", "messages", "system", "tools", "stream", "max_tokens"}),
    "openai.chat": frozenset(
        {"model", "messages", "tools", "stream", "stream_options", "max_completion_tokens"}
    ),
    "openai.responses": frozenset(
        {"model", "input", "instructions", "tools", "stream", "previous_response_id", "max_output_tokens"}
    ),
}
"""Top-level body keys each adapter renders itself from a :class:`~flightlog.providers.base.ModelRequest`."""

_MAX_KEYS: Mapping[str, str] = {
    "anthropic.messages": "max_tokens",
    "openai.chat": "max_completion_tokens",
    "openai.responses": "max_output_tokens",
}


@dataclass(frozen=True)
class RequestProfile:
    """How to configure an adapter so it sends what one recorded request sent.

    Attributes:
        protocol: Wire protocol of the request.
        model: The recorded model id.
        request_options: The adapter's ``request_options``: every recorded top-level key the adapter does
            not render from the transcript (``thinking``, ``tool_choice``, ``reasoning``, ``include``...), and
            ``None`` for the output-cap key when the recording sent none (so the adapter omits it).
        max_tokens: The recorded output cap, when one was sent.
        output_cap_key: The body key the adapter renders ``ModelRequest.max_tokens`` into (``max_tokens``,
            ``max_completion_tokens`` or ``max_output_tokens``).
        stream: Whether the recorded request streamed.
        strict_tools: The recorded ``strict`` flag of function tools (OpenAI), when every tool had one and
            they agreed; None otherwise.
    """

    protocol: str
    model: str
    request_options: Mapping[str, Any]
    max_tokens: int | None
    output_cap_key: str
    stream: bool
    strict_tools: bool | None

    def capabilities(self, base: Capabilities) -> Capabilities:
        """``base`` with ``strict_schema`` set from :attr:`strict_tools` (unchanged when that is None)."""
        if self.strict_tools is None:
            return base
        return Capabilities(
            strict_schema=self.strict_tools,
            parallel_tool_calls=base.parallel_tool_calls,
            streaming_tool_calls=base.streaming_tool_calls,
            prompt_caching=base.prompt_caching,
            structured_output=base.structured_output,
        )


def cassette_profile(interaction: Interaction) -> RequestProfile:
    """The adapter configuration that reproduces one recorded request.

    Args:
        interaction: A recorded interaction with a JSON request body.

    Returns:
        Its profile.

    Raises:
        ValueError: The request path is not a provider endpoint, or the body is not a JSON object.
    """
    request = interaction.request
    protocol = protocol_of(request.path)
    body = request.body
    if not isinstance(body, dict):
        raise ValueError(f"{request.path}: recorded body is not a JSON object")
    max_key = _MAX_KEYS[protocol]
    options: dict[str, Any] = {k: v for k, v in body.items() if k not in _TRANSCRIPT_KEYS[protocol]}
    if protocol == "openai.chat" and "max_tokens" in body:
        options[max_key] = None  # the recording used the legacy key; it stays an option
    elif max_key not in body:
        options[max_key] = None
    cap = body.get(max_key)
    return RequestProfile(
        protocol=protocol,
        model=str(body.get("model", "")),
        request_options=options,
        max_tokens=cap if isinstance(cap, int) else None,
        output_cap_key=max_key,
        stream=body.get("stream") is True,
        strict_tools=_strict_flag(body.get("tools")),
    )


def _strict_flag(tools: Any) -> bool | None:
    flags = set()
    for tool in tools if isinstance(tools, list) else []:
        holder = tool.get("function", tool) if isinstance(tool, dict) else {}
        flags.add(holder.get("strict") if isinstance(holder, dict) else None)
    return flags.pop() if len(flags) == 1 and None not in flags else None


def replay_provider(
    cassette: str | Path,
    *,
    seek: bool = False,
    journal: str | Path | None = None,
    **adapter_kwargs: Any,
) -> tuple[ModelProvider, ReplayServer]:
    """A real SDK adapter wired to a started replay server of ``cassette``: the recorded-replay provider.

    The adapter class follows the cassette's endpoint, its model and ``request_options`` follow the first
    recorded request (:func:`cassette_profile`; the recorded output cap and ``stream`` setting are forced
    through ``request_options`` too, so any ``ModelRequest.max_tokens`` and ``stream`` replay), and it never
    retries. Close the provider (``await provider.aclose()``) before the server. The caller owns
    the server: close it (``with server: ...``) when done, and call ``server.assert_clean()`` to check that
    every request matched.

    A durable run that resumes in another process builds its provider there again: pass ``seek=True`` so
    that process's server continues at the interaction the session has reached (see the module docs).

    Args:
        cassette: A VCR cassette path.
        seek: Let requests skip ahead to the interaction they match (see :class:`ReplayServer`).
        journal: Append one JSON line per answered request to this file (see :class:`ReplayServer`).
        **adapter_kwargs: Overrides for the adapter constructor (e.g. ``capabilities``,
            ``chain_responses=True``).

    Returns:
        ``(provider, server)``; the server is already running.

    Raises:
        ImportError: The SDK or pyyaml is missing (``pip install 'flightlog[providers]'``).
        ValueError: The cassette is empty or not a provider cassette.
        FileNotFoundError: ``journal``'s directory does not exist.
    """
    server = ReplayServer.from_cassette(cassette, seek=seek, journal=journal)
    if not server.interactions:
        raise ValueError(f"{cassette}: cassette has no interactions")
    profile = cassette_profile(server.interactions[0])
    options = dict(profile.request_options)
    if profile.max_tokens is not None:
        options[profile.output_cap_key] = profile.max_tokens
    recorded = server.interactions[0].request.body
    for key in ("stream", "stream_options"):  # stream exactly when the recording did
        options[key] = recorded.get(key) if isinstance(recorded, dict) else None
    adapter = _adapter_class(profile.protocol)
    kwargs: dict[str, Any] = {"api_key": "replay", "max_retries": 0, "request_options": options}
    kwargs.update(adapter_kwargs)
    server.start()
    kwargs.setdefault("base_url", server.base_url)
    kwargs.setdefault("capabilities", profile.capabilities(adapter.default_capabilities))
    try:
        provider = adapter(profile.model, **kwargs)
    except BaseException:
        server.close()
        raise
    return provider, server


def packaged_cassettes() -> dict[str, Path]:
    """The small cassettes shipped in ``flightlog/data/cassettes`` for the demo (attribution beside them).

    Returns:
        ``{"<api folder>/<name>": path}``, e.g. ``"anthropic/thinking-tool-use-roundtrip"``, sorted by name.
    """
    root = Path(__file__).resolve().parent.parent / "data" / "cassettes"
    return {f"{path.parent.name}/{path.stem}": path for path in sorted(root.glob("*/*.yaml"))}


def _adapter_class(protocol: str) -> Any:
    if protocol == "anthropic.messages":
        from .anthropic import AnthropicProvider

        return AnthropicProvider
    if protocol == "openai.chat":
        from .openai_chat import OpenAIChatProvider

        return OpenAIChatProvider
    from .openai_responses import OpenAIResponsesProvider

    return OpenAIResponsesProvider
