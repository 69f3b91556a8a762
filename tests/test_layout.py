"""The package layout (ARCHITECTURE.md, "Layers"): old module paths still import for one release, with a
DeprecationWarning naming the new one, and no module imports itself back through another."""

from __future__ import annotations

import importlib
import subprocess
import sys

import grimp
import pytest

from flightlog._moved import MOVED

KNOWN_CIRCLES: set[frozenset[str]] = set()


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_module_path_warns_and_gives_the_same_objects(old: str) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {MOVED[old][0]}"):
        module = importlib.import_module(old)
    assert module.__all__, old
    for target in MOVED[old]:
        moved = importlib.import_module(target)
        for name in getattr(moved, "__all__", ()):
            assert getattr(module, name) is getattr(moved, name), (old, name)


def test_the_old_checkpoints_path_keeps_every_name_it_had() -> None:
    """``flightlog.checkpoints`` was split in five; what it exported is all still there, the same objects."""
    sys.modules.pop("flightlog.checkpoints", None)
    with pytest.warns(DeprecationWarning):
        from flightlog.checkpoints import Notary, SessionSealed, audit_session, resume, sign_note

    from flightlog.integrity.notary import Notary as NewNotary
    from flightlog.integrity.notes import sign_note as new_sign_note
    from flightlog.integrity.signing import resume as new_resume
    from flightlog.integrity.verify import audit_session as new_audit
    from flightlog.notarization import SessionSealed as NewSealed

    assert (Notary, SessionSealed, audit_session, resume, sign_note) == (
        NewNotary,
        NewSealed,
        new_audit,
        new_resume,
        new_sign_note,
    )


def test_an_agent_spec_stored_under_the_old_demo_path_still_resolves() -> None:
    """Ledgers recorded by the old demo name ``flightlog.demo_kernel:demo_agent`` as their agent."""
    code = (
        "import warnings, importlib\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "from flightlog.cli.demo_kernel import demo_agent\n"
        "assert importlib.import_module('flightlog.demo_kernel').demo_agent is demo_agent\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_console_script_target_is_still_flightlog_cli_main(monkeypatch: pytest.MonkeyPatch) -> None:
    """``flightlog.cli:main`` runs ``cli.root.main`` for every command line but a lone ``--version`` (answered
    before typer loads: tests/test_cli_startup.py)."""
    import flightlog.cli
    from flightlog.cli import root

    seen: list[list[str]] = []
    monkeypatch.setattr(root, "main", lambda: seen.append(sys.argv[1:]))
    for argv in (["ls"], ["--version", "--debug"], []):
        monkeypatch.setattr(sys, "argv", ["flightlog", *argv])
        flightlog.cli.main()
    assert seen == [["ls"], ["--version", "--debug"], []]


def _circles(graph: grimp.ImportGraph) -> set[frozenset[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for module in sorted(graph.modules):
        if module.startswith("flightlog") and module not in index:
            visit(module)
    return found


def test_no_import_circle() -> None:
    """Runtime imports (module level and inside functions) form no circle; only imports under
    ``TYPE_CHECKING`` may name a type from a module above."""
    graph = grimp.build_graph("flightlog", exclude_type_checking_imports=True)
    circles = _circles(graph) - KNOWN_CIRCLES
    assert not circles, sorted(sorted(c) for c in circles)
