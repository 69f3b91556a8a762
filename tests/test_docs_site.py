"""The documentation site (docs/, Sphinx + MyST) cannot drift from the code.

1. The site builds with warnings as errors (``sphinx -W``): a docstring that is not valid reST, a broken
   cross-reference between guide pages, a page missing from the table of contents fails the build.
2. Every public name of every module the API reference documents (its ``.. automodule::`` directives,
   ``flightlog.__all__`` included) has a docstring of its own and appears in the built reference; public
   methods and properties of documented classes have a docstring (their own, or the contract's they
   override).
3. Every Python snippet of the guide pages and of the README runs: the ```python`` / ```py`` fences of a
   page run in order, in one namespace, in a fresh working directory, with the user's key, head and
   database locations isolated (tests/conftest.py). The exceptions:

   - ```python notrun: REASON`` marks a snippet that cannot run here (it calls a paid API); it must say
     why, it is still compiled, and there may be at most :data:`MAX_NOT_RUN` of them;
   - ```python postgres`` runs with ``$FLIGHTLOG_DB`` set to a fresh schema of the test PostgreSQL server
     (tests/postgres/server.py; skipped without one, except in CI).

   Snippets may construct the SDK adapters: ``OPENAI_API_KEY`` and ``ANTHROPIC_API_KEY`` hold placeholders,
   so constructing works, and any call that tried to reach the real API would fail (no snippet does: the
   ones that talk to a model use the loopback replay server).

Also: every ```toml`` fence is valid TOML, and one describing an agent passes ``agent_from_dict``'s checks.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import subprocess
import sys
import tomllib
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import flightlog

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

MAX_NOT_RUN = 3
"""Snippets exempt from running (each with its reason in the fence info): keep them few."""

REQUIRED_MODULES = {
    "flightlog",
    "flightlog.errors",
    "flightlog.events",
    "flightlog.fleet",
    "flightlog.importers",
    "flightlog.integrity.checkpoints",
    "flightlog.integrity.erasure",
    "flightlog.integrity.grants",
    "flightlog.integrity.notary",
    "flightlog.integrity.verify",
    "flightlog.integrations.langgraph",
    "flightlog.integrations.openai_agents",
    "flightlog.kernel",
    "flightlog.messages",
    "flightlog.providers.anthropic",
    "flightlog.providers.base",
    "flightlog.providers.openai_chat",
    "flightlog.providers.openai_responses",
    "flightlog.providers.replay_server",
    "flightlog.recorder",
    "flightlog.sessions",
    "flightlog.store",
}
"""Modules the user guide relies on; the API reference must document at least these."""

_FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)


# ─── the site ─────────────────────────────────────────────────────────────────────────────────


def documented_modules() -> list[str]:
    """The modules named by ``.. automodule::`` in docs/api/*.rst, sorted."""
    found = {
        match.group(1)
        for page in DOCS.glob("api/*.rst")
        for match in re.finditer(r"^\.\. automodule:: (\S+)", page.read_text(encoding="utf-8"), re.M)
    }
    return sorted(found)


@dataclass(frozen=True)
class Site:
    """A built site: its HTML directory and the Python names in its inventory."""

    html: Path
    names: frozenset[str]


def _inventory_names(html: Path) -> frozenset[str]:
    """The Python object names of a Sphinx ``objects.inv`` (version 2: four header lines, then zlib-compressed
    lines ``name domain:role priority uri display-name``)."""
    data = (html / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = data.index(b"\n", header_end) + 1
    assert data.startswith(b"# Sphinx inventory version 2"), data[:40]
    lines = zlib.decompress(data[header_end:]).decode("utf-8").splitlines()
    return frozenset(line.split(" ", 2)[0] for line in lines if line.split(" ", 2)[1].startswith("py:"))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """Build the site once for this module, exactly as the docs say: ``sphinx -W --keep-going``."""
    out = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    command += ["-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    assert proc.returncode == 0, f"the docs do not build cleanly:\n{proc.stderr}{proc.stdout}"
    return Site(out / "html", _inventory_names(out / "html"))


@pytest.mark.slow
def test_site_builds_with_warnings_as_errors(site: Site) -> None:
    assert (site.html / "index.html").is_file()
    assert (site.html / "attacks.html").is_file()  # other helpers append to docs/attacks.md: it stays linked
    assert "flightlog.kernel.Agent" in site.names
    assert "flightlog.Recorder.append" in site.names


def _homes(modules: list[str]) -> dict[int, str]:
    """Where a re-exported class or function is documented: the shortest documented path (docs/conf.py)."""
    homes: dict[int, str] = {}
    for name in sorted(modules, key=lambda m: (m.count("."), m)):
        module = importlib.import_module(name)
        for attr in getattr(module, "__all__", ()):
            obj = getattr(module, attr)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                homes.setdefault(id(obj), name)
    return homes


def _own_doc(obj: Any) -> str | None:
    return obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)


def _undocumented_names(module: ModuleType, homes: dict[int, str], names: frozenset[str]) -> list[str]:
    problems = []
    public = getattr(module, "__all__", None)
    if public is None:
        return [f"{module.__name__}: no __all__ (the reference documents what __all__ lists)"]
    for attr in public:
        obj = getattr(module, attr)
        full = f"{module.__name__}.{attr}"
        callable_obj = inspect.isclass(obj) or inspect.isfunction(obj)
        if callable_obj and not (_own_doc(obj) or "").strip():
            problems.append(f"{full}: no docstring")
        home = homes.get(id(obj), module.__name__) if callable_obj else module.__name__
        if f"{home}.{attr}" not in names and full not in names:
            problems.append(f"{full}: not in the API reference (no docstring autodoc could find?)")
    return problems


def _contract_doc(cls: type, attr: str) -> str | None:
    """The docstring of ``cls.attr``, or of the same attribute on the nearest base that has one."""
    for klass in cls.__mro__:
        value = klass.__dict__.get(attr)
        if value is None:
            continue
        target = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        doc = getattr(target, "__doc__", None)
        if doc and doc.strip():
            return doc
    return None


def _undocumented_members(cls: type) -> list[str]:
    problems = []
    for attr, value in vars(cls).items():
        if attr.startswith("_"):
            continue
        target = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if (inspect.isfunction(target) or isinstance(value, property)) and not _contract_doc(cls, attr):
            problems.append(f"{cls.__module__}.{cls.__qualname__}.{attr}: no docstring")
    return problems


@pytest.mark.slow
def test_every_public_name_has_a_docstring_and_is_in_the_reference(site: Site) -> None:
    modules = documented_modules()
    assert set(modules) >= REQUIRED_MODULES, f"not documented: {sorted(REQUIRED_MODULES - set(modules))}"
    homes = _homes(modules)
    problems: list[str] = []
    classes: dict[int, type] = {}
    for name in modules:
        module = importlib.import_module(name)
        problems += _undocumented_names(module, homes, site.names)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if inspect.isclass(obj) and obj.__module__.startswith("flightlog"):
                classes[id(obj)] = obj
    for cls in classes.values():
        problems += _undocumented_members(cls)
    assert not problems, "\n".join(problems)


def test_the_reference_documents_what_the_package_exports() -> None:
    """Cheap twin of the slow check above: flightlog.__all__ is on the top-level reference page."""
    assert "flightlog" in documented_modules()
    missing = [name for name in flightlog.__all__ if not (_own_doc(getattr(flightlog, name)) or "").strip()]
    assert not missing or missing == ["__version__"], missing


# ─── the snippets ─────────────────────────────────────────────────────────────────────────────


@dataclass(frozen=True)
class Snippet:
    """One fenced block: where it is, its fence info after the language, and its code."""

    path: Path
    line: int
    language: str
    info: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def snippets(path: Path) -> list[Snippet]:
    """Every fenced block of a Markdown file, in order (``line``: 1-based line of its first code line)."""
    text = path.read_text(encoding="utf-8")
    found = []
    for match in _FENCE.finditer(text):
        language, _, info = match.group("info").strip().partition(" ")
        line = text.count("\n", 0, match.start()) + 2
        found.append(Snippet(path, line, language, info.strip(), match.group("body")))
    return found


def _markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


def _python(path: Path) -> list[Snippet]:
    return [s for s in snippets(path) if s.language in ("python", "py")]


def _not_run(snippet: Snippet) -> str | None:
    """The reason a snippet is exempt from running, or None."""
    if not snippet.info.startswith("notrun"):
        return None
    reason = snippet.info.removeprefix("notrun").lstrip(":").strip()
    assert len(reason) >= 10, f"{snippet.where}: a notrun snippet must say why it cannot run here"
    return reason


def test_python_snippets_are_few_exemptions_and_known_fence_words() -> None:
    exempt = []
    for path in _markdown_files():
        for snippet in _python(path):
            assert snippet.info in ("", "postgres") or snippet.info.startswith("notrun"), (
                f"{snippet.where}: unknown fence info {snippet.info!r} (use notrun: REASON or postgres)"
            )
            if _not_run(snippet) is not None:
                exempt.append(snippet.where)
    assert len(exempt) <= MAX_NOT_RUN, f"too many snippets exempt from running: {exempt}"
    assert sum(len(_python(p)) for p in _markdown_files()) >= 30  # the guide is made of runnable examples


@pytest.fixture
def fresh_imports(tmp_path: Path) -> Iterator[None]:
    """Undo what snippets do to the interpreter: modules they import from their working directory, and
    the working directory put on ``sys.path`` by ``load_agent``."""
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        origin = getattr(sys.modules[name], "__file__", None) or ""
        if origin.startswith(str(tmp_path)):
            del sys.modules[name]


def _postgres_url() -> Iterator[str]:
    from postgres.server import database_url, fresh_schema, schema_url

    database_url()  # skips without a server (fails in CI)
    with fresh_schema() as schema:
        yield schema_url(schema)


def _run(snippet: Snippet, namespace: dict[str, Any]) -> None:
    code = compile(snippet.code, snippet.where, "exec")
    try:
        exec(code, namespace)
    except Exception as exc:
        raise AssertionError(f"snippet at {snippet.where} failed: {type(exc).__name__}: {exc}") from exc


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_python_snippets_run(
    path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    found = _python(path)
    if not found:
        pytest.skip("no Python snippet")
    _run_in_order(found, "docs_snippets_" + re.sub(r"\W", "_", path.stem), tmp_path, monkeypatch)


INTEGRATIONS = DOCS / "guide" / "integrations.md"
"""The page a user copies one framework's section of: each section's snippets must run on their own."""


def _sections(path: Path) -> dict[str, list[Snippet]]:
    """The Python snippets of each ``##`` / ``###`` section of a page, by heading, in order."""
    text = path.read_text(encoding="utf-8")
    found = _python(path)
    inside = {line for s in snippets(path) for line in range(s.line - 1, s.line + s.code.count("\n") + 1)}
    headings = [
        (text.count("\n", 0, m.start()) + 1, m.group(1))
        for m in re.finditer(r"(?m)^#{2,3} (.+)$", text)
        if text.count("\n", 0, m.start()) + 1 not in inside
    ]
    sections: dict[str, list[Snippet]] = {}
    for snippet in found:
        title = [title for line, title in headings if line < snippet.line][-1]
        sections.setdefault(title, []).append(snippet)
    return sections


@pytest.mark.parametrize("title", sorted(_sections(INTEGRATIONS)))
def test_each_integration_section_runs_on_its_own(
    title: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    """A user copies the section of their framework only: its snippets import what they use."""
    assert (
        len(_sections(INTEGRATIONS)) >= 5
    )  # LangGraph, Agents SDK (+ approvals), Pydantic AI, OpenTelemetry
    _run_in_order(
        _sections(INTEGRATIONS)[title], "docs_section_" + re.sub(r"\W", "_", title), tmp_path, monkeypatch
    )


def _integration_snippets() -> list[Snippet]:
    return [s for found in _sections(INTEGRATIONS).values() for s in found if _not_run(s) is None]


@pytest.mark.parametrize("snippet", _integration_snippets(), ids=lambda s: s.where)
def test_each_integration_snippet_runs_alone_and_again(
    snippet: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    """A user pastes one snippet, then runs it again: LangGraph's second snippet needed the first
    (``NameError: flightlog``), and its first failed a second run in the same folder (its thread ``t1``, kept
    in ``langgraph.db``, added two more steps). Each runs alone, twice, in one folder."""
    assert len(_integration_snippets()) >= 6
    name = "docs_snippet_" + re.sub(r"\W", "_", snippet.where)
    for _ in range(2):
        _run_in_order([snippet], name, tmp_path, monkeypatch)


PROVIDERS = DOCS / "guide" / "providers.md"
"""A page whose snippets a user copies one at a time (each sets up a different provider)."""


@pytest.mark.parametrize(
    "snippet", [s for s in _python(PROVIDERS) if _not_run(s) is None], ids=lambda s: s.where
)
def test_each_providers_snippet_runs_alone(
    snippet: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_imports: None
) -> None:
    """The custom-provider snippet, pasted alone, failed with ``NameError: flightlog`` (it used the replay
    snippet's imports: ``flightlog``, ``Kernel``, ``Agent``). Each runs in a fresh namespace."""
    _run_in_order([snippet], "docs_providers_" + re.sub(r"\W", "_", snippet.where), tmp_path, monkeypatch)


def _run_in_order(found: list[Snippet], name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run ``found`` in order in one fresh namespace, in ``tmp_path`` (the exceptions: module docstring)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-placeholder-docs-snippets-never-call-the-api")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-placeholder-docs-snippets-never-call-the-api")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    postgres: Iterator[str] | None = None
    # A real module, so that code resolving annotations through ``sys.modules[cls.__module__]`` (typing's
    # get_type_hints, as LangGraph does for a state schema) finds the snippet's imports.
    module = ModuleType(name)
    sys.modules[module.__name__] = module
    namespace = module.__dict__
    try:
        for snippet in found:
            if _not_run(snippet) is not None:
                compile(snippet.code, snippet.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
                continue
            if snippet.info == "postgres" and postgres is None:
                postgres = _postgres_url()
                monkeypatch.setenv("FLIGHTLOG_DB", next(postgres))
            _run(snippet, namespace)
    finally:
        sys.modules.pop(module.__name__, None)
        if postgres is not None:
            postgres.close()


def test_toml_snippets_parse_and_agents_in_them_pass_the_schema_checks() -> None:
    from flightlog.kernel.spec import agent_from_dict

    checked = 0
    for path in _markdown_files():
        for snippet in snippets(path):
            if snippet.language != "toml":
                continue
            data = tomllib.loads(snippet.code)
            if "route" not in data:
                continue
            # Only the schema is checked here (the code references name files of the reader's project):
            # a built-in provider and no tools stand in for them.
            probe = dict(data, route=["flightlog.kernel.scripted:ScriptedProvider"], tools=[])
            agent = agent_from_dict(probe, source=snippet.where)
            assert agent.name == data["name"]
            checked += 1
    assert checked >= 1
