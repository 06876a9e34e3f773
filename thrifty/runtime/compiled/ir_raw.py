"""LLVM IR of ``raw``: a plan without exits from its inputs to its raw scores only, for calls
that read nothing else (``raw_path``).

Every kind of block keeps each row's counters as it walks (nodes visited, features tested:
``ir_branchy.Packing``), which the serving path then prices. A caller that reads only the scores
pays for none of it here: each tree is ``ir_scalar.walk_ir``'s walk and the leaf's weighted
value added from the table ``leaf`` (``ir_scalar.leaf_values_ir``, the interpreter's additions in
the plan's order, so the sums are the same bit for bit), with nothing else at the leaf but the
record's offset (plans on vector blocks take ``ir_vraw``'s blocks and this driver). Generated for
forests on branchy blocks (``choice.branchy_blocks``: skewed trees,
where a row's path is a few splits and the counters were a third of a tree's time), compiled at
``ir_branchy.BRANCHY_LEVEL``.

Measured on lleaves' NYC_taxi (100 trees of 31 leaves, 10,000 rows, one thread, paired on a
loaded machine): see docs/runtime.md, "Scores only".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thrifty.runtime.compiled.ir_scalar import leaf_values_ir, walk_ir
from thrifty.runtime.compiled.layout import TABLES, Layout

if TYPE_CHECKING:
    from thrifty.runtime.compiled.ir_vector import _Emitter

# The words of ``raw``'s one argument (a call context, as ``ir_serving.CONTEXT``: one ctypes
# argument is the cheapest call): the input matrix, the scores' buffer (output ``c`` of row ``i``
# at ``c * n + i``), the plan's tables (addresses), the rows ``[lo, hi)`` of ``n``.
RAW_CONTEXT = ("X", "out", "T", "lo", "hi", "n")
# Rows per pass over the trees' modules: each module's trees for this many rows, then the next
# module's (the rows' scores stay in the first-level cache between modules).
RAW_ROWS = 256
# Positions per module function (``rawblk``): a row walks this many trees without a break.
# Fewer, for code that stays in the instruction cache over a group of rows, measured slower on
# NYC_taxi's 100 trees at 10,000 rows (paired, one thread, loaded machine, µs per call): 100
# trees 719, 50 756, 25 894 (854 in groups of 1,024 rows), 10 1,156; lleaves 733.
RAW_TREES = 100


def raw_module_irs(lay: Layout, key: str, trees_per_module: int = 0) -> list[str]:
    """The modules of ``raw``: one function per ``trees_per_module`` positions of the plan
    (default ``RAW_TREES``; ``rawblk_{key}_{m}(X, out, T, lo, hi, n)``, adding their trees'
    values to the rows' scores in ``out``), then ``raw_{key}(ctx)``, which sets the rows'
    scores to the forest's start (the ``base`` table, as ``serve`` does) and runs every
    module over ``RAW_ROWS`` rows at a time."""
    n = len(lay.order)
    trees_per_module = trees_per_module or RAW_TREES
    spans = [(p, min(trees_per_module, n - p)) for p in range(0, n, trees_per_module)]
    modules = [_block_ir(lay, key, m, p, k) for m, (p, k) in enumerate(spans)]
    return [*modules, driver_ir(lay, key, len(spans))]


def _block_ir(lay: Layout, key: str, m: int, p0: int, k: int) -> str:
    """``rawblk_{key}_{m}``: positions ``[p0, p0 + k)`` for the rows ``[lo, hi)``."""
    K, F = lay.K, lay.F
    lines = [
        "declare double @llvm.fabs.f64(double)",
        f"define void @rawblk_{key}_{m}(ptr noalias %X, ptr noalias %out, ptr noalias %T, "
        "i64 %lo, i64 %hi, i64 %n) {",
        "entry:",
        f"  %leafa = getelementptr ptr, ptr %T, i64 {TABLES.index('leaf')}",
        "  %leaf = load ptr, ptr %leafa",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [%lo, %entry], [%i1, %rowend]",
        "  %end = icmp sge i64 %i, %hi",
        "  br i1 %end, label %exit, label %body",
        "body:",
        f"  %xo = mul i64 %i, {F}",
        "  %row = getelementptr double, ptr %X, i64 %xo",
    ]
    acc = []
    for c in range(K):
        lines += [
            f"  %oi{c} = mul i64 %n, {c}",
            f"  %oj{c} = add i64 %oi{c}, %i",
            f"  %op{c} = getelementptr double, ptr %out, i64 %oj{c}",
            f"  %acc{c}_0 = load double, ptr %op{c}",
        ]
        acc.append(f"%acc{c}_0")
    lines.append("  br label %t0_start" if k else "  br label %rowend")
    globals_: list[str] = []
    R = lay.K + 1 + lay.words  # a leaf's record in the table ``leaf`` (``layout``)
    for j in range(k):
        x = f"t{j}_"
        walk, leaves = walk_ir(lay, int(lay.order[p0 + j]), x, globals_, key)
        phi = ", ".join(f"[{leaf * R}, %{x}n{leaf}]" for leaf in leaves)
        code, acc = leaf_values_ir(lay, int(lay.order[p0 + j]), x, acc)
        after = f"%t{j + 1}_start" if j + 1 < k else "%rowend"
        lines += [*walk, f"{x}leaf:", f"  %{x}r = phi i64 {phi}", *code, f"  br label {after}"]
    lines.append("rowend:")
    lines += [f"  store double {acc[c]}, ptr %op{c}" for c in range(K)]
    lines += ["  %i1 = add i64 %i, 1", "  br label %loop", "exit:", "  ret void", "}"]
    return "\n".join(globals_ + lines) + "\n"


def row_vectors(e: _Emitter) -> list[str]:
    """The head of a loop over the rows ``[%lo, %hi)`` in vectors of ``e.L``, after a block
    ``entry``: ``%i`` the vector's first row, ``%valid`` its lanes of rows below ``%hi`` and
    ``%idx`` each lane's row (lanes past ``%hi`` read row ``%i``, valid memory, and store
    nothing). The body ends by adding ``e.L`` to ``%i`` as ``%i1`` and branching to ``%loop``;
    the loop leaves to ``%exit``. Shared by the scores-only vector blocks and the pass's ranks."""
    L, Q, B = e.L, e.I, e.B
    iota = f"<{', '.join(f'i64 {j}' for j in range(L))}>"
    return [
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [%lo, %entry], [%i1, %body]",
        "  %go = icmp slt i64 %i, %hi",
        "  br i1 %go, label %body, label %exit",
        "body:",
        "  %left = sub i64 %hi, %i",
        f"  %l1 = insertelement {Q} poison, i64 %left, i64 0",
        f"  %lv = shufflevector {Q} %l1, {Q} poison, <{L} x i32> zeroinitializer",
        f"  %valid = icmp slt {Q} {iota}, %lv",
        f"  %i0 = insertelement {Q} poison, i64 %i, i64 0",
        f"  %iv = shufflevector {Q} %i0, {Q} poison, <{L} x i32> zeroinitializer",
        f"  %rowsv = add {Q} %iv, {iota}",
        f"  %idx = select {B} %valid, {Q} %rowsv, {Q} %iv",
    ]


