"""VCR cassettes (YAML) of recorded provider HTTP exchanges, loaded into plain, typed interactions.

Two dialects are read (PROVENANCE.md, ``provider/``):

* **vcrpy** (stock): ``request.body`` is the JSON text sent; ``response.body.string`` is text, or
  ``!!binary`` bytes (gzip when the recorded headers say ``Content-Encoding: gzip``, which is kept so the
  bytes are served exactly as recorded).
* **pydantic-ai**: ``request.parsed_body`` / ``response.parsed_body`` hold the decoded JSON (keys sorted,
  bodies decompressed, every string passed through :func:`pydantic_ai_normalise`); a response without
  ``parsed_body`` (server-sent events) keeps ``body.string`` as recorded.

Loading needs ``pyyaml`` (``pip install 'flightlog[providers]'``); YAML is parsed with the safe loader
(which maps ``!!binary`` to bytes).
"""

from __future__ import annotations

import importlib
import json
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

from ..errors import install_hint

__all__ = [
    "Dialect",
    "Interaction",
    "RecordedRequest",
    "RecordedResponse",
    "load_cassette",
    "pydantic_ai_normalise",
]

Dialect = Literal["vcrpy", "pydantic-ai"]

_SMART_CHARS = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u2013": "-",
        "\u2014": "--",
        "\u2026": "...",
    }
)


def pydantic_ai_normalise(text: str) -> str:
    """The text normalisation pydantic-ai's cassette serializer applies to every recorded JSON string.

    Smart quotes, en/em dashes and the ellipsis become ASCII, then NFKC. Base64/base64url payloads
    (signatures, encrypted reasoning) and ids are ASCII, so they pass through unchanged.

    Args:
        text: Any string.

    Returns:
        The normalised string.
    """
    return unicodedata.normalize("NFKC", text.translate(_SMART_CHARS))


@dataclass(frozen=True)
class RecordedRequest:
    """One recorded request.

    Attributes:
        method: HTTP method, upper case.
        host: The recorded host, e.g. ``api.openai.com`` (never contacted).
        path: URL path, e.g. ``/v1/messages``.
        query: Query parameters as ``(name, value)`` pairs, in recorded order.
        body: The decoded JSON body; None when the request had no body or it was not JSON.
        raw_body: The body text as recorded ("" for pydantic-ai, which only keeps the JSON).
    """

    method: str
    host: str
    path: str
    query: tuple[tuple[str, str], ...]
    body: Any
    raw_body: str


@dataclass(frozen=True)
class RecordedResponse:
    """One recorded response, ready to serve.

    Attributes:
        status: HTTP status code.
        reason: HTTP reason phrase.
        headers: ``(name, value)`` pairs as recorded, minus hop-by-hop and length headers (the server
            recomputes ``Content-Length``); ``Content-Encoding`` is kept only when ``body`` is still encoded.
        body: The exact bytes to send.
    """

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)

    @property
    def is_event_stream(self) -> bool:
        """True for a server-sent-events body (``text/event-stream``)."""
        return "text/event-stream" in (self.header("content-type") or "")


@dataclass(frozen=True)
class Interaction:
    """One recorded request/response pair and the cassette dialect it was written in."""

    request: RecordedRequest
    response: RecordedResponse
    dialect: Dialect


_DROPPED_HEADERS = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})


def load_cassette(path: str | Path) -> list[Interaction]:
    """Read a VCR cassette file.

    Args:
        path: The ``.yaml`` cassette.

    Returns:
        Its interactions in recorded order.

    Raises:
        ImportError: ``pyyaml`` is not installed.
        OSError: The file cannot be read.
        ValueError: The file is not a cassette (no ``interactions`` list, or an interaction lacks a
            request or response).
    """
    document = _yaml_load(Path(path).read_text(encoding="utf-8"))
    interactions = document.get("interactions") if isinstance(document, dict) else None
    if not isinstance(interactions, list):
        raise ValueError(f"{path}: not a VCR cassette (no 'interactions' list)")
    return [_interaction(item, f"{path}#{index}") for index, item in enumerate(interactions)]


def _yaml_load(text: str) -> Any:
    try:
        yaml = importlib.import_module("yaml")
    except ImportError as exc:
        raise ImportError(f"reading cassettes needs pyyaml: {install_hint('providers')}") from exc
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    return yaml.load(text, Loader=loader)


def _interaction(item: Any, where: str) -> Interaction:
    if not isinstance(item, dict) or not isinstance(item.get("request"), dict):
        raise ValueError(f"{where}: interaction without a request")
    if not isinstance(item.get("response"), dict):
        raise ValueError(f"{where}: interaction without a response")
    request, response = item["request"], item["response"]
    dialect: Dialect = "pydantic-ai" if "parsed_body" in request or "parsed_body" in response else "vcrpy"
    return Interaction(_request(request), _response(response), dialect)


def _request(data: Mapping[str, Any]) -> RecordedRequest:
    url = urlsplit(str(data.get("uri", "")))
    if "parsed_body" in data:
        body, raw = data["parsed_body"], ""
    else:
        raw = _text(data.get("body"))
        body = _json_or_none(raw)
    return RecordedRequest(
        method=str(data.get("method", "GET")).upper(),
        host=url.hostname or "",
        path=url.path or "/",
        query=tuple(parse_qsl(url.query, keep_blank_values=True)),
        body=body,
        raw_body=raw,
    )


def _response(data: Mapping[str, Any]) -> RecordedResponse:
    status = data.get("status") or {}
    headers = _header_pairs(data.get("headers") or {})
    if "parsed_body" in data:
        body = json.dumps(data["parsed_body"], ensure_ascii=False).encode("utf-8")
        encoded = False
    else:
        raw = (data.get("body") or {}).get("string", b"")
        encoded = isinstance(raw, bytes)
        body = raw if isinstance(raw, bytes) else str(raw).encode("utf-8")
    kept = tuple(
        (name, value)
        for name, value in headers
        if name.lower() not in _DROPPED_HEADERS and (encoded or name.lower() != "content-encoding")
    )
    return RecordedResponse(
        status=int(status.get("code", 200)),
        reason=str(status.get("message", "")),
        headers=kept,
        body=body,
    )


def _header_pairs(headers: Mapping[str, Any]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name, values in headers.items():
        for value in values if isinstance(values, list) else [values]:
            pairs.append((str(name), str(value)))
    return pairs


def _text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, bytes):
        return body.decode("utf-8", errors="replace")
    if isinstance(body, dict):
        return _text(body.get("string"))
    return str(body)


def _json_or_none(text: str) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None
