"""A transcript field of the wrong JSON type (attack on the importers): each importer dispatches on a
record's tag fields (``type``, ``source``, ``status``...) by looking them up in dicts and sets, and a
hostile file can put an object, an array or a number there. The import must read such a record as one of
an unknown kind, never end with a ``TypeError`` (unhashable type) or ``AttributeError``; and a Gemini CLI
record's numbers RFC 8785 cannot carry are kept as text (as every other importer keeps them), not a refusal
of the whole file.

Each sample, each key that holds a short string somewhere in it, each hostile value: every occurrence of
that key set to the value, read by the sample's own importer (``module.read``: no store), which may refuse
the file only with ``ImportFormatError``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flightlog.errors import ImportFormatError
from flightlog.importers import FORMATS, import_file
from flightlog.importers.base import ImportWarning
from flightlog.recorder import verify_session
from flightlog.store import SqliteStore

SAMPLES = Path(__file__).parent / "data" / "samples"
JSON_SAMPLES = sorted(
    p
    for p in SAMPLES.rglob("*")
    if p.is_file() and p.suffix in (".jsonl", ".json", ".traj") and p.parent.name in FORMATS
)
HOSTILE: list[Any] = [{"x": 1}, [1], 7]


def load(path: Path) -> tuple[bool, list[Any]]:
    """(is JSONL, its records or [the document])."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        return True, [value for value in map(_loads_or_none, text.splitlines()) if value is not None]
    return False, [json.loads(text)]


def _loads_or_none(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None  # a malformed sample line (the hostile samples have some): left out


def tag_keys(values: list[Any]) -> set[str]:
    """Keys that hold a short string somewhere (the fields an importer dispatches on)."""
    keys: set[str] = set()
    stack = list(values)
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            keys.update(k for k, v in item.items() if isinstance(v, str) and len(v) <= 40)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return keys


def replaced(value: Any, key: str, new: Any) -> Any:
    if isinstance(value, dict):
        return {k: (new if k == key else replaced(v, key, new)) for k, v in value.items()}
    if isinstance(value, list):
        return [replaced(v, key, new) for v in value]
    return value


def write(path: Path, jsonl: bool, records: list[Any]) -> None:
    if jsonl:
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    else:
        path.write_text(json.dumps(records[0]), encoding="utf-8")


@pytest.mark.parametrize("sample", JSON_SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name[:24]}")
def test_a_tag_field_of_the_wrong_type_never_crashes_an_importer(tmp_path: Path, sample: Path) -> None:
    jsonl, records = load(sample)
    module = FORMATS[sample.parent.name]
    path = tmp_path / sample.name
    crashes = []
    for key in sorted(tag_keys(records)):
        for new in HOSTILE:
            write(path, jsonl, [replaced(r, key, new) for r in records])
            try:
                module.read(path, [])
            except ImportFormatError:
                pass
            except Exception as exc:
                crashes.append(f"{key}={json.dumps(new)}: {type(exc).__name__}: {exc}")
    assert crashes == []


GEMINI = SAMPLES / "gemini-cli" / "session-2026-12-02T06-04-a3f1c2d4.jsonl"


@pytest.mark.parametrize("number", ["1e400", "-1e400", "NaN", "Infinity", str(2**53), str(-(2**60))])
def test_a_gemini_cli_number_rfc8785_cannot_carry_is_kept_as_text(tmp_path: Path, number: str) -> None:
    records = [json.loads(line) for line in GEMINI.read_text(encoding="utf-8").splitlines() if line.strip()]
    path = tmp_path / GEMINI.name
    lines = []
    for record in records:
        record["hostile"] = "@@"
        lines.append(json.dumps(record).replace('"@@"', number))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    warnings: list[ImportWarning] = []
    FORMATS["gemini-cli"].read(path, warnings)  # refused the file on main (EncodingError)
    with SqliteStore(tmp_path / "f.db") as store:
        result = import_file(store, path)
        assert all(verify_session(store, sid).ok for sid in result.session_ids)
    assert any("RFC 8785" in w.reason for w in result.warnings)
