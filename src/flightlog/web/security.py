"""The dashboard's guard: host allow-list, access token, same-origin writes, CSRF, security headers.

Threat model: the dashboard listens on loopback by default, but any web page the operator visits can make
their browser send requests to it (CSRF, DNS rebinding), and every string in a ledger is untrusted (a
transcript, a tool's output, a model's answer can carry markup or misleading text). So:

* **Host allow-list** (DNS rebinding): a request whose ``Host`` is not the bound address or a loopback
  name is refused (400). Binding to a wildcard address accepts any ``Host``; the token still applies.
* **Access token** on every request, static files included: ``Authorization: Bearer <token>``, or the
  cookie set by opening any URL once with ``?token=<token>`` (the response is a 303 to the same URL
  without the token, setting an ``HttpOnly; SameSite=Strict`` cookie named per port, whose value is an HMAC
  of the token, not the token). Anything else is 401. Tokens are compared in constant time.
* **Writes** (any method but GET/HEAD/OPTIONS) from a cookie session must come from the dashboard's own
  origin (``Origin``, else ``Referer``, must equal ``scheme://Host``; neither present is refused) and carry
  the CSRF token (an HMAC of the access token, rendered into each page; checked by the route). Bearer
  clients are exempt: a browser cannot attach that header across origins without a CORS preflight, which
  the dashboard never grants.
* **Headers** on every response: a Content-Security-Policy allowing scripts, styles, fetches and form posts
  only from the dashboard itself (no inline script or style, no framing), ``nosniff``, ``no-store``,
  ``Referrer-Policy: same-origin``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger("flightlog.web")

__all__ = ["CSP", "MIN_TOKEN_CHARS", "SAFE_METHODS", "Auth", "Guard", "new_token", "unauthorized_text"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
"""The Content-Security-Policy of every response: nothing inline, nothing from elsewhere."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
MIN_TOKEN_CHARS = 8
"""Shortest access token :class:`Auth` takes, in characters (``flightlog ui --help`` says it)."""

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def new_token() -> str:
    """A fresh random access token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def _mac(key: str, label: str) -> str:
    return hmac.new(key.encode(), label.encode(), hashlib.sha256).hexdigest()


def _same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode("utf-8", "surrogateescape"), b.encode("utf-8", "surrogateescape"))


@dataclass(frozen=True)
class Auth:
    """The secrets of one dashboard, all derived from its access token.

    Attributes:
        token: The access token (printed at start, ``--token``, or ``$FLIGHTLOG_UI_TOKEN``).
    """

    token: str

    def __post_init__(self) -> None:
        if len(self.token) < MIN_TOKEN_CHARS:
            raise ValueError(f"the access token must be at least {MIN_TOKEN_CHARS} characters")

    @property
    def cookie_value(self) -> str:
        """What the session cookie holds: an HMAC of the token (the token itself never sits in a cookie)."""
        return _mac(self.token, "flightlog-ui/cookie/v1")

    @property
    def csrf(self) -> str:
        """The CSRF token rendered into pages and required on every cookie-authenticated write."""
        return _mac(self.token, "flightlog-ui/csrf/v1")

    def token_ok(self, candidate: str) -> bool:
        """Constant-time comparison with the access token."""
        return _same(candidate, self.token)

    def cookie_ok(self, candidate: str) -> bool:
        """Constant-time comparison with the cookie value."""
        return _same(candidate, self.cookie_value)

    def csrf_ok(self, candidate: str | None) -> bool:
        """Constant-time comparison with the CSRF token (None never matches)."""
        return candidate is not None and _same(candidate, self.csrf)


def unauthorized_text(token_printed: bool) -> str:
    """The body of the 401 answer: how to sign in, true to whether ``flightlog ui`` printed the token."""
    where = (
        "open the URL that `flightlog ui` printed (it carries ?token=...) once"
        if token_printed
        else "open this dashboard once with ?token=<your token> added to the URL: the token you gave "
        "`flightlog ui` ($FLIGHTLOG_UI_TOKEN or --token), which it does not print"
    )
    return f"401 Unauthorized: {where}, or send Authorization: Bearer <token>\n"


def cookie_name(port: int | None) -> str:
    """The session cookie's name: per port, since cookies are shared by every port of a host."""
    return f"flightlog_ui_{port}" if port else "flightlog_ui"


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


