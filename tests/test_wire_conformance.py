"""Every field of every seed kind against the serde attributes of seed 000, read from the seed itself.

The table is the seed: ``tests/data/seed_000_session.rs`` (a verbatim copy of ``/work/shared/seeds/000_*``)
is parsed for ``SessionEvent``, ``ProviderReplay`` and ``RollbackReason``: variants, fields, Rust types and
``#[serde(...)]`` attributes. For each field the test derives what serde does and requires flightlog to do
the same, on output and on input:

==================================================  =============================  ========================
seed declaration                                    serde writes                   serde reads (missing)
==================================================  =============================  ========================
``T`` (no attribute)                                always                         error (required)
``#[serde(default)] T``                             always (``[]``, ``0``)         ``Default``
``Option<T>`` (no ``skip_serializing_if``)          ``null`` when ``None``         ``None``
``#[serde(default, skip_serializing_if =``          omitted when ``None``          ``None``
``"Option::is_none")] Option<T>``
``#[serde(default, skip_serializing_if =``          omitted when empty             ``[]``
``"Vec::is_empty")] Vec<T>``
==================================================  =============================  ========================

plus the Rust type (``u32``/``u64``/``usize`` ranges, ``String``, ``f64``, ``bool``, ``Vec``, tuples, named
types), the ``tag``/``rename_all`` of the enums and ``deny_unknown_fields``. An attribute or type this file
does not understand fails the test rather than being skipped, so the seed cannot grow past the table.

Types the seed uses but does not define (``Message``, ``ToolCall``, ``ToolResult``, ``ContentPart``,
``CancellationReason``, ``MemoryScope``, ``MemoryKind``, ``MemoryRecall``) have flightlog's own shapes
(ARCHITECTURE.md, "Wire conventions"), except the memory types, which follow upstream's ``mm::memory``
field by field (``tests/test_memory_wire.py``); here they only need a sample value that round-trips.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, TypeAdapter, ValidationError

from flightlog import events as ev
from flightlog.encoding import canonical_bytes, canonical_json, parse_json
from flightlog.errors import EventDecodeError

SEED = Path(__file__).resolve().parent / "data" / "seed_000_session.rs"

# ─── Reading the seed ─────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class SeedField:
    """One field as the seed declares it: name, Rust type (paths stripped) and its serde attributes."""

    name: str
    rust_type: str
    serde: tuple[tuple[str, str | None], ...]

    @property
    def attrs(self) -> dict[str, str | None]:
        return dict(self.serde)

    @property
    def is_option(self) -> bool:
        return self.rust_type.startswith("Option<")

    @property
    def required(self) -> bool:
        """serde reads a missing ``Option`` as ``None`` and a missing ``default`` field as its Default."""
        return not self.is_option and "default" not in self.attrs

    def rust_default(self) -> Any:
        """The JSON form of ``Default::default()`` for this field's type (``None`` for an ``Option``)."""
        if self.is_option:
            return None
        if self.rust_type.startswith("Vec<"):
            return []
        return {"String": "", "u32": 0, "u64": 0, "usize": 0, "bool": False, "f64": 0.0}[self.rust_type]

    def written(self, value: Any) -> bool:
        """Whether serde writes this field when it holds ``value``."""
        skip = self.attrs.get("skip_serializing_if")
        if skip == "Option::is_none":
            return value is not None
        if skip == "Vec::is_empty":
            return value != []
        return True


@dataclass(frozen=True)
class SeedType:
    """A seed ``struct`` (one variant, no tag) or ``enum`` (variants; unit variants have no fields)."""

    name: str
    container: dict[str, str | None]
    variants: dict[str, tuple[SeedField, ...]]


def _code() -> str:
    """The seed's Rust text: line-number prefixes and ``//`` comments removed (no string holds ``//``)."""
    lines = SEED.read_text(encoding="utf-8").splitlines()
    return "\n".join(re.sub(r"//.*", "", re.sub(r"^\d+", "", line)) for line in lines)


