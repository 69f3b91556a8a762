"""Docs that cannot drift: the README's two commands, CI, the public face, the error tree."""

from __future__ import annotations

import pickle
import re
import tomllib
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


_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
_WORD = re.compile(r"[a-z][a-z-]*")


def _readme_command_table() -> dict[tuple[str, ...], set[str]]:
    """The README's command block: command path -> every option its lines name.

    A line ``  PATH... ARGS [OPTIONS]   description`` opens a command: its path is the leading lowercase
    words of the synopsis (the text before the first run of 2+ spaces). Indented lines after it continue
    it. The ``flightlog ...`` line (and its continuation) holds the root's options, under the path ().
    """
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    [block] = re.findall(r"```\n(flightlog \[.+?)\n```", text, flags=re.S)
    table: dict[tuple[str, ...], set[str]] = {}
    current: tuple[str, ...] = ()
    for line in block.splitlines():
        if line.startswith("flightlog "):
            current = ()
        elif re.match(r"  [a-z]", line):
            synopsis = re.split(r"\s{2,}", line.strip())[0].split()
            current = tuple(word for word in _take_words(synopsis))
            assert current not in table, f"{' '.join(current)} is listed twice"
        elif not line.strip():
            continue
        else:
            assert line.startswith("   "), f"not a command line nor a continuation: {line!r}"
        table.setdefault(current, set()).update(_OPTION.findall(line))
    return table


def _take_words(words: list[str]) -> list[str]:
    taken = []
    for word in words:
        if not _WORD.fullmatch(word):
            break
        taken.append(word)
    return taken


def _real_command_tree() -> dict[tuple[str, ...], set[str]]:
    """Every leaf command of the real typer app -> its option names (short and long; help excluded)."""
    import typer.main

    from flightlog.cli import app

    root = typer.main.get_command(app)
    tree: dict[tuple[str, ...], set[str]] = {(): {"-h", "--help"}}

    def options(command: object) -> set[str]:
        return {
            name
            for param in getattr(command, "params", [])
            if param.param_type_name == "option"
            for name in (*param.opts, *param.secondary_opts)
        }

    def walk(command: object, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if not subcommands:
            tree[path] = options(command)
            return
        for name, sub in subcommands.items():
            walk(sub, (*path, name))

    tree[()] |= options(root)
    for name, sub in root.commands.items():  # type: ignore[attr-defined]
        walk(sub, (name,))
    return tree


def test_readme_lists_every_command_and_every_listed_command_exists() -> None:
    """Both ways: a command missing from the README, or a README command that does not exist, fails."""
    documented, real = _readme_command_table(), _real_command_tree()
    assert sorted(set(real) - set(documented)) == [], "commands the README does not list"
    assert sorted(set(documented) - set(real)) == [], "commands the README lists that do not exist"


def test_readme_names_every_option_and_only_real_ones() -> None:
    documented, real = _readme_command_table(), _real_command_tree()
    problems = []
    for path in sorted(real):
        name = " ".join(path) or "flightlog"
        if missing := real[path] - documented.get(path, set()):
            problems.append(f"{name}: undocumented {sorted(missing)}")
        if invented := documented.get(path, set()) - real[path]:
            problems.append(f"{name}: no such option {sorted(invented)}")
    assert problems == []


def test_the_table_parser_sees_what_a_reader_sees() -> None:
    """The parser itself: a sample of rows read as a human reads them (it must not pass on nothing)."""
    table = _readme_command_table()
    assert len(table) == len(_real_command_tree()) >= 30
    assert table[("db", "repair")] == {"--discard-wal", "--force"}
    assert table[("export",)] == {"-o", "--output", "--bundle", "--otlp", "--otlp-content"}
    assert table[("worker",)] >= {"--db", "-c", "--concurrency", "--json"}
    assert "--install-completion" in table[()] and "-h" in table[()]


def test_every_install_in_the_guide_works_from_a_clone() -> None:
    """flightlog is not on PyPI yet: wherever the guide names ``pip install 'flightlog[X]'`` it says that
    works once flightlog is published, and gives ``pip install -e '.[X]'`` (what works from a clone) on the
    same page; every extra it names is one pyproject.toml defines."""
    extras = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
            "optional-dependencies"
        ]
    )
    pages = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)
    installs = 0
    for page in pages:
        text = page.read_text(encoding="utf-8")
        clone = set(re.findall(r"pip install -e '\.\[([\w-]+)\]'", text))
        installs += len(clone)
        for line in text.splitlines():
            for extra in re.findall(r"'flightlog\[([\w-]+)\]'", line):
                assert "published" in line, (page.name, line)
                assert extra == "EXTRA" or extra in clone, (page.name, extra)
        assert clone <= extras | {"EXTRA"}, (page.name, clone - extras)
    assert installs >= 8  # the parser sees the guide's installs (it must not pass on nothing)


