"""Signed grant policies: the ceilings an agent session runs under, signed by a policy key in a DSSE envelope.

A :class:`GrantPolicy` states what a session may do at most: tools allowed and denied, path globs,
command prefixes, network hosts, which effect classes need a human approval, the authority epoch it is
issued for (seed 003: the fencing token of the session's writer) and a validity window. The kernel's
governance rules decide within these ceilings; the policy is what an operator signs.

**Envelope** (DSSE v1.0.2, ``envelope.md``)::

    {"payloadType": "application/vnd.flightlog.grant-policy+json",
     "payload": "<base64 of the policy's RFC 8785 canonical JSON>",
     "signatures": [{"keyid": "<key name>+<hex key id>", "sig": "<base64 Ed25519 signature>"}]}

The signature is over ``PAE(payloadType, payload)`` = ``"DSSEv1" SP LEN(type) SP type SP LEN(body) SP
body`` (``protocol.md``, "Signature Definition"). Verification follows ``protocol.md`` "To verify": the
signature is checked against each *trusted* key (``keyid`` is an unauthenticated hint, never used to
decide), then the payload type, then the payload bytes just verified are parsed (never re-read from the
envelope). Any other field in the envelope (an embedded public key, a certificate) is ignored: a key the
envelope brings is never a trust anchor. Standard and URL-safe base64 are both accepted.

**Keys.** The policy key is distinct from the log key: its own file ``<key dir>/policy.key`` (signer key
text, mode 0600, name ``flightlog.local/policy``, created on first ``flightlog grants sign``) and its own
trust list ``<key dir>/policy-keys.json`` (``{"format": "flightlog-policy-keys/1", "keys": ["<vkey>"]}``).
A key trusted as a log key is refused as a policy key, so a policy signed with the log key never verifies;
the two signature formats are also domain-separated (DSSE PAE vs C2SP signed-note text).

**Digest.** ``policy_digest`` is ``sha256:<hex>`` of the payload bytes (the policy's canonical JSON): the
same policy re-signed keeps its digest. :func:`record_grant` verifies an envelope and ledgers it at
session start (``grant_policy`` event with ``policy_id``, ``policy``, ``signed``, ``digest``, ``key``; the
envelope kept in ``grant_policies``).

**For the kernel** (governance decisions): call ``record_grant(recorder, envelope, load_policy_keys())``
right after ``Recorder.create`` and put ``VerifiedGrant.digest`` in each decision as ``policy_digest``;
after a resume, :func:`session_policy_digest` ``(store, session_id)`` returns the digest recorded.

Source: DSSE protocol.md and envelope.md v1.0.2 (secure-systems-lab/dsse); RFC 8032 (Ed25519); RFC 8785.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..encoding import canonical_json
from ..errors import GrantError
from .keys import KeyManifestError, LogSigner, VerifierKey, key_dir, load_keyring, now_ms

if TYPE_CHECKING:
    from ..recorder import Recorder
    from ..store.base import Store

__all__ = [
    "DEFAULT_POLICY_KEY_NAME",
    "PAYLOAD_TYPE",
    "POLICY_KEY_FILE",
    "POLICY_TRUST_FILE",
    "GrantPolicy",
    "VerifiedGrant",
    "envelope_digest",
    "load_policy_keys",
    "load_policy_signer",
    "pae",
    "policy_digest",
    "policy_payload",
    "record_grant",
    "session_policy_digest",
    "sign_grant",
    "trust_policy_key",
    "verify_grant",
]

PAYLOAD_TYPE = "application/vnd.flightlog.grant-policy+json"
"""DSSE payload type of a grant policy."""

POLICY_KEY_FILE = "policy.key"
"""The policy signing key's file in the key directory."""

POLICY_TRUST_FILE = "policy-keys.json"
"""The trusted policy keys' file in the key directory."""

DEFAULT_POLICY_KEY_NAME = "flightlog.local/policy"
"""Name of a generated policy key."""

_TRUST_FORMAT = "flightlog-policy-keys/1"

EffectClass = Literal["read_only", "idempotent", "side_effect"]


def _side_effects() -> list[EffectClass]:
    return ["side_effect"]


