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

``crun(X, S, T, touched, rows, m, n)`` evaluates the rows ``rows[:m]`` of ``X`` into the state
``S`` (``CASCADE_FIELDS``, field ``f`` of row ``i`` at ``S[f * n + i]``) and marks the features
each row tested in its row of ``touched`` (``n`` rows of one byte per feature). The trees' code
lives in blocks of up to ``CHUNK`` trees (one function each, in modules of about
``trees_per_module`` trees), ``crun`` in the last module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from thrifty.runtime.compiled.ir_scalar import _tree_ir
from thrifty.runtime.compiled.layout import CHUNK, Layout

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
    """``crun(X, S, T, rows, m, n)``: each row of the work list through the stages."""
    W, F, K = lay.words, lay.F, stages.n_stages
    t = {name: i for i, name in enumerate(CASCADE_TABLES)}
    fields = CASCADE_FIELDS
    block_sig = "ptr, ptr, ptr, ptr"
    lines = [f"declare void @cblock_{key}_{b}({block_sig})" for b in range(len(blocks))]
    lines += [
        "declare i64 @llvm.cttz.i64(i64, i1)",
        f"define void @crun_{key}(ptr noalias %X, ptr noalias %S, ptr noalias %T, ptr noalias %touched, "
        "ptr noalias %rows, i64 %m, i64 %n) {",
        "entry:",
        f"  %out = alloca double, i64 {max(1, len(stages.first))}",
        f"  %acc = alloca i64, i64 {1 + W}",
    ]
    for name, j in t.items():
        lines += [f"  %{name}a = getelementptr ptr, ptr %T, i64 {j}", f"  %{name} = load ptr, ptr %{name}a"]
    for j, name in enumerate(fields):
        lines += [f"  %{name}o = mul i64 %n, {j}", f"  %{name}S = getelementptr i64, ptr %S, i64 %{name}o"]
    lines += [
        "  br label %loop",
        "loop:",
        "  %a = phi i64 [0, %entry], [%a1, %rowdone]",
        "  %end = icmp sge i64 %a, %m",
        "  br i1 %end, label %exit, label %body",
        "body:",
        "  %rp = getelementptr i64, ptr %rows, i64 %a",
        "  %i = load i64, ptr %rp",
        f"  %xo = mul i64 %i, {F}",
        "  %row = getelementptr double, ptr %X, i64 %xo",
        "  %trow = getelementptr i8, ptr %touched, i64 %xo",
    ]
    for w in range(1 + W):
        lines += [f"  %acc{w}p = getelementptr i64, ptr %acc, i64 {w}", f"  store i64 0, ptr %acc{w}p"]
    lines.append("  br label %s0")
    ends: list[tuple[str, str, int, int | str]] = []  # (label, score, stage, dir)
    for k in range(K):
        lines.append(f"s{k}:")
        for b, (stage, _, _) in enumerate(blocks):
            if stage == k:
                lines.append(f"  call void @cblock_{key}_{b}(ptr %row, ptr %leaf, ptr %out, ptr %acc)")
        lines += [
            f"  %s{k}bp = getelementptr double, ptr %bias, i64 {k}",
            f"  %s{k}_0 = load double, ptr %s{k}bp",
        ]
        lo, hi = int(stages.stage_ptr[k]), int(stages.stage_ptr[k + 1])
        s = f"%s{k}_0"
        for j in range(lo, hi):
            slot = int(stages.slot[int(stages.stage_trees[j])])
            lines += [
                f"  %s{k}wp{j} = getelementptr double, ptr %w, i64 {j}",
                f"  %s{k}w{j} = load double, ptr %s{k}wp{j}",
                f"  %s{k}op{j} = getelementptr double, ptr %out, i64 {slot}",
                f"  %s{k}o{j} = load double, ptr %s{k}op{j}",
                f"  %s{k}p{j} = fmul double %s{k}w{j}, %s{k}o{j}",
                f"  %s{k}_{j + 1} = fadd double {s}, %s{k}p{j}",
            ]
            s = f"%s{k}_{j + 1}"
        if k == K - 1:
            # Past every stage: the last threshold decides.
            lines += [
                f"  %s{k}tp = getelementptr double, ptr %thr, i64 {k}",
                f"  %s{k}t = load double, ptr %s{k}tp",
                f"  %s{k}g = fcmp ogt double {s}, %s{k}t",
                f"  %s{k}d = select i1 %s{k}g, i64 1, i64 -1",
                "  br label %rowend",
            ]
            ends.append((f"%s{k}", s, k, f"%s{k}d"))
            continue
        lines += [
            f"  %s{k}tp = getelementptr double, ptr %thr, i64 {k}",
            f"  %s{k}t = load double, ptr %s{k}tp",
            f"  %s{k}r = fcmp olt double {s}, %s{k}t",
            f"  br i1 %s{k}r, label %rowend, label %s{k + 1}",
        ]
        ends.append((f"%s{k}", s, k, -1))
    # The score of the stage a row ended in, that stage, and its exit side; then its counters.
    lines += [
        "rowend:",
        "  %score = phi double " + ", ".join(f"[{s}, {q}]" for q, s, _, _ in ends),
        "  %stage = phi i64 " + ", ".join(f"[{k}, {q}]" for q, _, k, _ in ends),
        "  %dir = phi i64 " + ", ".join(f"[{d}, {q}]" for q, _, _, d in ends),
        "  %scorep = getelementptr double, ptr %scoreS, i64 %i",
        "  store double %score, ptr %scorep",
    ]
    for name in ("stage", "dir"):
        lines += [
            f"  %{name}p = getelementptr i64, ptr %{name}S, i64 %i",
            f"  store i64 %{name}, ptr %{name}p",
        ]
    lines += [
        "  %nodesv = load i64, ptr %acc0p",
        "  %nodesp = getelementptr i64, ptr %nodesS, i64 %i",
        "  store i64 %nodesv, ptr %nodesp",
        "  br label %w0",
    ]
    # Each set bit of the tested-feature words marks its feature's byte of the row's ``touched``.
    for w in range(W):
        nxt = f"%w{w + 1}" if w + 1 < W else "%rowdone"
        lines += [
            f"w{w}:",
            f"  %w{w}v = load i64, ptr %acc{w + 1}p",
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
    lines += [
        "rowdone:",
        "  %a1 = add i64 %a, 1",
        "  br label %loop",
        "exit:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines) + "\n"
