"""What a new user hit following the README from a fresh clone (session 18, task nu): each test pins the
exit code and the words a user reads."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from flightlog.cli import app

runner = CliRunner()
SAMPLES = Path(__file__).parent / "data" / "samples"


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _ledger(tmp_path: Path) -> Path:
    db = tmp_path / "src.db"
    code, _, err = invoke("--db", str(db), "import", str(SAMPLES / "codex"))
    assert code == 0, err
    return db


# ─── 1. db copy into a directory that does not exist ───────────────────────────────────────────


def test_db_copy_into_a_missing_directory_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """It used to create the directory, copy, and retire the source ("moved to /nonexist/c.db")."""
    src = _ledger(tmp_path)
    dst = tmp_path / "nonexist" / "c.db"
    code, out, err = invoke("db", "copy", str(src), str(dst))
    assert code == 2, err
    assert err.strip() == (
        f"flightlog: error: no directory {dst.parent} for DST {dst} (a typo? create the directory first to "
        "start a new database there)"
    )
    assert out == "" and not dst.parent.exists()
    code, _, err = invoke("--db", str(src), "import", str(SAMPLES / "codex"))  # the source is not retired
    assert code == 0 and "moved to" not in err, err


def test_db_copy_from_a_missing_source_is_refused(tmp_path: Path) -> None:
    src, dst = tmp_path / "typo.db", tmp_path / "c.db"
    code, _, err = invoke("db", "copy", str(src), str(dst))
    assert code == 2 and err.startswith(f"flightlog: error: no database at {src} yet"), err
    assert not src.exists() and not dst.exists()
