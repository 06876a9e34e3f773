"""LLVM IR for a Cascade plan (Cronus): stages re-weighting a shared pool of trees.

Every example meets the stages in order, so the stage at which a tree is first needed is known
when the code is generated: the trees are compiled in that order (``Stages.first``), each tree
once, by the scalar blocks' tree code (``ir_scalar._tree_ir``), its output stored in a per-row
slot and reused by every later stage, as the interpreter's ``tree_out`` is
(``interpret.kernels.run_cascade``). Stage ``k`` then sums ``bias[k] + w[k, t] * out[t]`` over
its trees in the plan's order (the interpreter's sum, term for term) and rejects the row when
the sum is below ``thr[k]`` (``k < K - 1``); a row that passes every stage is decided by the last
threshold (``interpret.executors.CascadeExecutor.decide``). Weights, biases and thresholds are
tables (``CASCADE_TABLES``), so cascades that differ only in them share code.

``crun(X, S, T, touched, rows, m, n, scratch)`` evaluates the rows ``rows[:m]`` of ``X`` into
the state ``S`` (``CASCADE_FIELDS``, field ``f`` of row ``i`` at ``S[f * n + i]``) and marks the
features each row tested in its row of ``touched`` (``n`` rows of one byte per feature). The
trees' code lives in blocks of up to ``CHUNK`` trees (one function each, in modules of about
``trees_per_module`` trees), run over groups of ``ROW_GROUP`` rows as the forest plans' blocks
are (``ir_scalar``); ``crun`` is in the last module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from thrifty.runtime.compiled.ir_scalar import _tree_ir
from thrifty.runtime.compiled.layout import CHUNK, ROW_GROUP, Layout

# Per-row state: the last stage's score, the stage reached, splits visited, and the exit side
# (-1: rejected or below the last threshold, 1: above it).
CASCADE_FIELDS = ("score", "stage", "nodes", "dir")
# Indices of the table addresses in ``T``: leaf records (``ir_scalar``'s, values unrounded),
# and the plan's ``stage_bias``, ``stage_w`` (``Cascade``'s CSR of weights) and thresholds.
CASCADE_TABLES = ("leaf", "bias", "w", "thr")
# -0.0: adding a tree's value to it gives the value itself, bit for bit (+0.0 would not for -0.0).
_NEG_ZERO = "0x8000000000000000"


@dataclass(frozen=True)
class Stages:
    """The structure of a cascade the code is specialised for (part of the cache key).

    Attributes
    ----------
    stage_ptr, stage_trees : ndarray of int64
        ``Cascade``'s CSR of each stage's trees (those with non-zero weight).
    first : ndarray of int64
        Every tree some stage uses, in the order they are first needed; tree ``first[s]``'s
        output is kept in slot ``s``.
    new_ptr : ndarray of int64
        Stage ``k`` evaluates the trees ``first[new_ptr[k]:new_ptr[k + 1]]`` (the others it
        reads were evaluated by earlier stages); ``new_ptr[k + 1]`` trees have run by its end.
    slot : ndarray of int64
        Each tree's slot (-1 for a tree no stage uses).
    """

    stage_ptr: np.ndarray
    stage_trees: np.ndarray
    first: np.ndarray
    new_ptr: np.ndarray
    slot: np.ndarray

    @classmethod
    def of(cls, stage_ptr: np.ndarray, stage_trees: np.ndarray, n_trees: int) -> Stages:
        slot = np.full(n_trees, -1, dtype=np.int64)
        first: list[int] = []
        new_ptr = [0]
        for k in range(len(stage_ptr) - 1):
            for t in stage_trees[stage_ptr[k] : stage_ptr[k + 1]].tolist():
                if slot[t] < 0:
                    slot[t] = len(first)
                    first.append(t)
            new_ptr.append(len(first))
        return cls(stage_ptr, stage_trees, np.asarray(first, dtype=np.int64), np.asarray(new_ptr), slot)

    @property
    def n_stages(self) -> int:
        return len(self.stage_ptr) - 1

    def blocks(self) -> list[tuple[int, int, int]]:
        """Blocks ``(stage, start, length)`` of up to ``CHUNK`` of each stage's new trees
        (positions in ``first``)."""
        out = []
        for k in range(self.n_stages):
            lo, hi = int(self.new_ptr[k]), int(self.new_ptr[k + 1])
            out += [(k, p, min(CHUNK, hi - p)) for p in range(lo, hi, CHUNK)]
        return out


def cascade_irs(lay: Layout, stages: Stages, key: str, trees_per_module: int) -> list[str]:
    """The IR modules: the tree blocks (about ``trees_per_module`` trees a module), then ``crun``.
    ``lay`` is the forest's layout with its trees in ``stages.first`` order, sums unrounded."""
    blocks = stages.blocks()
    modules, current, trees = [], [], 0
    for b, (_, p, k) in enumerate(blocks):
        current.append(_block_ir(lay, stages, p, k, b, key))
        trees += k
        if trees >= trees_per_module or b == len(blocks) - 1:
            modules.append("declare double @llvm.fabs.f64(double)\n" + "\n".join(current))
            current, trees = [], 0
    modules.append(_run_ir(lay, stages, blocks, key))
    return modules


