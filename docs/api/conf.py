"""Sphinx configuration of the cubsparse API reference (docs/api).

Build (as .ci/run does; warnings are errors):

    pip install -e '.[docs]'
    python -m sphinx -W --keep-going -b html docs/api /tmp/cubsparse-api-html

The pages list no public name by hand. The ``cubsparse-public`` directive below expands
to one autodoc directive per name in a module's ``__all__``, so a name added to
``cubsparse.__all__`` appears in the reference on the next build; a check at the end of
reading fails the build (a warning, an error under -W) when a name of ``__all__`` is
missing from the reference, e.g. a new public submodule without a page of its own.

The build needs no GPU, no CuPy and no network: cubsparse imports CuPy lazily, the mocks
below cover any module that might not, and no inventory is fetched (no intersphinx).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import ClassVar

from docutils.parsers.rst import directives
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

# The checkout's package, also when it is not installed (an installed one is the same
# files with `pip install -e`).
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import cubsparse  # noqa: E402

# -- project ------------------------------------------------------------------------------
project = "cubsparse"
author = "cubsparse developers"
copyright = "cubsparse developers, MIT License"  # no year: the output does not depend on the date
version = release = cubsparse.__version__

# -- general ------------------------------------------------------------------------------
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",  # the summary tables (no stub pages are generated)
    "numpydoc",
]
root_doc = "index"
exclude_patterns = ["_build"]
templates_path: list[str] = []
language = "en"
# Unresolvable references (numpy.ndarray, array, ...) stay plain text: no intersphinx, so
# nothing is fetched at build time, and nitpicky mode would flag every one of them.
nitpicky = False

# -- autodoc ------------------------------------------------------------------------------
# CI builds the reference on a machine without a GPU or CuPy.
autodoc_mock_imports = ["cupy", "cupy_backends"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # numpydoc's Parameters sections give the types
autodoc_preserve_defaults = True  # signatures show defaults as written in the source
autodoc_inherit_docstrings = False
autoclass_content = "class"  # the class docstring documents the constructor's parameters
autosummary_generate = False

# -- numpydoc -----------------------------------------------------------------------------
# autodoc's :members: lists the members; numpydoc only formats each docstring.
numpydoc_show_class_members = False
numpydoc_show_inherited_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- HTML ---------------------------------------------------------------------------------
html_theme = "alabaster"
html_title = f"cubsparse {release} API reference"
html_static_path: list[str] = []
html_last_updated_fmt = None  # no build date in the pages
html_show_sourcelink = False
html_copy_source = False
html_theme_options = {"description": "Block-sparse matrices on the GPU with CuPy"}

# -- the public names -----------------------------------------------------------------------
logger = logging.getLogger("cubsparse.docs")

# Members of a documented class: every public method and property (with or without a
# docstring), and the special methods (operators) that have a docstring of their own; see
# _skip_member.
_CLASS_OPTIONS = ("   :members:", "   :undoc-members:", "   :special-members:")
# Special members that every class has, or that the class docstring already covers.
_SPECIAL_EXCLUDED = frozenset(
    {"__init__", "__new__", "__repr__", "__weakref__", "__dict__", "__module__", "__doc__"}
)


def _kind(obj) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "data"


def _public(modname: str) -> list[tuple[str, str]]:
    """``(name, kind)`` for each name of the module's ``__all__``, in its order."""
    module = importlib.import_module(modname)
    names = getattr(module, "__all__", None)
    if names is None:
        raise ValueError(f"{modname} has no __all__")
    return [(name, _kind(getattr(module, name))) for name in names]


class PublicNames(SphinxDirective):
    """``.. cubsparse-public:: MODULE`` with ``:kind: class | function | data``.

    Expands to an autosummary table and one autodoc directive per name of
    ``MODULE.__all__`` of that kind, in ``__all__`` order (modules get pages of their own).
    """

    required_arguments = 1
    has_content = False
    option_spec: ClassVar = {
        "kind": lambda arg: directives.choice(arg, ("class", "function", "data"))
    }

    def run(self):
        modname = self.arguments[0]
        kind = self.options.get("kind", "function")
        names = [name for name, k in _public(modname) if k == kind]
        if not names:
            return []
        lines = [f".. currentmodule:: {modname}", "", ".. autosummary::", "   :nosignatures:", ""]
        lines += [f"   {name}" for name in names]
        lines.append("")
        for name in names:
            lines.append(f".. auto{kind}:: {name}")
            if kind == "class":
                lines.extend(_CLASS_OPTIONS)
            lines.append("")
        return self.parse_text_to_nodes("\n".join(lines))


def _skip_member(app, what, name, obj, skip, options):
    """Keep a special member only when it has a docstring of its own (an operator)."""
    if what == "class" and name.startswith("__") and name.endswith("__"):
        doc = getattr(obj, "__doc__", None)
        # A plain value (``__array_priority__ = 1000``) has only its type's docstring.
        if name in _SPECIAL_EXCLUDED or not doc or doc == getattr(type(obj), "__doc__", None):
            return True
    return None  # autodoc's own rule


def _attribute_doc(name: str, obj) -> list[str] | None:
    """The ``#:`` comment (or string after it) of a constant, in the module defining it.

    ``cubsparse.X`` is imported from a private module, where autodoc does not look; and a
    constant has no docstring of its own (``__doc__`` is that of its type, e.g. tuple).
    """
    short = name.rpartition(".")[2]
    for modname in sorted(m for m in sys.modules if m.split(".")[0] == "cubsparse"):
        module = sys.modules[modname]
        if module is None or getattr(module, short, None) is not obj:
            continue
        try:
            docs = ModuleAnalyzer.for_module(modname).find_attr_docs()
        except PycodeError:
            continue
        if ("", short) in docs:
            return list(docs[("", short)])
    return None


def _data_docstring(app, what, name, obj, options, lines):
    if what == "data":
        lines[:] = _attribute_doc(name, obj) or []


# The modules whose __all__ the reference must cover, each name as ``module.name``.
COVERED_MODULES = ("cubsparse", "cubsparse.layouts")


def _check_coverage(app, env) -> None:
    objects = env.get_domain("py").objects
    for modname in COVERED_MODULES:
        for name, _ in _public(modname):
            if f"{modname}.{name}" not in objects:
                logger.warning(
                    "%s.%s is in %s.__all__ but not in the API reference: document it in "
                    "docs/api (a public submodule needs a page of its own)",
                    modname,
                    name,
                    modname,
                )


def setup(app):
    app.add_directive("cubsparse-public", PublicNames)
    app.connect("env-check-consistency", _check_coverage)
    app.connect("autodoc-skip-member", _skip_member)
    # Before numpydoc (priority 500) formats the docstring.
    app.connect("autodoc-process-docstring", _data_docstring, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
