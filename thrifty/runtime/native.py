"""Native code for a forest and a plan's order: LLVM IR generated per block of trees,
compiled with llvmlite, cached on disk.

The plan's positions are cut into blocks (up to 32 positions, never past a position with an
exit); each block becomes one function that, row by row, runs the block's trees one after the
other with their splits as constants: the feature offset, the threshold (written bit for
bit), the missing-value rule and, for categorical splits, the category bitset. It writes the
global index of the leaf each row reaches; the caller (``_native_kernels``) adds leaf values,
accounts cost from per-leaf tables and applies the plan's exits. Rows go in small blocks so a
block's code stays hot across them (lleaves' blocking of trees over rows).

The object code is cached under ``cache_dir()`` keyed by a hash of the forest, the order and
its blocks, this generator's version and the CPU, so a new process loads it without compiling.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct
import sys
import time
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm
import numpy as np

from thrifty.forest import Forest
from thrifty.forest._forest import MISSING_AS_ZERO, MISSING_ZERO
from thrifty.forest._traverse import _ZERO

# Bump when the generated code changes meaning: cached objects of older versions are ignored.
CODEGEN_VERSION = 3
# Trees per compiled module: the unit of progress display and of LLVM's work.
_TREES_PER_MODULE = 100
# The signature of ``leaves``: (X, stride, rows, n_rows, p, k, out) -> None.
LEAVES = ctypes.CFUNCTYPE(
    None,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_void_p,
)


def cache_dir() -> Path:
    """Where compiled forests are kept: ``$THRIFTY_CACHE_DIR``, else the platform's cache
    directory (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
    ``%LOCALAPPDATA%`` on Windows) under ``thrifty/compiled``."""
    if os.environ.get("THRIFTY_CACHE_DIR"):
        return Path(os.environ["THRIFTY_CACHE_DIR"])
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif os.name == "nt":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "thrifty" / "compiled"


def code_key(forest: Forest, order: np.ndarray, blocks: list[tuple[int, int]]) -> str:
    """Hash of everything the native code depends on: the forest's splits, the plan's order
    and blocks, this generator's version and the target CPU."""
    h = hashlib.sha256()
    h.update(
        f"{CODEGEN_VERSION}|{llvmlite.__version__}|{llvm.get_process_triple()}|"
        f"{llvm.get_host_cpu_name()}|{llvm.get_host_cpu_features().flatten()}".encode()
    )
    for a in (
        forest.feature,
        forest.threshold,
        forest.children_left,
        forest.children_right,
        forest.missing_left,
        forest.missing_type,
        forest.cat_start,
        forest.cat_size,
        forest.cat_bitsets,
        forest.roots,
        np.asarray(order, dtype=np.int64),
        np.asarray(blocks, dtype=np.int64),
    ):
        h.update(str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    h.update(str(forest.n_features).encode())
    return h.hexdigest()[:32]


class NativeCode:
    """The trees of a forest compiled for one order of evaluation, loaded into this process.

    Parameters
    ----------
    forest : Forest
    order : ndarray of int64
        Trees in the order the plan visits them.
    stop : ndarray of int64
        ``stop[p]``: one past the first position ``>= p`` after which a row may exit.
    chunk : int
        Most positions run at once.
    progress : bool
        Show progress on stderr when compiling takes more than a few seconds.

    Attributes
    ----------
    leaves : ctypes function
        ``leaves(X, stride, rows, n_rows, p, k, out)``: for the ``n_rows`` row indices at
        ``rows`` (int64) of the float64 matrix ``X`` (``stride`` values per row), runs the
        block of positions ``[p, p + k)`` (``p`` a block start, see ``plan_blocks``) and writes
        the global leaf index (int32) that row ``r`` reaches at position ``p + j`` to
        ``out[r * k + j]``.
    key : str
        The cache key (``code_key``).
    compile_seconds : float
        Time spent compiling (0 when loaded from the cache).
    """

    def __init__(
        self, forest: Forest, order: np.ndarray, stop: np.ndarray, chunk: int, *, progress: bool = True
    ) -> None:
        blocks = plan_blocks(stop, chunk)
        self.key = code_key(forest, order, blocks)
        path = cache_dir() / f"{self.key}.o"
        t0 = time.perf_counter()
        objects = _read_cached(path)
        self.from_cache = objects is not None
        if objects is None:
            objects = _compile(forest, order, blocks, self.key, progress)
            _write_cached(path, objects)
        self.compile_seconds = 0.0 if self.from_cache else time.perf_counter() - t0
        self._engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _target_machine())
        for obj in objects:
            self._engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
        self._engine.finalize_object()
        self.leaves = LEAVES(self._engine.get_function_address(f"leaves_{self.key}"))


