"""Audit commands: ``prove``, ``verify-proof``, ``audit``, ``keys``, ``witness``, ``grants`` and ``erase``,
as the Typer app ``audit_app``.

Mount at the top level of the ``flightlog`` command with ``app.add_typer(audit_app)`` (no name: Typer then
adds the commands themselves, so they read ``flightlog prove ...``). The commands read the root
command's ``--db`` (``flightlog.cli.state``), and raise :class:`~flightlog.errors.FlightlogError` for the
root's one handler to print and map to an exit code. Exit codes follow the rest of the CLI: 0 intact or
valid, 1 a problem found, 2 a usage mistake (bad option, unknown session, unreadable proof file).

:func:`check_sessions` is the body of both ``flightlog audit`` and ``flightlog verify``: the full check of
:mod:`flightlog.integrity.audit` (chain, tree, signed checkpoints, seal, retained head, witnessed heads (each trusted
witness with a URL is asked, unless ``--offline``), the index log and the session's checkpoints it holds,
salted artifacts), the same check every command that acts on a session runs first; with ``--all`` the
index log is reported once, with the sessions it (or a retained head) knows but the database lost. Then the
unhashed rows against the verified ledger: the ``sessions`` row (``row_mismatch``,
:func:`flightlog.kernel.rowcheck.row_divergences`; a kernel sub-agent's parent in the full check,
:mod:`flightlog.integrity.lineage`, and with ``--all`` a sub-agent whose row names no parent while a
verified ledger spawned it, printed ``PARENT``) and the ``runs`` projection
(:class:`flightlog.runs.check.ProjectionCheck`: ``projection_mismatch`` / ``projection_missing`` per
session; with ``--all`` sub-agent rows and ``projection_extra`` rows, printed ``DIVERGES`` / ``MISSING`` /
``EXTRA``; a stale projection is a note, not a problem). The ``external_effects`` rows are compared inside
the full check itself (``effect_mismatch``, :mod:`flightlog.integrity.effects`), so every entry point that
acts refuses them too.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import FlightlogError
from ..narration import plural
from .console import terminal_safe
from .options import session_arg

if TYPE_CHECKING:  # imported inside the commands at run time: `flightlog --version` stays fast
    from pydantic import ValidationError

    from ..integrity.bundle import BundleReport
    from ..integrity.heads import RetainedHead
    from ..integrity.indexlog import IndexReport
    from ..integrity.lineage import CutOff
    from ..integrity.retirement import RetirementCheck
    from ..integrity.verify import AuditReport
    from ..store import Store
    from ..store.base import UnnamedSessionRow

__all__ = ["audit_app", "check_sessions", "grants_app", "keys_app", "witness_app"]

_PLAIN: Any = {"no_args_is_help": True, "rich_markup_mode": None}  # help text is not rich markup
audit_app = typer.Typer(help="Proofs, checkpoint audits and log keys.", **_PLAIN)
keys_app = typer.Typer(help="The log signing key and the trusted-key manifest.", **_PLAIN)
witness_app = typer.Typer(help="Run a witness, submit checkpoints to one, trust one.", **_PLAIN)
grants_app = typer.Typer(help="Sign and verify grant policies (DSSE, policy key).", **_PLAIN)
audit_app.add_typer(keys_app, name="keys")
audit_app.add_typer(witness_app, name="witness")
audit_app.add_typer(grants_app, name="grants")
DIVERGENCE_LINES = 20
"""Divergences ``verify`` / ``audit`` print per session (the first, in seq order); the rest are counted in
one ``(+N more divergent; --json lists them all)`` line (the exit code is the same either way)."""


@contextmanager
def _store(read_only: bool = True) -> Iterator[Store]:
    from .options import open_db as open_root_store  # the root callback has parsed --db by now

    with open_root_store(read_only=read_only) as store:
        yield store


def _emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def _say(text: str) -> None:
    sys.stdout.write(terminal_safe(text) + "\n")


# ─── prove / verify-proof ─────────────────────────────────────────────────────────────────────


@audit_app.command("prove")
def prove_cmd(
    session: Annotated[str, session_arg()],
    seq: Annotated[int | None, typer.Option("--seq", help="Prove this event is in the tree head.")] = None,
    from_size: Annotated[int | None, typer.Option("--from", help="Prove consistency from this size.")] = None,
    to_size: Annotated[
        int | None,
        typer.Option("--to", help="Tree size to prove against [default: latest signed checkpoint]."),
    ] = None,
    index: Annotated[
        bool, typer.Option("--index", help="Prove the latest session checkpoint is in the signed index log.")
    ] = False,
) -> None:
    """Print an RFC 9162 inclusion (--seq N), consistency (--from A [--to B]) or index (--index) proof."""
    from ..integrity.indexlog import prove_index_inclusion
    from ..integrity.proofs import prove_consistency, prove_inclusion

    if sum((seq is not None, from_size is not None, index)) != 1:
        raise typer.BadParameter("give one of --seq N, --from SIZE or --index")
    with _store() as store:
        sid = store.resolve_session(session)
        try:
            if index:
                proof: Any = prove_index_inclusion(store, sid)
            elif seq is not None:
                proof = prove_inclusion(store, sid, seq, tree_size=to_size)
            else:
                assert from_size is not None
                proof = prove_consistency(store, sid, from_size, to_size)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from exc
    _emit(proof.to_json())
    for size in _unsigned_heads(proof):
        sys.stderr.write(
            f"note: no signed checkpoint at tree size {size}: the root is not authenticated, and "
            "verify-proof refuses this proof without --unsigned-root-ok\n"
        )


@audit_app.command("verify-proof")
def verify_proof_cmd(
    path: Annotated[
        str | None, typer.Argument(metavar="FILE", help="Proof JSON file, or - for stdin.")
    ] = None,
    unsigned_root_ok: Annotated[
        bool,
        typer.Option(
            "--unsigned-root-ok",
            help="Accept a tree head no trusted key signed: checks only the Merkle math (root NOT authenticated).",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check a proof printed by `prove`: the Merkle math, and that a trusted key signed its tree head.

    A proof whose tree head has no signed checkpoint proves nothing (anyone can make up a root) and is
    refused (exit 1) unless --unsigned-root-ok.
    """
    from ..integrity.indexlog import INDEX_PROOF_FORMAT, IndexInclusionProof, load_index_proof
    from ..integrity.keys import load_keyring
    from ..integrity.proofs import load_proof

    if path is None:
        if _stdin_is_tty():
            raise typer.BadParameter("give a proof FILE, or - to read one from stdin", param_hint="FILE")
        path = "-"
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        doc = json.loads(text)
        proof: Any = (
            load_index_proof(doc)
            if isinstance(doc, dict) and doc.get("format") == INDEX_PROOF_FORMAT
            else load_proof(doc)
        )
    except (OSError, ValueError) as exc:
        raise typer.BadParameter(f"cannot read a proof from {path}: {exc}") from exc
    keyring = load_keyring()
    unsigned = _unsigned_heads(proof)
    if isinstance(proof, IndexInclusionProof):
        problems = proof.check(keyring)
    else:
        problems = proof.check(keyring, allow_unsigned=True)  # the unsigned head is judged below
    if unsigned and not unsigned_root_ok:
        problems += [_unsigned_problem(proof, size) for size in unsigned]
    if problems and not len(keyring):
        problems.append("no trusted log keys (flightlog keys trust VKEY, or set $FLIGHTLOG_LOG_KEY)")
    authenticated = not problems and not unsigned
    if json_out:
        _emit(
            {
                "ok": not problems,
                "authenticated": authenticated,
                "unsigned_heads": unsigned,
                "problems": problems,
            }
        )
    elif problems:
        _say("\n".join(f"INVALID: {p}" for p in problems))
    elif unsigned:
        sizes = ", ".join(str(size) for size in unsigned)
        _say(
            f"ok: the Merkle math holds, but the root is NOT authenticated (unsigned tree head at size {sizes})"
        )
    else:
        _say("ok: proof holds")
    if problems:
        raise typer.Exit(1)


