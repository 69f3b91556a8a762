"""Claude Code resume copies: runs a transcript shares with a session already recorded.

``claude --resume`` / ``--continue`` of Claude Code 1.0.x–2.0.x (and ``--fork-session``) write a NEW
transcript (new ``sessionId``) whose first records are copies of the resumed session's records, with the
same ``uuid`` and ``timestamp``; the new prompts follow (issues anthropics/claude-code#4926, #10806). Each
prompt's ``uuid`` is the ``run_id`` of the ``run_started`` it becomes, so a run of the new file whose
``run_id`` another imported session records is a copy. :func:`recorded_runs` names, for each such run,
the session that records it; :func:`flightlog.importers.claude_code.read` then keeps the copied events
(replay gives the conversation as the model saw it: it was sent that history) but closes each copied run
with ``turns_used=0, total_tokens=0`` (its turns and tokens are counted in the session that recorded them),
marks the copy with ``Custom("claude_code.resume_copy")`` / ``("claude_code.resume_copy_end")`` and puts
``resumed_from`` and ``resume_copy`` (run id → session) into the new session's metadata. The earlier
transcript imported *after* the one that resumed it has no run of its own and repeats runs of a session
that has more: its runs are the copies, and its metadata says ``copy_of`` instead (:func:`label_copies`).

Trust: a session is used as the one recording a run only after it passes the full ``audit`` check
(:func:`flightlog.integrity.audit.require_intact`); one that fails it is not trusted (its runs are
imported as new, with a warning naming it). The decision is made when the session is created and kept:
importing the grown transcript again reads the mapping back from the session's metadata (the events it
yields are then checked byte for byte against the recorded ones by
:func:`flightlog.importers.check_prefix`), so a session imported later never changes what an earlier
import recorded.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from pathlib import Path

from ..encoding import parse_json
from ..errors import LedgerIntegrityError, SessionBusy
from ..events import RunStarted
from ..store.base import Store
from .base import ImportedSession, ImportWarning, events_of

__all__ = ["RunIndex", "label_copies", "recorded_runs", "run_ids_of"]

SOURCE = "import:claude-code"
"""``SessionRecord.source`` of sessions the Claude Code importer records."""


class RunIndex:
    """Which stored Claude Code sessions start a run of each ``run_id``: a hint read from the stored rows
    without checking them (:func:`recorded_runs` audits a session before trusting it).

    Built on first use by one pass over the store's Claude Code sessions, then kept up to date by
    :meth:`add` with what each import records, so importing a folder of N transcripts reads the store
    once, not N times. Sessions another process records meanwhile are not in it (their copies are then
    imported as new runs).
    """

    def __init__(self) -> None:
        self._runs: dict[str, list[str]] | None = None

    def sessions_with(self, store: Store, run_ids: set[str], own_keys: list[str]) -> dict[str, list[str]]:
        """``{session_id: [run ids of run_ids it starts]}`` over sessions not recording ``own_keys``."""
        runs = self._load(store)
        found: dict[str, list[str]] = {}
        for run_id in sorted(run_ids):
            for session_id in runs.get(run_id, ()):
                if not _same_source(session_id, own_keys):
                    found.setdefault(session_id, []).append(run_id)
        return found

    def is_empty(self, store: Store) -> bool:
        """Whether the store holds no Claude Code session, or the index (once loaded) no run: then
        :meth:`sessions_with` finds nothing whatever the run ids. Stops at the first such session; the
        index itself is loaded only by :meth:`sessions_with`."""
        if self._runs is None and not any(record.source == SOURCE for record in store.list_sessions()):
            self._runs = {}
        return self._runs is not None and not self._runs

    def runs_of(self, store: Store, session_id: str) -> set[str]:
        """The run ids the index holds for ``session_id``."""
        return {run_id for run_id, holders in self._load(store).items() if session_id in holders}

    def add(self, session_id: str, run_ids: Iterable[str]) -> None:
        """Note the runs an import just recorded in ``session_id`` (nothing to do before the first use:
        the first use reads them from the store)."""
        if self._runs is not None:
            _note(self._runs, session_id, run_ids)

    def _load(self, store: Store) -> dict[str, list[str]]:
        if self._runs is None:
            runs: dict[str, list[str]] = {}
            for record in store.list_sessions():
                if record.source == SOURCE:
                    _note(runs, record.session_id, _run_ids(store, record.session_id))
            self._runs = runs
        return self._runs


def _note(runs: dict[str, list[str]], session_id: str, run_ids: Iterable[str]) -> None:
    for run_id in run_ids:
        holders = runs.setdefault(run_id, [])
        if session_id not in holders:
            holders.append(session_id)


def run_ids_of(session: ImportedSession) -> list[str]:
    """The ``run_id`` of every ``run_started`` event of an imported session."""
    return [e.run_id for _, e in events_of(session.events, ("run_started",)) if isinstance(e, RunStarted)]


def recorded_runs(
    store: Store,
    sessions: list[ImportedSession],
    existing: Collection[str],
    warnings: list[ImportWarning],
    path: Path,
    index: RunIndex | None = None,
) -> dict[str, str]:
    """The runs of ``sessions`` (read from ``path``) that another recorded session already records.

    Args:
        store: The store.
        sessions: What the importer read (without ``recorded_runs``).
        existing: Session ids an earlier import of this source created (continued now): their metadata's
            ``resume_copy`` is the mapping (decided when they were created).
        warnings: Receives one warning per session that records some of these runs but fails the audit.
        path: The transcript (named in warnings).
        index: The run index to look runs up in (a fresh one, reading the store once, when None).

    Returns:
        ``{run_id: session_id}``; empty when no run is a copy.
    """
    if existing:
        return _frozen(store, existing)
    index = index or RunIndex()
    if index.is_empty(store):  # no stored session starts a run: nothing to look up (no decode of the runs)
        return {}
    run_ids = {run_id for s in sessions for run_id in run_ids_of(s)}
    if not run_ids:
        return {}
    candidates = index.sessions_with(store, run_ids, [s.key for s in sessions])
    return _trusted(store, candidates, warnings, path)


def label_copies(store: Store, sessions: list[ImportedSession], index: RunIndex) -> None:
    """Rename ``resumed_from`` to ``copy_of`` in the metadata of a session that has no run of its own
    while the session it copies has runs it lacks: it is the *earlier* transcript, imported after the one
    that resumed it (whose runs it repeats), not a resume."""
    for session in sessions:
        origin = session.metadata.get("resumed_from")
        copied = session.metadata.get("resume_copy")
        if not isinstance(origin, str) or not isinstance(copied, dict):
            continue
        own = set(run_ids_of(session))
        if own <= set(copied) and index.runs_of(store, origin) - own:
            session.metadata["copy_of"] = session.metadata.pop("resumed_from")


def _frozen(store: Store, session_ids: Iterable[str]) -> dict[str, str]:
    """The ``resume_copy`` mappings recorded in these sessions' metadata (merged)."""
    mapping: dict[str, str] = {}
    for session_id in session_ids:
        copy = store.get_session(session_id).metadata.get("resume_copy")
        if isinstance(copy, dict):
            mapping.update({k: v for k, v in copy.items() if isinstance(k, str) and isinstance(v, str)})
    return mapping