def _target_machine() -> llvm.TargetMachine:
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(),
        features=llvm.get_host_cpu_features().flatten(),
        opt=2,
        reloc="pic",
        codemodel="default",
    )


def plan_blocks(stop: np.ndarray, chunk: int) -> list[tuple[int, int]]:
    """The blocks ``(start, length)`` of positions the driver runs at once: up to ``chunk``
    positions, never past the next position with an exit (``stop[p]``)."""
    blocks, p = [], 0
    while p < len(stop):
        k = min(int(stop[p]), p + chunk) - p
        blocks.append((p, k))
        p += k
    return blocks


def _compile(
    forest: Forest, order: np.ndarray, blocks: list[tuple[int, int]], key: str, progress: bool
) -> list[bytes]:
    """Object code of the blocks' functions (in modules of about ``_TREES_PER_MODULE`` trees)
    and of the dispatcher."""
    tm = _target_machine()
    objects = []
    t0 = time.perf_counter()
    shown = False
    module: list[str] = []
    trees = 0
    for b, (p, k) in enumerate(blocks):
        module.append(_block_ir(forest, order[p : p + k], b, key))
        trees += k
        if trees % _TREES_PER_MODULE < k or b == len(blocks) - 1:
            objects.append(_emit(tm, "declare double @llvm.fabs.f64(double)\n" + "\n".join(module)))
            module = []
            elapsed = time.perf_counter() - t0
            if progress and (shown or elapsed > 2.0) and b < len(blocks) - 1:
                # Compiling a large forest takes a while: say how far it is.
                shown = True
                print(
                    f"\rthrifty: compiling trees {trees}/{len(order)} ({elapsed:.0f} s)",
                    end="",
                    file=sys.stderr,
                    flush=True,
                )
    if shown:
        print(
            f"\rthrifty: compiled {len(order)} trees in {time.perf_counter() - t0:.1f} s   ", file=sys.stderr
        )
    objects.append(_emit(tm, _dispatcher_ir(blocks, key)))
    return objects


def _emit(tm: llvm.TargetMachine, ir: str) -> bytes:
    mod = llvm.parse_assembly(ir)
    mod.triple = tm.triple
    mod.verify()
    # Level 1 gives most of the speed of higher levels at half their compile time.
    pto = llvm.create_pipeline_tuning_options(speed_level=1)
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)
    return tm.emit_object(mod)


def _double(x: float) -> str:
    """A double constant written bit for bit (LLVM's hexadecimal form)."""
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(x)))[0]:016X}"


def _block_ir(forest: Forest, trees: np.ndarray, b: int, key: str) -> str:
    """Block ``b`` as ``void block(X, stride, rows, n_rows, out)``: for each listed row, every
    tree of the block in turn (their code inlined one after the other, so the CPU overlaps
    independent trees), writing the leaf of tree ``j`` to ``out[r * k + j]``."""
    head = [
        f"define void @block_{key}_{b}(ptr noalias %X, i64 %stride, ptr noalias %rows, i64 %m, "
        "ptr noalias %out) {",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %r = phi i64 [0, %entry], [%r1, %next]",
        "  %end = icmp sge i64 %r, %m",
        "  br i1 %end, label %exit, label %body",
        "body:",
        "  %rp = getelementptr i64, ptr %rows, i64 %r",
        "  %ri = load i64, ptr %rp",
        "  %off = mul i64 %ri, %stride",
        "  %row = getelementptr double, ptr %X, i64 %off",
        "  br label %t0_start",
    ]
    lines: list[str] = []
    globals_: list[str] = []
    for j, t in enumerate(trees):
        after = f"%t{j + 1}_start" if j + 1 < len(trees) else "%next"
        lines += _tree_body(forest, int(t), f"t{j}_", j, len(trees), after, key, globals_)
    tail = ["next:", "  %r1 = add i64 %r, 1", "  br label %loop", "exit:", "  ret void", "}"]
    return "\n".join(globals_ + head + lines + tail)


