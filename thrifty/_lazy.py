"""Lazy package namespaces (PEP 562): a package's public names are imported on first use.

A package ``__init__`` lists its public names as imports under ``if TYPE_CHECKING:`` (what type
checkers and readers see) and hands its ``__name__`` and ``__file__`` to :func:`attach`, which reads
that block and returns the module's ``__getattr__`` and ``__dir__``. ``import thrifty.costs`` thus
loads the cost model alone, not numba, scikit-learn or LightGBM through the packages beside it.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def attach(package: str, init_file: str) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose ``__init__`` is ``init_file``.

    Each name imported under the ``__init__``'s ``if TYPE_CHECKING:`` block is imported from its
    module on first access (then stored on the package, so later accesses are plain lookups); a
    submodule not imported yet is imported on access (``thrifty.datasets`` after ``import thrifty``).
    The block's names must be the package's ``__all__`` (less the names the ``__init__`` defines
    itself), and none may be spelled like one of the package's submodules: importing that
    submodule would bind the submodule over the name (``tests/test_structure.py`` checks it).
    """
    where = _type_checking_imports(Path(init_file))
    module = sys.modules[package]
    if set(where) != set(module.__all__) - set(vars(module)):
        raise ImportError(f"{package}: __all__ and the TYPE_CHECKING imports list different names")

    def __getattr__(name: str) -> Any:
        if name in where:
            source, attribute = where[name]
            value = getattr(importlib.import_module(source), attribute)
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(module)) | set(where))

    return __getattr__, __dir__


def _type_checking_imports(init_file: Path) -> dict[str, tuple[str, str]]:
    """Name -> (module, attribute) of every ``from module import attribute [as name]`` under the
    file's ``if TYPE_CHECKING:``."""
    where = {}
    for node in ast.parse(init_file.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                if isinstance(imp, ast.ImportFrom) and imp.module is not None:
                    where.update({a.asname or a.name: (imp.module, a.name) for a in imp.names})
    return where
