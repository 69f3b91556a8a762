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
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx

import flightlog

# Sphinx's autodoc, while documenting pydantic models, writes annotations gathered from pydantic's own source
# into ``pydantic.BaseModel.__annotations__``; a pydantic-based library imported *after* that (LangChain
# under the LangGraph integration, the OpenAI Agents SDK) then fails to build its models. Importing the
# integrations here, before autodoc runs, loads those libraries while BaseModel is still untouched.
import flightlog.integrations.langgraph  # noqa: F401
import flightlog.integrations.openai_agents  # noqa: F401

project = "flightlog"
author = "flightlog developers"
copyright = "flightlog developers"  # noqa: A001  (Sphinx's setting name)
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

# Docstrings are Google style (STYLE.md (e)); "Attributes:" become field lists, not separate objects, so a
# dataclass field documented by autodoc and by the class docstring is not described twice.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
napoleon_use_rtype = False

autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
# A member documents itself or is left out: an override without a docstring does not borrow its parent's,
# so "documented" in tests/test_docs_site.py means a docstring of its own.
autodoc_inherit_docstrings = False
autodoc_class_signature = "mixed"

html_theme = "alabaster"
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


def _skip_reexports(
    app: Sphinx, what: str, name: str, obj: Any, skip: bool, options: Any
) -> bool | None:
    """Document a re-exported object once, in its home module (:data:`HOMES`); other pages leave it out.

    Without this, ``flightlog.Store`` and ``flightlog.store.Store`` would be two descriptions of one class,
    and every unqualified ``Store`` reference would be ambiguous.
    """
    if what == "module" and (inspect.isclass(obj) or inspect.isfunction(obj)) and id(obj) in HOMES:
        return HOMES[id(obj)] != app.env.temp_data.get("autodoc:module") or None
    return None


def _remember_module(app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Track which module page autodoc is filling (for :func:`_skip_reexports`)."""
    if what == "module":
        app.env.temp_data["autodoc:module"] = name


def _builtins_stay_builtins(app: Sphinx, doctree: nodes.document) -> None:
    """A type such as ``bytes`` or ``str`` in a signature never links to a flightlog attribute of that name.

    Sphinx resolves type references in "specific" mode, which also matches any object whose name *ends*
    in ``.bytes`` (``AuditReport.bytes``); that is a wrong link (and an ambiguity warning). Builtin names
    are resolved exactly instead, which leaves them as plain text.
    """
    for node in doctree.findall(addnodes.pending_xref):
        if node.get("refdomain") == "py" and node.get("reftarget") in vars(builtins):
            node.attributes.pop("refspecific", None)


def setup(app: Sphinx) -> dict[str, Any]:
    """Connect the handlers above."""
    app.connect("autodoc-process-docstring", _remember_module, priority=100)
    app.connect("autodoc-skip-member", _skip_reexports)
    app.connect("doctree-read", _builtins_stay_builtins)
    return {"parallel_read_safe": True}
