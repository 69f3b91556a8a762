"""The flightlog error tree.

One base, with a builtin second base where callers expect one (``except ValueError`` keeps working)::

    FlightlogError
    +-- EncodingError(ValueError)            field
    |   `-- ItemEncodingError(TypeError)     field (items[i]...)
    +-- EventDecodeError(ValueError)         seq, reason
    +-- LedgerIntegrityError                 session_id, seq, reason, divergences
    +-- ArtifactIntegrityError               handle, reason, session_id, seq
    +-- StoreError
    |   +-- SessionNotFound(LookupError)     session_id (or prefix), ambiguous matches, exact
    |   +-- AppendConflict                   session_id, seq
    |   |   `-- SessionBusy                  session_id, seq
    |   |       +-- HolderBusy               session_id, seq, effect, holder, fenced, waited_s
    |   |       `-- KernelBusy               session_id, seq (None), threads
    |   +-- StaleWriter                      session_id, epoch, current_epoch
    |   +-- SignalRowInvalid(ValueError)     signal_id, field, reason
    |   +-- ReadOnlyStore                    url
    |   |   `-- LedgerRetired                url, state, peer, at_ms
    |   `-- StoreUnavailable                 url (password removed), reason
    +-- EffectConflict                       idempotency_key, stored_hash, new_hash
    +-- GrantError                           key_id, reason
    +-- RepairError                          path, reason
    +-- ExportFailed                         url, reason
    `-- ImportFormatError(ValueError)        path, line, reason

Fields are keyword-only attributes; the one-line message is built from them. Every class pickles
(``__reduce__`` rebuilds from the keyword fields). Only ``flightlog.cli`` catches the base.

A missing optional dependency is a builtin ``ImportError`` whose message ends with :func:`install_hint`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AppendConflict",
    "ArtifactIntegrityError",
    "Divergence",
    "EffectConflict",
    "EncodingError",
    "EventDecodeError",
    "ExportFailed",
    "FlightlogError",
    "GrantError",
    "HolderBusy",
    "ImportFormatError",
    "InvalidSessionId",
    "ItemEncodingError",
    "KernelBusy",
    "LedgerIntegrityError",
    "LedgerRetired",
    "ReadOnlyStore",
    "RepairError",
    "SessionBusy",
    "SessionNotFound",
    "SignalRowInvalid",
    "StaleWriter",
    "StoreError",
    "StoreUnavailable",
    "install_hint",
    "retired_phrase",
]


def install_hint(extra: str) -> str:
    """How to install the optional dependency group ``extra`` (a ``[project.optional-dependencies]`` key of
    pyproject.toml), the same words in every message for a missing extra: ``pip install 'flightlog[X]'
    (from a checkout: pip install -e '.[X]')``. flightlog is not on PyPI yet, so the checkout form is the
    one that works today.

    Args:
        extra: The extra's name, e.g. ``"langgraph"``.

    Returns:
        One line, no trailing punctuation.
    """
    return f"pip install 'flightlog[{extra}]' (from a checkout: pip install -e '.[{extra}]')"


class FlightlogError(Exception):
    """Base of every error flightlog raises on purpose."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self._fields = fields
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), str(self), self._fields))


def _rebuild(cls: type[FlightlogError], message: str, fields: dict[str, Any]) -> FlightlogError:
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    error._fields = fields
    for name, value in fields.items():
        setattr(error, name, value)
    return error


class EncodingError(FlightlogError, ValueError):
    """A value cannot be put in canonical (RFC 8785) form; ``field`` is its JSON path (``$.a.b[2]``)."""

    field: str
    reason: str

    def __init__(self, *, field: str, reason: str) -> None:
        super().__init__(f"cannot encode {field}: {reason}", field=field, reason=reason)


class ItemEncodingError(EncodingError, TypeError):
    """An item given to a session store (``FlightlogSession.add_items``) cannot be put in canonical form;
    ``field`` names the item and its field (``items[2].content``).

    A ``TypeError`` too: the OpenAI Agents SDK's ``SQLiteSession.add_items`` raises one (``json.dumps``'s) for
    an item it cannot serialize, and its session tests expect it; still an :class:`EncodingError` (a
    ``ValueError``), as for every other value RFC 8785 cannot hold."""


