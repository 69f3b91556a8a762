"""Sphinx configuration: the user guide (Markdown, MyST) and the API reference (autodoc from docstrings).

Build (what ``tests/test_docs_site.py`` runs, warnings fail the build)::

    python -m sphinx -W --keep-going -b html docs docs/_build/html

``docs/_build/`` is ignored by git: the site is never committed.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

import flightlog

# Sphinx's autodoc, while documenting pydantic models, writes annotations gathered from pydantic's own source
# into ``pydantic.BaseModel.__annotations__``; a pydantic-based library imported *after* that (LangChain
# under the LangGraph integration, the OpenAI Agents SDK) then fails to build its models. Importing the
# integrations here, before autodoc runs, loads those libraries while BaseModel is still untouched.
import flightlog.integrations.langgraph
import flightlog.integrations.openai_agents

logger = logging.getLogger("flightlog.docs")

project = "flightlog"
author = "flightlog developers"
copyright = "flightlog developers"
release = flightlog.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]

# Markdown: explicit heading anchors so guide pages can link to sections (``page.md#section``).
myst_heading_anchors = 3
# A heading level skipped (``#`` then ``###``, as docs/attacks.md has: several authors append to it) still
# renders as a nested section; it is a matter of style, not a broken page, so it does not fail the build.
suppress_warnings = ["myst.header"]

# Docstrings are Google style (STYLE.md (e)); "Attributes:" become field lists, not separate objects, so a
# dataclass field documented by autodoc and by the class docstring is not described twice.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
napoleon_use_rtype = False

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
# Types go into the parameter lists: signatures stay readable (an Agent has 16 fields), and annotations
# written as strings (``from __future__ import annotations``) render without stray ``~`` markers.
autodoc_typehints = "description"
autodoc_typehints_format = "short"
# A member documents itself or is left out: an override without a docstring does not borrow its parent's,
# so "documented" in tests/test_docs_site.py means a docstring of its own.
autodoc_inherit_docstrings = False
autodoc_class_signature = "mixed"

html_theme = "alabaster"
html_theme_options = {"page_width": "1240px", "sidebar_width": "250px", "fixed_sidebar": True}
html_title = f"flightlog {release}"
html_static_path: list[str] = []
html_show_sourcelink = False

DOCUMENTED = sorted(
    {
        match.group(1)
        for page in Path(__file__).parent.glob("api/*.rst")
        for match in re.finditer(r"^\.\. automodule:: (\S+)", page.read_text(encoding="utf-8"), re.M)
    }
)
"""Every module the API reference documents (its ``.. automodule::`` directives)."""


def _homes() -> dict[int, str]:
    """For each class or function exported by more than one documented module, the module that documents it:
    the shortest public path (``flightlog.Store`` over ``flightlog.store.Store``, ``flightlog.kernel.Agent``
    over a submodule), ties broken by name."""
    homes: dict[int, str] = {}
    for module_name in sorted(DOCUMENTED, key=lambda m: (m.count("."), m)):
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                homes.setdefault(id(obj), module_name)
    return homes


HOMES = _homes()


def _reexported_data() -> dict[tuple[str, str], list[str]]:
    """Docstrings of module data a documented module re-exports (``flightlog.fleet.QUEUED`` is defined in
    ``flightlog.fleet.submit``): autodoc looks for a data docstring only in the module it documents."""
    found: dict[tuple[str, str], list[str]] = {}
    for module_name in DOCUMENTED:
        module = importlib.import_module(module_name)
        own = ModuleAnalyzer.for_module(module_name).find_attr_docs()
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if ("", name) in own or inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj):
                continue
            for source_name, source in sorted(sys.modules.items()):
                if source_name.startswith("flightlog.") and source is not module and getattr(source, name, None) is obj:
                    doc = ModuleAnalyzer.for_module(source_name).find_attr_docs().get(("", name))
                    if doc:
                        found[(module_name, name)] = list(doc)
                        break
    return found


REEXPORTED_DATA = _reexported_data()


def _skip_reexports(
    app: Sphinx, what: str, name: str, obj: Any, skip: bool, options: Any
) -> bool | None:
    """Document a re-exported object once, in its home module (:data:`HOMES`); other pages leave it out.

    Without this, ``flightlog.Store`` and ``flightlog.store.Store`` would be two descriptions of one class,
    and every unqualified ``Store`` reference would be ambiguous.
    """
    module = app.env.temp_data.get("autodoc:module")
    if what == "module" and (inspect.isclass(obj) or inspect.isfunction(obj)) and id(obj) in HOMES:
        return HOMES[id(obj)] != module or None
    if what == "module" and module == "flightlog" and name == "__version__":
        return False  # a dunder, skipped by default, but part of the public face
    return None


def _remember_module(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Track which module page autodoc is filling (for :func:`_skip_reexports`), and give re-exported data
    the docstring of the module that defines it."""
    if what == "module":
        app.env.temp_data["autodoc:module"] = name
    module, _, attr = name.rpartition(".")
    if what == "data" and (module, attr) in REEXPORTED_DATA:
        lines[:] = REEXPORTED_DATA[(module, attr)]  # else autodoc falls back to the value's type's docstring


