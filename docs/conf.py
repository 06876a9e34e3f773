"""Sphinx configuration of thrifty's documentation site (``make docs``).

The markdown pages under ``docs/`` are read by myst-parser; the API reference
(``api/index.rst``, generated here on every build so it can never miss a public name) lists
every name of ``thrifty.__all__`` and the public names of the modules in ``API_MODULES``;
autosummary writes one page per name from its numpydoc docstring.
"""

from __future__ import annotations

import importlib
import inspect
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import thrifty  # noqa: E402

project = "thrifty"
author = "The thrifty developers"
copyright = "the thrifty developers (MIT licence)"
release = version = thrifty.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "numpydoc",
    "myst_parser",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
templates_path = ["_templates"]

# Links such as forest.md#feature-names-as-users-write-them resolve to section anchors.
myst_heading_anchors = 3

autosummary_generate = True
autodoc_default_options = {"member-order": "groupwise"}
# numpydoc renders the docstrings; the class template lists the members itself.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"thrifty {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_static_path: list[str] = []

# Modules documented beside the top-level package, in the order shown. A name that
# ``thrifty`` itself exports is documented once, under ``thrifty``.
API_MODULES = [
    ("thrifty.metrics", "Metrics and cost-aware model selection"),
    ("thrifty.cascade", "Cascades: Cronus, early exits and margin cascades"),
    ("thrifty.costs", "Cost models and reports"),
    ("thrifty.io", "Saving and loading"),
    ("thrifty.plot", "Plots"),
    ("thrifty.frontier", "Cost-quality frontiers"),
    ("thrifty.datasets", "Datasets"),
    ("thrifty.providers", "Feature providers (lazy evaluation)"),
    ("thrifty.serve", "HTTP serving"),
    ("thrifty.dask", "Dask"),
    ("thrifty.estimator_checks", "Estimator checks"),
    ("thrifty.exceptions", "Exceptions"),
]


def public_names(module_name: str) -> list[str]:
    """``__all__``, else the functions and classes a module defines without a leading underscore."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            n
            for n, obj in vars(module).items()
            if not n.startswith("_")
            and (inspect.isfunction(obj) or inspect.isclass(obj))
            and obj.__module__ == module_name
        ]
    return [n for n in names if not n.startswith("_")]


def _autosummary(module_name: str, names: list[str]) -> list[str]:
    return [
        f".. currentmodule:: {module_name}",
        "",
        ".. autosummary::",
        "   :toctree: generated",
        "   :nosignatures:",
        "",
        *(f"   {n}" for n in sorted(names, key=str.lower)),
        "",
    ]


def write_api_index() -> None:
    top = public_names("thrifty")
    exported = {id(getattr(thrifty, n)) for n in top}
    kind = {True: [], False: []}
    for n in top:
        kind[inspect.isclass(getattr(thrifty, n))].append(n)
    lines = [
        "API reference",
        "=============",
        "",
        "Every public estimator, plan, function and class. Each name links to its page, rendered",
        "from its numpydoc docstring.",
        "",
        "``thrifty``: classes",
        "--------------------",
        "",
        *_autosummary("thrifty", kind[True]),
        "``thrifty``: functions",
        "----------------------",
        "",
        *_autosummary("thrifty", kind[False]),
    ]
    for module_name, title in API_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a module that is not part of this version
            continue
        names = [n for n in public_names(module_name) if id(getattr(module, n)) not in exported]
        if not names:
            continue
        heading = f"``{module_name}``: {title}"
        lines += [heading, "-" * len(heading), "", *_autosummary(module_name, names)]
    text = "\n".join(lines)
    path = HERE / "api" / "index.rst"
    path.parent.mkdir(exist_ok=True)
    if not path.exists() or path.read_text() != text:  # unchanged: keep Sphinx's cache valid
        # The pages of names no longer listed would be orphans (a warning, so an error).
        shutil.rmtree(path.parent / "generated", ignore_errors=True)
        path.write_text(text)


write_api_index()


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Members scikit-learn attaches to every estimator (``set_fit_request`` ...) are its
    documentation, not thrifty's: leave them out of the class pages."""
    if getattr(obj, "__module__", None) and str(obj.__module__).startswith("sklearn."):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign_members)