class EventDecodeError(FlightlogError, ValueError):
    """Stored or supplied bytes do not decode to a known event (``seq`` may be None outside a ledger)."""

    seq: int | None
    reason: str

    def __init__(self, *, reason: str, seq: int | None = None) -> None:
        where = f"event at seq {seq}" if seq is not None else "event"
        super().__init__(f"undecodable {where}: {reason}", seq=seq, reason=reason)


class Divergence(tuple[int, str, str]):
    """One divergent sequence found by verification: ``(seq, reason, detail)``.

    ``reason`` is one of (every reason the code produces; the detail says more):

    * the chain and tree (:func:`flightlog.ledger.verify_rows`): ``gap``, ``broken_link``,
      ``hash_mismatch``, ``undecodable``, ``kind_mismatch`` (the row's ``kind`` column says another kind
      than its bytes), ``head_mismatch`` (the recorded head or tree head differs from the rows),
      ``truncated`` (a recorded head or signed checkpoint covers more events than stored);
    * signed checkpoints, seal and heads kept outside the database (:mod:`flightlog.integrity.verify`):
      ``bad_checkpoint``, ``checkpoint_mismatch``, ``rollback``, ``stale_head``, ``fork``, ``after_seal``,
      ``bad_seal``;
    * artifacts: ``artifact_missing``, ``artifact_corrupt`` (:mod:`flightlog.integrity.linked`),
      ``ref_unreadable``;
    * a retired store (:mod:`flightlog.integrity.retirement`): ``stale_copy``, ``retired_mismatch``,
      ``bad_retirement``;
    * the index log's own problems (``seq`` is then a leaf index, :mod:`flightlog.integrity.indexlog`):
      ``bad_leaf``, ``index_mismatch``, and ``bad_checkpoint``, ``truncated``, ``rollback``, ``stale_head``,
      ``fork`` as for a session;
    * the unhashed rows against the verified ledger (``verify``/``audit``): ``row_mismatch`` (the
      ``sessions`` row, :func:`flightlog.kernel.rowcheck.row_divergences`; its ``source`` in the full
      check too, :mod:`flightlog.integrity.authorship`), ``projection_mismatch`` and
      ``projection_missing`` (the ``runs`` projection, :class:`flightlog.runs.check.ProjectionCheck`; a
      listed ``runs`` row no ledger accounts for is the finding ``projection_extra``,
      :class:`flightlog.runs.check.RunFinding`, not a session's divergence);
    * side effects (:mod:`flightlog.integrity.effects`, part of the full check every entry point runs):
      ``effect_mismatch`` (an ``external_effects`` row contradicts the verified ledger, or the ledger records
      an effect twice or a completion without intent), ``intent_hash_mismatch`` (an intent event's
      ``intent_hash`` is not its intent's).
    """

    __slots__ = ()

    def __new__(cls, seq: int, reason: str, detail: str = "") -> Divergence:
        return super().__new__(cls, (seq, reason, detail))

    def __getnewargs__(self) -> tuple[int, str, str]:
        return (self[0], self[1], self[2])

    @property
    def seq(self) -> int:
        """The divergent sequence (0-based position in the session)."""
        return self[0]

    @property
    def reason(self) -> str:
        """What diverges, one word (see the class docs; :mod:`flightlog.integrity.verify` adds more)."""
        return self[1]

    @property
    def detail(self) -> str:
        """A human explanation, possibly empty."""
        return self[2]

    def __str__(self) -> str:
        return f"seq {self.seq}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


class LedgerIntegrityError(FlightlogError):
    """A session fails verification; resuming, deciding on or aborting it is refused. ``seq`` is the first
    divergent one (None when only the index log vouching for it diverges)."""

    session_id: str
    seq: int | None
    reason: str
    divergences: tuple[Divergence, ...]

    def __init__(
        self,
        *,
        session_id: str,
        reason: str,
        seq: int | None = None,
        divergences: Sequence[Divergence] = (),
    ) -> None:
        where = f" at sequence {seq}" if seq is not None else ""
        more = f" (+{len(divergences) - 1} more divergent)" if len(divergences) > 1 else ""
        super().__init__(
            f"ledger of session {session_id} diverges{where}: {reason}{more}; refusing to act on it",
            session_id=session_id,
            seq=seq,
            reason=reason,
            divergences=tuple(Divergence(*d) for d in divergences),
        )