def _same_source(session_id: str, own_keys: list[str]) -> bool:
    """Whether ``session_id`` records one of ``own_keys`` (itself, or ``<key>@<sha12>`` of an older version)."""
    return any(session_id == key or session_id.startswith(key + "@") for key in own_keys)


def _run_ids(store: Store, session_id: str) -> list[str]:
    """The ``run_id`` of every stored ``run_started`` row of the session."""
    ids: list[str] = []
    for row in store.read_events(session_id):
        if row.kind == "run_started":
            run_id = parse_json(row.event_bytes).get("run_id")
            if isinstance(run_id, str):
                ids.append(run_id)
    return ids


def _trusted(
    store: Store, candidates: dict[str, list[str]], warnings: list[ImportWarning], path: Path
) -> dict[str, str]:
    """``{run_id: session}`` over the candidates that pass the full audit, a run going to a session that
    does not itself record it as a copy when there is one (else the first by session id)."""
    if not candidates:
        return {}
    from ..integrity.audit import Auditor  # the audit stack loads only when a copy is found

    mapping: dict[str, str] = {}
    copies: dict[str, str] = {}
    # the full check require_intact makes, with the index log checked once for all the candidates
    for session_id, outcome in Auditor.from_env().require_each(store, sorted(candidates)):
        hits = candidates[session_id]
        if isinstance(outcome, (LedgerIntegrityError, SessionBusy)):
            why = (
                outcome.reason
                if isinstance(outcome, LedgerIntegrityError)
                else "not verified: another writer kept appending through the check"
            )
            warnings.append(
                ImportWarning(
                    path.name,
                    None,
                    f"{len(hits)} run(s) are also in {session_id}, which fails the audit ({why}): "
                    "not trusted, imported as new runs",
                )
            )
            continue
        copied = _frozen(store, [session_id])
        for run_id in hits:
            target = copies if run_id in copied else mapping
            target.setdefault(run_id, session_id)
    return {**copies, **mapping}