def _block_ir(lay: Layout, stages: Stages, p0: int, k: int, b: int, key: str) -> str:
    """``cblock_b(row, leaf, out, acc)``: the trees ``first[p0:p0 + k]`` on the row at ``row``,
    each one's output to its slot of ``out``; ``acc`` holds the row's splits visited and
    tested-feature words, read and written back."""
    W = lay.words
    head = [
        f"define void @cblock_{key}_{b}(ptr noalias %row, ptr noalias %leaf, ptr noalias %out, "
        "ptr noalias %acc) {",
        "entry:",
        "  %nodes_0 = load i64, ptr %acc",
    ]
    for w in range(W):
        head += [
            f"  %bits{w}_0p = getelementptr i64, ptr %acc, i64 {1 + w}",
            f"  %bits{w}_0 = load i64, ptr %bits{w}_0p",
        ]
    head.append("  br label %t0_start")
    lines: list[str] = []
    globals_: list[str] = []
    nodes, bits = "%nodes_0", [f"%bits{w}_0" for w in range(W)]
    for j in range(k):
        s = p0 + j
        tree = int(stages.first[s])
        code, acc, nodes, bits, _ = _tree_ir(lay, tree, f"t{j}_", [_NEG_ZERO], nodes, bits, globals_, key)
        lines += code
        after = f"%t{j + 1}_start" if j + 1 < k else "%end"
        lines += [
            f"  %t{j}_op = getelementptr double, ptr %out, i64 {s}",
            f"  store double {acc[0]}, ptr %t{j}_op",
            f"  br label {after}",
        ]
    tail = ["end:", f"  store i64 {nodes}, ptr %acc"]
    tail += [f"  store i64 {bits[w]}, ptr %bits{w}_0p" for w in range(W)]
    tail += ["  ret void", "}"]
    return "\n".join(globals_ + head + lines + tail) + "\n"