def _stdin_is_tty() -> bool:
    return sys.stdin.isatty()


def _unsigned_heads(proof: Any) -> list[int]:
    """Tree sizes whose root the proof relies on but no checkpoint signs."""
    from ..integrity.indexlog import IndexInclusionProof

    if isinstance(proof, IndexInclusionProof):
        return [proof.tree_size] if proof.index_checkpoint is None else []
    return list(proof.unsigned_heads())


def _unsigned_problem(proof: Any, size: int) -> str:
    from ..integrity.indexlog import IndexInclusionProof

    what = "the index log's tree head" if isinstance(proof, IndexInclusionProof) else "the tree head"
    return (
        f"{what} at size {size} is unsigned: no checkpoint signed by a trusted key authenticates its root "
        "(--unsigned-root-ok checks the math alone)"
    )


# ─── audit ────────────────────────────────────────────────────────────────────────────────────


@audit_app.command("audit")
def audit_cmd(
    session: Annotated[str | None, session_arg()] = None,
    all_sessions: Annotated[
        bool, typer.Option("--all", help="Audit every session and the index log.")
    ] = False,
    bundle: Annotated[
        Path | None,
        typer.Option("--bundle", help="Audit an offline bundle directory (no database, no network)."),
    ] = None,
    keys: Annotated[
        list[str] | None,
        typer.Option(
            "--key", help="Trusted log verifier key for --bundle (repeatable) [default: the key manifest]."
        ),
    ] = None,
    witness_keys: Annotated[
        list[str] | None,
        typer.Option(
            "--witness-key", help="Trusted witness key for --bundle (repeatable) [default: witnesses.json]."
        ),
    ] = None,
    offline: Annotated[
        bool, typer.Option("--offline", help="Do not ask witnesses (stored cosignatures only).")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print results as JSON.")] = False,
    record: Annotated[
        bool,
        typer.Option(
            "--record",
            help="With --all: record this sweep as a core_job run once it is done (the check itself only "
            "reads; without --record nothing is written).",
        ),
    ] = False,
) -> None:
    """Check sessions (`verify`'s check, on the database) or an exported bundle offline (--bundle DIR):
    chains, signed checkpoints, seals, retained and witnessed heads; sealed vs open, unanchored tails.

    Use `verify` for the sessions of your own database (the same check); use `audit --bundle DIR` for a
    bundle `flightlog export --bundle` wrote, with no database and no network, trusting only the keys
    you give (--key, --witness-key). The sessions, runs and external_effects rows are compared with the
    verified ledger (projection_mismatch names the run, the column, the stored and the folded value; a
    stale runs projection is a note; effect_mismatch names the effect and the seq of its intent or
    completion). With --all, the index log is checked too, sub-agent and extra runs rows, and
    sessions it (or a retained head) knows but the database no longer holds are listed.
    """
    if sum((bool(session), all_sessions, bundle is not None)) != 1:
        raise typer.BadParameter("give a SESSION, --all or --bundle DIR")
    if bundle is not None:
        _audit_bundle(bundle, keys or [], witness_keys, json_out)
        return
    if record and not all_sessions:
        raise typer.BadParameter("--record records a --all sweep", param_hint="--record")
    check_sessions(session, all_sessions=all_sessions, json_out=json_out, offline=offline, record=record)


def check_sessions(
    session: str | None, *, all_sessions: bool, json_out: bool, offline: bool = False, record: bool = False
) -> None:
    """The full check behind ``flightlog verify`` and ``flightlog audit``: print and exit 1 on any problem.

    Args:
        session: A session id or unique prefix (or None with ``all_sessions``).
        all_sessions: Every session, the index log, and sessions missing from the database.
        json_out: Print a JSON array (one row per session, then missing sessions, the runs projection's
            findings (:meth:`flightlog.runs.check.RunFinding.to_json`) and its notes row, then the index log).
        offline: Do not ask witnesses over the network.
        record: With ``all_sessions``, record the sweep as a ``core_job`` run once done
            (:func:`flightlog.cli.options.record_finished_job`; the check itself only reads).

    Raises:
        typer.Exit: code 1 when anything diverges or is missing (a ``runs`` row included; a stale runs
            projection alone is a note, exit 0).
    """
    from ..integrity.audit import Auditor
    from ..integrity.lineage import TreeProofs
    from ..integrity.retirement import split_missing
    from ..integrity.verify import missing_sessions
    from ..kernel.rowcheck import row_divergences
    from ..runs.check import ProjectionCheck
    from ..store.sqlite import now_ms
    from .options import progress_bar, record_finished_job

    auditor = Auditor.from_env(online=not offline)
    if all_sessions:  # each session's spawns, kept: a parent proves its sub-agents without another check
        auditor.trees = TreeProofs()
    reports: list[AuditReport] = []
    started_ms = now_ms()
    with _store() as store:
        # --all: a row whose id is not text (NULL, BLOB: a raw write) names no session to verify; named below
        unnamed = store.unnamed_sessions() if all_sessions else []
        orphans = store.orphan_events() if all_sessions else []  # events rows no sessions row owns
        stray = store.orphan_effects() if all_sessions else []  # external_effects rows of no session
        ids = (
            [s.session_id for s in store.list_sessions()]  # every id text (a row whose id is not: unnamed)
            if all_sessions
            else [store.resolve_session(session or "")]
        )
        retired = auditor.retirement(store)  # once: a retired store's record pins them all
        # --all: the index log is checked once, and reported on its own row; one session: each report
        # carries the index log's problems (a damaged index log cannot vouch for the session).
        index = auditor.index(store, retired=retired) if all_sessions else None
        runs = ProjectionCheck(store, whole=all_sessions)  # folds each session's rows as they are verified
        stale = runs.stale_note()
        events = 0
        with progress_bar(len(ids), "verify", quiet=json_out or not all_sessions) as advance:
            for sid in ids:
                # checked again while a live writer moves the head (never read as tampering: Auditor.settled)
                report = auditor.settled(
                    store, sid, index=index, retired=retired, tap=runs.tap, shared_index=False
                )
                verified = report.ok
                report.divergences.extend(row_divergences(store, report))  # the row vs the verified ledger
                found, notes = runs.session(sid, ok=verified, events=report.events)  # its runs row too
                report.divergences.extend(found)
                report.notes.extend(notes)
                if stale is not None and not all_sessions:
                    report.notes.append(stale)
                reports.append(report)
                if not json_out:
                    _print_report(report)
                events += report.events
                advance(1, events=events)  # a running total: summing every report was O(n²) in sessions
        findings, runs_notes = runs.store_findings() if all_sessions else ([], [])
        assert auditor.heads is not None
        retained = missing_sessions(store, auditor.heads) if all_sessions else []
    retained, elsewhere = split_missing(retained, retired)
    missing = _missing_rows(retained, index) + _stale_rows(elsewhere, retired) + _unnamed_rows(unnamed)
    missing += _orphan_rows(orphans) + _orphan_effect_rows(stray)
    missing += _cut_off_rows(auditor.trees.cut_off() if auditor.trees is not None else [])
    if json_out:
        gone = [{k: v for k, v in row.items() if k != "why"} for row in missing]
        gone += [f.to_json() for f in findings] + _projection_rows(stale, runs_notes, all_sessions)
        _emit([r.to_json() for r in reports] + gone + ([index.to_json()] if index is not None else []))
    else:
        for row in missing:
            if row["state"] == "stale_copy":
                _say(f"STALE     {row['session_id']}  {row['why']}")
            elif row["state"] == "unnamed_row":
                _say(f"UNNAMED   {row['why']}")
            elif row["state"] in ("orphan_events", "orphan_effects"):
                _say(f"ORPHAN    {row['session_id']}  {row['why']}")
            elif row["state"] == "row_mismatch":
                _say(f"PARENT    {row['session_id']}  seq {row['seq']}: row_mismatch ({row['why']})")
            else:
                _say(f"MISSING   {row['session_id']}  {row['why']}, but the database has no such session")
        for finding in findings:
            _say(f"{_RUN_LABELS[finding.state]:<9} {finding.run_id}  {finding.why}")
        for note in ([stale] if stale is not None and all_sessions else []) + runs_notes:
            _say(f"note: {note}")
        if index is not None:
            _print_index(index)
        _print_copy_hint(reports, index, missing)
    problem = (
        bool(missing)
        or bool(findings)
        or not all(r.ok for r in reports)
        or (index is not None and bool(index.divergences))
    )
    if all_sessions and record:  # a core_job run, recorded once done (the check itself only reads)
        bad = sum(not r.ok for r in reports) + len(missing) + len(findings)
        summary = {"sessions": len(reports), "divergent": bad, "missing": len(missing)}
        goal = f"verify --all: {plural(len(reports), 'session')} and the index log"
        record_finished_job(
            "verify",
            goal,
            started_at_ms=started_ms,
            reason="failed" if problem else "completed",
            done=len(reports),
            failed=bad,
            summary=summary,
        )
    if problem:
        raise typer.Exit(1)


def _print_copy_hint(
    reports: list[AuditReport], index: IndexReport | None, missing: list[dict[str, Any]]
) -> None:
    """One ``note:`` line saying what a divergence from a retained head means and what to do (none else)."""
    from ..integrity.heads import copy_hint

    found = [d for r in reports for d in (*r.divergences, *r.index_divergences)]
    found += index.divergences if index is not None else []
    unknown = any(row["state"] == "missing" and row.get("retained_file") for row in missing)
    hint = copy_hint(found, index=index is not None and bool(index.divergences), unknown_head=unknown)
    if hint:
        _say(f"note: {hint}")


_RUN_LABELS = {
    "projection_mismatch": "DIVERGES",
    "projection_missing": "MISSING",
    "projection_extra": "EXTRA",
}
"""How ``verify --all`` prints a problem of the ``runs`` projection (:class:`flightlog.runs.check.RunFinding`)."""


def _projection_rows(stale: str | None, notes: list[str], all_sessions: bool) -> list[dict[str, Any]]:
    """``--all --json``: the runs projection's notes (stale, not compared) as one row, ``ok`` true (a stale
    projection is read by no one: readers fold the ledgers)."""
    said = ([stale] if stale is not None else []) + notes
    if not all_sessions or not said:
        return []
    state = "projection_stale" if stale is not None else "projection_unchecked"
    return [{"session_id": None, "ok": True, "state": state, "notes": said}]


def _stale_rows(elsewhere: list[RetainedHead], retired: RetirementCheck | None) -> list[dict[str, Any]]:
    """Retained heads of sessions a retired store never held (:func:`flightlog.integrity.retirement.split_missing`)."""
    phrase = retired.describe() if retired is not None else ""
    return [
        {
            "session_id": head.session_id,
            "ok": False,
            "state": "stale_copy",
            "retained_file": str(head.path),
            "index_leaf": None,
            "why": (
                f"stale copy: a head is retained ({head.path}), but this database, {phrase}, never held the "
                "session: it was recorded in the live store"
            ),
        }
        for head in elsewhere
    ]


def _unnamed_rows(unnamed: list[UnnamedSessionRow]) -> list[dict[str, Any]]:
    """``sessions`` rows whose id is not text (:meth:`flightlog.store.base.Store.unnamed_sessions`): no
    session to verify, so each is a problem ``verify --all`` names (by its id's text and its columns)."""
    return [
        {
            "session_id": row.session_id,
            "ok": False,
            "state": "unnamed_row",
            "id_type": row.id_type,
            "created_at_ms": row.created_at_ms
            if isinstance(row.created_at_ms, int)
            else repr(row.created_at_ms),
            "status": row.status,
            "why": f"{row.describe()}: written outside flightlog, it names no session, so nothing of it can be verified",
        }
        for row in unnamed
    ]


def _orphan_rows(orphans: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """``events`` rows whose session id has no ``sessions`` row (:meth:`flightlog.store.base.Store.orphan_events`):
    no session holds them, so ``verify --all`` names them (by id and row count)."""
    return [
        {
            "session_id": sid,
            "ok": False,
            "state": "orphan_events",
            "rows": rows,
            "why": f"{rows} events row(s) of session id {sid!r} with no sessions row: written or left outside "
            "flightlog, no session holds them, so nothing of them is verified",
        }
        for sid, rows in orphans
    ]


def _orphan_effect_rows(stray: list[tuple[str, int]]) -> list[dict[str, Any]]:
    """``external_effects`` rows whose session id has no ``sessions`` row
    (:meth:`flightlog.store.base.Store.orphan_effects`): no session's check compares them with a ledger, so
    ``verify --all`` names them (by id and row count)."""
    return [
        {
            "session_id": sid,
            "ok": False,
            "state": "orphan_effects",
            "rows": rows,
            "why": f"{rows} external_effects row(s) of session id {sid!r} with no sessions row: no ledger "
            "records these effects (written outside flightlog, or their session deleted under them), so "
            "nothing of them is verified and no resume decides from them",
        }
        for sid, rows in stray
    ]


def _cut_off_rows(found: list[CutOff]) -> list[dict[str, Any]]:
    """Kernel runs whose row names no parent while a verified ledger of the sweep records spawning them
    (:meth:`flightlog.integrity.lineage.TreeProofs.cut_off`): their own check cannot tell (no ``spawned_by``
    in their start), the sweep can."""
    return [
        {
            "session_id": cut.session_id,
            "ok": False,
            "state": "row_mismatch",
            "seq": cut.at,
            "parent": cut.parent,
            "parent_seq": cut.seq,
            "why": cut.why(),
        }
        for cut in found
    ]


def _missing_rows(retained: list[Any], index: IndexReport | None) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for head in retained:
        rows[head.session_id] = {
            "session_id": head.session_id,
            "ok": False,
            "state": "missing",
            "retained_file": str(head.path),
            "index_leaf": None,
            "why": f"a head is retained ({head.path})",
        }
    for gone in index.missing if index is not None else []:
        why = f"its checkpoint at size {gone.size} is leaf {gone.leaf} of the signed index log"
        row = rows.setdefault(
            gone.session_id,
            {
                "session_id": gone.session_id,
                "ok": False,
                "state": "missing",
                "retained_file": None,
                "why": why,
            },
        )
        row["index_leaf"] = gone.leaf
        if row["why"] != why:
            row["why"] += f" and {why}"
    return list(rows.values())


_LABELS = {"ok": "ok", "stale_copy": "STALE", "diverges": "DIVERGES", "moved": "MOVED"}
"""How ``verify`` prints a verdict (:meth:`flightlog.integrity.verify.AuditReport.verdict`); a stale copy's
sessions the store never held print ``STALE`` too."""


def _print_report(report: AuditReport) -> None:
    status = _LABELS[report.verdict()]
    _say(f"{status:<9} {report.session_id}  {plural(report.events, 'event')}  root {report.root[:16]}")
    _say(f"          {report.summary()}")
    if report.moved is not None:
        _say(
            f"          moved during the check: a live writer appended (head seq {report.moved[0]} -> "
            f"{report.moved[1]}) through every check; the rows past seq {report.moved[0]} are not "
            "verified: re-run"
        )
    for note in report.notes:
        _say(f"          note: {note}")
    for ref in report.artifacts:
        _say(f"          artifact {ref.handle}: {ref.state}" + (f" ({ref.detail})" if ref.detail else ""))
    for d in report.divergences[:DIVERGENCE_LINES]:
        _say(f"          seq {d.seq}: {d.reason}" + (f" ({d.detail})" if d.detail else ""))
    if len(report.divergences) > DIVERGENCE_LINES:
        _say(
            f"          (+{len(report.divergences) - DIVERGENCE_LINES} more divergent; --json lists them all)"
        )
    for d in report.index_divergences:
        _say(f"          index log leaf {d.seq}: {d.reason}" + (f" ({d.detail})" if d.detail else ""))


def _print_index(report: IndexReport) -> None:
    status = _LABELS[report.verdict()] if report.divergences else "ok"  # missing sessions: rows of their own
    _say(f"{status:<9} index log  {plural(report.leaves, 'leaf')}  root {report.root[:16]}")
    _say(f"          {report.summary()}")
    for d in report.divergences:
        _say(f"          leaf {d.seq}: {d.reason}" + (f" ({d.detail})" if d.detail else ""))


def _audit_bundle(directory: Path, keys: list[str], witness_keys: list[str] | None, json_out: bool) -> None:
    from ..integrity.bundle import audit_bundle
    from ..integrity.keys import Keyring, TrustedKey, VerifierKey, load_keyring
    from ..integrity.witness import CosignerKey
    from ..integrity.witness_client import load_witnesses

    try:
        keyring = (
            Keyring([TrustedKey(VerifierKey.parse(k), pinned=True) for k in keys]) if keys else load_keyring()
        )
        witnesses = (
            [CosignerKey.parse(k) for k in witness_keys]
            if witness_keys
            else [w.key for w in load_witnesses()]
        )
    except FlightlogError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if not directory.is_dir():
        raise typer.BadParameter(f"no bundle directory {directory}", param_hint="--bundle")
    report = audit_bundle(directory, keyring=keyring, witness_keys=witnesses)
    if json_out:
        _emit(report.to_json())
    else:
        _say(f"{'ok' if report.ok else 'REJECTED':<9} bundle {directory}  session {report.session_id}")
        signer = f"signed by {report.signer}" if report.signer else "NOT signed by a trusted key"
        _say(f"          manifest {signer}")
        for line in report.findings():
            _say(f"          {line}")
        for note in report.notes:
            if not note.startswith(("witness:", "index:")):  # those are in the findings already
                _say(f"          note: {note}")
        for problem in report.problems:
            _say(f"          PROBLEM: {problem}")
        for d in report.audit.divergences if report.audit is not None else []:
            _say(f"          seq {d.seq}: {d.reason}" + (f" ({d.detail})" if d.detail else ""))
        if not keys:
            for line in _untrusted_signer_hint(report):
                _say(line)
    if not report.ok:
        raise typer.Exit(1)


_UNTRUSTED = "no signature by a trusted key"
"""The reason :func:`flightlog.integrity.notes.open_note` gives for a note no trusted key signed."""


def _untrusted_signer_hint(report: BundleReport) -> list[str]:
    """Two lines for ``audit --bundle`` without ``--key`` when signatures failed only for want of a trusted
    key: the flag that fixes it, and what was checked without it (nothing when something else failed too)."""
    divergences = report.audit.divergences if report.audit is not None else []
    reasons = [*report.problems, *(f"{d.reason} ({d.detail})" for d in divergences)]
    untrusted = [r for r in reasons if _UNTRUSTED in r]
    if not untrusted:
        return []
    signers = sorted(set(re.findall(r"signed by ([^)\s]+)", " ".join(untrusted))))
    lines = [
        f"hint: pass --key VKEY to check the signatures: no key of {', '.join(signers) or 'the signer'} is"
        " trusted here (`flightlog keys show` prints its VKEY where the bundle was made)"
    ]
    if len(untrusted) == len(reasons) and report.audit is not None:
        lines.append(
            f"      without it: the hash chain of its {plural(report.audit.events, 'event')} and the files' sha256"
            " (against manifest.json) were checked and agree; who signed them was not"
        )
    return lines


# ─── keys ─────────────────────────────────────────────────────────────────────────────────────


@keys_app.command("show")
def keys_show_cmd(json_out: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False) -> None:
    """Print the signing key's verifier key (creating the key on first use) and the trusted keys."""
    from ..integrity.keys import key_dir, load_keyring, load_signer

    signer = load_signer()
    keys = [k.to_json() for k in load_keyring()]
    if json_out:
        _emit({"key_dir": str(key_dir()), "signing": str(signer.verifier), "trusted": keys})
        return
    _say(f"signing key: {signer.verifier}")
    _say(f"key dir:     {key_dir()}")
    for k in keys:
        window = f"[{k['not_before_ms']}, {k['not_after_ms'] or '...'})"
        how = "pinned" if k["pinned"] else ("endorsed" if k["endorsement"] else "root")
        _say(f"  trusted {window:<32} {how:<8} {k['vkey']}")


@keys_app.command("rotate")
def keys_rotate_cmd(
    name: Annotated[str | None, typer.Option("--name", help="New key name [default: the old one].")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print {signing} as JSON.")] = False,
) -> None:
    """Retire the active key now; a new key, endorsed by the old one, signs from now on."""
    from ..integrity.keys import rotate_key

    signer = rotate_key(name=name)
    if json_out:
        _emit({"signing": str(signer.verifier)})
        return
    _say(f"new signing key: {signer.verifier}")


@keys_app.command("trust")
def keys_trust_cmd(
    vkey: Annotated[str, typer.Argument(metavar="VKEY", help="Verifier key <name>+<hex id>+<base64 key>.")],
    not_before: Annotated[int, typer.Option("--not-before", help="Valid from (epoch ms).")] = 0,
    not_after: Annotated[int | None, typer.Option("--not-after", help="Valid until (epoch ms).")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the trusted entry as JSON.")] = False,
) -> None:
    """Trust another log's verifier key (to audit sessions it signed)."""
    from ..integrity.keys import trust_key

    entry = trust_key(vkey, not_before_ms=not_before, not_after_ms=not_after)
    if json_out:
        _emit(entry.to_json())
        return
    _say(f"trusted: {entry.verifier}")


# ─── witness ──────────────────────────────────────────────────────────────────────────────────


def _default_witness_dir() -> Path:
    from platformdirs import user_state_dir

    return Path(user_state_dir("flightlog", appauthor=False)) / "witness"


@witness_app.command("serve")
def witness_serve_cmd(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port (0 picks a free one).", min=0, max=65535)] = 7380,
    store_dir: Annotated[
        Path | None,
        typer.Option("--store", help="The witness's own state directory [default: user state dir]."),
    ] = None,
    name: Annotated[str | None, typer.Option("--name", help="Name of a new witness key.")] = None,
    log_keys: Annotated[
        list[str] | None,
        typer.Option("--log-key", help="Trust this log verifier key (repeatable; kept in the store)."),
    ] = None,
    origin_prefix: Annotated[
        str, typer.Option("--origin-prefix", help="Origins the --log-key keys may sign.")
    ] = "flightlog.local/",
) -> None:
    """Run a C2SP tlog-witness: verify, check consistency, persist and cosign checkpoints (Ctrl-C stops).

    Without any trusted log key (given now or kept from before), the local key manifest's keys are trusted.
    A port that cannot be listened on (taken, not allowed) is one error line and exit 1.
    """
    from ..integrity.keys import load_keyring
    from ..integrity.witness import Witness, WitnessServer

    directory = store_dir or _default_witness_dir()
    witness = Witness.open(directory, name=name, log_keys=log_keys or [], origin_prefix=origin_prefix)
    if not witness.logs:
        local = [str(k.verifier) for k in load_keyring()]
        witness = Witness.open(directory, log_keys=local, origin_prefix=origin_prefix)
    try:
        server = WitnessServer(witness, host, port)
    except OSError as exc:
        sys.stderr.write(f"flightlog: error: cannot listen on {host}:{port}: {exc.strerror or exc}\n")
        raise typer.Exit(1) from None
    _say(f"witness key: {witness.cosigner.verifier}")
    _say(f"trusted log keys: {', '.join(str(log.verifier) for log in witness.logs) or 'none'}")
    _say(f"listening on {server.url}")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()


@witness_app.command("submit")
def witness_submit_cmd(
    session: Annotated[str | None, session_arg()] = None,
    url: Annotated[str, typer.Option("--url", help="The witness (http://host:port).")] = "",
    index: Annotated[bool, typer.Option("--index", help="Submit the index log's latest checkpoint.")] = False,
    witness_key: Annotated[
        str | None, typer.Option("--witness-key", help="The witness's key [default: trusted for --url].")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Have a witness cosign a session's (and/or the index log's) latest checkpoint; keep the cosignature.

    The session must first pass the full check (as ``audit --offline``): exit 1 naming the seq otherwise.
    """
    from ..integrity.audit import Auditor, require_intact
    from ..integrity.witness import CosignerKey
    from ..integrity.witness_client import submit_index, submit_session

    if not url:
        raise typer.BadParameter("give --url URL", param_hint="--url")
    if not session and not index:
        raise typer.BadParameter("give a SESSION and/or --index")
    try:
        key = CosignerKey.parse(witness_key) if witness_key else None
    except FlightlogError as exc:
        raise typer.BadParameter(str(exc), param_hint="--witness-key") from exc
    done = []
    with _store(read_only=False) as store:
        if session:
            sid = store.resolve_session(session)
            require_intact(
                store, sid, auditor=Auditor.from_env(online=False)
            )  # no cosigning what audit rejects
            done.append(submit_session(store, sid, url, witness_key=key))
        if index:
            done.append(submit_index(store, url, witness_key=key))
    if json_out:
        _emit(
            [
                {
                    "origin": d.origin,
                    "size": d.size,
                    "old_size": d.old_size,
                    "witness": d.witness,
                    "timestamp": d.timestamp,
                }
                for d in done
            ]
        )
        return
    for d in done:
        _say(f"cosigned {d.origin} at size {d.size} by {d.witness} (it had cosigned size {d.old_size})")


@witness_app.command("trust")
def witness_trust_cmd(
    vkey: Annotated[
        str,
        typer.Argument(metavar="VKEY", help="Witness verifier key <name>+<hex id>+<base64(0x04 || key)>."),
    ],
    url: Annotated[
        str | None, typer.Option("--url", help="Where verify/audit ask it for its latest heads.")
    ] = None,
) -> None:
    """Trust a witness key: its cosignatures count, and verify/audit ask it (at --url) for the heads it saw."""
    from ..integrity.witness_client import trust_witness

    entry = trust_witness(vkey, url)
    _say(f"trusted witness: {entry.key}" + (f" at {entry.url}" if entry.url else ""))


# ─── grants ───────────────────────────────────────────────────────────────────────────────────


@grants_app.command("sign")
def grants_sign_cmd(
    policy: Annotated[Path, typer.Argument(metavar="POLICY", help="Grant policy JSON file.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the DSSE envelope.")],
) -> None:
    """Sign a grant policy with the policy key (created on first use, distinct from the log key)."""
    from pydantic import ValidationError

    from ..integrity.grants import GrantPolicy, load_policy_signer, policy_digest, sign_grant

    try:
        data = policy.read_bytes()
    except OSError as exc:
        raise typer.BadParameter(f"cannot read a grant policy from {policy}: {exc}") from exc
    try:
        parsed = GrantPolicy.model_validate_json(data)
    except ValidationError as exc:
        for line in policy_errors(policy, exc):
            sys.stderr.write(terminal_safe(f"flightlog: error: {line}") + "\n")
        raise typer.Exit(2) from None
    signer = load_policy_signer()
    output.write_text(json.dumps(sign_grant(parsed, signer), indent=2) + "\n", encoding="utf-8")
    _say(
        f"signed {parsed.policy_id} ({policy_digest(parsed)}) with {signer.verifier.name}+{signer.key_id:08x}"
    )


def policy_errors(path: Path, exc: ValidationError) -> list[str]:
    """One line per error of a grant policy file that does not validate: ``FILE: FIELD: message (got
    VALUE)``, the field as its path in the policy (``grants[0].tool``), or ``FILE: not JSON: ...`` naming
    the line and column (pydantic's messages, without its documentation URLs)."""
    from ..narration import short

    lines = []
    for error in exc.errors(include_url=False):
        if error["type"] == "json_invalid":
            lines.append(f"{path}: not JSON: {str(error['msg']).removeprefix('Invalid JSON: ')}")
            continue
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
        given = "" if error["type"] == "missing" else f" (got {short(repr(error.get('input')), 60)})"
        lines.append(f"{path}: {field or 'the policy'}: {error['msg']}{given}")
    return lines


@grants_app.command("verify")
def grants_verify_cmd(
    envelope: Annotated[Path, typer.Argument(metavar="ENVELOPE", help="DSSE envelope JSON file.")],
    epoch: Annotated[int | None, typer.Option("--epoch", help="Check against this authority epoch.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the verified policy as JSON.")] = False,
) -> None:
    """Verify a signed grant policy against the trusted policy keys (exit 1 when it does not verify)."""
    from ..integrity.grants import load_policy_keys, verify_grant

    try:
        text = envelope.read_text(encoding="utf-8")
    except OSError as exc:
        raise typer.BadParameter(f"cannot read {envelope}: {exc}") from exc
    verified = verify_grant(text, load_policy_keys(), epoch=epoch)
    if json_out:
        _emit(
            {
                "ok": True,
                "digest": verified.digest,
                "key": str(verified.key),
                "policy": verified.policy.model_dump(mode="json"),
            }
        )
        return
    _say(
        f"ok: {verified.policy.policy_id} signed by {verified.key.name}+{verified.key.key_id:08x}, {verified.digest}"
    )


@grants_app.command("key")
def grants_key_cmd() -> None:
    """Print the policy key's verifier key (creating the key on first use)."""
    from ..integrity.grants import load_policy_signer

    _say(str(load_policy_signer().verifier))


@grants_app.command("trust")
def grants_trust_cmd(
    vkey: Annotated[str, typer.Argument(metavar="VKEY", help="Policy verifier key.")],
) -> None:
    """Trust another policy key (never a log key)."""
    from ..integrity.grants import trust_policy_key

    _say(f"trusted policy key: {trust_policy_key(vkey)}")


# ─── erase ────────────────────────────────────────────────────────────────────────────────────


@audit_app.command("erase")
def erase_cmd(
    artifact: Annotated[
        str, typer.Argument(metavar="ARTIFACT", help="Salted artifact handle salted:sha256:<hex>.")
    ],
    reason: Annotated[str, typer.Option("--reason", help="Why (ledgered: no personal data here).")] = "",
    json_out: Annotated[
        bool,
        typer.Option("--json", help="Print {artifact, erased_at_ms, log_session_id, log_seq} as JSON."),
    ] = False,
) -> None:
    """Erase a salted artifact's content and salt; ledger the erasure; every chain still verifies."""
    from ..integrity.erasure import ArtifactNotFound, erase_artifact
    from ..integrity.notary import Notary

    with _store(read_only=False) as store:
        try:
            record = erase_artifact(store, artifact, reason=reason, notary=Notary.from_env())
        except (ValueError, ArtifactNotFound) as exc:
            raise typer.BadParameter(str(exc), param_hint="ARTIFACT") from exc
    if json_out:
        _emit(
            {
                "artifact": f"salted:sha256:{record.digest}",
                "erased_at_ms": record.erased_at_ms,
                "log_session_id": record.log_session_id,
                "log_seq": record.log_seq,
            }
        )
        return
    _say(
        f"erased salted:sha256:{record.digest} (content and salt deleted); "
        f"ledgered at {record.log_session_id} seq {record.log_seq}"
    )
