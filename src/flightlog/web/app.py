"""The dashboard application: FastAPI routes, server-rendered pages, server-sent events.

Pages and endpoints (every one behind :class:`~flightlog.web.security.Guard`):

=============================== ==========================================================================
``GET /``                        runs: filters (``state``, ``source``), the parent/child tree, the approvals
                                 queue (100 sessions that may wait a page, ``queue_from=`` pages them, with
                                 their count) and the runs waiting for a resume; live through
                                 ``/api/stream/runs``
``GET /session?id=``             one session: header and run state, verification, its waiting calls,
                                 replay at any seq (``at=``), the event timeline (``start=`` pages it),
                                 tool calls, thinking, provider-native payloads, artifacts (100 rows a
                                 page, ``artifacts_from=`` pages them); live through
                                 ``/api/stream/session``
``GET /api/runs``                the runs page's data as JSON (what the stream sends; ``queue_from=`` too)
``GET /runs``                    every run, 100 per page: sort, filters (state, source, start date, text
                                 in goals and messages), keyset pages (:mod:`flightlog.web.runs_list`);
                                 ``/api/runs/page`` the same page as JSON
``GET /api/event?session=&seq=`` one stored event, pretty-printed JSON (the "show more" of a row)
``GET /api/proof``               one event's inclusion proof (``session``, ``seq``) for the in-browser check
                                 (:mod:`flightlog.web.proof_api`)
``GET /api/integrity?session=``  the session's signed checkpoints, witness cosignatures and seals with the
                                 keys the server trusts, checked in the browser
                                 (:mod:`flightlog.web.integrity_api`)
``GET /api/waterfall?session=``  the run's time spans and per-turn tokens and context fill, drawn on
                                 the session page (:mod:`flightlog.web.waterfall_api`)
``GET /api/charts?session=``    the run's cumulative cost at list prices and entropy score per turn
                                 (:mod:`flightlog.web.charts_api`)
``GET /conversation?id=``        the replayed transcript at any seq (``at=``) as a conversation, a page
                                 at a time (``before=``), and the message-level diff from another seq
                                 (``from=``)
                                 (:mod:`flightlog.web.conversation`; images through
                                 ``/api/conversation/image``)
``GET /api/stream/runs``         SSE: ``runs`` messages (the whole tree and queue) whenever they change
``GET /api/stream/session``      SSE: ``ev`` messages (new timeline rows, ``id`` = seq, so a reconnect
                                 resumes after ``Last-Event-ID``) and ``status`` messages
``POST /approvals/decide``       approve or deny a waiting call (form: ``session_id``, ``call_id``,
                                 ``decision``, ``operator``, ``reason``, ``csrf``, ``next``)
``POST /runs/abort``             abort a run (form: ``session_id``, ``operator``, ``confirm``, ``csrf``,
                                 ``next``): :func:`flightlog.kernel.abort` with the operator recorded
``POST /signals/send``           queue a signal for a run (form: ``session_id``, ``kind`` message, steer or
                                 interrupt, ``text``, ``operator``, ``csrf``, ``next``)
``GET /static/...``              ``app.js`` and ``app.css``
=============================== ==========================================================================

Approving records ``permission_resolved(responder="user")`` and ``Custom("approval_decision")`` naming the
operator (:func:`flightlog.kernel.approve`); it runs nothing. The dashboard never resumes a run: it holds no
agent definition (tools, model route, credentials) and will not load code named in a database from a
browser request. A session whose every gate is decided is listed as *waiting for resume* with the command
that continues it, ``flightlog resume SESSION``; a runner that stays up can instead poll
:func:`flightlog.kernel.pending` for the session and call ``Kernel.resume`` itself.

Reads share one read-only store opened at startup (thread-safe; SQLite in WAL mode sees each commit of
other processes); each decision opens a writable store of its own and closes it. Between reads the live
streams wait in a worker thread on ``Store.wait_for_events`` (at most ``poll_s``): PostgreSQL wakes them
on ``NOTIFY``, SQLite polls the session row (every 50 ms for a session stream; the runs stream re-reads
every ``poll_s``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse
from starlette.staticfiles import StaticFiles

from ..errors import EventDecodeError, FlightlogError, SessionNotFound
from ..kernel.abort import abort
from ..kernel.approvals import approve, deny, operator_problem, resume_command, session_in_doubt
from ..kernel.attention import no_signal_reader, send_signal
from ..kernel.errors import NotPending
from ..kernel.rowheld import LEDGER_STATUS, held_state
from ..narration import state_word
from ..runs.projection import Undecodable, listed_word, no_run_sessions, resumable_sessions
from ..sessions import replay_session
from ..store.base import Store, retired_notice
from ..store.signals import SIGNAL_KINDS
from . import actions, charts_api, conversation, integrity_api, proof_api, subtree, views, waterfall_api
from .memory import register as register_memory
from .runs_list import register as register_runs_list
from .security import Auth, Guard

__all__ = ["OpenDb", "create_app"]

log = logging.getLogger("flightlog.web")

OpenDb = Callable[[bool], AbstractContextManager[Store]]
"""``open_db(read_only)``: a context manager yielding an open store, closed on exit (the CLI's ``_store``)."""

MAX_FORM_BYTES = 64 * 1024
MAX_REASON = 2000
REPLAY_PART_BYTES = 8192

_STATIC = Path(__file__).parent / "static"


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` that is a plain string shows its invisible characters (escaping follows);
    markup from macros and :class:`~flightlog.web.views.Exact` ids pass unchanged."""
    if isinstance(value, str) and not isinstance(value, Markup | views.Exact):
        return views.visible(value)
    return value


def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("flightlog.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )


class _Dashboard:
    """Per-app state: secrets, the shared reader store, the gate cache, the stop flag, the templates."""

    def __init__(self, open_db: OpenDb, auth: Auth, poll_s: float, ping_s: float) -> None:
        self.open_db = open_db
        self.auth = auth
        self.poll_s = poll_s
        self.ping_s = ping_s
        self.pending = views.PendingCache()
        self.verified = views.VerificationCache()
        self.stopping = threading.Event()
        self.templates = _environment()
        self._reader: Store | None = None

    @property
    def reader(self) -> Store:
        if self._reader is None:
            raise RuntimeError("the dashboard is not started (use it inside its lifespan)")
        return self._reader

    @contextmanager
    def opened(self) -> Iterator[None]:
        """Open the shared reader store for the app's lifetime; set the stop flag on the way out."""
        self.stopping.clear()
        with self.open_db(True) as store:
            self._reader = store
            try:
                yield
            finally:
                self.stopping.set()
                self._reader = None

    async def wait(self, store: Store, session_id: str | None = None) -> None:
        """Wait up to ``poll_s`` for a commit that may touch ``session_id`` (any session when None).

        ``Store.wait_for_events`` in a worker thread (``asyncio.to_thread``): PostgreSQL ``LISTEN``s,
        SQLite polls the session row. The shared reader store is safe to use from worker threads
        (``SqliteStore``: ``check_same_thread=False`` behind an ``RLock``; ``PostgresStore``: a pool and
        its own listener connection). Once the dashboard is stopping (the store may be closing under the
        thread) errors end the wait quietly; otherwise a failed wait is logged and falls back to a plain
        sleep, so the next read reports the store's state.
        """
        try:
            await asyncio.to_thread(store.wait_for_events, self.poll_s, session_id=session_id)
        except Exception:
            if self.stopping.is_set():
                return
            log.warning("waiting for events failed; polling instead", exc_info=True)
            await asyncio.sleep(self.poll_s)

    def page(self, template: str, http_status: int = 200, **context: Any) -> HTMLResponse:
        """Render ``template`` (autoescaped, every string made visible) with the CSRF token, and the header's
        note when ``flightlog db copy`` retired the store (read on every page: a copy may retire it while the
        dashboard runs)."""
        retired = retired_notice(self._reader) if self._reader is not None else None
        html = self.templates.get_template(template).render(csrf=self.auth.csrf, retired=retired, **context)
        return HTMLResponse(html, status_code=http_status)

    def error(
        self,
        http_status: int,
        message: str,
        links: list[dict[str, str]] | None = None,
        *,
        heading: str | None = None,
        back: str | None = None,
    ) -> HTMLResponse:
        """An error page; ``links`` (``{"href", "label"}``) are listed under the message. ``heading``: what
        failed, in words (``Signal not sent``), then the status line (``400 Bad Request``) under it; else
        the status code is the heading. ``back``: a dashboard path (:func:`_local`) linked as "Back to the
        page you came from" above the link to the runs."""
        phrase = f"{http_status} {HTTPStatus(http_status).phrase}" if heading else None
        return self.page(
            "error.html",
            http_status,
            title=heading or str(http_status),
            status_line=phrase,
            message=message,
            links=links or [],
            back=back if back and back != "/" else None,
        )

    def resolve_page(self, path: str, session_id: str, params: dict[str, str | None]) -> Response | None:
        """None when ``session_id`` names a session exactly; else the answer a page at ``path`` gives, resolving
        the id as the command line does (:meth:`flightlog.store.base.Store.resolve_session`): a unique prefix
        (or an import's source id) redirects (303) to the page of the full id with the same ``params``; several
        matches give a 409 page linking each; none a 404; an empty id a 400 naming the ``id`` parameter."""
        if not session_id:
            return self.error(400, views.missing("id"))
        store = self.reader
        try:
            store.get_session(session_id)
            return None
        except SessionNotFound:
            pass
        try:
            full = store.resolve_session(session_id)
        except SessionNotFound as exc:
            if not exc.matches:
                return self.error(
                    404, "no recorded session has this id or prefix (a sub-agent entry may have none)"
                )
            links = [{"href": _page_href(path, m, params), "label": views.show(m, 160)} for m in exc.matches]
            return self.error(409, views.show(f"the prefix {session_id!r} matches several sessions:"), links)
        return RedirectResponse(_page_href(path, full, params), status_code=303)


def _page_href(path: str, session_id: str, params: dict[str, str | None]) -> str:
    query = views.session_href(session_id, **{k: v for k, v in params.items() if v is not None})
    return path + "?" + query.split("?", 1)[1]


def _choice(value: str | None, allowed: tuple[str, ...]) -> str | None:
    if not value:
        return None
    if value not in allowed:
        raise ValueError(value)
    return value


def _int(value: str | None) -> int | None:
    """A sequence number from a query: None when absent; ValueError unless ``0 <= n < 2**53``."""
    if value is None or value == "":
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 16:
        raise ValueError(value)
    number = int(value)
    if number >= 2**53:
        raise ValueError(value)
    return number


def _local(path: str | None) -> str:
    """A redirect target that stays on the dashboard (``/...``, never ``//host`` or a scheme)."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path


def _sse(event: str, data: Any, event_id: int | None = None) -> str:
    text = json.dumps(views.sanitize(data), ensure_ascii=False, separators=(",", ":"))
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {text}\n\n"


def _stream(body: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(
        body, media_type="text/event-stream", headers={"X-Accel-Buffering": "no", "Cache-Control": "no-store"}
    )


def create_app(
    open_db: OpenDb,
    *,
    token: str,
    bind_host: str = "127.0.0.1",
    poll_s: float = 0.4,
    ping_s: float = 5.0,
    token_printed: bool = True,
) -> FastAPI:
    """Build the dashboard.

    Args:
        open_db: Opens the store: ``open_db(True)`` once for all reads (at startup), ``open_db(False)`` per
            decision.
        token: The access token (see :mod:`flightlog.web.security`).
        bind_host: The address the server listens on (for the ``Host`` allow-list).
        poll_s: The longest a live stream waits for a change notification before reading again, in
            seconds (``Store.wait_for_events``' timeout).
        ping_s: Seconds between keep-alive comments on a quiet stream.
        token_printed: Whether the URL printed at start carries the token (False when the operator gave
            it: the 401 page then says to add it, :func:`flightlog.web.security.unauthorized_text`).

    Raises:
        ValueError: the token is shorter than 8 characters.
    """
    dash = _Dashboard(open_db, Auth(token), poll_s, ping_s)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        with dash.opened():
            yield

    app = FastAPI(title="flightlog", docs_url=None, redoc_url=None, openapi_url=None, lifespan=lifespan)
    app.state.dashboard = dash
    app.add_middleware(Guard, auth=dash.auth, bind_host=bind_host, token_printed=token_printed)
    app.mount("/static", StaticFiles(directory=_STATIC), name="static")
    _routes(app, dash)
    register_memory(app, dash)
    register_runs_list(app, dash)
    proof_api.register(app, lambda: dash.reader)
    integrity_api.register(app, lambda: dash.reader)
    waterfall_api.register(app, lambda: dash.reader)
    conversation.register(app, dash)
    charts_api.register(app, lambda: dash.reader)
    return app


def stop_streams(app: FastAPI) -> None:
    """Tell every live stream of ``app`` to end (before a server shuts down)."""
    dash: _Dashboard = app.state.dashboard
    dash.stopping.set()


def _runs_data(
    dash: _Dashboard, state: str | None, source: str | None, queue_from: int = 0
) -> dict[str, Any]:
    store = dash.reader
    queue = dash.pending.queue(store, start=queue_from, limit=views.QUEUE_PAGE)
    waiting = {sid for sid, calls in queue.suspended.items() if not calls}
    filters = {k: v for k, v in (("state", state), ("source", source)) if v}
    unreadable = dict(queue.unreadable)  # the tree adds those it finds: every one is named at the top
    runs = views.run_tree(
        store,
        state=state,
        source=source,
        waiting=waiting,
        warnings=queue.warnings,
        marks=queue.marks,
        unreadable=unreadable,
    )
    return {
        "runs": runs,
        "unreadable": views.unreadable_rows(unreadable),
        "pending": views.pending_rows([c for calls in queue.suspended.values() for c in calls], store),
        "waiting": views.waiting_rows(queue.suspended, queue.decided, store),
        "in_doubt": views.in_doubt_rows(store, queue.in_doubt),  # no gate open yet: a resume comes first
        "queue": views.queue_nav(queue, lambda start: "/?" + urlencode({**filters, "queue_from": start})),
    }


def _session_status(dash: _Dashboard, session_id: str) -> dict[str, Any]:
    """The session page's status block. A session whose row's status ends its run while its ledger waits
    shows the ledger's status and state, as ``flightlog ls`` and the runs lists do, with the row warning
    (:func:`flightlog.kernel.rowheld.held_state`)."""
    store = dash.reader
    record = store.get_session(session_id)
    queue = dash.pending.queue(store, session_id)
    suspended, decided = queue.suspended, queue.decided
    calls = suspended.get(session_id, [])
    warning = queue.warnings.get(session_id) or queue.unreadable.get(session_id, "")
    unread: Undecodable = []  # the row ended its run, its events do not decode: whether it waits is unknown
    state, budget, ended = views.session_status(store, session_id, undecodable=unread)
    held = None
    resumable: set[str] = set()  # aborted and resumable: "paused" as ls and runs say it, nothing to abort
    try:
        held = None if session_id in queue.unreadable else held_state(store, record)
        resumable = set() if held is not None else resumable_sessions(store, [record])
    except EventDecodeError as exc:
        unread.append((session_id, exc))
    if unread:  # said (over a cached fold's warning: the bytes read now decide), the rest of the page shown
        warning = views.unreadable_waits(session_id, str(unread[0][1]))
    if held is not None:
        state = state or held.value  # a stale projection gives no state; the ledger's is the one listed
    stored = LEDGER_STATUS if held is not None else record.status
    word = listed_word(record, no_run=no_run_sessions(store, [record]), resumable=resumable)
    kernel = no_signal_reader(record) is None  # a LangGraph thread's graph, an import's agent: not ours
    abandoned = state.endswith(" (abandoned)") and record.source == "kernel"
    return {
        "status": views.show(state_word(stored) if held is not None else word, 60),
        # only where a kernel runs the session: it alone reads signals, and an abort stops only its runs
        "signals": kernel and stored in ("running", "suspended", "cancelled"),  # the kernel's words
        "abortable": kernel
        and bool(state)
        and not state.startswith("terminal")
        and session_id not in resumable,
        "aborted": session_id in resumable,
        # a kernel run nothing drove within the lease (killed, crashed): resume continues it
        "abandoned": abandoned,
        # its calls in doubt (killed or aborted mid-call), as `pending` and the approvals queue list them
        "in_doubt": _in_doubt(store, session_id, session_id in resumable)
        if (abandoned or session_id in resumable) and not unread
        else [],
        # the command the aborted/abandoned sections name (with --spec when the ledger records no agent spec)
        "resume": views.show(_resume_command(store, session_id, abandoned or session_id in resumable), 200),
        "row_warning": views.show(warning, views.LINE_LIMIT),
        "state": state,
        "ended": ended,
        "budget": budget,
        "context": views.session_context(store, session_id),
        "children": subtree.child_rows(store, session_id),
        "head_seq": record.head_seq,
        "pending": views.pending_rows(calls, store),
        "waiting": views.waiting_rows(suspended, decided, store),
    }


def _resume_command(store: Store, session_id: str, resumable: bool) -> str:
    """``flightlog resume SESSION``, naming ``--spec MODULE:ATTR`` for a ``resumable`` kernel run whose
    ledger records no agent spec (:func:`~flightlog.kernel.approvals.resume_command`; a run started from
    Python); only a resumable run's events are read for it."""
    return resume_command(store, session_id) if resumable else f"flightlog resume {session_id}"


def _in_doubt(store: Store, session_id: str, paused: bool) -> list[dict[str, str]]:
    """An abandoned (or, ``paused``, aborted) kernel run's calls in doubt
    (:func:`flightlog.kernel.approvals.session_in_doubt`), each ``{call, said, todo}`` in ``pending``'s
    words (:func:`flightlog.web.views.in_doubt_rows`, as the approvals queue lists them): no gate is open, a
    resume comes first. A ledger that does not decode gives [] (the page's warning says it)."""
    try:
        calls = [dataclasses.replace(c, run_paused=paused) for c in session_in_doubt(store, session_id)]
        return views.in_doubt_rows(store, calls)
    except EventDecodeError:
        return []


def _new_rows(dash: _Dashboard, session_id: str, start: int) -> list[dict[str, Any]]:
    return list(views.new_events(dash.reader, session_id, start))


def _routes(app: FastAPI, dash: _Dashboard) -> None:
    @app.get("/", response_class=HTMLResponse)
    def runs_page(
        state: str | None = None, source: str | None = None, queue_from: str | None = None
    ) -> Response:
        """The runs tree with filters, one page of the approvals queue and runs waiting for a resume."""
        try:
            state_v, source_v = _choice(state, views.STATES), _choice(source, views.SOURCES)
        except ValueError:
            return dash.error(400, "unknown state or source filter")
        try:
            queue_v = _int(queue_from) or 0
        except ValueError:
            return dash.error(400, "queue_from must be an integer >= 0")
        data = _runs_data(dash, state_v, source_v, queue_v)
        query = "&".join(
            f"{k}={v}" for k, v in (("state", state_v), ("source", source_v), ("queue_from", queue_v)) if v
        )
        return dash.page(
            "runs.html",
            title="Runs",
            states=views.STATES,
            sources=views.SOURCES,
            state=state_v or "",
            source=source_v or "",
            stream="/api/stream/runs" + (f"?{query}" if query else ""),
            next="/" + (f"?{query}" if query else ""),
            **data,
        )

    @app.get("/favicon.ico")
    def favicon() -> Response:
        """No icon (and no 404 in the browser console)."""
        return Response(status_code=204)

    @app.get("/api/runs")
    def runs_json(
        state: str | None = None, source: str | None = None, queue_from: str | None = None
    ) -> Response:
        """The runs page's data as JSON (``queue_from=`` pages the approvals queue)."""
        try:
            state_v, source_v = _choice(state, views.STATES), _choice(source, views.SOURCES)
            queue_v = _int(queue_from) or 0
        except ValueError:
            return JSONResponse({"error": "unknown state or source filter, or queue_from"}, status_code=400)
        return JSONResponse(views.sanitize(_runs_data(dash, state_v, source_v, queue_v)))

    @app.get("/session", response_class=HTMLResponse)
    def session_page(
        id: str = "", start: str | None = None, at: str | None = None, artifacts_from: str | None = None
    ) -> Response:
        """One session: timeline, replay, tool calls, thinking, payloads, artifacts, verification."""
        try:
            start_v, at_v, artifacts_v = _int(start), _int(at), _int(artifacts_from)
        except ValueError:
            return dash.error(400, "start, at and artifacts_from must be integers >= 0")
        store = dash.reader
        params = {"start": start, "at": at, "artifacts_from": artifacts_from}
        elsewhere = dash.resolve_page("/session", id, params)
        if elsewhere is not None:
            return elsewhere
        try:
            page = views.session_page(store, id, start=start_v, artifacts_from=artifacts_v or 0)
        except SessionNotFound:
            return dash.error(404, "no recorded session has this id (a sub-agent entry may have none)")
        replay, replay_error = None, ""
        if at_v is not None:
            try:
                messages = replay_session(store, id, at=at_v, max_part_bytes=REPLAY_PART_BYTES)
                replay = views.message_rows(messages)
            except FlightlogError as exc:  # an undecodable event: say so, show the rest of the page
                replay_error = views.show(f"cannot replay: {exc}")
        earlier = views.session_href(id, start=max(0, page.start - views.EVENT_PAGE)) if page.start else ""
        later = "" if page.at_tail else views.session_href(id, start=page.start + views.EVENT_PAGE)
        status = _session_status(dash, id)
        return dash.page(
            "session.html",
            title="Session",
            page=page,
            status=status,
            verify=dash.verified.check(store, id, reuse=False),  # fresh on every load; kept for /conversation
            decisions=actions.decision_rows(store, id),
            lineage=subtree.lineage(store, id),
            replay=replay,
            replay_error=replay_error,
            at="" if at_v is None else str(at_v),
            earlier=earlier,
            later=later,
            latest=views.session_href(id) if not page.at_tail else "",
            stream=(
                "/api/stream/session?" + views.session_href(id, after=page.next_seq).split("?", 1)[1]
                if page.at_tail
                else ""
            ),
            next=views.session_href(id),
            session_id=id,
            command=views.resume_command(store, id),
        )

    @app.get("/api/event")
    def event_json(session: str = "", seq: str = "", id: str = "") -> Response:
        """One stored event, pretty-printed (served as JSON text, never as HTML)."""
        session, problem = views.api_session(session, id)
        if problem is not None:
            return PlainTextResponse(problem + "\n", status_code=400)
        try:
            seq_v = _int(seq)
        except ValueError:
            seq_v = None
        if seq_v is None:
            return PlainTextResponse("seq must be an integer >= 0\n", status_code=400)
        text = views.raw_event(dash.reader, session, seq_v)
        if text is None:
            return PlainTextResponse("no such event\n", status_code=404)
        return Response(text, media_type="application/json; charset=utf-8")

    @app.get("/api/stream/runs")
    async def runs_stream(
        state: str | None = None, source: str | None = None, queue_from: str | None = None
    ) -> Response:
        """Server-sent ``runs`` messages whenever the tree, the queue's page or the waiting list change."""
        try:
            state_v, source_v = _choice(state, views.STATES), _choice(source, views.SOURCES)
            queue_v = _int(queue_from) or 0
        except ValueError:
            return PlainTextResponse("unknown state or source filter, or queue_from\n", status_code=400)

        async def body() -> AsyncIterator[str]:
            clock = asyncio.get_running_loop().time
            last, since = "", clock()
            store = dash.reader
            yield "retry: 2000\n\n"
            while not dash.stopping.is_set():
                data = await run_in_threadpool(_runs_data, dash, state_v, source_v, queue_v)
                message = _sse("runs", data)
                if message != last:
                    last, since = message, clock()
                    yield message
                elif clock() - since >= dash.ping_s:
                    since = clock()
                    yield ": ping\n\n"
                await dash.wait(store)

        return _stream(body())

    @app.get("/api/stream/session")
    async def session_stream(request: Request, id: str = "", after: str | None = None) -> Response:
        """Server-sent ``ev`` messages for new events (from ``after`` or ``Last-Event-ID`` + 1) and
        ``status`` messages when the status, run state or waiting calls change."""
        if not id:
            return PlainTextResponse(views.missing("id") + "\n", status_code=400)
        try:
            position = _int(after) or 0
            last_id = _int(request.headers.get("last-event-id"))
        except ValueError:
            return PlainTextResponse("after must be an integer >= 0\n", status_code=400)
        if last_id is not None:
            position = last_id + 1
        try:
            await run_in_threadpool(dash.reader.get_session, id)
        except SessionNotFound:
            return PlainTextResponse("no such session\n", status_code=404)

        async def body() -> AsyncIterator[str]:
            nonlocal position
            clock = asyncio.get_running_loop().time
            last, since = "", clock()
            store = dash.reader
            yield "retry: 2000\n\n"
            while not dash.stopping.is_set():
                rows = await run_in_threadpool(_new_rows, dash, id, position)
                for row in rows:
                    position = row["seq"] + 1
                    yield _sse("ev", row, row["seq"])
                status = _sse("status", await run_in_threadpool(_session_status, dash, id))
                if status != last or rows:
                    since = clock()
                if status != last:
                    last = status
                    yield status
                elif not rows and clock() - since >= dash.ping_s:
                    since = clock()
                    yield ": ping\n\n"
                if not rows:
                    await dash.wait(store, id)

        return _stream(body())

    async def posted(
        request: Request, heading: str
    ) -> tuple[dict[str, str], Callable[[int, str], Response], Response | None]:
        """A posted form after the size, type and CSRF checks; the failure responder; a refusal or None.

        The responder answers a script (``Accept: application/json``) with ``{"ok": false, "error"}``, and a
        form posted without one (no JavaScript) with an error page headed ``heading`` (what did not happen,
        ``Signal not sent``), the error, and a link back to the form's ``next`` page (a dashboard path)."""
        wants_json = "application/json" in request.headers.get("accept", "")
        back: list[str] = []  # the form's next page, once the form is read

        def fail(status: int, message: str) -> Response:
            if wants_json:
                return JSONResponse({"ok": False, "error": views.visible(message)}, status_code=status)
            return dash.error(status, message, heading=heading, back=back[0] if back else None)

        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            return {}, fail, fail(413, "form too large")
        content_type = request.headers.get("content-type", "").split(";")[0].strip()
        if content_type != "application/x-www-form-urlencoded":
            return {}, fail, fail(415, "send the form as application/x-www-form-urlencoded")
        form = dict(parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True))
        back.append(_local(form.get("next")))
        if request.state.auth != "bearer" and not dash.auth.csrf_ok(
            form.get("csrf") or request.headers.get("x-csrf-token")
        ):
            return form, fail, fail(403, "missing or wrong CSRF token: reload the page and try again")
        return form, fail, None

    @app.post("/approvals/decide")
    async def decide(request: Request) -> Response:
        """Approve or deny a waiting call; records the decision, runs nothing (see the module docs)."""
        wants_json = "application/json" in request.headers.get("accept", "")
        form, fail, refused = await posted(request, "Decision not recorded")
        if refused is not None:
            return refused
        session_id, call_id = form.get("session_id", ""), form.get("call_id", "")
        decision = form.get("decision", "")
        operator = form.get("operator", "").strip(" ")  # the rule refuses any other character at the ends
        reason = form.get("reason", "").strip() or None
        if decision not in ("approve", "deny") or not session_id or not call_id:
            return fail(400, "give session_id, call_id and decision (approve or deny)")
        problem = operator_problem(operator)  # the one rule of the CLI and the Python API
        if problem is not None:
            return fail(400, f"operator: invalid operator name: {problem}")
        if reason is not None and (len(reason) > MAX_REASON or views.visible(reason) != reason):
            return fail(400, f"the reason must be at most {MAX_REASON} printable characters")

        hints: list[str] = []

        def record() -> None:
            with dash.open_db(False) as store:
                if decision == "approve":
                    approve(store, session_id, call_id, responder=operator)
                else:
                    deny(store, session_id, call_id, responder=operator, reason=reason)
                hints.append(views.resume_command(store, session_id))

        try:
            await run_in_threadpool(record)
        except SessionNotFound:
            return fail(404, "no such session")
        except NotPending:
            return fail(409, "that call is not waiting for a decision (already decided, or never gated)")
        except FlightlogError as exc:
            return fail(409, f"not recorded: {exc}")
        verb = "approved" if decision == "approve" else "denied"
        message = f"{verb} {call_id} as {operator}"
        if wants_json:
            return JSONResponse(
                {
                    "ok": True,
                    "message": views.show(message, 300),
                    "resume": views.show(hints[0], 300),
                }
            )
        return RedirectResponse(_local(form.get("next")), status_code=303)

    @app.post("/signals/send")
    async def send(request: Request) -> Response:
        """Queue a signal for a running or suspended run (:func:`flightlog.kernel.send_signal`)."""
        form, fail, refused = await posted(request, "Signal not sent")
        if refused is not None:
            return refused
        session_id, kind = form.get("session_id", ""), form.get("kind", "")
        text, operator = form.get("text", "").strip(), form.get("operator", "").strip(" ")
        if kind not in SIGNAL_KINDS or not session_id or not text:
            return fail(400, "give session_id, kind (message, steer or interrupt) and text")
        if len(text) > MAX_REASON or views.visible(text) != text:
            return fail(400, f"the text must be at most {MAX_REASON} printable characters")
        problem = operator_problem(operator)
        if problem is not None:
            return fail(400, f"operator: invalid operator name: {problem}")

        def record() -> str:
            with dash.open_db(False) as store:
                return send_signal(store, session_id, kind, text, sender=operator).signal_id

        try:
            signal_id = await run_in_threadpool(record)
        except SessionNotFound:
            return fail(404, "no such session")
        except FlightlogError as exc:
            return fail(409, f"not queued: {exc}")
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"ok": True, "signal_id": signal_id})
        return RedirectResponse(_local(form.get("next")), status_code=303)

    @app.post("/runs/abort")
    async def abort_run(request: Request) -> Response:
        """Abort a run: fence its writer, audit it, record ``operation_cancelled`` and who asked
        (:func:`flightlog.kernel.abort`, signed with the user's key as ``flightlog abort``)."""
        form, fail, refused = await posted(request, "Run not aborted")
        if refused is not None:
            return refused
        session_id, operator = form.get("session_id", ""), form.get("operator", "").strip(" ")
        if not session_id or form.get("confirm") != "yes":
            return fail(400, "give session_id and confirm=yes (tick the box: an abort stops the run)")
        problem = operator_problem(operator)
        if problem is not None:
            return fail(400, f"operator: invalid operator name: {problem}")

        def record() -> bool:
            with dash.open_db(False) as store:
                return abort(store, session_id, requested_by=operator)

        try:
            done = await run_in_threadpool(record)
        except SessionNotFound:
            return fail(404, "no such session")
        except FlightlogError as exc:
            return fail(409, f"not aborted: {exc}")
        message = f"aborted {session_id} as {operator}" if done else f"{session_id} had already ended"
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"ok": True, "aborted": done, "message": views.show(message, 300)})
        return RedirectResponse(_local(form.get("next")), status_code=303)
