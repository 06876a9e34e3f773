"""The package's shape: packages import each other's public names only, imports never go round in a
circle, modules stay small, and importing a light module does not load the heavy libraries."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import thrifty
from thrifty._lazy import _type_checking_imports

ROOT = Path(thrifty.__file__).parent
# The shared base every package builds on: private to thrifty, open to all of its packages.
SHARED_BASE = {
    "thrifty._estimator",
    "thrifty._lazy",
    "thrifty._param_validation",
    "thrifty._validation",
    "thrifty._version",
}
HEAVY = ("numba", "sklearn", "lightgbm", "matplotlib", "xgboost", "scipy")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
PACKAGES = {_module_name(p) for p in ROOT.rglob("__init__.py")}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(body: list[ast.AST], *, nested: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """The imports a module runs when imported (never those for type checkers), and with ``nested``
    also those inside its functions."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _imports(node.orelse, nested=nested)
        elif nested or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            children = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt | ast.excepthandler)]
            yield from _imports(children, nested=nested)


def _all_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    return (n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom))


def _names(node: ast.Import | ast.ImportFrom) -> list[str]:
    """Every dotted name an import statement reaches (``from a.b import c`` reaches ``a.b.c``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return [f"{node.module}.{alias.name}" for alias in node.names]


def _target(name: str) -> str | None:
    """The thrifty module a dotted import name loads (``thrifty.a.b.f`` -> ``thrifty.a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _scope(owner: str) -> str:
    """Where the private names of ``owner`` may be used: the package, or a top-level module itself."""
    if owner in PACKAGES:
        return owner
    parent = owner.rpartition(".")[0]
    return owner if parent == "thrifty" else parent


def _private_imports() -> list[str]:
    found = []
    for module, path in MODULES.items():
        for node in _all_imports(ast.parse(path.read_text())):
            assert not (isinstance(node, ast.ImportFrom) and node.level), f"{module}: relative import"
            for name in _names(node):
                parts = name.split(".")
                if parts[0] != "thrifty":
                    continue
                for i, part in enumerate(parts[1:], start=1):
                    if part.startswith("_") and not part.startswith("__"):
                        owner = ".".join(parts[:i])
                        if owner == "thrifty":
                            allowed = ".".join(parts[: i + 1]) in SHARED_BASE
                        else:
                            scope = _scope(owner)
                            allowed = module == scope or module.startswith(scope + ".")
                        if not allowed:
                            found.append(f"{module}:{node.lineno} imports {name}")
                        break
    return sorted(set(found))


def test_no_package_imports_another_packages_private_names():
    # A private module or name is an implementation detail of its package; another package using
    # it would break when the detail changes. Give the helper a public home instead.
    found = _private_imports()
    assert not found, "\n".join(found)


def _graph(*, nested: bool, level: str) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for node in _imports(ast.parse(path.read_text()).body, nested=nested):
            for name in _names(node):
                target = _target(name) if name.startswith("thrifty") else None
                if target is not None and target != module:
                    graph[module].add(target)
    if level == "module":
        return graph
    package = {m: ".".join(m.split(".")[:2]) for m in MODULES}
    out: dict[str, set[str]] = {p: set() for p in package.values()}
    for module, targets in graph.items():
        out[package[module]] |= {package[t] for t in targets} - {package[module]}
    return out


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_modules_import_each_other_without_cycles():
    # Module-level imports: a cycle makes the import order matter and hides a missing layer.
    cycles = _cycles(_graph(nested=False, level="module"))
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_packages_depend_on_each_other_in_layers():
    # Counting the imports inside functions too: a package that needs another never is needed by it.
    cycles = _cycles(_graph(nested=True, level="package"))
    assert not cycles, "\n".join(" <-> ".join(c) for c in cycles)


def test_modules_are_small():
    sizes = {m: len(p.read_text().splitlines()) for m, p in MODULES.items()}
    assert {m: n for m, n in sizes.items() if n > 600} == {}


def _runtime_room(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["thrifty", "runtime"] else None


def test_the_interpreter_and_lazy_rounds_never_import_the_compiler():
    # A compiled plan hands its executors to the interpreter (interpret.Accelerated), never the
    # other way round: the reference engine must run without LLVM code generation.
    graph = _graph(nested=True, level="module")
    found = [
        f"{m} imports {t}"
        for m, targets in graph.items()
        if _runtime_room(m) in ("interpret", "lazy")
        for t in targets
        if _runtime_room(t) == "compiled"
    ]
    assert found == []


def test_importing_the_interpreter_loads_no_compiler():
    loaded = _loaded_after(
        "import thrifty.runtime.interpret, thrifty.runtime.lazy, thrifty.runtime.evaluate\n"
        "heavy = [m for m in sys.modules if m.startswith('thrifty.runtime.compiled')]\n"
        "assert not heavy, heavy"
    )
    assert "numba" in loaded["heavy"]  # the probe saw the interpreter's own imports


def _kernels() -> Iterator[tuple[str, ast.FunctionDef]]:
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                "jit" in ast.unparse(d) for d in node.decorator_list
            ):
                yield module, node


def test_kernels_take_records_not_long_argument_lists():
    # Arrays that travel together (a forest's nodes, a schedule's exits, a row's state) are one
    # tuple: a long positional list is easy to misorder and hard to read.
    assert len(list(_kernels())) > 20
    long = {f"{m}.{f.name}": len(f.args.args) for m, f in _kernels() if len(f.args.args) > 12}
    assert long == {}


def test_parallel_kernels_write_no_array_bound_by_unpacking():
    # numba 0.68 silently drops a prange loop's writes to an array bound by unpacking four or
    # more values (`a, b, c, d = x, y, z, w`, or a tuple argument), even when they are the
    # kernel's own array arguments (QWYC's candidate scan found no exits so). Arrays a parallel
    # kernel writes are its arguments, or bound one per statement (`n_nodes = tally[NODES]`).
    found = []
    for m, f in _kernels():
        if "parallel=True" not in " ".join(ast.unparse(d) for d in f.decorator_list):
            continue
        unpacked = {
            t.id
            for node in ast.walk(f)
            if isinstance(node, ast.Assign)
            for target in node.targets
            if isinstance(target, ast.Tuple)
            for t in target.elts
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(f):
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign):
                targets = [node.target]
            else:
                continue
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in unpacked:
                    found.append(f"{m}.{f.name}:{node.lineno} writes {t.value.id}")
    assert found == []


def _loaded_after(code: str) -> dict[str, list[str] | float]:
    probe = (
        "import json, sys, time\n"
        "t = time.perf_counter()\n"
        f"{code}\n"
        "t = time.perf_counter() - t\n"
        f"print(json.dumps({{'heavy': [m for m in {HEAVY!r} if m in sys.modules], 'seconds': t}}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
        cwd=ROOT.parent,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    "code",
    [
        "import thrifty",
        "import thrifty.costs",
        "import thrifty.exceptions",
        # the command line's help and version
        "from thrifty.cli import main\nassert main(['--help']) == 0",
    ],
)
def test_light_imports_do_not_load_the_heavy_libraries(code):
    assert _loaded_after(code)["heavy"] == []


def test_every_public_name_resolves_and_is_listed():
    assert len(set(thrifty.__all__)) == len(thrifty.__all__)
    for name in thrifty.__all__:
        assert getattr(thrifty, name) is not None, name
    assert set(thrifty.__all__) <= set(dir(thrifty))
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        thrifty.no_such_name  # noqa: B018


def test_lazy_names_are_not_spelled_like_submodules():
    # Importing thrifty.x.name (the module) binds the module as the package's attribute `name`,
    # over the lazily imported function of that name: such names must be imported eagerly.
    lazy = [p for p in PACKAGES if "attach(__name__, __file__)" in MODULES[p].read_text()]
    assert "thrifty" in lazy and "thrifty.forest" in lazy
    # Names the __init__ imports eagerly are bound after their submodule, so only lazy ones count.
    clashes = {
        p: sorted(n for n in _type_checking_imports(MODULES[p]) if f"{p}.{n}" in MODULES) for p in lazy
    }
    assert {p: c for p, c in clashes.items() if c} == {}


@pytest.mark.parametrize("package", sorted(p for p in PACKAGES if p != "thrifty.dask"))
def test_every_subpackage_name_resolves(package):
    module = __import__(package, fromlist=["__all__"])
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"
    assert set(module.__all__) <= set(dir(module))


TESTS = Path(__file__).resolve().parent


def _tests_module(name: str) -> str:
    """The module or package of the tests tree a dotted import name loads (``tests.a.b.f`` ->
    ``tests.a.b``)."""
    parts = name.split(".")
    while len(parts) > 1:
        path = TESTS.parent.joinpath(*parts)
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            break
        parts.pop()
    return ".".join(parts)


def _test_imports() -> set[tuple[str, str]]:
    """(module of the tests tree, file importing it) for every file outside tests/_helpers, apart
    from imports of tests/_helpers and of a file's own (empty) package."""
    found = set()
    for path in sorted(TESTS.rglob("*.py")):
        relative = path.relative_to(TESTS.parent)
        if relative.parts[1] == "_helpers":
            continue
        own_package = ".".join(relative.parent.parts)
        for node in _all_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:  # from . import x, from ..a import x
                package = relative.parent.parts[: len(relative.parent.parts) + 1 - node.level]
                module = ".".join([*package, *([node.module] if node.module else [])])
                names = [f"{module}.{alias.name}" for alias in node.names]
            else:
                names = _names(node)
            for name in names:
                if name.split(".")[0] != "tests":
                    continue
                module = _tests_module(name)
                if module not in (own_package, "tests._helpers") and not module.startswith("tests._helpers."):
                    found.add((module, relative.as_posix()))
    return found


def test_test_modules_import_helpers_only_from_tests_helpers():
    # A test module that imports another runs (and may break with) the other's module-level code,
    # and hides which of its names are shared: shared helpers live in tests/_helpers (plain
    # functions and data) or a conftest.py (fixtures).
    found = sorted(
        f"{file} imports {module}: share what it uses through tests/_helpers"
        for module, file in _test_imports()
    )
    assert found == []