class ArtifactIntegrityError(FlightlogError):
    """An artifact a reader needs is not what its handle names: the stored bytes of a content-addressed
    artifact (``sha256:<hex>``) hash otherwise, a salted one's content and salt do not hash to its handle
    (``salted:sha256:<hex>``), or the bytes are not what the reference promises (a message archive that
    does not parse). Raised by the store's reads (:meth:`flightlog.store.base.Store.get_artifact`) and the
    readers above them, never swallowed: acting on altered bytes would act on what was never recorded.

    ``session_id`` and ``seq`` name the event that references the artifact when the reader knows it
    (:meth:`named_by` fills them in as the error travels up: the store knows neither, the replay fold
    knows the seq, the session's loader the session); None when unknown.
    """

    handle: str
    reason: str
    session_id: str | None
    seq: int | None

    def __init__(
        self, *, handle: str, reason: str, session_id: str | None = None, seq: int | None = None
    ) -> None:
        where = ""
        if session_id is not None or seq is not None:
            parts = ([f"session {session_id}"] if session_id is not None else []) + (
                [f"seq {seq}"] if seq is not None else []
            )
            where = f" (referenced by {' at '.join(parts)})"
        super().__init__(
            f"artifact {handle}{where} {reason}; refusing to use it (`flightlog audit` names every such artifact)",
            handle=handle,
            reason=reason,
            session_id=session_id,
            seq=seq,
        )

    def named_by(self, *, session_id: str | None = None, seq: int | None = None) -> ArtifactIntegrityError:
        """This error with the referencing session and seq filled in where still unknown (a new error; the
        caller raises it ``from`` this one)."""
        return ArtifactIntegrityError(
            handle=self.handle,
            reason=self.reason,
            session_id=self.session_id if self.session_id is not None else session_id,
            seq=self.seq if self.seq is not None else seq,
        )


class StoreError(FlightlogError):
    """A storage backend failed or refused an operation."""


class SessionNotFound(StoreError, LookupError):
    """No session has this id, or a prefix matches several (``matches`` lists them).

    The message names at most five matches and says "and more" when ``matches`` holds more than five
    (the SQL stores look up six). ``exact`` is True for a lookup by exact id (``Store.get_session``, which
    every Python entry point taking a session id goes through): its message says that prefixes are not
    resolved there and how to resolve one (``Store.resolve_session``, the command line's rule).
    """

    session_id: str
    matches: tuple[str, ...]
    exact: bool

    def __init__(self, *, session_id: str, matches: Sequence[str] = (), exact: bool = False) -> None:
        if matches:
            more = ", and more (give a longer prefix)" if len(matches) > 5 else ""
            msg = f"session prefix {session_id!r} is ambiguous: matches {', '.join(matches[:5])}{more}"
        elif exact:
            msg = (
                f"no session has the id {session_id!r} (Python calls take the full id; to use a unique "
                f"prefix as the command line does, pass store.resolve_session({session_id!r}))"
            )
        else:
            msg = f"no session matches {session_id!r}"
        super().__init__(msg, session_id=session_id, matches=tuple(matches), exact=exact)


class InvalidSessionId(StoreError, ValueError):
    """A new session's id holds a character a terminal acts on instead of showing (a control character,
    newline and tab included, or a bidirectional control); nothing was written.

    Session ids are printed one per line by ``ls``, ``runs`` and ``import``: an id carrying a newline (a
    hostile transcript's ``sessionId``) would print a forged row of its own. ``reason`` names the character
    as ``U+XXXX``."""

    session_id: str
    reason: str

    def __init__(self, *, session_id: str, reason: str) -> None:
        super().__init__(
            f"refusing session id {session_id!r}: it {reason}; nothing written",
            session_id=session_id,
            reason=reason,
        )


class AppendConflict(StoreError):
    """Another writer already stored ``seq`` of this session; nothing was written."""

    session_id: str
    seq: int

    def __init__(self, *, session_id: str, seq: int) -> None:
        super().__init__(
            f"session {session_id} already has an event at seq {seq} (another writer?); nothing written",
            session_id=session_id,
            seq=seq,
        )


