"""Read-side operations over a stored session: typed event streams, replay, export.

These glue the store (I/O) to the pure folds in :mod:`flightlog.replay`; the CLI and the Python API call
them. Everything streams: memory is bounded by the output (the replayed messages), never by the session.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, NamedTuple

from .encoding import decode_rows, decode_stored
from .errors import ArtifactIntegrityError
from .events import SessionEvent
from .messages import Message
from .replay import Rebuilder, collector_paused
from .salted import SALTED_PREFIX, get_personal_artifact, parse_handle
from .store.base import SessionRecord, Store, StoredEvent

__all__ = [
    "CreatedAt",
    "archive_loader",
    "created_at",
    "export_jsonl",
    "export_line",
    "find_sessions",
    "iter_events",
    "replay_session",
    "replay_session_cuts",
]

_HEX64 = re.compile(r"[0-9a-f]{64}")


class CreatedAt(NamedTuple):
    """What a session's ``created_at_ms`` is (:func:`created_at`).

    Attributes:
        basis: ``recorded`` (a session recorded live: when it was created), ``source`` (an import: the
            transcript's own first timestamp) or ``import`` (an import whose source gives no zone-aware time:
            the import time, never the transcript's).
        source_clock: For ``import``: the transcript's own first timestamp as it wrote it, when it has one
            without a zone (aider's ``started_at``, OpenHands' ``first_timestamp``, in the session metadata),
            else None. Shown as written, never converted (its zone is unknown).
    """

    basis: str
    source_clock: str | None


def created_at(record: SessionRecord) -> CreatedAt:
    """What ``record.created_at_ms`` means, for display (``flightlog ls``, the dashboard's session page).

    An import records the source's first zone-aware timestamp as the creation time and says so in its
    metadata (``created_from``: ``source`` or ``import``, see :mod:`flightlog.importers`); an import recorded
    before that key existed is ``source`` when its rows carry the source's times (``source_times``), else
    ``import``. Any other session is ``recorded``.
    """
    if not record.source.startswith("import:"):
        return CreatedAt("recorded", None)
    meta = record.metadata or {}
    basis = meta.get("created_from")
    if basis not in ("source", "import"):
        basis = "source" if meta.get("source_times") is True else "import"
    clock = None
    if basis == "import":
        found = meta.get("first_timestamp", meta.get("started_at"))
        clock = found if isinstance(found, str) and found.strip() else None
    return CreatedAt(basis, clock)


def find_sessions(
    store: Store,
    *,
    statuses: Sequence[str] = (),
    since_ms: int | None = None,
    task: str | None = None,
    limit: int | None = None,
    status_of: Callable[[SessionRecord], str] | None = None,
    records: Iterable[SessionRecord] | None = None,
) -> list[SessionRecord]:
    """Sessions that pass every filter given, newest first (what ``flightlog ls`` lists, in the order ``runs``
    lists runs: latest first; by creation time, then id descending); a row whose id is not text names no
    session and is not among them (:meth:`~flightlog.store.base.Store.unnamed_sessions`).

    Args:
        store: The store.
        statuses: Keep sessions whose status is one of these (exact match); empty keeps all.
        status_of: The status ``statuses`` matches for a record (default its row's ``status``; ``ls``
            passes one that says ``no run`` for a session holding no run).
        since_ms: Keep sessions created at or after this epoch time, in ms.
        task: Keep sessions whose task contains this text (case-insensitive).
        limit: Keep only the ``limit`` most recently created of those (the first ``limit``); None keeps all.
        records: The sessions to filter, as ``store.list_sessions()`` yields them (its default; ``ls``
            passes the list it already read, so 100,000 rows are read and decoded once).

    Raises:
        ValueError: ``limit`` is negative.
    """
    if limit is not None and limit < 0:
        raise ValueError("limit must be >= 0")
    needle = task.casefold() if task else None
    kept = [
        record
        for record in (store.list_sessions() if records is None else records)
        # list_sessions yields text ids only (a NULL, BLOB or undecodable id names no session:
        # Store.unnamed_sessions)
        if (not statuses or (status_of(record) if status_of else record.status) in statuses)
        and (since_ms is None or record.created_at_ms >= since_ms)
        and (needle is None or needle in record.task.casefold())
    ]
    kept.reverse()  # records come oldest first (Store.list_sessions): one pass, then newest first
    return kept if limit is None else kept[:limit]


def iter_events(
    store: Store, session_id: str, *, start: int = 0, stop: int | None = None
) -> Iterator[tuple[StoredEvent, SessionEvent]]:
    """Stream ``(row, decoded event)`` pairs in seq order.

    Raises:
        EventDecodeError: a stored event does not decode (names its seq); run ``verify`` for the full list.
    """
    for row in store.read_events(session_id, start=start, stop=stop):
        yield row, decode_stored(row.event_bytes, seq=row.seq)


def archive_loader(store: Store, session_id: str | None = None) -> Callable[[str], list[Message] | None]:
    """A replay archive loader resolving ``sha256:<hex>`` refs to artifacts holding a JSON message list,
    and ``salted:sha256:<hex>`` refs (a memory's text, :mod:`flightlog.kernel.memory_bank`) to one user message with
    the text. Every artifact read is checked against its digest by the store
    (:meth:`~flightlog.store.base.Store.get_artifact`, :meth:`~flightlog.store.base.Store.get_salted_artifact`).

    Args:
        store: Where the artifacts are.
        session_id: The session whose events name the refs (named in the errors raised; None: unknown).

    Returns:
        The loader: a ref's messages; None (so replay falls back to a note naming the ref, or marks a memory
        erased) when the ref names nothing this store holds: not a ``sha256:<64 hex>``/``salted:sha256:<64
        hex>`` handle, a content-addressed artifact not stored, or a salted one erased (the erasure is
        recorded). It never drops an artifact it cannot read.

    The loader raises:
        ArtifactIntegrityError: naming the handle and ``session_id`` (the replay fold adds the seq): the
            stored bytes hash otherwise (altered in the store); a salted artifact is gone without an erasure
            record; or a content-addressed one is not a message archive (not JSON, not a list, or an item
            that is not a message).
    """

    def load(ref: str) -> list[Message] | None:
        try:
            return _load_archive(store, ref)
        except ArtifactIntegrityError as exc:
            raise exc.named_by(session_id=session_id) from exc

    return load


def _load_archive(store: Store, ref: str) -> list[Message] | None:
    if ref.startswith(SALTED_PREFIX):
        return _load_salted(store, ref)
    digest = ref.removeprefix("sha256:")
    if not ref.startswith("sha256:") or not _HEX64.fullmatch(digest):
        return None  # not a handle: names no artifact of this store
    data = store.get_artifact(digest)
    if data is None:
        return None
    try:
        raw = json.loads(data)
        if not isinstance(raw, list):
            raise ValueError(f"a JSON {type(raw).__name__}, not a list")
        return [Message.model_validate(item) for item in raw]
    except ValueError as exc:  # json's JSONDecodeError, pydantic's ValidationError: both ValueErrors
        why = " ".join(str(exc).split())[:200]
        raise ArtifactIntegrityError(
            handle=ref, reason=f"is not a message archive (a JSON list of messages): {why}"
        ) from exc


def _load_salted(store: Store, ref: str) -> list[Message] | None:
    try:
        digest = parse_handle(ref)
    except ValueError:
        return None  # not a handle: names no artifact of this store
    text = get_personal_artifact(store, ref)
    if text is None:
        if store.erasure(digest) is None:
            raise ArtifactIntegrityError(
                handle=ref,
                reason="is missing from the store, with no erasure record (deleted outside flightlog)",
            )
        return None  # erased, and the erasure is recorded
    return [Message.text("user", text.decode("utf-8", errors="replace"))]


def replay_session(
    store: Store, session_id: str, *, at: int | None = None, max_part_bytes: int | None = None
) -> list[Message]:
    """Reconstruct the provider-neutral transcript of a session as of seq ``at`` (inclusive; None = head).

    Applies the seed 000 replay rules (see :func:`flightlog.replay.reconstruct`); page-out archives are
    loaded from the artifact store. Reads the rows up to ``at`` only (raw pages, :meth:`Store.read_chain`)
    and decodes each into its event, so an undecodable one up to ``at`` raises as in :func:`iter_events`.
    The fold runs with Python's cyclic collector paused (:func:`flightlog.replay.collector_paused`).

    Raises:
        EventDecodeError: a stored event up to ``at`` does not decode (names its seq).
        SessionNotFound: no session has exactly this id (a prefix is not resolved here:
            :meth:`Store.resolve_session`).
        ValueError: ``max_part_bytes`` is negative.
    """
    return _rebuilt(store, session_id, at, max_part_bytes, True).messages()


def replay_session_cuts(
    store: Store,
    session_id: str,
    *,
    at: int | None = None,
    max_part_bytes: int | None = None,
    mark_cuts: bool = True,
) -> tuple[list[Message], list[dict[int, int]]]:
    """:func:`replay_session`'s messages, and per message the parts ``max_part_bytes`` cut: part index ->
    that part's UTF-8 bytes before the cut (:meth:`flightlog.replay.Rebuilder.cuts`; ``{}``: none cut).
    ``mark_cuts=False``: a cut part is its first ``max_part_bytes`` bytes, without the in-text
    ``[replay truncated]`` marker (for a caller that marks it from the cuts).

    Raises:
        EventDecodeError, SessionNotFound, ValueError: as :func:`replay_session`.
    """
    rebuilder = _rebuilt(store, session_id, at, max_part_bytes, mark_cuts)
    return rebuilder.messages(), rebuilder.cuts()


def _rebuilt(
    store: Store, session_id: str, at: int | None, max_part_bytes: int | None, mark_cuts: bool
) -> Rebuilder:
    rebuilder = Rebuilder(
        archive_loader(store, session_id), max_part_bytes, keep_replay=False, mark_cuts=mark_cuts
    )
    stop = None if at is None else max(at + 1, 0)
    read = False
    with collector_paused():  # the kept transcript is many small containers (replay.collector_paused)
        for page in store.read_chain(session_id, stop=stop):  # ascending, unique seqs (the primary key)
            rebuilder.feed_all(decode_rows(page))
            read = True
    if not read:
        store.get_session(session_id)  # no rows: an empty session, or none (SessionNotFound, not [])
    return rebuilder


def export_line(row: StoredEvent) -> str:
    """One export JSONL line: ``{"seq", "prev_hash", "hash", "event"}`` with the stored bytes embedded
    verbatim as ``event`` (so RFC 8785 of the parsed ``event`` is exactly the stored bytes)."""
    return (
        f'{{"seq":{row.seq},"prev_hash":"{row.prev_hash}","hash":"{row.hash}","event":'
        f"{row.event_bytes.decode('utf-8')}}}\n"
    )


def export_jsonl(store: Store, session_id: str, out: IO[str]) -> int:
    """Write a session as JSONL (one line per event, see :func:`export_line`); returns the event count."""
    count = 0
    for row in store.read_events(session_id):
        out.write(export_line(row))
        count += 1
    return count
