"""Re-importing a transcript whose earlier line changed: refused clearly, and (user pass, session 16) the
refusal now offers the next steps a user really has. Each one is taken here and works."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from flightlog.cli import app

SAMPLE = Path(__file__).parent / "data" / "samples" / "claude-code" / "spotter_short.jsonl"
SID = "claude-code:55604662-cf2a-4331-851a-ec234028f8ca"
runner = CliRunner()


def _import(db: Path, path: Path) -> tuple[int, str, str]:
    done = runner.invoke(app, ["--db", str(db), "import", str(path)])
    return done.exit_code, done.stdout, " ".join(done.stderr.split())


def test_a_changed_earlier_line_is_refused_with_the_ways_on_and_each_works(tmp_path: Path) -> None:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    source, db, other = tmp_path / "t.jsonl", tmp_path / "a.db", tmp_path / "other.db"
    source.write_text("".join(lines[:-2]), encoding="utf-8")
    assert _import(db, source)[0] == 0
    edited = [line.replace('"content":"', '"content":"EDITED ', 1) for line in lines]
    assert edited != lines
    source.write_text("".join(edited), encoding="utf-8")
    code, out, err = _import(db, source)
    assert code == 1 and out == ""
    assert "refusing to fork the session (nothing recorded). What was recorded stays " in err
    assert (
        f"(`flightlog show {SID}`); to record this version as well, import it into another database " in err
    )
    assert (
        f"(`flightlog --db OTHER.db import {source}`); once the file starts with what was recorded again, "
        in err
    )
    assert err.endswith("an import appends its new lines")
    assert _import(other, source)[0] == 0  # another database takes the changed version
    source.write_text("".join(lines), encoding="utf-8")  # restored, and grown by the two last lines
    code, out, _ = _import(db, source)
    assert code == 0 and out.startswith(f"{SID}  ") and "events from t.jsonl" in out
    assert runner.invoke(app, ["--db", str(db), "verify", SID, "--offline"]).exit_code == 0