def _run_ir(lay: Layout, stages: Stages, blocks: list[tuple[int, int, int]], key: str) -> str:
    """``crun(X, S, T, touched, rows, m, n, scratch)``: the rows in groups of ``ROW_GROUP``; for
    each group, stage by stage, each of the stage's blocks over the group's rows still in (trees
    blocked over rows: a block's code stays in cache), then the stage's sums, which drop the
    rows it rejects. ``scratch`` holds ``ROW_GROUP`` records of ``record_words`` words: a row's
    tree outputs (a slot per tree), its splits visited and tested-feature words, and the list of
    the group's rows still in."""
    W, F, K = lay.words, lay.F, stages.n_stages
    R = record_words(stages, W)
    NS = R - 1 - W
    t = {name: i for i, name in enumerate(CASCADE_TABLES)}
    lines = [f"declare void @cblock_{key}_{b}(ptr, ptr, ptr, ptr)" for b in range(len(blocks))]
    lines += [
        _finish_ir(W, F, key),
        f"define void @crun_{key}(ptr noalias %X, ptr noalias %S, ptr noalias %T, ptr noalias %touched, "
        "ptr noalias %rows, i64 %m, i64 %n, ptr noalias %scratch) {",
        "entry:",
        f"  %live = getelementptr i64, ptr %scratch, i64 {ROW_GROUP * R}",
    ]
    for name, j in t.items():
        lines += [f"  %{name}a = getelementptr ptr, ptr %T, i64 {j}", f"  %{name} = load ptr, ptr %{name}a"]
    lines += [
        "  br label %group",
        "group:",
        "  %lo = phi i64 [0, %entry], [%lo1, %next]",
        "  %more = icmp slt i64 %lo, %m",
        "  br i1 %more, label %init, label %exit",
        "init:",
        "  %left = sub i64 %m, %lo",
        f"  %small = icmp slt i64 %left, {ROW_GROUP}",
        f"  %g = select i1 %small, i64 %left, i64 {ROW_GROUP}",
        "  %wl = getelementptr i64, ptr %rows, i64 %lo",
    ]
    # Every row of the group starts in, with no splits visited and no feature tested.
    body = [f"  %z{w}p = getelementptr i64, ptr %rec, i64 {NS + w}" for w in range(1 + W)]
    body += [f"  store i64 0, ptr %z{w}p" for w in range(1 + W)]
    body += ["  %zl = getelementptr i64, ptr %live, i64 %zj", "  store i64 %zj, ptr %zl"]
    lines += _loop("z", "%g", "init", body, R)
    count, pred = "%g", "zx"
    for k in range(K):
        for b, (stage, _, _) in enumerate(blocks):
            if stage != k:
                continue
            call = [
                f"  %k{k}b{b}np = getelementptr i64, ptr %rec, i64 {NS}",
                f"  call void @cblock_{key}_{b}(ptr %row, ptr %leaf, ptr %rec, ptr %k{k}b{b}np)",
            ]
            lines += _loop(f"k{k}b{b}", count, pred, call, R, F)
            pred = f"k{k}b{b}x"
        lines += _stage(stages, k, count, pred, (R, NS, F), key)
        count, pred = f"%k{k}qx_kept", f"k{k}qx"
    lines += [
        "  br label %next",
        "next:",
        f"  %lo1 = add i64 %lo, {ROW_GROUP}",
        "  br label %group",
        "exit:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"


def record_words(stages: Stages, words: int) -> int:
    """Words of a row's record in ``crun``'s scratch: its tree outputs (at least one slot), its
    splits visited and its ``words`` tested-feature words."""
    return max(1, len(stages.first)) + 1 + words


def _loop(x: str, count: str, pred: str, body: list[str], R: int, F: int = 0) -> list[str]:
    """A loop ``%{x}j`` over ``[0, count)`` entered from block ``pred`` (whose terminator it
    adds), ending in block ``{x}x``. In ``body`` the row's record is ``%rec``: that of group row
    ``%{x}j``, or with ``F`` (features) that of the ``%{x}j``-th row still in, whose values are
    at ``%row``."""
    j = f"%{x}j"
    lines = [
        f"  br label %{x}h",
        f"{x}h:",
        f"  {j} = phi i64 [0, %{pred}], [{j}1, %{x}b]",
        f"  %{x}e = icmp sge i64 {j}, {count}",
        f"  br i1 %{x}e, label %{x}x, label %{x}b",
        f"{x}b:",
    ]
    a = j
    if F:
        a = f"%{x}a"
        lines += [f"  %{x}lp = getelementptr i64, ptr %live, i64 {j}", f"  {a} = load i64, ptr %{x}lp"]
        lines += _row(x, a, F)
    lines += [f"  %{x}ro = mul i64 {a}, {R}", f"  %rec = getelementptr i64, ptr %scratch, i64 %{x}ro"]
    body = [line.replace("%rec", f"%{x}rec").replace("%row", f"%{x}row") for line in body]
    lines = [line.replace("%rec", f"%{x}rec") for line in lines]
    lines += body + [f"  {j}1 = add i64 {j}, 1", f"  br label %{x}h", f"{x}x:"]
    return lines


def _row(x: str, a: str, F: int) -> list[str]:
    """``%{x}i``, the input row of the group's row ``a``, and ``%{x}row``, its ``F`` values."""
    return [
        f"  %{x}wp = getelementptr i64, ptr %wl, i64 {a}",
        f"  %{x}i = load i64, ptr %{x}wp",
        f"  %{x}xo = mul i64 %{x}i, {F}",
        f"  %{x}row = getelementptr double, ptr %X, i64 %{x}xo",
    ]


def _stage(stages: Stages, k: int, count: str, pred: str, sizes: tuple[int, int, int], key: str) -> list[str]:
    """Stage ``k``'s sums over its rows still in (loop ``k{k}q``): ``bias[k]`` plus ``w * out``
    over its trees in the plan's order; a row below ``thr[k]`` (or any row, at the last stage)
    is finished (``cfinish``), the others stay in, compacted to the front of the list
    (``%k{k}qx_kept`` of them). ``sizes``: words of a record, tree slots, features."""
    R, NS, F = sizes
    K = stages.n_stages
    x = f"k{k}q"
    j, kept = f"%{x}j", f"%{x}kept"
    lines = [
        f"  br label %{x}h",
        f"{x}h:",
        f"  {j} = phi i64 [0, %{pred}], [{j}1, %{x}t]",
        f"  {kept} = phi i64 [0, %{pred}], [{kept}1, %{x}t]",
        f"  %{x}e = icmp sge i64 {j}, {count}",
        f"  br i1 %{x}e, label %{x}x, label %{x}b",
        f"{x}b:",
        f"  %{x}lp = getelementptr i64, ptr %live, i64 {j}",
        f"  %{x}a = load i64, ptr %{x}lp",
        f"  %{x}ro = mul i64 %{x}a, {R}",
        f"  %{x}rec = getelementptr i64, ptr %scratch, i64 %{x}ro",
        f"  %{x}bp = getelementptr double, ptr %bias, i64 {k}",
        f"  %{x}s_0 = load double, ptr %{x}bp",
    ]
    s = f"%{x}s_0"
    for p in range(int(stages.stage_ptr[k]), int(stages.stage_ptr[k + 1])):
        slot = int(stages.slot[int(stages.stage_trees[p])])
        lines += [
            f"  %{x}wp{p} = getelementptr double, ptr %w, i64 {p}",
            f"  %{x}w{p} = load double, ptr %{x}wp{p}",
            f"  %{x}op{p} = getelementptr double, ptr %{x}rec, i64 {slot}",
            f"  %{x}o{p} = load double, ptr %{x}op{p}",
            f"  %{x}p{p} = fmul double %{x}w{p}, %{x}o{p}",
            f"  %{x}s{p} = fadd double {s}, %{x}p{p}",
        ]
        s = f"%{x}s{p}"
    lines += [
        f"  %{x}tp = getelementptr double, ptr %thr, i64 {k}",
        f"  %{x}t0 = load double, ptr %{x}tp",
    ]
    if k == K - 1:
        # Past every stage: the last threshold decides.
        lines += [
            f"  %{x}g = fcmp ogt double {s}, %{x}t0",
            f"  %{x}d = select i1 %{x}g, i64 1, i64 -1",
            f"  br label %{x}f",
        ]
    else:
        lines += [
            f"  %{x}r = fcmp olt double {s}, %{x}t0",
            f"  br i1 %{x}r, label %{x}f, label %{x}k",
            f"{x}k:",
            f"  %{x}kl = getelementptr i64, ptr %live, i64 {kept}",
            f"  store i64 %{x}a, ptr %{x}kl",
            f"  %{x}kept_in = add i64 {kept}, 1",
            f"  br label %{x}t",
        ]
    d = f"%{x}d" if k == K - 1 else "-1"
    lines += [f"{x}f:"] + _row(x, f"%{x}a", F)
    lines += [
        f"  %{x}np = getelementptr i64, ptr %{x}rec, i64 {NS}",
        f"  call void @cfinish_{key}(ptr %S, i64 %n, i64 %{x}i, ptr %touched, ptr %{x}np, "
        f"double {s}, i64 {k}, i64 {d})",
        f"  br label %{x}t",
        f"{x}t:",
        f"  {kept}1 = phi i64 [{kept}, %{x}f]" + ("" if k == K - 1 else f", [%{x}kept_in, %{x}k]"),
        f"  {j}1 = add i64 {j}, 1",
        f"  br label %{x}h",
        f"{x}x:",
        f"  %{x}x_kept = add i64 {kept}, 0",
    ]
    return lines


def _finish_ir(W: int, F: int, key: str) -> str:
    """``cfinish(S, n, i, touched, acc, score, stage, dir)``: row ``i``'s state fields, and its
    tested-feature words (``acc[1:]``) as bytes of its row of ``touched`` (``F`` features)."""
    lines = [
        f"define private void @cfinish_{key}(ptr noalias %S, i64 %n, i64 %i, ptr noalias %touched, "
        "ptr noalias %acc, double %score, i64 %stage, i64 %dir) {",
        "entry:",
        "  %scorep = getelementptr double, ptr %S, i64 %i",
        "  store double %score, ptr %scorep",
        "  %nodes = load i64, ptr %acc",
    ]
    for j, name in enumerate(CASCADE_FIELDS[1:], 1):
        lines += [
            f"  %{name}o = mul i64 %n, {j}",
            f"  %{name}j = add i64 %{name}o, %i",
            f"  %{name}p = getelementptr i64, ptr %S, i64 %{name}j",
            f"  store i64 %{name}, ptr %{name}p",
        ]
    lines += [
        f"  %tro = mul i64 %i, {F}",
        "  %trow = getelementptr i8, ptr %touched, i64 %tro",
        "  br label %w0",
    ]
    # Each set bit of the tested-feature words marks its feature's byte of the row's ``touched``.
    for w in range(W):
        nxt = f"%w{w + 1}" if w + 1 < W else "%done"
        lines += [
            f"w{w}:",
            f"  %w{w}vp = getelementptr i64, ptr %acc, i64 {1 + w}",
            f"  %w{w}v = load i64, ptr %w{w}vp",
            f"  br label %w{w}l",
            f"w{w}l:",
            f"  %w{w}m = phi i64 [%w{w}v, %w{w}], [%w{w}m1, %w{w}b]",
            f"  %w{w}z = icmp eq i64 %w{w}m, 0",
            f"  br i1 %w{w}z, label {nxt}, label %w{w}b",
            f"w{w}b:",
            f"  %w{w}tz = call i64 @llvm.cttz.i64(i64 %w{w}m, i1 true)",
            f"  %w{w}f = add i64 %w{w}tz, {64 * w}",
            f"  %w{w}p = getelementptr i8, ptr %trow, i64 %w{w}f",
            f"  store i8 1, ptr %w{w}p",
            f"  %w{w}d = sub i64 %w{w}m, 1",
            f"  %w{w}m1 = and i64 %w{w}m, %w{w}d",
            f"  br label %w{w}l",
        ]
    lines += ["done:", "  ret void", "}"]
    return "declare i64 @llvm.cttz.i64(i64, i1)\n" + "\n".join(lines) + "\n"