ERRORS = [
    errors.EncodingError(field="$.a", reason="nan"),
    errors.ItemEncodingError(field="items[1].content", reason="object is not a JSON value"),
    errors.EventDecodeError(reason="bad", seq=3),
    errors.LedgerIntegrityError(
        session_id="s",
        seq=2,
        reason="hash_mismatch",
        divergences=[errors.Divergence(2, "hash_mismatch", "x")],
    ),
    errors.ArtifactIntegrityError(handle="sha256:" + "a" * 64, reason="holds bytes of another sha256"),
    errors.ArtifactIntegrityError(
        handle="salted:sha256:" + "b" * 64, reason="altered", session_id="s", seq=5
    ),
    errors.SessionNotFound(session_id="ab", matches=["abc", "abd"]),
    errors.SessionNotFound(session_id="ab", exact=True),
    errors.AppendConflict(session_id="s", seq=4),
    errors.SessionBusy(session_id="s", seq=4),
    errors.HolderBusy(session_id="s", seq=4, effect="s:1:p1", holder="pid 7", fenced=True, waited_s=30.0),
    errors.KernelBusy(session_id="s", threads=1),
    errors.StaleWriter(session_id="s", epoch=1, current_epoch=2),
    errors.SignalRowInvalid(signal_id="sig-1", field="kind", reason="is 'zzz'"),
    errors.ReadOnlyStore(url="sqlite:///x"),
    errors.StoreUnavailable(url="sqlite:///x", reason="gone"),
    errors.EffectConflict(idempotency_key="k", stored_hash="a" * 64, new_hash="b" * 64),
    errors.RepairError(path="x.db", reason="no"),
    errors.ExportFailed(url="http://127.0.0.1:4318", reason="refused"),
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
    item = errors.ItemEncodingError(field="items[0]", reason="x")
    assert isinstance(item, TypeError) and isinstance(item, ValueError)
    assert isinstance(errors.SessionNotFound(session_id="x"), LookupError)
    assert isinstance(errors.ImportFormatError(path="p", reason="r"), ValueError)
    assert "seq 2" not in str(errors.LedgerIntegrityError(session_id="s", reason="empty"))
    assert "sequence 5" in str(errors.LedgerIntegrityError(session_id="s", seq=5, reason="gap"))
    bare = errors.ArtifactIntegrityError(handle="sha256:ab", reason="is altered")
    assert "referenced by" not in str(bare)
    named = bare.named_by(session_id="s").named_by(seq=7, session_id="other")
    assert (named.handle, named.session_id, named.seq) == ("sha256:ab", "s", 7)
    assert "artifact sha256:ab (referenced by session s at seq 7) is altered" in str(named)


def test_readme_python_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    [snippet] = re.findall(r"```python\n(.+?)\n```", text, flags=re.S)
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    exec(compile(snippet, "README.md", "exec"), namespace)
    report = namespace["report"]
    assert report.ok  # type: ignore[attr-defined]
    assert "sealed" in report.summary()  # type: ignore[attr-defined]


def test_readme_says_what_the_core_job_session_of_a_folder_import_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README explains the ``core_job:import:…`` session a folder import adds (it did not): its id, task,
    events and status, checked here against what an import of a folder records."""
    import json
    import shutil

    from typer.testing import CliRunner

    from flightlog.cli import app

    text = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    for claim in (
        "session `core_job:import:<12 hex>` whose task is `import N transcripts from M paths`",
        "holding `run_started`, a `core_job.progress` event",
        "then `core_job.summary` (those counts and the events imported) and `run_terminal`",
        "its status ends `completed`",
        "no paths (metadata: job, host, pid)",
    ):
        assert claim in text, claim
    monkeypatch.setenv("FLIGHTLOG_KEY_DIR", str(tmp_path / "keys"))
    monkeypatch.setenv("FLIGHTLOG_HEAD_DIR", str(tmp_path / "heads"))
    folder = tmp_path / "transcripts"
    folder.mkdir()
    for name in ("spotter_short.jsonl", "spotter_tool_heavy.jsonl"):
        shutil.copy(ROOT / "tests" / "data" / "samples" / "claude-code" / name, folder / name)
    db = str(tmp_path / "f.db")
    runner = CliRunner()
    assert runner.invoke(app, ["--db", db, "import", str(folder)]).exit_code == 0
    listed = json.loads(runner.invoke(app, ["--db", db, "ls", "--json"]).stdout)
    (job,) = [row for row in listed if row["source"] == "core_job"]
    assert re.fullmatch(r"core_job:import:[0-9a-f]{12}", job["session_id"])
    assert (job["task"], job["status"]) == ("import 2 transcripts from 1 path", "completed")
    shown = runner.invoke(app, ["--db", db, "show", job["session_id"], "--json"]).stdout
    kinds = [
        e.get("custom_kind", e["kind"]) for e in (json.loads(line)["event"] for line in shown.splitlines())
    ]
    assert kinds[0] == "run_started" and "core_job.progress" in kinds, kinds
    assert kinds[-3:] == ["core_job.summary", "run_terminal", "session_sealed"]  # signed and sealed
    assert str(folder) not in shown and "spotter" not in shown
    with flightlog.open_store(db) as store:
        meta = store.get_session(job["session_id"]).metadata
    assert set(meta) == {"job", "host", "pid"}


def test_readme_and_importers_guide_name_every_folder_watch_follows_by_default() -> None:
    """``watch``'s default folders, as the code lists them (``~/.gemini/tmp`` was missing from the README)."""
    from flightlog.importers.watch import default_folders

    folders = ["~/" + str(p.relative_to("/h")) for p in default_folders({"HOME": "/h"})]
    assert "~/.gemini/tmp" in folders
    readme = " ".join(ROOT.joinpath("README.md").read_text(encoding="utf-8").split())
    watch_line = readme[readme.index("watch [FOLDER]...") :][:400]
    guide = " ".join(ROOT.joinpath("docs", "guide", "importers.md").read_text(encoding="utf-8").split())
    for folder in folders:
        assert folder in watch_line, f"README's watch line omits {folder}"
        assert f"`{folder}`" in guide, f"docs/guide/importers.md omits {folder}"
