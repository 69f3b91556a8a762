"""Retired stores: what ``flightlog db copy`` leaves behind, stated durably and verifiably.

A copy is the same ledger in another store (same ledger id, so every signed origin still holds), and the
heads retained outside the database are kept per ledger id. Two writable stores of one ledger would
each make the other look rolled back. So a copy always leaves exactly one of them live and **retires**
the other:

* a whole copy (every session and the index log) **moves** the ledger: the *source* is retired
  (``state moved``, ``peer`` = the destination);
* a partial copy (some sessions) leaves the source live: the *destination* is retired
  (``state partial``, ``peer`` = the source).

A retired store refuses every write transaction (:class:`~flightlog.errors.LedgerRetired`, naming the
peer), checked by the backend inside the transaction (SQLite under ``BEGIN IMMEDIATE``; PostgreSQL just
before ``COMMIT``, after the SHARE locks the retiring copy holds), so a writer racing the copy either
commits before the copy reads or is refused. It stays readable: ``show``, ``replay``, ``export``,
``verify`` work.

**Record.** A C2SP signed note, signed by the log key (trusted like a checkpoint), kept in the retired
store's ``ledger_meta`` (``retired_record``; ``retired`` holds a JSON summary the backend reads to refuse
writes)::

    flightlog.local/<ledger id>/_/retired
    state moved
    peer "<URL of the other store, password removed, JSON string>"
    time <epoch ms>
    index <size> <base64 root>
    session <percent-encoded session id> <size> <base64 RFC 9162 root>
    ...

It pins what the retired store held at that moment: every session's size and tree root, and the index
log's. The origin's last segment ``_/retired`` cannot be a session origin (session ids are
percent-encoded, so never hold ``/``) nor the index log's (``_/index``).

**Verification** (:func:`flightlog.integrity.verify.audit_session`, :func:`flightlog.integrity.indexlog.audit_index`,
``verify --all``). When the record verifies and a session's rows are exactly its pin, a retained or
witnessed head *beyond* the pin is what a stale copy shows, not a rollback: it is reported as
``stale_copy`` ("stale copy: ... the ledger went on in <peer>"); a retained head of a session the record
does not list is a session recorded elsewhere after the copy (``stale_copy``, not ``missing``). Anything
else keeps its name: rows that differ from their pin (``retired_mismatch``: written after the copy), a
session present but not listed (``retired_mismatch``), a fork, a pinned session gone (``missing``), a
record that does not verify (``bad_retirement``; nothing is reclassified). ``stale_copy`` still fails
``verify`` (exit 1): a stale copy is not the live ledger, and a live ledger replaced by one must not pass.

Source: C2SP signed-note (format, Ed25519 signatures), C2SP tlog-checkpoint (origin line); RFC 9162
§2.1.1 (roots).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal
from urllib.parse import quote, unquote

from ..errors import StoreError
from .checkpoints import ORIGIN_HOST
from .heads import RetainedHead
from .keys import KeyManifestError, Keyring
from .notes import NoteError, open_note, parse_note, sign_note

if TYPE_CHECKING:
    from ..store.base import Store
    from .notary import Notary

__all__ = [
    "Pin",
    "Retirement",
    "RetirementCheck",
    "StaleCopy",
    "load_retirement",
    "open_retirement",
    "retired_origin",
    "sign_retirement",
    "split_missing",
    "verdict",
]

State = Literal["moved", "partial"]


def verdict(ok: bool, reasons: Iterable[str]) -> Literal["ok", "stale_copy", "diverges"]:
    """One word for a verified session or index log: ``ok``; ``stale_copy`` when every divergence is
    ``stale_copy`` (a retired store whose ledger went on in the live store: still a failure, exit 1);
    else ``diverges``. ``verify`` prints it as ``ok`` / ``STALE`` / ``DIVERGES`` and puts it in each
    ``--json`` row's ``verdict``.

    Args:
        ok: The report's ``ok``.
        reasons: The reasons of its divergences (a session's own and its index log's).
    """
    if ok:
        return "ok"
    found = set(reasons)
    return "stale_copy" if found == {"stale_copy"} else "diverges"


_DECIMAL = re.compile(r"0|[1-9][0-9]*")
_SAFE = "-._~:"


def retired_origin(ledger_id: str) -> str:
    """``flightlog.local/<ledger id>/_/retired``: the retirement record's origin line."""
    return f"{ORIGIN_HOST}/{ledger_id}/_/retired"


@dataclass(frozen=True)
class Pin:
    """What a retired store held of one log: ``size`` entries with RFC 9162 root ``root`` (32 bytes)."""

    size: int
    root: bytes

    def matches(self, size: int, root_hex: str) -> bool:
        """Whether a log of ``size`` entries with root ``root_hex`` is exactly this pin."""
        return size == self.size and root_hex == self.root.hex()