class GrantPolicy(BaseModel):
    """What a session may do at most (ceilings), for which writer and when.

    Globs are ``fnmatch``-style on tool names; hosts match exactly or by ``*.domain`` suffix
    (:meth:`allows_host`); path globs and command prefixes use the kernel's rules
    (``flightlog.kernel.policy``: ``**`` spans directories, prefixes match whole tokens). The kernel
    enforces all of them as ceilings (:mod:`flightlog.kernel.ceiling`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy_id: str = Field(min_length=1)
    """Stable id of the policy (one id, one content: re-issue under a new id)."""
    description: str = ""
    """For people."""
    tools_allow: list[str] = Field(default_factory=lambda: ["*"])
    """Tool-name globs the session may call; a tool matching none is denied."""
    tools_deny: list[str] = Field(default_factory=list)
    """Tool-name globs denied whatever ``tools_allow`` says."""
    path_globs: list[str] = Field(default_factory=lambda: ["**"])
    """Paths tool arguments may name."""
    command_prefixes: list[str] = Field(default_factory=list)
    """Shell commands allowed, as token prefixes (``git status``); empty: no shell command."""
    network_hosts: list[str] = Field(default_factory=list)
    """Host globs network tools may reach; empty: none."""
    approval_required: list[EffectClass] = Field(default_factory=_side_effects)
    """Effect classes whose calls need a human approval (the approval ceiling)."""
    authority_epoch: int | None = Field(default=None, ge=0)
    """When set, valid only for the writer holding exactly this authority epoch (seed 003 fencing)."""
    not_before_ms: int | None = None
    """Valid from (epoch ms, inclusive)."""
    not_after_ms: int | None = None
    """Valid until (epoch ms, exclusive)."""

    def allows_tool(self, name: str) -> bool:
        """Whether ``name`` is under the tool ceiling (allowed by a glob, denied by none)."""
        allowed = any(fnmatch.fnmatchcase(name, g) for g in self.tools_allow)
        return allowed and not any(fnmatch.fnmatchcase(name, g) for g in self.tools_deny)

    def allows_host(self, host: str) -> bool:
        """Whether a network tool may reach ``host``: it equals a ``network_hosts`` entry, or an entry
        ``*.domain`` names a subdomain of ``domain`` (not ``domain`` itself); a lone ``*`` allows any
        host. Case-insensitive, trailing dots ignored; no other wildcards.
        """
        want = host.lower().rstrip(".")
        if not want:
            return False
        for entry in self.network_hosts:
            pattern = entry.lower().rstrip(".")
            if pattern == "*" or pattern == want:
                return True
            if pattern.startswith("*.") and "*" not in pattern[2:] and want.endswith(pattern[1:]):
                return True
        return False

    def needs_approval(self, effect: str) -> bool:
        """Whether a call of this effect class needs a human approval."""
        return effect in self.approval_required

    def valid_at(self, at_ms: int) -> bool:
        """Whether ``at_ms`` (epoch ms) lies in the validity window."""
        after_start = self.not_before_ms is None or at_ms >= self.not_before_ms
        return after_start and (self.not_after_ms is None or at_ms < self.not_after_ms)


def policy_payload(policy: GrantPolicy) -> bytes:
    """The DSSE payload of a policy: its RFC 8785 canonical JSON (every field, defaults included)."""
    return canonical_json(policy.model_dump(mode="json"))


def policy_digest(policy: GrantPolicy) -> str:
    """``sha256:<hex>`` of :func:`policy_payload`: the digest governance decisions name."""
    return "sha256:" + hashlib.sha256(policy_payload(policy)).hexdigest()


def pae(payload_type: str, body: bytes) -> bytes:
    """DSSE Pre-Authentication Encoding.

    Returns:
        ``"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body``, lengths as ASCII decimals of byte counts.

    Source: DSSE protocol.md v1.0.2, "Signature Definition" (test vector: ``DSSEv1 29
    http://example.com/HelloWorld 11 hello world``).
    """
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def _keyid(key: VerifierKey) -> str:
    return f"{key.name}+{key.key_id:08x}"


def sign_grant(policy: GrantPolicy, signer: LogSigner) -> dict[str, Any]:
    """A DSSE envelope of ``policy`` signed by ``signer`` (the policy key).

    Source: DSSE protocol.md "To sign", envelope.md "Standard JSON envelope".
    """
    body = policy_payload(policy)
    sig = signer.sign(pae(PAYLOAD_TYPE, body))
    return {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(body).decode(),
        "signatures": [{"keyid": _keyid(signer.verifier), "sig": base64.b64encode(sig).decode()}],
    }


@dataclass(frozen=True)
class VerifiedGrant:
    """A grant policy whose envelope verified against a trusted policy key.

    Attributes:
        policy: The policy, parsed from the verified payload bytes.
        payload: Those bytes.
        digest: ``sha256:<hex>`` of them.
        key: The trusted key whose signature verified.
        envelope: The envelope as given (to keep beside the ledger).
    """

    policy: GrantPolicy
    payload: bytes
    digest: str
    key: VerifierKey
    envelope: dict[str, Any]


def _b64(text: Any, what: str) -> bytes:
    """Standard or URL-safe base64, padding optional (DSSE: verifiers MUST accept either)."""
    if not isinstance(text, str):
        raise GrantError(reason=f"{what} is not a base64 string")
    padded = text + "=" * (-len(text) % 4)
    try:
        if "-" in text or "_" in text:
            return base64.urlsafe_b64decode(padded.encode("ascii"))
        return base64.b64decode(padded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise GrantError(reason=f"{what} is not base64") from exc


def _envelope(envelope: Mapping[str, Any] | str | bytes) -> dict[str, Any]:
    if isinstance(envelope, str | bytes):
        try:
            envelope = json.loads(envelope)
        except ValueError as exc:
            raise GrantError(reason=f"the envelope is not JSON: {exc}") from exc
    if not isinstance(envelope, Mapping):
        raise GrantError(reason="the envelope is not a JSON object")
    doc = dict(envelope)
    sigs = doc.get("signatures")
    if not isinstance(doc.get("payloadType"), str) or "payload" not in doc or not isinstance(sigs, list):
        raise GrantError(reason="the envelope needs payload, payloadType and signatures (DSSE envelope.md)")
    if not sigs or not all(isinstance(s, dict) and "sig" in s for s in sigs):
        raise GrantError(reason="every DSSE signature needs a sig")
    return doc


def envelope_digest(envelope: Mapping[str, Any] | str | bytes) -> str:
    """``sha256:<hex>`` of an envelope's payload bytes, *without verifying it* (to compare digests).

    Raises:
        GrantError: a malformed envelope or payload.
    """
    body = _b64(_envelope(envelope)["payload"], "payload")
    return "sha256:" + hashlib.sha256(body).hexdigest()


def verify_grant(
    envelope: Mapping[str, Any] | str | bytes,
    trusted_keys: Iterable[VerifierKey],
    *,
    at_ms: int | None = None,
    epoch: int | None = None,
    check_window: bool = True,
) -> VerifiedGrant:
    """Verify a DSSE grant-policy envelope against trusted policy keys, then the policy's own limits.

    Args:
        envelope: The envelope (a mapping, or its JSON text).
        trusted_keys: The policy keys trusted (:func:`load_policy_keys`); nothing in the envelope is.
        at_ms: The time to check the validity window at (epoch ms, default now).
        epoch: The writer's authority epoch; checked when both it and the policy's are set.
        check_window: Check the validity window (default True).

    Returns:
        The verified grant.

    Raises:
        GrantError: malformed envelope; no signature by a trusted key (``key_id`` names the claimed
            signer); another payload type; a payload that is not a grant policy; outside the validity
            window; another authority epoch.

    Source: DSSE protocol.md v1.0.2, "To verify".
    """
    doc = _envelope(envelope)
    body = _b64(doc["payload"], "payload")
    message = pae(doc["payloadType"], body)
    keys = list(trusted_keys)
    hint = next((str(s.get("keyid")) for s in doc["signatures"] if s.get("keyid")), "")
    signer = next(
        (k for s in doc["signatures"] for k in keys if k.verify(message, _b64(s["sig"], "sig"))), None
    )
    if signer is None:
        raise GrantError(reason="no signature by a trusted policy key", key_id=hint)
    if doc["payloadType"] != PAYLOAD_TYPE:
        raise GrantError(
            reason=f"payload type {doc['payloadType']!r} is not {PAYLOAD_TYPE}", key_id=_keyid(signer)
        )
    try:
        policy = GrantPolicy.model_validate_json(body)
    except ValidationError as exc:
        raise GrantError(
            reason=f"the payload is not a grant policy: {exc.errors()[0]['msg']}", key_id=_keyid(signer)
        ) from exc
    when = now_ms() if at_ms is None else at_ms
    if check_window and not policy.valid_at(when):
        raise GrantError(reason=f"policy {policy.policy_id} is not valid at {when} ms", key_id=_keyid(signer))
    if epoch is not None and policy.authority_epoch is not None and epoch != policy.authority_epoch:
        raise GrantError(
            reason=f"policy {policy.policy_id} is for authority epoch {policy.authority_epoch}, the writer holds {epoch}",
            key_id=_keyid(signer),
        )
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    return VerifiedGrant(policy, body, digest, signer, doc)


# ─── the policy key and its trust list ───────────────────────────────────────────────────────


def _trust_path(directory: Path | None) -> Path:
    return (directory or key_dir()) / POLICY_TRUST_FILE


def _log_keys(directory: Path | None) -> set[bytes]:
    return {k.verifier.public_key for k in load_keyring(directory)}


def load_policy_keys(directory: Path | None = None) -> list[VerifierKey]:
    """The trusted policy keys (``<key dir>/policy-keys.json``; empty when there is none).

    Raises:
        KeyManifestError: an unreadable list, a malformed key, or a key that is also a trusted log key
            (the two roles must not share a key).
    """
    path = _trust_path(directory)
    if not path.exists():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != _TRUST_FORMAT:
            raise ValueError(f"not a {_TRUST_FORMAT} file")
        keys = [VerifierKey.parse(k) for k in doc["keys"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise KeyManifestError(path=str(path), reason=f"unreadable policy key list: {exc}") from exc
    shared = [k for k in keys if k.public_key in _log_keys(directory)]
    if shared:
        raise KeyManifestError(
            path=str(path), reason=f"{shared[0]} is also a log key; a policy key must be distinct"
        )
    return keys


def trust_policy_key(vkey: str, directory: Path | None = None) -> VerifierKey:
    """Add a policy verifier key to the trust list.

    Raises:
        KeyManifestError: a malformed key, or a key that is a trusted log key.
    """
    key = VerifierKey.parse(vkey)
    if key.public_key in _log_keys(directory):
        raise KeyManifestError(
            path=str(_trust_path(directory)), reason="this is a log key; a policy key must be distinct"
        )
    keys = load_policy_keys(directory)
    if key not in keys:
        path = _trust_path(directory)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(
            json.dumps({"format": _TRUST_FORMAT, "keys": [str(k) for k in [*keys, key]]}, indent=2) + "\n"
        )
        os.replace(tmp, path)
    return key


def load_policy_signer(directory: Path | None = None, *, create: bool = True) -> LogSigner:
    """The policy signing key (``<key dir>/policy.key``), created and trusted locally on first use.

    Raises:
        KeyManifestError: an unreadable key file, one readable by others, no key with ``create=False``,
            or a policy key equal to a log key.
    """
    directory = directory or key_dir()
    path = directory / POLICY_KEY_FILE
    if path.exists():
        mode = path.stat().st_mode
        if os.name == "posix" and mode & 0o077:
            raise KeyManifestError(
                path=str(path), reason=f"policy key is readable by others (mode {mode & 0o777:o})"
            )
        try:
            signer = LogSigner.parse(path.read_text(encoding="ascii"))
        except (OSError, UnicodeDecodeError) as exc:
            raise KeyManifestError(path=str(path), reason=f"unreadable policy key: {exc}") from exc
    elif not create:
        raise KeyManifestError(path=str(path), reason="no policy key (flightlog grants sign creates one)")
    else:
        signer = LogSigner.generate(DEFAULT_POLICY_KEY_NAME)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(signer.secret_text() + "\n")
    if signer.verifier.public_key in _log_keys(directory):
        raise KeyManifestError(
            path=str(path), reason="the policy key is a log key; a policy key must be distinct"
        )
    trust_policy_key(str(signer.verifier), directory)
    return signer


# ─── ledgering ───────────────────────────────────────────────────────────────────────────────


def record_grant(
    recorder: Recorder,
    envelope: Mapping[str, Any] | str | bytes,
    trusted_keys: Iterable[VerifierKey],
    *,
    at_ms: int | None = None,
) -> VerifiedGrant:
    """Verify a signed grant policy for ``recorder``'s writer and ledger it (call at session start).

    Stores the envelope in ``grant_policies`` and appends a ``grant_policy`` event with ``policy_id``,
    ``policy``, ``signed: true``, ``digest`` and ``key`` (the verifier key text), in one transaction.

    Raises:
        GrantError: the envelope does not verify, or the policy is not valid now or for the recorder's
            authority epoch (nothing recorded).
    """
    verified = verify_grant(envelope, trusted_keys, at_ms=at_ms, epoch=recorder.epoch)
    recorder.record_grant_policy(
        verified.policy.policy_id,
        verified.policy.model_dump(mode="json"),
        signed=True,
        digest=verified.digest,
        durable=json.dumps(verified.envelope, sort_keys=True),
        key=str(verified.key),
    )
    return verified


def session_policy_digest(store: Store, session_id: str) -> str | None:
    """The digest of the latest grant policy recorded for a session, or None.

    Reads the stored envelope (or plain policy); the digest is over the payload bytes as recorded. To
    trust it beyond the store, re-verify the envelope with :func:`verify_grant`.
    """
    policies = store.grant_policies(session_id)
    if not policies:
        return None
    doc = json.loads(policies[-1][1])
    if (
        isinstance(doc, dict)
        and doc.get("payloadType") == PAYLOAD_TYPE
        and isinstance(doc.get("payload"), str)
    ):
        return "sha256:" + hashlib.sha256(_b64(doc["payload"], "payload")).hexdigest()
    return "sha256:" + hashlib.sha256(canonical_json(doc)).hexdigest()