class SessionBusy(AppendConflict):
    """Another writer appended to the session (up to its event ``seq``) while this process verified it: to
    take it over (``Recorder.attach``, hence ``Kernel.resume``), or through every retry of the full check
    (:func:`flightlog.integrity.audit.require_intact`, hence every entry point that acts on a session). A
    live process holds the session. Nothing was written and its authority was not taken (that writer goes
    on undisturbed); never read as tampering, and not a verification either (try again when it is idle)."""

    def __init__(self, *, session_id: str, seq: int) -> None:
        StoreError.__init__(
            self,
            f"session {session_id} is held by another writer (it appended up to seq {seq} while this "
            "process verified the session); nothing written, that writer goes on",
            session_id=session_id,
            seq=seq,
        )


class HolderBusy(SessionBusy):
    """A resume waited its bound (``waited_s``, seconds) for the session's previous holder, a live process
    still driving it (``holder``: its pid, and host when not this one) with an effect in doubt (``effect``,
    its idempotency key), and gives up (:mod:`flightlog.kernel.takeover`). Nothing was reconciled or re-run
    and no event written; the effect stays in doubt for a later resume. ``seq`` is the head the resume read.

    ``fenced`` tells which of the resume's two waits ran out. False: the wait before it takes authority;
    that process still holds the session and may still be writing to it. True: the wait after it took
    authority (the epoch is bumped); that process is fenced off, its appends refused, but the tool running
    the effect may still be running, so its outcome is unknown yet.
    """

    effect: str
    holder: str
    fenced: bool
    waited_s: float

    def __init__(
        self, *, session_id: str, seq: int, effect: str, holder: str, fenced: bool, waited_s: float
    ) -> None:
        if fenced:
            detail = (
                f"its previous holder ({holder}) is fenced off (its appends are refused) but its effect "
                f"{effect} may still be running after {waited_s:g} s; nothing reconciled, the effect stays "
                "in doubt (resume again once that process has ended)"
            )
        else:
            detail = (
                f"another process ({holder}) still drives it with effect {effect} in doubt after {waited_s:g} s;"
                " its authority was not taken, nothing written, and it may still be writing (resume again"
                " when it is idle)"
            )
        StoreError.__init__(
            self,
            f"session {session_id}: {detail}",
            session_id=session_id,
            seq=seq,
            effect=effect,
            holder=holder,
            fenced=fenced,
            waited_s=waited_s,
        )


class KernelBusy(SessionBusy):
    """A ``Kernel`` was asked to resume a session it still holds itself: an activation of that same instance
    still drives it, or ``threads`` worker threads of its stopped activation still run (one may be performing
    a side effect in doubt). Its own live record is not another holder's, so the takeover would not wait for
    it (:meth:`flightlog.kernel.Kernel.resume`); refused before anything is read or written (``seq`` None).
    Resume once that activation has stopped and its threads have returned, or from another ``Kernel``
    (which waits for it as for any live holder)."""

    threads: int

    def __init__(self, *, session_id: str, threads: int) -> None:
        doing = (
            f"{threads} worker thread(s) of its stopped activation still run"
            if threads
            else "an activation of it still drives the session"
        )
        StoreError.__init__(
            self,
            f"session {session_id} is held by this Kernel instance itself ({doing}); nothing read or written "
            "(resume once it has stopped and its threads returned, or from another Kernel, which waits for it)",
            session_id=session_id,
            seq=None,
            threads=threads,
        )


class StaleWriter(StoreError):
    """The writer's authority epoch (fencing token) is older than the session's; nothing was written."""

    session_id: str
    epoch: int
    current_epoch: int

    def __init__(self, *, session_id: str, epoch: int, current_epoch: int) -> None:
        super().__init__(
            f"session {session_id}: writer holds authority epoch {epoch}, current is {current_epoch}; "
            "fenced off, nothing written",
            session_id=session_id,
            epoch=epoch,
            current_epoch=current_epoch,
        )


class SignalRowInvalid(StoreError, ValueError):
    """A row of the signal queue (``signals``, which no hash covers) is not one flightlog writes: ``field``
    holds a value of the wrong type or outside its vocabulary (an unknown ``kind``, ``urgency`` or ``state``,
    a ``queued_at_ms`` that is not an integer). Nothing was delivered, disposed or recorded for it: the
    kernel refuses to act on it (:mod:`flightlog.store.signals`). ``signal_id`` is the row's id as text."""

    signal_id: str
    field: str
    reason: str

    def __init__(self, *, signal_id: str, field: str, reason: str) -> None:
        super().__init__(
            f"signal {signal_id}: field {field} {reason}; the signals row is not one flightlog writes: "
            "nothing was delivered or recorded (fix or delete the row, then resume)",
            signal_id=signal_id,
            field=field,
            reason=reason,
        )