def _document_reexported_data(app: Sphinx, docname: str, source: list[str]) -> None:
    """After each ``.. automodule:: M``, an ``.. autodata::`` per datum M re-exports (autodoc's member
    listing leaves out data defined in another module); :func:`_remember_module` gives it its docstring."""

    def add(match: re.Match[str]) -> str:
        extra = [f"\n.. autodata:: {m}.{n}\n" for m, n in REEXPORTED_DATA if m == match.group(1)]
        return match.group(0) + "".join(extra)

    source[0] = re.sub(r"^\.\. automodule:: (\S+)\n(?:[ \t]+\S.*\n)*", add, source[0], flags=re.M)


def _builtins_stay_builtins(app: Sphinx, doctree: nodes.document) -> None:
    """A type such as ``bytes`` or ``str`` in a signature never links to a flightlog attribute of that name.

    Sphinx resolves type references in "specific" mode, which also matches any object whose name *ends*
    in ``.bytes`` (``AuditReport.bytes``); that is a wrong link (and an ambiguity warning). Builtin names
    are resolved exactly instead, which leaves them as plain text.
    """
    for node in doctree.findall(addnodes.pending_xref):
        if node.get("refdomain") == "py" and node.get("reftarget") in vars(builtins):
            node.attributes.pop("refspecific", None)


def _object_at(target: str) -> tuple[str, str, Any] | None:
    """``(module, first attribute, that object)`` for a dotted ``flightlog`` path, or None."""
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, parts[cut]):
            return module_name, parts[cut], getattr(module, parts[cut])
        return None
    return None


def _resolve_reference(
    app: Sphinx, env: Any, node: addnodes.pending_xref, contnode: nodes.TextElement
) -> nodes.reference | None:
    """Resolve what Sphinx could not, or say so.

    * A path through the module that *defines* a re-exported object (``flightlog.recorder.Recorder.attach``)
      is resolved to where the reference documents it (``flightlog.Recorder.attach``, see :data:`HOMES`).
    * Any other unresolved name of a documented module is a warning (so, under ``-W``, a failed build): a
      renamed or removed API cannot leave the guide or a docstring pointing at nothing.
    * Private names (``_Event``), modules and names of modules the reference does not document stay plain
      text, as Sphinx leaves every unresolved reference without ``nitpicky``.
    """
    target = str(node.get("reftarget", ""))
    if node.get("refdomain") != "py" or not target.startswith("flightlog."):
        return None
    if node.get("reftype") == "mod" or any(part.startswith("_") for part in target.split(".")):
        return None
    found = _object_at(target)
    if found is None:
        return None
    module_name, attr, obj = found
    home = HOMES.get(id(obj))
    if home is not None and home != module_name:
        home_attr = next((n for n in importlib.import_module(home).__all__ if getattr_safe(home, n) is obj), attr)
        rest = target[len(f"{module_name}.{attr}") :]
        domain = env.get_domain("py")
        resolved: nodes.reference | None = domain.resolve_xref(
            env, node["refdoc"], app.builder, node["reftype"], f"{home}.{home_attr}{rest}", node, contnode
        )
        if resolved is not None:
            return resolved
    if module_name in DOCUMENTED and attr in getattr(importlib.import_module(module_name), "__all__", ()):
        logger.warning("unresolved reference to %s", target, location=node, type="ref", subtype="flightlog")
    return None


def getattr_safe(module_name: str, name: str) -> Any:
    """``module.name``, or None when the module has no such attribute."""
    return getattr(importlib.import_module(module_name), name, None)


def _napoleon_except_attributes(app: Sphinx) -> None:
    """Run napoleon on every docstring but those of attributes and module data.

    Napoleon reads an attribute docstring's first line as ``type: description``; ours are plain sentences
    (the type is the annotation), so "Stable id (one id, one content: re-issue under a new id)." would
    render with half of the sentence as its type.
    """
    from sphinx.ext.napoleon import _process_docstring

    for listener in list(app.events.listeners.get("autodoc-process-docstring", [])):
        if listener.handler is _process_docstring:
            app.disconnect(listener.id)

    def process(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
        if what not in ("attribute", "data"):
            _process_docstring(app, what, name, obj, options, lines)

    app.connect("autodoc-process-docstring", process)


def setup(app: Sphinx) -> dict[str, Any]:
    """Connect the handlers above."""
    _napoleon_except_attributes(app)
    app.connect("missing-reference", _resolve_reference)
    app.connect("autodoc-process-docstring", _remember_module, priority=100)
    app.connect("autodoc-skip-member", _skip_reexports)
    app.connect("source-read", _document_reexported_data)
    app.connect("doctree-read", _builtins_stay_builtins)
    return {"parallel_read_safe": True}