def _tree_body(
    f: Forest, t: int, x: str, j: int, width: int, after: str, key: str, globals_: list[str]
) -> list[str]:
    """The code of tree ``t`` for the row at ``%row`` (names prefixed ``x``): it stores the
    leaf reached to ``out[r * width + j]`` and branches to ``after``. The split rules mirror
    ``thrifty.forest._traverse.next_node`` exactly."""
    lines = [f"{x}start:", f"  br label %{x}n{int(f.roots[t])}"]
    leaves: list[int] = []
    stack = [int(f.roots[t])]
    while stack:
        node = stack.pop()
        feat = int(f.feature[node])
        n = f"{x}n{node}"
        if feat < 0:
            leaves.append(node)
            lines += [f"{n}:", f"  br label %{x}leaf"]
            continue
        left, right = f"%{x}n{int(f.children_left[node])}", f"%{x}n{int(f.children_right[node])}"
        stack += [int(f.children_right[node]), int(f.children_left[node])]
        default = left if f.missing_left[node] else right
        v = f"%{n}v"
        lines += [
            f"{n}:",
            f"  %{n}p = getelementptr double, ptr %row, i64 {feat}",
            f"  {v} = load double, ptr %{n}p",
        ]
        if f.cat_start[node] >= 0:
            words = f.cat_bitsets[f.cat_start[node] : f.cat_start[node] + f.cat_size[node]]
            name = f"@cat_{key}_{node}"
            if not any(g.startswith(name + " ") for g in globals_):
                globals_.append(
                    f"{name} = private unnamed_addr constant [{len(words)} x i32] ["
                    + ", ".join(f"i32 {int(w)}" for w in words)
                    + "]"
                )
            lines += [
                f"  %{n}nan = fcmp uno double {v}, 0.0",
                f"  br i1 %{n}nan, label {default}, label %{n}c",
                f"{n}c:",
                f"  %{n}gt = fcmp ogt double {v}, -1.0",
                f"  %{n}lt = fcmp olt double {v}, {_double(32.0 * len(words))}",
                f"  %{n}in = and i1 %{n}gt, %{n}lt",
                f"  br i1 %{n}in, label %{n}b, label {right}",
                f"{n}b:",
                # fptosi truncates toward zero, as the interpreter's int() does.
                f"  %{n}code = fptosi double {v} to i32",
                f"  %{n}w = lshr i32 %{n}code, 5",
                f"  %{n}s = and i32 %{n}code, 31",
                f"  %{n}wp = getelementptr [{len(words)} x i32], ptr {name}, i32 0, i32 %{n}w",
                f"  %{n}word = load i32, ptr %{n}wp",
                f"  %{n}bits = lshr i32 %{n}word, %{n}s",
                f"  %{n}bit = trunc i32 %{n}bits to i1",
                f"  br i1 %{n}bit, label {left}, label {right}",
            ]
            continue
        thr = _double(f.threshold[node])
        mt = int(f.missing_type[node])
        if np.isnan(f.threshold[node]) and mt != MISSING_ZERO:
            # No value is <= NaN: NaN takes the default child (or, read as 0.0, goes right).
            target = default if mt != MISSING_AS_ZERO else right
            lines += [
                f"  %{n}nan = fcmp uno double {v}, 0.0",
                f"  br i1 %{n}nan, label {target}, label {right}",
            ]
            continue
        if mt == MISSING_ZERO:
            lines += [
                f"  %{n}a = call double @llvm.fabs.f64(double {v})",
                f"  %{n}z = fcmp ule double %{n}a, {_double(_ZERO)}",
                f"  br i1 %{n}z, label {default}, label %{n}c",
                f"{n}c:",
                f"  %{n}le = fcmp ole double {v}, {thr}",
                f"  br i1 %{n}le, label {left}, label {right}",
            ]
            continue
        # NaN goes to the default child (MISSING_NAN) or is read as 0.0 (MISSING_AS_ZERO): an
        # unordered comparison sends NaN left, an ordered one right.
        nan_left = (0.0 <= f.threshold[node]) if mt == MISSING_AS_ZERO else bool(f.missing_left[node])
        lines += [
            f"  %{n}le = fcmp {'ule' if nan_left else 'ole'} double {v}, {thr}",
            f"  br i1 %{n}le, label {left}, label {right}",
        ]
    lines += [
        f"{x}leaf:",
        f"  %{x}id = phi i32 " + ", ".join(f"[{leaf}, %{x}n{leaf}]" for leaf in leaves),
        f"  %{x}o = mul i64 %r, {width}",
        f"  %{x}oo = add i64 %{x}o, {j}",
        f"  %{x}op = getelementptr i32, ptr %out, i64 %{x}oo",
        f"  store i32 %{x}id, ptr %{x}op",
        f"  br label {after}",
    ]
    return lines


