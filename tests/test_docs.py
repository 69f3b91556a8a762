"""Docs that cannot drift: the README's two commands, CI, the public face, the error tree."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import pytest

import flightlog
from flightlog import errors

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```sh\n(.+?)\n```", text)


def test_readme_opens_with_two_commands_and_ci_runs_the_second() -> None:
    commands = _readme_commands()
    assert len(commands) >= 2
    install_and_demo, install_and_test = commands[:2]
    assert install_and_demo.endswith("flightlog demo")
    assert "pip install" in install_and_demo
    assert "'.[test]'" in install_and_test and "pytest" in install_and_test
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert install_and_test.replace(" -q", "") in ci.replace(" -q", "")


def test_public_names_are_sorted_and_exported() -> None:
    assert flightlog.__all__ == sorted(flightlog.__all__)
    for name in flightlog.__all__:
        assert hasattr(flightlog, name), name


def test_readme_documents_every_command() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    for command in ("demo", "import", "ls", "show", "replay", "verify", "export", "db repair"):
        assert f"  {command}" in text, command


ERRORS = [
    errors.EncodingError(field="$.a", reason="nan"),
    errors.EventDecodeError(reason="bad", seq=3),
    errors.LedgerIntegrityError(
        session_id="s",
        seq=2,
        reason="hash_mismatch",
        divergences=[errors.Divergence(2, "hash_mismatch", "x")],
    ),
    errors.SessionNotFound(session_id="ab", matches=["abc", "abd"]),
    errors.AppendConflict(session_id="s", seq=4),
    errors.StaleWriter(session_id="s", epoch=1, current_epoch=2),
    errors.ReadOnlyStore(url="sqlite:///x"),
    errors.StoreUnavailable(url="sqlite:///x", reason="gone"),
    errors.EffectConflict(idempotency_key="k", stored_hash="a" * 64, new_hash="b" * 64),
    errors.RepairError(path="x.db", reason="no"),
    errors.ImportFormatError(path="f.jsonl", line=3, reason="bad"),
    errors.StoreError("plain", url="u"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda e: type(e).__name__)
def test_every_error_pickles_with_its_fields(error: errors.FlightlogError) -> None:
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back._fields == error._fields


def test_errors_keep_their_builtin_bases() -> None:
    assert isinstance(errors.EncodingError(field="$", reason="x"), ValueError)
    assert isinstance(errors.SessionNotFound(session_id="x"), LookupError)
    assert isinstance(errors.ImportFormatError(path="p", reason="r"), ValueError)
    assert "seq 2" not in str(errors.LedgerIntegrityError(session_id="s", reason="empty"))
    assert "sequence 5" in str(errors.LedgerIntegrityError(session_id="s", seq=5, reason="gap"))


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    [snippet] = re.findall(r"```python\n(.+?)\n```", text, flags=re.S)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(snippet, "README.md", "exec"), namespace)
    report = namespace["report"]
    assert report.ok  # type: ignore[attr-defined]
    assert "sealed" in report.summary()  # type: ignore[attr-defined]