def _split_top(text: str) -> list[str]:
    """Split at commas outside any (), <>, [] or {}."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "(<[{":
            depth += 1
        elif char in ")>]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _serde_attrs(text: str) -> tuple[tuple[str, str | None], ...]:
    """``#[serde(a, b = "c")]`` attributes in ``text`` as ``(("a", None), ("b", "c"))``."""
    found: list[tuple[str, str | None]] = []
    for body in re.findall(r"#\[serde\((.*?)\)\]", text, flags=re.S):
        for item in _split_top(body):
            key, _, value = item.partition("=")
            found.append((key.strip(), value.strip().strip('"') if value else None))
    return tuple(found)


def _fields(body: str) -> tuple[SeedField, ...]:
    fields = []
    for chunk in _split_top(body):
        declaration = re.sub(r"#\[.*?\]", "", chunk, flags=re.S).strip()
        match = re.fullmatch(r"(?:pub\s+)?(\w+)\s*:\s*(.+)", declaration, flags=re.S)
        assert match, f"cannot read field {chunk!r} of the seed"
        rust_type = re.sub(r"\b(?:\w+::)+(\w+)", r"\1", re.sub(r"\s+", "", match.group(2)))
        fields.append(SeedField(match.group(1), rust_type, _serde_attrs(chunk)))
    return tuple(fields)


def _body(code: str, open_brace: int) -> str:
    depth = 0
    for i in range(open_brace, len(code)):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        if depth == 0:
            return code[open_brace + 1 : i]
    raise AssertionError("unbalanced braces in the seed")


def read_seed() -> dict[str, SeedType]:
    """Every ``struct`` and ``enum`` the seed defines, by name."""
    code = _code()
    types: dict[str, SeedType] = {}
    for match in re.finditer(r"((?:#\[[^\]]*\]\s*)*)pub (struct|enum) (\w+) \{", code):
        attrs, kind, name = match.groups()
        body = _body(code, match.end() - 1)
        container = dict(_serde_attrs(attrs))
        if kind == "struct":
            types[name] = SeedType(name, container, {name: _fields(body)})
            continue
        variants: dict[str, tuple[SeedField, ...]] = {}
        for chunk in _split_top(body):
            declaration = re.sub(r"^(?:\s*#\[[^\]]*\])*", "", chunk).strip()  # the variant's own attributes
            variant = re.fullmatch(r"(\w+)\s*(?:\{(.*)\})?", declaration, flags=re.S)
            assert variant, f"cannot read variant {chunk!r} of {name}"
            variants[variant.group(1)] = _fields(variant.group(2) or "")
        types[name] = SeedType(name, container, variants)
    return types