def _hostname(host: str) -> str:
    """The host part of a ``Host`` header value, lowercased (``[::1]:8000`` → ``::1``)."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _origin_of(url: str) -> str | None:
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return None
    return f"{parts.scheme}://{parts.netloc}".lower()


class Guard:
    """Pure ASGI middleware enforcing the module's rules in front of the whole app.

    Args:
        app: The application.
        auth: The dashboard's secrets.
        bind_host: The address the server listens on (decides the ``Host`` allow-list).
        token_printed: Whether ``flightlog ui`` printed the URL with the token (it made the token); False
            when the operator gave it (``$FLIGHTLOG_UI_TOKEN``, ``--token``: the URL printed then holds a
            placeholder). The 401 page says where the token is accordingly.
    """

    def __init__(
        self, app: ASGIApp, *, auth: Auth, bind_host: str = "127.0.0.1", token_printed: bool = True
    ) -> None:
        self.app = app
        self.auth = auth
        self.unauthorized = unauthorized_text(token_printed)
        bound = _hostname(bind_host) if bind_host not in WILDCARD_HOSTS else ""
        self.allowed_hosts: frozenset[str] | None = (
            None if bind_host in WILDCARD_HOSTS else LOOPBACK_NAMES | {bound}
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k != b"cache-control"]
                message = {**message, "headers": [*headers, *SECURITY_HEADERS]}
            await send(message)

        refusal = self._check(scope)
        if refusal is not None:
            status, body, extra = refusal
            await _respond(send_with_headers, status, body, extra)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send_with_headers(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            log.exception("dashboard request failed: %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            await _respond(send_with_headers, 500, "500 Internal Server Error (see the server log)\n", [])

    def _check(self, scope: Scope) -> tuple[int, str, list[tuple[bytes, bytes]]] | None:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        host = _header(headers, b"host") or ""
        if self.allowed_hosts is not None and _hostname(host) not in self.allowed_hosts:
            return 400, "400 Bad Request: unexpected Host header\n", []
        server = scope.get("server")
        port = server[1] if server and len(server) > 1 else None
        name = cookie_name(port)
        query = scope.get("query_string", b"").decode("latin-1")
        pairs = parse_qsl(query, keep_blank_values=True)
        given = [value for key, value in pairs if key == "token"]
        if given:
            if scope["method"] not in SAFE_METHODS or not self.auth.token_ok(given[-1]):
                return 401, "401 Unauthorized: wrong access token\n", []
            rest = urlencode([(k, v) for k, v in pairs if k != "token"])
            location = scope.get("path", "/") + (f"?{rest}" if rest else "")
            secure = "; Secure" if scope.get("scheme") == "https" else ""
            cookie = f"{name}={self.auth.cookie_value}; HttpOnly; SameSite=Strict; Path=/{secure}"
            return 303, "", [(b"location", location.encode("latin-1")), (b"set-cookie", cookie.encode())]
        bearer = _header(headers, b"authorization") or ""
        state: dict[str, Any] = scope.setdefault("state", {})
        if bearer[:7].lower() == "bearer " and self.auth.token_ok(bearer[7:].strip()):
            state["auth"] = "bearer"
            return None
        jar = SimpleCookie()
        try:
            jar.load(_header(headers, b"cookie") or "")
        except Exception:  # a malformed Cookie header is just no cookie
            jar = SimpleCookie()
        morsel = jar.get(name)
        if morsel is None or not self.auth.cookie_ok(morsel.value):
            return 401, self.unauthorized, [(b"www-authenticate", b"Bearer")]
        state["auth"] = "cookie"
        if scope["method"] not in SAFE_METHODS and not self._same_origin(scope, host):
            return 403, "403 Forbidden: cross-origin request refused\n", []
        return None

    @staticmethod
    def _same_origin(scope: Scope, host: str) -> bool:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        expected = f"{scope.get('scheme', 'http')}://{host}".lower()
        origin = _header(headers, b"origin")
        if origin is not None:  # "null" (an opaque origin) is never the dashboard's
            return _origin_of(origin) == expected
        referer = _header(headers, b"referer")
        return referer is not None and _origin_of(referer) == expected


async def _respond(send: Send, status: int, body: str, extra: list[tuple[bytes, bytes]]) -> None:
    data = body.encode()
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(data)).encode()),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
