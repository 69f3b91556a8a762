"""Offline audit bundles: one session's evidence in a directory, checked with no database and no network.

``flightlog export SESSION --bundle DIR`` writes, and ``flightlog audit --bundle DIR [--key VKEY]`` checks::

    manifest.json     {"format": "flightlog-bundle/1", "session_id", "ledger_id", "origin",
                       "events", "head", "root", "created_ms",
                       "files": {"<file name>": "<sha256 hex of its bytes>", ...}}
    manifest.note     C2SP signed note by the log key; text:
                          flightlog-bundle/1
                          manifest <sha256 hex of manifest.json's bytes>
                          time <epoch ms>
    entries.jsonl     one line per event, the export format: {"seq":N,"prev_hash":"..","hash":"..","event":E}
                      where E is the stored RFC 8785 bytes verbatim (the verifier slices them out, it
                      never re-serialises)
    checkpoints.json  {"checkpoints": [{"size", "root", "note"}], "cosignatures": [{"size", "witness", "note"}]}
    index.json        {"proof": <flightlog-index-proof/1 document of the latest session checkpoint> | null,
                       "cosignatures": [...]}  (the index log's cosigned heads)
    keys.json         the log key manifest's public entries (flightlog-keys/1, no private key files)
    witnesses.json    {"witnesses": [{"vkey", "url"}]}
    grants.json       {"policies": [{"policy_id", "policy_json"}]}  (signed envelopes as recorded)

**Trust.** Nothing in the bundle is a trust anchor. The auditor brings the log's verifier key
(``--key``, or the local key manifest) and, to count cosignatures, the witness keys
(``--witness-key``, or the local ``witnesses.json``). ``keys.json`` is used only to follow rotations a
trusted key endorsed (:func:`~flightlog.integrity.keys.trusted_by_endorsement`); ``witnesses.json`` is
informational. A bundle whose manifest is signed by another key (a swapped ``keys.json`` and a re-signed
manifest) is rejected with the signer named.

**What the audit reports** (each with the reason when it does not hold):

* ``complete up to size N``: every entry 0..N-1 is present, chained (seed rule) and its RFC 9162 root
  equals the signed checkpoint at size N (the largest that verifies);
* ``sealed`` or ``open`` (with the unanchored tail, if any);
* ``witnessed up to size M``: a cosignature by a trusted witness key over the checkpoint at size M
  (C2SP tlog-cosignature), consistent with the entries;
* ``indexed``: the latest checkpoint is a leaf of the signed index log (RFC 9162 §2.1.3 inclusion).

Every file is checked against the manifest, the manifest against the signed note; an edited entry is
also named by its seq (``hash_mismatch``), whatever the attacker did to the manifest.

Source: C2SP signed-note, tlog-checkpoint, tlog-cosignature; RFC 9162 §2.1; RFC 8785.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import FlightlogError
from ..narration import plural, state_word
from ..store.base import CheckpointRecord, StoredEvent
from .checkpoints import Checkpoint, origin_for
from .heads import WitnessedHead
from .keys import (
    KeyManifestError,
    Keyring,
    LogSigner,
    TrustedKey,
    load_keyring,
    now_ms,
    trusted_by_endorsement,
)
from .notes import NoteError, open_note, parse_note, sign_note
from .verify import AuditReport, audit_rows

if TYPE_CHECKING:
    from ..store.base import Store
    from .witness import CosignerKey

__all__ = [
    "BUNDLE_FORMAT",
    "FILES",
    "BundleError",
    "BundleReport",
    "audit_bundle",
    "export_bundle",
]

BUNDLE_FORMAT = "flightlog-bundle/1"
"""``format`` of ``manifest.json`` and first line of ``manifest.note``."""

FILES = ("entries.jsonl", "checkpoints.json", "index.json", "keys.json", "witnesses.json", "grants.json")
"""The data files every bundle holds (all listed, with their sha256, in ``manifest.json``)."""

_ENTRY = re.compile(rb'\{"seq":(0|[1-9][0-9]*),"prev_hash":"([^"]*)","hash":"([^"]*)","event":(.*)\}')


class BundleError(FlightlogError):
    """A bundle cannot be written or read at all (a bundle that reads but does not verify is a report)."""

    path: str
    reason: str

    def __init__(self, *, path: str, reason: str) -> None:
        super().__init__(f"bundle {path}: {reason}", path=path, reason=reason)


# ─── export ──────────────────────────────────────────────────────────────────────────────────


def _dump(path: Path, doc: Any) -> str:
    data = (json.dumps(doc, indent=2, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def _write_entries(store: Store, session_id: str, path: Path) -> tuple[str, int, str]:
    from ..sessions import export_line

    digest, count, head = hashlib.sha256(), 0, "GENESIS"
    with path.open("w", encoding="utf-8", newline="\n") as fh:
        for row in store.read_events(session_id):
            line = export_line(row)
            fh.write(line)
            digest.update(line.encode("utf-8"))
            count, head = count + 1, row.hash
    return digest.hexdigest(), count, head


def _cosignatures(store: Store, origin: str) -> list[dict[str, Any]]:
    try:
        return [{"size": c.size, "witness": c.witness, "note": c.note} for c in store.cosignatures(origin)]
    except NotImplementedError:
        return []


def _index_doc(store: Store, ledger_id: str, session_id: str) -> dict[str, Any]:
    from .indexlog import index_origin, prove_index_inclusion

    try:
        proof: dict[str, Any] | None = prove_index_inclusion(store, session_id).to_json()
    except (ValueError, NotImplementedError):
        proof = None
    return {"proof": proof, "cosignatures": _cosignatures(store, index_origin(ledger_id))}


def export_bundle(
    store: Store,
    session_id: str,
    directory: Path,
    *,
    signer: LogSigner | None = None,
    keyring: Keyring | None = None,
) -> dict[str, Any]:
    """Write an offline audit bundle of one session (layout in the module docstring).

    Streams the entries (bounded memory). The directory must not exist or be empty.

    Args:
        store: The store.
        session_id: The session (exact id).
        directory: Where to write.
        signer: Signs ``manifest.note`` (default: the user's log key, :func:`~flightlog.integrity.keys.load_signer`).
        keyring: The public keys to ship in ``keys.json`` (default: the user's manifest).

    Returns:
        The manifest written.

    Raises:
        BundleError: the directory is not empty (or not a directory, or cannot be created), or the
            database has no ledger id.
        SessionNotFound: no such session.
    """
    from .keys import load_signer
    from .witness_client import load_witnesses

    record = store.get_session(session_id)
    try:
        ledger_id = store.ledger_id()
    except NotImplementedError as exc:
        raise BundleError(path=str(directory), reason="the store has no ledger id") from exc
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise BundleError(path=str(directory), reason="it exists and is not a directory")
    if directory.exists() and any(directory.iterdir()):
        raise BundleError(path=str(directory), reason="the directory is not empty")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BundleError(path=str(directory), reason=f"cannot create it: {exc.strerror or exc}") from exc
    signer = signer or load_signer()
    keyring = load_keyring() if keyring is None else keyring
    origin = origin_for(ledger_id, session_id)
    files: dict[str, str] = {}
    files["entries.jsonl"], events, head = _write_entries(store, session_id, directory / "entries.jsonl")
    checkpoints = [{"size": c.size, "root": c.root, "note": c.body} for c in store.checkpoints(session_id)]
    files["checkpoints.json"] = _dump(
        directory / "checkpoints.json",
        {"checkpoints": checkpoints, "cosignatures": _cosignatures(store, origin)},
    )
    files["index.json"] = _dump(directory / "index.json", _index_doc(store, ledger_id, session_id))
    public = [{**k.to_json(), "private_key_file": None} for k in keyring]
    files["keys.json"] = _dump(directory / "keys.json", {"format": "flightlog-keys/1", "keys": public})
    witnesses = [{"vkey": str(w.key), "url": w.url} for w in load_witnesses()]
    files["witnesses.json"] = _dump(directory / "witnesses.json", {"witnesses": witnesses})
    policies = [{"policy_id": p, "policy_json": j} for p, j in store.grant_policies(session_id)]
    files["grants.json"] = _dump(directory / "grants.json", {"policies": policies})
    manifest = {
        "format": BUNDLE_FORMAT,
        "session_id": session_id,
        "ledger_id": ledger_id,
        "origin": origin,
        "events": events,
        "head": head,
        "root": record.merkle_root if events == record.events else "",
        "created_ms": now_ms(),
        "files": files,
    }
    digest = _dump(directory / "manifest.json", manifest)
    text = f"{BUNDLE_FORMAT}\nmanifest {digest}\ntime {now_ms()}\n"
    (directory / "manifest.note").write_text(sign_note(text, signer), encoding="utf-8")
    return manifest


# ─── offline audit ───────────────────────────────────────────────────────────────────────────


@dataclass
class BundleReport:
    """What an offline bundle proves (:func:`audit_bundle`).

    Attributes:
        directory: The bundle.
        session_id: From the manifest ("" when unreadable).
        ledger_id: From the manifest.
        signer: The trusted key that signed the manifest (``name+hex id``), or None.
        problems: Every reason the bundle is rejected, each naming the file (or seq) at fault.
        audit: The entries' audit (chain, tree, checkpoints, seal, witnesses), when the files read.
        indexed: One line on the index-log inclusion proof, when it holds.
        index_witnessed: Largest index size a trusted witness cosigned, or None.
        notes: What was not checked and why.
    """

    directory: str
    session_id: str = ""
    ledger_id: str = ""
    signer: str | None = None
    problems: list[str] = field(default_factory=list)
    audit: AuditReport | None = None
    indexed: str | None = None
    index_witnessed: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing is wrong: the manifest is signed by a trusted key, every file matches, the
        entries verify and the index proof holds."""
        return not self.problems and self.audit is not None and self.audit.ok

    def findings(self) -> list[str]:
        """The report, one line per statement (complete / sealed-or-open / witnessed / indexed)."""
        audit = self.audit
        if audit is None:
            return ["nothing proven: the bundle's files could not be read"]
        if audit.ok:
            lines = [
                f"complete up to size {audit.anchored}: {plural(audit.events, 'entry')} chained, "
                f"the signed checkpoint at size {audit.anchored} matches them"
                if audit.anchored
                else f"complete up to size 0: {plural(audit.events, 'entry')} chained, no signed checkpoint verifies"
            ]
        else:
            lines = [f"not complete: {audit.divergences[0]}" + (" ..." if len(audit.divergences) > 1 else "")]
        tail = audit.unanchored
        if audit.sealed:
            lines.append(f"sealed ({state_word(audit.seal_status)})" if audit.seal_status else "sealed")
        elif tail is not None:
            lines.append(f"open (unanchored tail seqs {tail[0]}..{tail[1]})")
        else:
            lines.append("open (every entry anchored, no seal)")
        if audit.witnessed is not None:
            lines.append(f"witnessed up to size {audit.witnessed} by {audit.witnessed_by}")
        else:
            why = next((n for n in self.notes if n.startswith("witness:")), "witness: no cosignature")
            lines.append("not witnessed: " + why.removeprefix("witness: "))
        if self.indexed:
            lines.append(self.indexed)
        else:
            why = next((n for n in self.notes if n.startswith("index:")), "index: see the problems")
            lines.append("not indexed: " + why.removeprefix("index: "))
        return lines

    def to_json(self) -> dict[str, Any]:
        """Stable JSON fields."""
        audit = self.audit
        return {
            "bundle": self.directory,
            "ok": self.ok,
            "session_id": self.session_id,
            "ledger_id": self.ledger_id,
            "signer": self.signer,
            "complete": audit.anchored if audit is not None and audit.ok else None,
            "findings": self.findings(),
            "problems": list(self.problems),
            "notes": list(self.notes),
            "audit": None if audit is None else audit.to_json(),
            "index_witnessed": self.index_witnessed,
        }


def _read(path: Path, report: BundleReport) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError as exc:
        report.problems.append(f"{path.name}: unreadable ({exc.strerror or exc})")
        return None


def _open_manifest(directory: Path, keyring: Keyring, report: BundleReport) -> dict[str, Any] | None:
    note_bytes, manifest_bytes = (
        _read(directory / "manifest.note", report),
        _read(directory / "manifest.json", report),
    )
    if note_bytes is None or manifest_bytes is None:
        return None
    try:
        note = note_bytes.decode("utf-8")
        lines = parse_note(note).text.split("\n")
        if len(lines) != 4 or lines[0] != BUNDLE_FORMAT or not lines[1].startswith("manifest "):
            raise NoteError(reason=f"not a {BUNDLE_FORMAT} manifest note")
        at = int(lines[2].removeprefix("time ")) if lines[2].startswith("time ") else None
        opened = open_note(note, keyring, at_ms=at)
        sig = next(s for s in opened.signatures if keyring.find(s.name, s.key_id))
        report.signer = f"{sig.name}+{sig.key_id:08x}"
    except (NoteError, UnicodeDecodeError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, NoteError) else str(exc)
        report.problems.append(f"manifest.note: {reason}")
        lines = []
    if len(lines) == 4 and lines[1].removeprefix("manifest ") != hashlib.sha256(manifest_bytes).hexdigest():
        report.problems.append(
            "manifest.json: sha256 differs from the signed manifest.note (edited after export)"
        )
    try:
        manifest = json.loads(manifest_bytes)
        if not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT:
            raise ValueError(f"not a {BUNDLE_FORMAT} manifest")
        if not isinstance(manifest.get("files"), dict) or not isinstance(manifest.get("session_id"), str):
            raise ValueError("files or session_id missing")
    except ValueError as exc:
        report.problems.append(f"manifest.json: {exc}")
        return None
    report.session_id, report.ledger_id = manifest["session_id"], str(manifest.get("ledger_id", ""))
    return manifest


def _check_files(directory: Path, manifest: dict[str, Any], report: BundleReport) -> None:
    listed: dict[str, Any] = manifest["files"]
    for name in FILES:
        if name not in listed:
            report.problems.append(f"{name}: not listed in manifest.json")
    for name, digest in sorted(listed.items()):
        if "/" in name or name.startswith(".") or not isinstance(digest, str):
            report.problems.append(f"manifest.json: bad file entry {name!r}")
            continue
        data = _read(directory / name, report)
        if data is not None and hashlib.sha256(data).hexdigest() != digest:
            report.problems.append(f"{name}: sha256 differs from manifest.json (edited after export)")
    extra = sorted(
        p.name
        for p in directory.iterdir()
        if p.name not in listed and p.name not in ("manifest.json", "manifest.note")
    )
    if extra:
        report.notes.append(f"files not covered by the manifest (ignored): {', '.join(extra)}")


def _entries(path: Path, session_id: str, report: BundleReport) -> Iterator[StoredEvent]:
    try:
        fh = path.open("rb")
    except OSError:
        return
    with fh:
        for number, line in enumerate(fh, start=1):
            match = _ENTRY.fullmatch(line.rstrip(b"\n"))
            if match is None:
                report.problems.append(f"entries.jsonl line {number}: not an entry line")
                continue
            seq, prev, digest, data = match.groups()
            yield StoredEvent(
                session_id,
                int(seq),
                "",
                data,
                prev.decode("ascii", "replace"),
                digest.decode("ascii", "replace"),
                0,
            )


def _json_file(directory: Path, name: str, report: BundleReport) -> dict[str, Any]:
    data = _read(directory / name, report)
    try:
        doc = json.loads(data) if data is not None else {}
    except ValueError as exc:
        report.problems.append(f"{name}: not JSON ({exc})")
        return {}
    if not isinstance(doc, dict):
        report.problems.append(f"{name}: not a JSON object")
        return {}
    return doc


def _witnessed(
    docs: Any,
    origin: str,
    keyring: Keyring,
    witness_keys: Sequence[CosignerKey],
    what: str,
    report: BundleReport,
) -> list[WitnessedHead]:
    from .witness_client import verify_cosigned

    heads: list[WitnessedHead] = []
    cosigned = docs if isinstance(docs, list) else []
    for doc in cosigned:
        note = doc.get("note") if isinstance(doc, dict) else None
        if not isinstance(note, str):
            report.problems.append(f"{what}: a cosignature entry has no note")
            continue
        try:
            heads += verify_cosigned(note, origin, keyring, witness_keys)
        except NoteError as exc:
            report.problems.append(f"{what}: a cosigned checkpoint does not verify: {exc.reason}")
    label = "witness" if what == "checkpoints.json" else "index witness"
    if not cosigned:
        report.notes.append(f"{label}: the bundle holds no cosignature")
    elif not witness_keys:
        report.notes.append(
            f"{label}: cosignatures present, but no trusted witness key given (--witness-key)"
        )
    elif not heads:
        report.notes.append(f"{label}: no cosignature by a trusted witness key")
    return heads


def _records(doc: dict[str, Any], report: BundleReport) -> list[CheckpointRecord]:
    out = []
    for number, entry in enumerate(doc.get("checkpoints") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("note"), str):
            report.problems.append(f"checkpoints.json: entry {number} has no note")
            continue
        size, root = entry.get("size"), entry.get("root")
        if not isinstance(size, int) or not isinstance(root, str):
            report.problems.append(f"checkpoints.json: entry {number} has no size or root")
            continue
        out.append(CheckpointRecord(report.session_id, number, size, root, entry["note"], 0))
    return out


def _check_index(doc: dict[str, Any], audit: AuditReport, keyring: Keyring, report: BundleReport) -> None:
    from .indexlog import load_index_proof

    if doc.get("proof") is None:
        report.notes.append(
            "index: the bundle holds no index inclusion proof (the session was never indexed)"
        )
        return
    try:
        proof = load_index_proof(doc["proof"])
    except ValueError as exc:
        report.problems.append(f"index.json: {exc}")
        return
    problems = proof.check(keyring)
    if proof.session_id != report.session_id:
        problems.append(f"the proof is for session {proof.session_id}")
    if audit.latest is not None and proof.leaf != audit.latest.checkpoint.text():
        problems.append(f"the indexed checkpoint is not the latest signed one (size {audit.latest.size})")
    if problems:
        report.problems += [f"index.json: {p}" for p in problems]
        return
    size = Checkpoint.parse(proof.leaf).size
    report.indexed = (
        f"indexed: the checkpoint at size {size} is leaf {proof.leaf_index} of the signed index log "
        f"of size {proof.tree_size}"
    )


def audit_bundle(
    directory: Path,
    *,
    keyring: Keyring | None = None,
    witness_keys: Sequence[CosignerKey] = (),
    decode: bool = True,
) -> BundleReport:
    """Verify an offline bundle with no database and no network (module docstring: what it proves).

    Args:
        directory: The bundle.
        keyring: The trusted log keys (default: the local key manifest); the bundle's ``keys.json`` only
            adds keys these endorsed.
        witness_keys: Trusted witness keys (cosignatures by others are ignored).
        decode: Also decode every event.

    Returns:
        The report (``ok`` False with every problem named when anything is wrong).

    Raises:
        BundleError: ``directory`` is not a directory.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise BundleError(path=str(directory), reason="no such directory")
    report = BundleReport(str(directory))
    keyring = load_keyring() if keyring is None else keyring
    keyring = _follow_rotations(directory, keyring, report)
    manifest = _open_manifest(directory, keyring, report)
    if manifest is None:
        return report
    _check_files(directory, manifest, report)
    ledger_id = report.ledger_id or None
    origin = origin_for(report.ledger_id, report.session_id)
    if manifest.get("origin") != origin:
        report.problems.append(f"manifest.json: origin {manifest.get('origin')!r} is not {origin!r}")
    cps = _json_file(directory, "checkpoints.json", report)
    witnessed = _witnessed(cps.get("cosignatures"), origin, keyring, witness_keys, "checkpoints.json", report)
    events, head = manifest.get("events"), manifest.get("head")
    expected = (
        (events - 1, head) if isinstance(events, int) and events > 0 and isinstance(head, str) else None
    )
    report.audit = audit_rows(
        report.session_id,
        _entries(directory / "entries.jsonl", report.session_id, report),
        _records(cps, report),
        keyring=keyring,
        ledger_id=ledger_id,
        expected_head=expected,
        merkle_root=manifest.get("root") or None,
        witnessed=witnessed,
        decode=decode,
        kinds=False,  # an entry line holds seq, hashes and bytes: no kind column to compare
    )
    index = _json_file(directory, "index.json", report)
    _check_index(index, report.audit, keyring, report)
    from .indexlog import index_origin

    index_heads = _witnessed(
        index.get("cosignatures"), index_origin(report.ledger_id), keyring, witness_keys, "index.json", report
    )
    report.index_witnessed = max((h.size for h in index_heads), default=None)
    return report


def _follow_rotations(directory: Path, keyring: Keyring, report: BundleReport) -> Keyring:
    try:
        doc = json.loads((directory / "keys.json").read_text(encoding="utf-8"))
        entries = [TrustedKey.from_json(e) for e in doc.get("keys", [])]
    except (OSError, ValueError, AttributeError, KeyManifestError):
        report.notes.append("keys.json: unreadable; key rotations not followed")
        return keyring
    return trusted_by_endorsement(keyring, entries)