def snake(name: str) -> str:
    """serde ``rename_all = "snake_case"`` of a variant name."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


SEED_TYPES = read_seed()
DEFINED = {"SessionEvent", "ProviderReplay", "RollbackReason"}

# ─── Values by Rust type ──────────────────────────────────────────────────────────────────────────

PRIMITIVES: dict[str, Any] = {
    "String": "s€",
    "u32": 4_000_000_000,
    "u64": 2**53 - 1,
    "usize": 2**40,
    "f64": 0.25,
    "bool": True,
}
"""A valid JSON value of each primitive (integers beyond the signed 32-bit range where allowed)."""

INVALID: dict[str, list[Any]] = {
    "String": [5],
    "u32": [-1, 2**32],
    "u64": [-1, 2**64],
    "usize": [-1, 2**64],
    "f64": ["x"],
    "bool": ["maybe"],
    "CancellationReason": ["nope"],
    "MemoryKind": ["belief"],
    "MemoryScope": [{"tenant_id": "t"}],
}
"""JSON values serde refuses for a type (the named types serde would refuse for a reason of ours too)."""

NAMED: dict[str, Any] = {
    "Message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}]},
    "ToolCall": {"id": "call_1", "name": "read", "arguments": '{"path": "a"}'},
    "ToolResult": {"call_id": "call_1", "output": "ok", "is_error": True, "token_count": 3},
    "ContentPart": {"type": "image", "ref": "sha256:" + "ab" * 32, "media_type": "image/png"},
    "CancellationReason": "lease_lost",
    "MemoryScope": {"tenant_id": "t", "namespace": "n"},
    "MemoryKind": "feedback",
    "MemoryRecall": {  # upstream mm::memory shape; field by field in tests/test_memory_wire.py
        "record": {
            "record_id": "m1",
            "scope": {"tenant_id": "t", "namespace": "n"},
            "name": "style",
            "kind": "project",
            "content": "short answers",
            "description": "how the user likes answers",
            "provenance": {"author": "model", "trust": "untrusted"},
            "created_at": 1,
            "updated_at": 2,
            "recall_count": 0,
            "confidence": 0.5,
            "pinned": False,
        },
        "score": 0.75,
        "why": "matched 'style'",
    },
    "Value": {"v": [1, "two", None, True, 2.5]},
}
"""A sample (in flightlog's wire form, so it re-encodes unchanged) of every type the seed names without
defining it; ``Value`` is ``serde_json::Value``."""


def sample(rust_type: str) -> Any:
    """A valid, non-empty JSON value of a seed type."""
    if rust_type.startswith("Option<"):
        return sample(rust_type[len("Option<") : -1])
    if rust_type.startswith("Vec<"):
        return [sample(rust_type[len("Vec<") : -1])]
    if rust_type.startswith("("):
        return [sample(part) for part in _split_top(rust_type[1:-1])]
    if rust_type in PRIMITIVES:
        return PRIMITIVES[rust_type]
    if rust_type in DEFINED:
        seed = SEED_TYPES[rust_type]
        variant, fields = next((v, f) for v, f in seed.variants.items() if f)
        full = {field.name: sample(field.rust_type) for field in fields}
        tag = seed.container.get("tag")
        return {tag: snake(variant), **full} if tag else full
    return NAMED[rust_type]


def invalid(rust_type: str) -> list[Any]:
    """JSON values serde refuses for a seed type."""
    if rust_type.startswith("Option<"):
        return invalid(rust_type[len("Option<") : -1])
    if rust_type.startswith("Vec<"):
        return ["not a list", *[[bad] for bad in invalid(rust_type[len("Vec<") : -1])]]
    if rust_type.startswith("("):
        return [[sample(_split_top(rust_type[1:-1])[0])]]  # a tuple of the wrong length
    return INVALID.get(rust_type, [])


def named_types(rust_type: str) -> set[str]:
    return set(re.findall(r"[A-Za-z_]\w*", rust_type)) - {"Option", "Vec"}


# ─── The owners of fields: 32 kinds, ProviderReplay, each RollbackReason variant ──────────────────


@dataclass(frozen=True)
class Owner:
    """Something with fields: how to decode a wire dict into flightlog's model, and the tag it carries."""

    label: str
    fields: tuple[SeedField, ...]
    tag: dict[str, str]
    deny_unknown: bool
    model: type[BaseModel]
    decode: Callable[[dict[str, Any]], BaseModel]

    def expected(self, values: dict[str, Any]) -> dict[str, Any]:
        """What serde_json writes for these field values (a missing key holds the Rust default)."""
        out: dict[str, Any] = dict(self.tag)
        for field in self.fields:
            value = values[field.name] if field.name in values else field.rust_default()
            if field.written(value):
                out[field.name] = value
        return out

    def minimal(self) -> dict[str, Any]:
        return {f.name: sample(f.rust_type) for f in self.fields if f.required}

    def full(self) -> dict[str, Any]:
        return {f.name: sample(f.rust_type) for f in self.fields}


def _event_model(kind: str) -> type[BaseModel]:
    (model,) = [m for m in ev.Event.__subclasses__() if m.model_fields["kind"].default == kind]
    return model


def _owners() -> list[Owner]:
    owners: list[Owner] = []
    events = SEED_TYPES["SessionEvent"]
    tag = events.container["tag"]
    assert tag is not None
    for variant, fields in events.variants.items():
        kind = snake(variant)
        owners.append(
            Owner(
                kind,
                fields,
                {tag: kind},
                "deny_unknown_fields" in events.container,
                _event_model(kind),
                lambda data, kind=kind: ev.event_from_wire({"kind": kind, **data}),
            )
        )
    replay = SEED_TYPES["ProviderReplay"]
    owners.append(
        Owner(
            "ProviderReplay",
            replay.variants["ProviderReplay"],
            {},
            "deny_unknown_fields" in replay.container,
            ev.ProviderReplay,
            ev.ProviderReplay.model_validate,
        )
    )
    reasons = SEED_TYPES["RollbackReason"]
    reason_tag = reasons.container["tag"]
    assert reason_tag is not None
    adapter: TypeAdapter[Any] = TypeAdapter(ev.RollbackReasonT)
    for variant, fields in reasons.variants.items():
        name = snake(variant)
        owners.append(
            Owner(
                f"RollbackReason::{name}",
                fields,
                {reason_tag: name},
                "deny_unknown_fields" in reasons.container,
                getattr(ev.RollbackReason, variant),
                lambda data, name=name, tag=reason_tag: adapter.validate_python({tag: name, **data}),
            )
        )
    return owners


OWNERS = _owners()
FIELDS = [(owner, field) for owner in OWNERS for field in owner.fields]


def wire_bytes(owner: Owner, value: BaseModel) -> bytes:
    """The canonical bytes flightlog writes: the event path for events, the same encoder for nested types."""
    if isinstance(value, ev.Event):
        return canonical_bytes(value)
    wire = value.model_dump(mode="json")
    return canonical_json(wire)


def check_writes(owner: Owner, values: dict[str, Any]) -> None:
    """flightlog's bytes for ``values`` are the RFC 8785 form of what serde writes for them."""
    data = wire_bytes(owner, owner.decode(values))
    want = owner.expected(values)
    assert parse_json(data) == want
    assert data == canonical_json(want)


# ─── The tests ────────────────────────────────────────────────────────────────────────────────────


def test_the_seed_reads_as_the_32_kinds_tagged_by_kind() -> None:
    events = SEED_TYPES["SessionEvent"]
    assert events.container == {"tag": "kind", "rename_all": "snake_case"}
    assert [snake(v) for v in events.variants] == list(ev.SEED_KINDS)
    assert re.findall(r'=> "([a-z_]+)",', _code()) == list(ev.SEED_KINDS)  # the seed's own kind_str table
    assert len(ev.SEED_KINDS) == 32
    assert SEED_TYPES["RollbackReason"].container == {"tag": "kind", "rename_all": "snake_case"}
    assert SEED_TYPES["ProviderReplay"].container == {"deny_unknown_fields": None}
    assert set(SEED_TYPES) == DEFINED
    assert len(OWNERS) == 32 + 1 + len(SEED_TYPES["RollbackReason"].variants)


def test_the_table_understands_every_attribute_and_type_the_seed_uses() -> None:
    """A new attribute (``rename``, ``flatten``, ``with``...) or a new type fails here, not silently."""
    for owner, field in FIELDS:
        assert set(field.attrs) <= {"default", "skip_serializing_if"}, (owner.label, field)
        assert field.attrs.get("skip_serializing_if") in (None, "Option::is_none", "Vec::is_empty")
        if "skip_serializing_if" in field.attrs:
            assert "default" in field.attrs, f"{owner.label}.{field.name}: skipped but no default"
    for seed in SEED_TYPES.values():
        assert set(seed.container) <= {"tag", "rename_all", "deny_unknown_fields"}
    used = set().union(*(named_types(f.rust_type) for _, f in FIELDS))
    assert used == set(PRIMITIVES) | set(NAMED) | (DEFINED - {"SessionEvent"})
    for _, field in FIELDS:
        sample(field.rust_type)


@pytest.mark.parametrize("owner", OWNERS, ids=lambda o: o.label)
def test_field_names_are_the_seeds(owner: Owner) -> None:
    names = set(owner.model.model_fields) - set(owner.tag)
    assert names == {f.name for f in owner.fields}


@pytest.mark.parametrize(("owner", "field"), FIELDS, ids=[f"{o.label}.{f.name}" for o, f in FIELDS])
def test_field_follows_its_serde_attributes(owner: Owner, field: SeedField) -> None:
    """Written as serde writes it (always, null, omitted when None, omitted when empty), read as serde reads
    it (required or defaulted), and typed as the seed types it."""
    full = owner.full()
    check_writes(owner, full)
    minimal = owner.minimal()
    if field.required:
        without = {k: v for k, v in minimal.items() if k != field.name}
        with pytest.raises((EventDecodeError, ValidationError), match=field.name):
            owner.decode(without)
    else:
        assert field.name not in minimal
        check_writes(owner, minimal)  # absent: written as its default, as null, or not at all
        check_writes(owner, {**minimal, field.name: field.rust_default()})  # explicit None / [] / 0
        check_writes(owner, {**minimal, field.name: full[field.name]})
    for bad in invalid(field.rust_type):
        with pytest.raises((EventDecodeError, ValidationError), match=field.name):
            owner.decode({**minimal, field.name: bad})


def test_the_three_option_fields_without_skip_are_written_as_null() -> None:
    """Issue 10 item 6, spelled out: these three were omitted, so the bytes differed from serde's."""
    nulls = sorted(
        f"{o.label}.{f.name}" for o, f in FIELDS if f.is_option and "skip_serializing_if" not in f.attrs
    )
    assert nulls == ["permission_requested.reason", "run_started.agent_id", "run_started.system_prompt"]
    started = json.loads(canonical_bytes(ev.RunStarted(run_id="r", goal="g")))
    assert started == {
        "kind": "run_started",
        "run_id": "r",
        "goal": "g",
        "criteria": [],
        "agent_id": None,
        "system_prompt": None,
    }
    asked = json.loads(canonical_bytes(ev.PermissionRequested(turn=1, tool="t", arguments="{}")))
    assert asked == {
        "kind": "permission_requested",
        "turn": 1,
        "tool": "t",
        "arguments": "{}",
        "reason": None,
    }


@pytest.mark.parametrize("owner", OWNERS, ids=lambda o: o.label)
def test_unknown_fields_follow_deny_unknown_fields(owner: Owner) -> None:
    data = {**owner.minimal(), "zz_unknown": 1}
    if owner.deny_unknown:
        with pytest.raises((EventDecodeError, ValidationError), match="zz_unknown"):
            owner.decode(data)
    else:
        check_writes(owner, owner.minimal())
        assert "zz_unknown" not in parse_json(wire_bytes(owner, owner.decode(data)))


@st.composite
def _values(draw: st.DrawFn) -> tuple[Owner, dict[str, Any]]:
    owner = draw(st.sampled_from(OWNERS))
    values = owner.minimal()
    for field in owner.fields:
        if not field.required:
            choice = draw(st.sampled_from(["absent", "default", "sample"]))
            if choice == "default":
                values[field.name] = field.rust_default()
            elif choice == "sample":
                values[field.name] = sample(field.rust_type)
    return owner, values


@given(_values())
def test_any_mix_of_present_and_absent_fields_encodes_as_serde_does(
    case: tuple[Owner, dict[str, Any]],
) -> None:
    owner, values = case
    check_writes(owner, values)