@dataclass(frozen=True)
class Retirement:
    """A retirement record (see the module docs).

    Attributes:
        ledger_id: The ledger.
        state: ``moved`` (this store was the source of a whole copy) or ``partial`` (this store is the
            destination of a copy of some sessions).
        peer: The other store's URL (password removed).
        at_ms: When, epoch ms.
        index: The index log as this store held it.
        sessions: Each session this store held, by id.
    """

    ledger_id: str
    state: State
    peer: str
    at_ms: int
    index: Pin
    sessions: Mapping[str, Pin] = field(default_factory=dict)

    def when(self) -> str:
        """``at_ms`` as ``YYYY-MM-DD HH:MM:SS UTC``."""
        return datetime.fromtimestamp(self.at_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    def describe(self) -> str:
        """One phrase: ``moved to <peer> at <time>`` or ``a partial copy of <peer> made at <time>``."""
        if self.state == "moved":
            return f"moved to {self.peer} at {self.when()}"
        return f"a partial copy of {self.peer} made at {self.when()}"

    def summary(self) -> str:
        """The JSON summary a backend reads to refuse writes (:func:`flightlog.store.base.retired_error`)."""
        return json.dumps({"state": self.state, "peer": self.peer, "at_ms": self.at_ms}, sort_keys=True)

    def text(self) -> str:
        """The note text (module docs), each line ending in a newline; sessions in id order."""
        lines = [
            retired_origin(self.ledger_id),
            f"state {self.state}",
            f"peer {json.dumps(self.peer, ensure_ascii=False)}",
            f"time {self.at_ms}",
            f"index {self.index.size} {base64.b64encode(self.index.root).decode()}",
        ]
        for sid in sorted(self.sessions):
            pin = self.sessions[sid]
            lines.append(f"session {quote(sid, safe=_SAFE)} {pin.size} {base64.b64encode(pin.root).decode()}")
        return "".join(line + "\n" for line in lines)

    @classmethod
    def parse(cls, text: str, ledger_id: str) -> Retirement:
        """Parse a record's note text for ``ledger_id``.

        Raises:
            NoteError: another origin or ledger, a missing, repeated or malformed line (names it).
        """
        lines = text[:-1].split("\n") if text.endswith("\n") else []
        if len(lines) < 5:
            raise NoteError(reason="retirement record needs origin, state, peer, time and index lines")
        if lines[0] != retired_origin(ledger_id):
            raise NoteError(reason=f"origin {lines[0][:120]!r} is not {retired_origin(ledger_id)!r}")
        state = _field(lines[1], "state")
        if state not in ("moved", "partial"):
            raise NoteError(reason=f"state {state[:20]!r} is not moved or partial")
        try:
            peer = json.loads(_field(lines[2], "peer"))
        except ValueError as exc:
            raise NoteError(reason="peer is not a JSON string") from exc
        if not isinstance(peer, str):
            raise NoteError(reason="peer is not a JSON string")
        at_ms = _decimal(_field(lines[3], "time"), "time")
        index = _pin(_field(lines[4], "index"), 2, "index")[1]
        sessions: dict[str, Pin] = {}
        for line in lines[5:]:
            encoded, pin = _pin(_field(line, "session"), 3, "session")
            try:
                sid = unquote(encoded, errors="strict")
            except UnicodeDecodeError as exc:
                raise NoteError(reason=f"session id {encoded[:60]!r} is not percent-encoded UTF-8") from exc
            if quote(sid, safe=_SAFE) != encoded or sid in sessions:
                raise NoteError(reason=f"session id {encoded[:60]!r} is not canonical or is repeated")
            sessions[sid] = pin
        return cls(ledger_id, state, peer, at_ms, index, sessions)  # type: ignore[arg-type]


def _pin(value: str, parts: int, what: str) -> tuple[str, Pin]:
    """``[name] size root`` (``parts`` space-separated fields) -> (name or "", pin)."""
    fields = value.split(" ")
    if len(fields) != parts:
        raise NoteError(reason=f"{what} line needs {parts} fields, found {len(fields)}")
    return ("" if parts == 2 else fields[0]), Pin(_decimal(fields[-2], f"{what} size"), _root(fields[-1]))


def _field(line: str, name: str) -> str:
    key, sep, value = line.partition(" ")
    if key != name or not sep:
        raise NoteError(reason=f"expected a {name!r} line, found {line[:60]!r}")
    return value


def _decimal(text: str, what: str) -> int:
    if not _DECIMAL.fullmatch(text):
        raise NoteError(reason=f"{what} {text[:30]!r} is not a decimal without leading zeros")
    return int(text)


def _root(encoded: str) -> bytes:
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise NoteError(reason="root is not base64") from exc
    if len(raw) != 32 or base64.b64encode(raw).decode() != encoded:
        raise NoteError(reason="root is not the canonical base64 of 32 bytes")
    return raw


@dataclass(frozen=True)
class StaleCopy:
    """A retired store's pin for the log being checked (a session, or the index log) and how the store was
    retired: the rule that tells a stale copy from a rollback (module docs)."""

    pin: Pin
    retired_as: str

    def explains(self, size: int, held: int, root_hex: str) -> bool:
        """Whether a head of ``size`` over a log of ``held`` entries with root ``root_hex`` is what a stale
        copy shows: the log is exactly what the store held when retired, and the head is at or beyond it."""
        return self.pin.matches(held, root_hex) and size >= self.pin.size

    def detail(self, what: str, size: int, held: int, unit: str, signed_after: bool) -> str:
        """The ``stale_copy`` divergence detail for ``what`` (a head) at ``size`` over ``held`` entries."""
        if signed_after:
            return (
                f"stale copy: {what} at size {size} was signed after this database was {self.retired_as} "
                f"(it holds the {held} {unit} it held then)"
            )
        return (
            f"stale copy: {what} covers {size} {unit}; this database holds the {held} it held when it was "
            f"{self.retired_as}: the ledger went on in the live store"
        )


def sign_retirement(record: Retirement, notary: Notary) -> str:
    """The signed note of ``record``, by the notary's log key.

    Raises:
        KeyManifestError: the signing key is not valid at ``record.at_ms`` (a record no verifier would
            accept is refused here, as :meth:`~flightlog.integrity.notary.Notary.sign` does for checkpoints).
        NoteError: the text holds a control character (a peer URL with one).
    """
    keys = notary.keyring.find(notary.signer.name, notary.signer.key_id)
    if not any(k.valid_at(record.at_ms) for k in keys):
        raise KeyManifestError(
            path="", reason=f"signing key {notary.signer.verifier} is not valid at {record.at_ms} ms"
        )
    return sign_note(record.text(), notary.signer)


def open_retirement(note: str, keyring: Keyring, ledger_id: str) -> Retirement:
    """Parse and verify a signed retirement record of ``ledger_id``.

    Raises:
        NoteError: malformed, another ledger, or no valid signature by a key trusted at its time.
    """
    record = Retirement.parse(parse_note(note).text, ledger_id)
    open_note(note, keyring, at_ms=record.at_ms)
    return record


@dataclass(frozen=True)
class RetirementCheck:
    """A store's retirement as a check sees it.

    Attributes:
        record: The verified record (None when it does not verify).
        problem: Why it does not verify (None when it does).
        summary: The backend's one-line summary (what the store says when refusing writes).
    """

    record: Retirement | None
    problem: str | None
    summary: str

    def describe(self) -> str:
        """The verified record's phrase, else the summary's, marked unverified."""
        if self.record is not None:
            return self.record.describe()
        return f"retired, per an unverified summary {self.summary[:200]}"


def load_retirement(store: Store, keyring: Keyring) -> RetirementCheck | None:
    """The store's retirement, verified against ``keyring``; None when the store is live.

    A summary without a record, a record without a summary, another ledger's record or a record that does
    not verify is a :class:`RetirementCheck` with a ``problem`` (reported as ``bad_retirement``).
    """
    try:
        summary, note = store.retirement(), store.retirement_record()
    except NotImplementedError:
        return None
    if summary is None and note is None:
        return None
    if summary is None or note is None:
        missing = "signed record" if note is None else "summary"
        return RetirementCheck(
            None, f"the store is marked retired but its {missing} is missing", summary or ""
        )
    try:
        ledger_id = store.ledger_id()
        record = open_retirement(note, keyring, ledger_id)
    except (NoteError, StoreError) as exc:
        return RetirementCheck(None, f"retirement record: {exc}", summary)
    try:
        same = json.loads(summary) == json.loads(record.summary())
    except ValueError:
        same = False
    if not same:
        return RetirementCheck(None, "the retirement summary differs from the signed record", summary)
    return RetirementCheck(record, None, summary)


def split_missing(
    heads: Iterable[RetainedHead], retired: RetirementCheck | None
) -> tuple[list[RetainedHead], list[RetainedHead]]:
    """Retained heads of sessions the database lacks: ``(missing, recorded elsewhere)``.

    A verified retirement record that does not list the session means it was recorded in the live store
    after this one was retired (or, for a partial copy, never copied): a stale copy, not a deletion. A
    session the record lists but the database lacks was deleted: missing.
    """
    missing: list[RetainedHead] = []
    elsewhere: list[RetainedHead] = []
    record = retired.record if retired is not None else None
    for head in heads:
        if record is not None and head.session_id not in record.sessions:
            elsewhere.append(head)
        else:
            missing.append(head)
    return missing, elsewhere