def _dispatcher_ir(blocks: list[tuple[int, int]], key: str) -> str:
    """``leaves(X, stride, rows, m, p, k, out)``: the block starting at position ``p``."""
    decls = "\n".join(f"declare void @block_{key}_{b}(ptr, i64, ptr, i64, ptr)" for b in range(len(blocks)))
    cases = " ".join(f"i64 {p}, label %b{b}" for b, (p, _) in enumerate(blocks))
    calls = "\n".join(
        f"b{b}:\n  call void @block_{key}_{b}(ptr %X, i64 %stride, ptr %rows, i64 %m, ptr %out)\n  ret void"
        for b in range(len(blocks))
    )
    return f"""{decls}

define void @leaves_{key}(ptr %X, i64 %stride, ptr %rows, i64 %m, i64 %p, i64 %k, ptr %out) {{
entry:
  switch i64 %p, label %none [{cases}]
{calls}
none:
  ret void
}}
"""


def _read_cached(path: Path) -> list[bytes] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    objects, at = [], 0
    try:
        (count,) = struct.unpack_from("<Q", data, 0)
        at = 8
        for _ in range(count):
            (size,) = struct.unpack_from("<Q", data, at)
            objects.append(data[at + 8 : at + 8 + size])
            at += 8 + size
    except struct.error:
        return None
    return objects if at == len(data) else None


def _write_cached(path: Path, objects: list[bytes]) -> None:
    """Write atomically (another process may be reading or writing the same key)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(
            struct.pack("<Q", len(objects)) + b"".join(struct.pack("<Q", len(o)) + o for o in objects)
        )
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs a compile next time


def leaf_tables(forest: Forest) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node: its depth (splits on the path from the root) and the distinct features tested
    on that path (CSR: ``feat[ptr[node]:ptr[node + 1]]``). At a leaf these are exactly the
    splits a row reaching it visited and the features it tested."""
    f = forest
    depth = np.zeros(f.n_nodes, dtype=np.int64)
    paths: list[tuple[int, ...]] = [()] * f.n_nodes
    for root in f.roots:
        stack = [int(root)]
        while stack:
            node = stack.pop()
            feat = int(f.feature[node])
            if feat < 0:
                continue
            below = paths[node] if feat in paths[node] else paths[node] + (feat,)
            for c in (int(f.children_left[node]), int(f.children_right[node])):
                depth[c] = depth[node] + 1
                paths[c] = below
                stack.append(c)
    ptr = np.zeros(f.n_nodes + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(p) for p in paths])
    tested = np.fromiter((x for p in paths for x in p), dtype=np.int64, count=int(ptr[-1]))
    return depth, ptr, tested