def driver_ir(lay: Layout, key: str, n_modules: int, ranked: int = 0) -> str:
    """``raw_{key}(ctx)``: the rows' scores set to the forest's start, then every module's
    trees over ``RAW_ROWS`` rows at a time. With ``ranked`` features, each pass of rows first
    ranks them (``ir_preranks.prerank_ir``) into a buffer that every module reads."""
    sig = "ptr, ptr, ptr, i64, i64, i64" + (", ptr" if ranked else "")
    lines = [f"declare void @rawblk_{key}_{m}({sig})" for m in range(n_modules)]
    lines += [f"define void @raw_{key}(ptr %ctx) {{", "entry:"]
    if ranked:
        lines.append(f"  %R = alloca i16, i64 {ranked * RAW_ROWS}, align 64")
    for j, name in enumerate(RAW_CONTEXT):
        lines += [
            f"  %{name}c = getelementptr i64, ptr %ctx, i64 {j}",
            f"  %{name} = load {'ptr' if j < 3 else 'i64'}, ptr %{name}c",
        ]
    lines += [
        f"  %basea = getelementptr ptr, ptr %T, i64 {TABLES.index('base')}",
        "  %base = load ptr, ptr %basea",
        "  br label %init",
        "init:",
        "  %ii = phi i64 [%lo, %entry], [%ii1, %initrow]",
        "  %imore = icmp slt i64 %ii, %hi",
        "  br i1 %imore, label %initrow, label %chunk",
        "initrow:",
    ]
    for c in range(lay.K):
        lines += [
            f"  %bp{c} = getelementptr double, ptr %base, i64 {c}",
            f"  %bv{c} = load double, ptr %bp{c}",
            f"  %io{c} = mul i64 %n, {c}",
            f"  %ij{c} = add i64 %io{c}, %ii",
            f"  %ip{c} = getelementptr double, ptr %out, i64 %ij{c}",
            f"  store double %bv{c}, ptr %ip{c}",
        ]
    lines += [
        "  %ii1 = add i64 %ii, 1",
        "  br label %init",
        "chunk:",
        "  %a = phi i64 [%lo, %init], [%b, %ran]",
        "  %cmore = icmp slt i64 %a, %hi",
        "  br i1 %cmore, label %go, label %done",
        "go:",
        f"  %a2 = add i64 %a, {RAW_ROWS}",
        "  %short = icmp slt i64 %hi, %a2",
        "  %b = select i1 %short, i64 %hi, i64 %a2",
    ]
    if ranked:
        lines.append(f"  call void @prerank_{key}(ptr %X, ptr %R, i64 %a, i64 %b, i64 %n)")
    more = ", ptr %R" if ranked else ""
    lines += [
        f"  call void @rawblk_{key}_{m}(ptr %X, ptr %out, ptr %T, i64 %a, i64 %b, i64 %n{more})"
        for m in range(n_modules)
    ]
    lines += ["  br label %ran", "ran:", "  br label %chunk", "done:", "  ret void", "}"]
    return "\n".join(lines) + "\n"