class ReadOnlyStore(StoreError):
    """A write was attempted on a store opened read-only."""

    url: str

    def __init__(self, *, url: str) -> None:
        super().__init__(f"store {url} is open read-only", url=url)


class LedgerRetired(ReadOnlyStore):
    """A write was attempted on a store that ``flightlog db copy`` retired: the whole ledger was moved to
    ``peer`` (``state`` ``moved``: this store is a stale copy), or this store is a partial copy of ``peer``
    (``state`` ``partial``). Nothing was written. See :mod:`flightlog.integrity.retirement`."""

    url: str
    state: str
    peer: str
    at_ms: int

    def __init__(self, *, url: str, state: str, peer: str, at_ms: int) -> None:
        StoreError.__init__(
            self,
            f"store {url} {retired_phrase(state, peer, at_ms)}",
            url=url,
            state=state,
            peer=peer,
            at_ms=at_ms,
        )


def retired_phrase(state: str, peer: str, at_ms: int) -> str:
    """What a retired store is, as :class:`LedgerRetired` and every reader of one say it: ``was moved to
    <peer> at <YYYY-MM-DD HH:MM:SS UTC> (flightlog db copy): it is a read-only stale copy; write to <peer>``
    (``state`` ``moved``), else ``is a read-only partial copy of <peer> made at <time> ...; write to <peer>``.
    ``at_ms`` is epoch ms."""
    from datetime import UTC, datetime

    when = datetime.fromtimestamp(at_ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    what = (
        f"was moved to {peer} at {when} (flightlog db copy): it is a read-only stale copy"
        if state == "moved"
        else f"is a read-only partial copy of {peer} made at {when} (flightlog db copy)"
    )
    return f"{what}; write to {peer}"


class StoreUnavailable(StoreError):
    """The store cannot be opened or reached (``url`` never carries a password)."""

    url: str
    reason: str

    def __init__(self, *, url: str, reason: str) -> None:
        super().__init__(f"cannot open store {url}: {reason}", url=url, reason=reason)


class EffectConflict(FlightlogError):
    """An idempotency key was reused with different intent bytes (seed 003, external-effect intents)."""

    idempotency_key: str
    stored_hash: str
    new_hash: str

    def __init__(self, *, idempotency_key: str, stored_hash: str, new_hash: str) -> None:
        super().__init__(
            f"effect {idempotency_key!r} was recorded with intent {stored_hash[:12]}, not {new_hash[:12]}",
            idempotency_key=idempotency_key,
            stored_hash=stored_hash,
            new_hash=new_hash,
        )


class GrantError(FlightlogError):
    """A signed grant policy does not verify or does not apply (``key_id`` names the signer when known).

    Raised by :func:`flightlog.integrity.grants.verify_grant`: a malformed DSSE envelope, no signature by a trusted
    policy key, a payload that is not a grant policy, a policy outside its validity window or for another
    authority epoch.
    """

    key_id: str
    reason: str

    def __init__(self, *, reason: str, key_id: str = "") -> None:
        who = f" (key {key_id})" if key_id else ""
        super().__init__(f"grant policy{who}: {reason}", key_id=key_id, reason=reason)


class RepairError(FlightlogError):
    """``db repair`` refused or failed; the original files are restored and nothing is deleted."""

    path: str
    reason: str

    def __init__(self, *, path: str, reason: str) -> None:
        super().__init__(f"repair of {path}: {reason}", path=path, reason=reason)


class ExportFailed(FlightlogError):
    """A receiver refused or did not take an export (``flightlog export --otlp``); ``url`` names it."""

    url: str
    reason: str

    def __init__(self, *, url: str, reason: str) -> None:
        super().__init__(f"export to {url}: {reason}", url=url, reason=reason)


class ImportFormatError(FlightlogError, ValueError):
    """A transcript cannot be imported at all (a bad line alone is skipped and reported, not raised)."""

    path: str
    line: int | None
    reason: str

    def __init__(self, *, path: str, reason: str, line: int | None = None) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {reason}", path=path, line=line, reason=reason)
