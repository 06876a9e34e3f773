"""LLVM IR of a forest plan's blocks evaluated several rows at a time, without branches per split.

Each tree is evaluated the QuickScorer way (Lucchese et al., SIGIR 2015), on vectors of rows: the
leaves are numbered left to right, every split of the tree is tested on all lanes at once (its
feature, threshold, missing-value rule and category set inlined as constants, exactly as
``ir_scalar._split_ir`` and the interpreter decide), and a split that sends a row right clears the
leaves of its left subtree from that row's leaf mask. The leftmost leaf left in the mask is the
row's exit leaf (QuickScorer's Theorem 1), found with one count-trailing-zeros. A data-dependent
branch per split costs a misprediction about every other tree; the vector form has none, and one
comparison and one mask update per split serve every lane.

The number of lanes is the target's (``targets``): 8 for AVX-512 (one register of doubles, the lane
masks in mask registers), 4 for AVX2 (lane masks as compare results), 2 for NEON, two per 128 bits
for SVE (whose blocks carry the vector length as ``vscale_range``, so LLVM may use SVE's gathers and
predicates on the fixed-width vectors).

The block has ``ir_scalar.scalar_block_ir``'s signature and contract (rows of a work list in, the
rows that did not exit compacted to its front, state in ``S``), so ``run``, ``serve`` and the
executors are unchanged. Leaf records (the weighted values, the splits on the path and the features
it tests as bits) are read from the table ``vleaf``, in the leaves' left-to-right order per tree
(``layout.inorder_leaves``); the tested-feature set is one vector per 64 features, and after a tree
only the words its features lie in are updated, from a record that holds them folded into a word or
two (``layout.Layout.folds``) in forests of more than 56 features. A tree of more than 64 leaves has
a leaf mask of one vector per 64 leaves. Used when every tree has at most ``VECTOR_LEAVES`` leaves
(or is oblivious) and the plan no bin exits (``vector_ok``); other plans use ``ir_scalar``'s scalar
blocks. An oblivious tree (``layout.oblivious_levels``) takes ``ir_oblivious``'s path instead of the
leaf mask: one comparison per level. Rank blocks (``ranks``, ``ir_ranks``) compare 32-bit or 16-bit
ranks of the inputs among the block's thresholds on two or four times the lanes, with leaf masks of
32-bit or 16-bit words (``ir_narrow``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from thrifty.forest import Forest
from thrifty.forest.kernels import MISSING_AS_ZERO, MISSING_ZERO, ZERO
from thrifty.runtime.compiled import ir_catshift
from thrifty.runtime.compiled.ir_narrow import exit_leaf_narrow
from thrifty.runtime.compiled.ir_oblivious import oblivious_counts, oblivious_leaf
from thrifty.runtime.compiled.ir_ranks import block_thresholds, goes_right_rank, rank_ir
from thrifty.runtime.compiled.ir_scalar import module_irs, scalar_block_ir
from thrifty.runtime.compiled.layout import TABLES, Layout, double, formed_ir, state_fields, word_field
from thrifty.runtime.compiled.vblocks import vblocks

# Rows per vector by default (one 512-bit register of doubles); the target sets its own.
LANES = 8


def intrinsics(lanes: int) -> str:
    """Declarations of the intrinsics the vector blocks of ``lanes`` lanes call."""
    L = lanes
    V, Q, B, P = f"<{L} x double>", f"<{L} x i64>", f"<{L} x i1>", f"<{L} x ptr>"
    return f"""
declare {V} @llvm.masked.gather.v{L}f64.v{L}p0({P}, i32 immarg, {B}, {V})
declare {Q} @llvm.masked.gather.v{L}i64.v{L}p0({P}, i32 immarg, {B}, {Q})
declare <{L} x i32> @llvm.masked.gather.v{L}i32.v{L}p0({P}, i32 immarg, {B}, <{L} x i32>)
declare void @llvm.masked.scatter.v{L}f64.v{L}p0({V}, {P}, i32 immarg, {B})
declare void @llvm.masked.scatter.v{L}i64.v{L}p0({Q}, {P}, i32 immarg, {B})
declare {Q} @llvm.masked.load.v{L}i64.p0(ptr, i32 immarg, {B}, {Q})
declare void @llvm.masked.compressstore.v{L}i64({Q}, ptr, {B})
declare {Q} @llvm.cttz.v{L}i64({Q}, i1 immarg)
declare {Q} @llvm.fshr.v{L}i64({Q}, {Q}, {Q})
declare <{L} x i32> @llvm.cttz.v{L}i32(<{L} x i32>, i1 immarg)
declare <{L} x i16> @llvm.cttz.v{L}i16(<{L} x i16>, i1 immarg)
declare {V} @llvm.fabs.v{L}f64({V})
declare i64 @llvm.ctpop.i64(i64)
"""


def _signed(word: int, bits: int) -> int:
    """The unsigned ``bits``-bit ``word`` as LLVM's signed integer constant."""
    return word - (1 << bits) if word >= 1 << (bits - 1) else word


def _splat(ty: str, value: str) -> str:
    return f"splat ({ty} {value})"


class _Emitter:
    """IR lines of one vector block of ``lanes`` lanes, with fresh names; ``V``, ``I``, ``B``
    and ``P`` are its vector types of doubles, words, booleans and pointers."""

    def __init__(self, lanes: int = LANES) -> None:
        self.lines: list[str] = []
        self.k = 0
        self.L = L = lanes
        self.V, self.I, self.B, self.P = f"<{L} x double>", f"<{L} x i64>", f"<{L} x i1>", f"<{L} x ptr>"

    def __call__(self, rhs: str) -> str:
        self.k += 1
        name = f"%v{self.k}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def gep(self, base: str, ty: str, index: str) -> str:
        return self(f"getelementptr {ty}, ptr {base}, {self.I} {index}")

    def gather(self, ty: str, ptrs: str, mask: str) -> str:
        vt = f"<{self.L} x {ty}>"
        suffix = {"double": "f64", "i64": "i64", "i32": "i32"}[ty]
        return self(
            f"call {vt} @llvm.masked.gather.v{self.L}{suffix}.v{self.L}p0({self.P} {ptrs}, i32 8, "
            f"{self.B} {mask}, {vt} poison)"
        )

    def scatter(self, ty: str, value: str, ptrs: str, mask: str) -> None:
        suffix = {"double": "f64", "i64": "i64"}[ty]
        self.lines.append(
            f"  call void @llvm.masked.scatter.v{self.L}{suffix}.v{self.L}p0(<{self.L} x {ty}> {value}, "
            f"{self.P} {ptrs}, i32 8, {self.B} {mask})"
        )

    def any(self, mask: str) -> str:
        bits = self(f"bitcast {self.B} {mask} to i{self.L}")
        return self(f"icmp ne i{self.L} {bits}, 0")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")


def vector_module_irs(
    lay: Layout,
    key: str,
    trees_per_module: int,
    lanes: int = LANES,
    vscale: int = 0,
    by_exponent: bool = False,
    ranks: int = 0,
    cat_shift: bool = False,
    cold_scalar: bool = False,
) -> list[str]:
    """``ir_scalar.module_irs`` with vector blocks (``vblocks``) of ``lanes`` lanes (with
    ``vscale``, SVE's vector length in units of 128 bits, as the blocks' ``vscale_range``; with
    ``by_exponent``, exit leaves found by ``_low_bit_by_exponent`` where the ISA has no vector
    count-trailing-zeros). With ``ranks`` (32 or 16; 0: doubles), the blocks compare ranks of
    that many bits (``ir_ranks``) on as many lanes as a register holds such integers (twice or
    four times the doubles'). With ``cat_shift`` (``targets.Target.cat_shift``), categorical
    splits of 32-bit rank blocks test codes of the categories (``ir_catshift``). With
    ``cold_scalar``, the scalar blocks are compiled without optimisation (``optnone``;
    ``objects._compile`` asks it for plans without exits, where they run only for a lone row
    of a call)."""
    if ranks:
        lanes *= 64 // ranks
    decl = intrinsics(lanes)
    if cat_shift and ir_catshift.supported(lanes, ranks):
        decl += ir_catshift.declarations(lanes, ranks=ranks)

    def block(lay: Layout, p0: int, k: int, b: int, key: str) -> str:
        # Both kinds of each block: ``run`` serves a single row with the scalar one.
        vector = vblock_ir(lay, p0, k, b, key, lanes, vscale, by_exponent, ranks, cat_shift)
        scalar = scalar_block_ir(lay, p0, k, b, key)
        if cold_scalar:
            # The attributes go on the scalar block's one definition (its header's end).
            scalar = scalar.replace("i64 %n) {\nentry:", "i64 %n) optnone noinline {\nentry:", 1)
        return vector + scalar

    return module_irs(lay, key, trees_per_module, vblocks(lay), block, decl)


def vblock_ir(
    lay: Layout,
    p0: int,
    k: int,
    b: int,
    key: str,
    lanes: int = LANES,
    vscale: int = 0,
    by_exponent: bool = False,
    ranks: int = 0,
    cat_shift: bool = False,
) -> str:
    """Block ``b`` (positions ``[p0, p0 + k)``) as ``ir_scalar.scalar_block_ir`` makes it, on vectors
    of ``lanes`` rows (``vector_module_irs``); tree ``t``'s leaf records in ``vleaf`` start at
    ``lay.leaf_ptr[t]``. With ``ranks`` (32 or 16), numeric splits compare ranks of that many bits
    among the block's thresholds (``ir_ranks``) and leaf masks are words of as many leaves;
    ``cat_shift`` as ``vector_module_irs``."""
    K, W = lay.K, lay.words
    R = lay.vrecord
    t = {name: i for i, name in enumerate(TABLES)}
    off = {name: (K + j) for j, name in enumerate(state_fields(W))}
    e = _Emitter(lanes)
    globals_: list[str] = []
    e.lines += [
        f"define i64 @vblock_{key}_{b}(ptr noalias %X, ptr noalias %S, ptr noalias %T, "
        "ptr noalias %touched, ptr noalias %rows, i64 %m, i64 %n)"
        # SVE: at least ``vscale`` units of 128 bits (16, SVE's most, as the upper bound: the
        # fixed-width code then runs on any longer vector length too).
        + (f" vscale_range({vscale},16)" if vscale else "")
        + " {",
        "entry:",
    ]
    for name in ("vleaf", "oleaf", "eps_pos", "eps_neg"):
        e.lines += [
            f"  %{name}a = getelementptr ptr, ptr %T, i64 {t[name]}",
            f"  %{name} = load ptr, ptr %{name}a",
        ]
    e.lines += [
        f"  %n1 = insertelement {e.I} poison, i64 %n, i64 0",
        f"  %nv = shufflevector {e.I} %n1, {e.I} poison, <{e.L} x i32> zeroinitializer",
        "  br label %loop",
        "loop:",
        "  %a = phi i64 [0, %entry], [%a1, %next]",
        "  %kept = phi i64 [0, %entry], [%kept1, %next]",
        "  %go = icmp slt i64 %a, %m",
        "  br i1 %go, label %body, label %exit",
        "body:",
        "  %left = sub i64 %m, %a",
        f"  %l1 = insertelement {e.I} poison, i64 %left, i64 0",
        f"  %lv = shufflevector {e.I} %l1, {e.I} poison, <{e.L} x i32> zeroinitializer",
        f"  %valid = icmp slt {e.I} <{', '.join(f'i64 {i}' for i in range(e.L))}>, %lv",
        "  %rp = getelementptr i64, ptr %rows, i64 %a",
        "  %r0 = load i64, ptr %rp",
        f"  %r01 = insertelement {e.I} poison, i64 %r0, i64 0",
        f"  %r0v = shufflevector {e.I} %r01, {e.I} poison, <{e.L} x i32> zeroinitializer",
        # Lanes past the end repeat the first row: every lane reads valid memory.
        f"  %idx = call {e.I} @llvm.masked.load.v{e.L}i64.p0(ptr %rp, i32 8, {e.B} %valid, {e.I} %r0v)",
    ]
    every = _splat("i1", "true")
    # Per-row state pointers: field f of row i is S[f * n + i].
    ptrs: dict[str, str] = {}
    words = [word_field("bits", w) for w in range(W)]
    for name in ("nodes", *words, "pos", "dir"):
        at = e(f"mul {e.I} %nv, {_splat('i64', str(off[name]))}")
        ptrs[name] = e.gep("%S", "i64", e(f"add {e.I} {at}, %idx"))
    acc: list[str] = []
    for c in range(K):
        at = e(f"mul {e.I} %nv, {_splat('i64', str(c))}")
        ptrs[f"raw{c}"] = e.gep("%S", "double", e(f"add {e.I} {at}, %idx"))
        acc.append(e.gather("double", ptrs[f"raw{c}"], every))
    nodes = e.gather("i64", ptrs["nodes"], every)
    bits = [e.gather("i64", ptrs[name], every) for name in words]
    xo = e(f"mul {e.I} %idx, {_splat('i64', str(lay.F))}")
    f = lay.forest
    right_of = split_tests(e, lay, p0, k, xo, f"@vthr_{key}_{b}", globals_, key, ranks, cat_shift)
    word_bits = ranks or 64
    live = "%valid"
    exits_to_next: list[str] = []
    for j in range(k):
        p = p0 + j
        tree = int(lay.order[p])
        levels = lay.levels(tree)
        if levels is None:
            # The leaf mask's exit leaf; its values lead its record of R words in ``vleaf``.
            n_leaves = int(lay.leaf_ptr[tree + 1] - lay.leaf_ptr[tree]) if by_exponent else None
            mask = _leaf_mask(e, f, tree, right_of, word_bits)
            leaf = _exit_leaf(e, mask, n_leaves, by_exponent, word_bits)
            scaled = e(f"mul {e.I} {leaf}, {_splat('i64', str(R))}")
            table, rec = "%vleaf", e(f"add {e.I} {scaled}, {_splat('i64', str(R * int(lay.leaf_ptr[tree])))}")
        else:
            # An oblivious tree: its leaf is the bit pattern of one comparison per level, scaled
            # by the K values a leaf has in ``oleaf`` (values alone: fewer cache lines; the
            # record's counts are the tree's constants). The tree's first leaf is the base.
            rights = [right_of(n) for n in levels]
            rec = oblivious_leaf(e, rights, e.L, K)
            table = e(f"getelementptr double, ptr %oleaf, i64 {K * int(lay.leaf_ptr[tree])}")
        cls = int(f.tree_class[tree])
        acc = list(acc)
        for o in [cls] if cls >= 0 else range(K):
            col = 0 if cls >= 0 else o
            at = rec if col == 0 else e(f"add {e.I} {rec}, {_splat('i64', str(col))}")
            w = e.gather("double", e.gep(table, "double", at), every)
            v = e(f"fadd {e.V} {acc[o]}, {w}")
            if lay.acc32:
                # XGBoost sums in float32 (the table holds float32(weight * value)).
                v = e(f"fpext <{e.L} x float> {e(f'fptrunc {e.V} {v} to <{e.L} x float>')} to {e.V}")
            acc[o] = v
        if levels is not None:
            nodes, bits = oblivious_counts(e, lay, tree, nodes, bits, e.L)
        else:
            nodes, bits = _counts(e, lay, tree, rec, nodes, bits)
        if not int(lay.exits[p]):
            continue
        code, scores = formed_ir(lay.finish, acc, e.V, f"x{p}_f", lambda c: _splat("double", c))
        e.lines += code
        g = scores[0] if K == 1 else _vmargin(e, scores)
        ep = e(f"load double, ptr {e(f'getelementptr double, ptr %eps_pos, i64 {p}')}")
        en = e(f"load double, ptr {e(f'getelementptr double, ptr %eps_neg, i64 {p}')}")
        gp = e(f"fcmp ogt {e.V} {g}, {_broadcast(e, ep)}")
        gn = e(f"fcmp olt {e.V} {g}, {_broadcast(e, en)}")
        out = e(f"and {e.B} {e(f'or {e.B} {gp}, {gn}')}, {live}")
        live = e(f"xor {e.B} {live}, {out}")
        has, stay = e.any(out), f"x{p}_stay"
        e.lines.append(f"  br i1 {has}, label %x{p}_store, label %{stay}")
        e.label(f"x{p}_store")
        direction = e(f"select {e.B} {gp}, {e.I} {_splat('i64', '1')}, {e.I} {_splat('i64', '-1')}")
        _store(e, ptrs, acc, nodes, bits, _splat("i64", str(p + 1)), out, K)
        e.scatter("i64", direction, ptrs["dir"], out)
        e.lines.append(f"  br label %{stay}")
        e.label(stay)
        more = e.any(live)
        cont = f"x{p}_more"
        e.lines.append(f"  br i1 {more}, label %{cont}, label %x{p}_gone")
        e.label(f"x{p}_gone")
        e.lines.append("  br label %next")
        exits_to_next.append(f"%x{p}_gone")
        e.label(cont)
    _store(e, ptrs, acc, nodes, bits, _splat("i64", str(p0 + k)), live, K)
    e.lines.append("  %keptp = getelementptr i64, ptr %rows, i64 %kept")
    e.lines.append(f"  call void @llvm.masked.compressstore.v{e.L}i64({e.I} %idx, ptr %keptp, {e.B} {live})")
    live_bits = e(f"zext i{e.L} {e(f'bitcast {e.B} {live} to i{e.L}')} to i64")
    count = e(f"call i64 @llvm.ctpop.i64(i64 {live_bits})")
    e.lines += [
        f"  %kept_in = add i64 %kept, {count}",
        "  br label %rowend",
        "rowend:",
        "  br label %next",
        "next:",
        "  %kept1 = phi i64 [%kept_in, %rowend]" + "".join(f", [%kept, {x}]" for x in exits_to_next),
        f"  %a1 = add i64 %a, {e.L}",
        "  br label %loop",
        "exit:",
        "  ret i64 %kept",
        "}",
    ]
    return "\n".join(globals_ + e.lines) + "\n"


def _counts(
    e: _Emitter, lay: Layout, tree: int, rec: str, nodes: str, bits: list[str]
) -> tuple[str, list[str]]:
    """``nodes`` plus the splits on each lane's leaf path and ``bits`` ORed with the features
    that path tests, read from the leaf records at ``rec``."""
    K, every = lay.K, _splat("i1", "true")
    bits = list(bits)
    if lay.packed and lay.tree_words(tree):
        # One gather: the tested features below bit 56, the splits on the path above.
        at = e(f"add {e.I} {rec}, {_splat('i64', str(K + 1))}")
        both = e.gather("i64", e.gep("%vleaf", "i64", at), every)
        splits = e(f"lshr {e.I} {both}, {_splat('i64', '56')}")
        nodes = e(f"add {e.I} {nodes}, {splits}")
        low = e(f"and {e.I} {both}, {_splat('i64', str((1 << 56) - 1))}")
        bits[0] = e(f"or {e.I} {bits[0]}, {low}")
        return nodes, bits
    if lay.folded:
        return _folded_counts(e, lay, tree, rec, nodes, bits)
    depth = e.gather("i64", e.gep("%vleaf", "i64", e(f"add {e.I} {rec}, {_splat('i64', str(K))}")), every)
    nodes = e(f"add {e.I} {nodes}, {depth}")
    # Only the words this tree's features lie in can change.
    for word in lay.tree_words(tree):
        at = e(f"add {e.I} {rec}, {_splat('i64', str(K + 1 + word))}")
        bits[word] = e(f"or {e.I} {bits[word]}, {e.gather('i64', e.gep('%vleaf', 'i64', at), every)}")
    return nodes, bits


def _folded_counts(
    e: _Emitter, lay: Layout, tree: int, rec: str, nodes: str, bits: list[str]
) -> tuple[str, list[str]]:
    """``_counts`` from folded records (``Layout.folds``): one gather per fold the tree uses,
    each word of the tested-feature set rotated back out of its fold and masked."""
    K, every = lay.K, _splat("i1", "true")
    bits = list(bits)
    plan = lay.folds(tree)
    folds = []
    for i in range(lay.tree_folds(tree)):
        at = e(f"add {e.I} {rec}, {_splat('i64', str(K + i))}")
        folds.append(e.gather("i64", e.gep("%vleaf", "i64", at), every))
    splits = e(f"lshr {e.I} {folds[0]}, {_splat('i64', '56')}")
    nodes = e(f"add {e.I} {nodes}, {splits}")
    shared = [i for _, i, _, _ in plan]
    for word, i, r, mask in plan:
        got = folds[i]
        if r:
            got = e(
                f"call {e.I} @llvm.fshr.v{e.L}i64({e.I} {got}, {e.I} {got}, {e.I} {_splat('i64', str(r))})"
            )
        if i == 0 or shared.count(i) > 1:
            # Other words' bits (or fold 0's splits) share the fold: keep this word's own.
            got = e(f"and {e.I} {got}, {_splat('i64', str(_signed(mask, 64)))}")
        bits[word] = e(f"or {e.I} {bits[word]}, {got}")
    return nodes, bits


def _broadcast(e: _Emitter, scalar: str) -> str:
    one = e(f"insertelement {e.V} poison, double {scalar}, i64 0")
    return e(f"shufflevector {e.V} {one}, {e.V} poison, <{e.L} x i32> zeroinitializer")


def _store(
    e: _Emitter, ptrs: dict, acc: list[str], nodes: str, bits: list[str], pos: str, mask: str, K: int
) -> None:
    """Write the lanes ``mask`` of the row state back to ``S``."""
    for c in range(K):
        e.scatter("double", acc[c], ptrs[f"raw{c}"], mask)
    e.scatter("i64", nodes, ptrs["nodes"], mask)
    for w, word in enumerate(bits):
        e.scatter("i64", word, ptrs[word_field("bits", w)], mask)
    e.scatter("i64", pos, ptrs["pos"], mask)


def _vmargin(e: _Emitter, acc: list[str]) -> str:
    """The leading score's margin over the runner-up, per lane (``ir_scalar._margin``)."""
    ninf = "0xFFF0000000000000"
    top = second = _splat("double", ninf)
    for v in acc:
        gt = e(f"fcmp ogt {e.V} {v}, {top}")
        gs = e(f"fcmp ogt {e.V} {v}, {second}")
        s2 = e(f"select {e.B} {gs}, {e.V} {v}, {e.V} {second}")
        second = e(f"select {e.B} {gt}, {e.V} {top}, {e.V} {s2}")
        top = e(f"select {e.B} {gt}, {e.V} {v}, {e.V} {top}")
    return e(f"fsub {e.V} {top}, {second}")


def split_tests(
    e: _Emitter,
    lay: Layout,
    p0: int,
    k: int,
    xo: str,
    tables: str,
    globals_: list[str],
    key: str,
    ranks: int,
    cat_shift: bool = False,
    ranked: tuple[dict[int, np.ndarray], Callable[[int], str]] | None = None,
) -> Callable[[int], str]:
    """``right_of(node)``: per lane, whether the row at offset ``xo`` (its first value's index
    in ``%X``) goes right at ``node`` of the block of positions ``[p0, p0 + k)``. Each feature's
    column is gathered once, at its first test; with ``ranks`` (32 or 16) a rankable feature's
    rank among the block's thresholds is formed once too (``ir_ranks``, its table named
    ``{tables}_{feature}``). With ``cat_shift`` (the target's ``cat_shift``), categorical splits
    of rank blocks test a code of the category formed once per feature (``ir_catshift``)
    where the lane count allows. ``ranked`` (thresholds, ``load(feature)``: ``ir_preranks``)
    replaces the block's ranks. Shared by the vector blocks and the scores-only ones (``ir_vraw``)."""
    f = lay.forest
    every = _splat("i1", "true")
    columns: dict[int, str] = {}

    def column(feat: int) -> str:
        if feat not in columns:
            cell = e.gep("%X", "double", e(f"add {e.I} {xo}, {_splat('i64', str(feat))}"))
            columns[feat] = e.gather("double", cell, every)
        return columns[feat]

    thresholds, load = ranked or (block_thresholds(lay, p0, k) if ranks else {}, None)
    rank_of: dict[int, str] = {}
    coded: dict[int, str] = {}
    cat_shift = cat_shift and ir_catshift.supported(e.L, ranks)

    def right_of(node: int) -> str:
        feat = int(f.feature[node])
        if cat_shift and ir_catshift.fits(f, node):
            if feat not in coded:
                coded[feat] = ir_catshift.code_ir(e, column(feat))
            return ir_catshift.goes_right_ir(e, f, node, coded[feat], ranks=ranks)
        if feat not in thresholds:
            return _goes_right(e, f, node, column(feat), globals_, key)
        if feat not in rank_of:
            table = f"{tables}_{feat}"
            rank_of[feat] = (
                load(feat) if load else rank_ir(e, column(feat), thresholds[feat], table, globals_, ranks)
            )
        return goes_right_rank(e, f, node, rank_of[feat], thresholds[feat], ranks)

    return right_of


def _leaf_mask(e: _Emitter, f: Forest, tree: int, right_of, bits: int = 64) -> list[str]:
    """Per lane, the mask of leaves of ``tree`` left after every split sending the row right
    (``right_of(node)``) cleared its left subtree's leaves, as words of ``bits`` (64, 32 or 16)
    leaves (leaf ``l`` is bit ``l % bits`` of word ``l // bits``); its lowest set bit is the
    exit leaf."""
    ty = e.I if bits == 64 else f"<{e.L} x i{bits}>"
    ranges: list[tuple[int, int, int]] = []
    n_leaves = _ranges(f, int(f.roots[tree]), 0, ranges)
    cleared: list[list[str]] = [[] for _ in range(-(-n_leaves // bits))]
    for node, lo, mid in ranges:
        right = right_of(node)
        # The left subtree's leaves [lo, mid) cleared, word by word (only the words they lie in).
        for w in range(lo // bits, (mid - 1) // bits + 1):
            a, b = max(lo, bits * w) - bits * w, min(mid, bits * w + bits) - bits * w
            clear = ((1 << b) - 1) ^ ((1 << a) - 1)
            # The bits cleared (rather than the bits kept): a lane mask ANDed with a constant,
            # one operation on every ISA, where selecting between two constants is a blend
            # without mask registers (AVX2, NEON).
            constant = _splat(f"i{bits}", str(_signed(clear, bits)))
            cleared[w].append(e(f"select {e.B} {right}, {ty} {constant}, {ty} zeroinitializer"))
    words = []
    for word in cleared:
        # A balanced OR: log2(splits) steps of latency rather than one per split.
        while len(word) > 1:
            pairs = [e(f"or {ty} {a}, {b}") for a, b in zip(word[::2], word[1::2])]
            word = pairs + word[len(pairs) * 2 :]
        # The leaves left: those no split cleared.
        ones = _splat(f"i{bits}", "-1")
        words.append(e(f"xor {ty} {word[0]}, {ones}") if word else ones)
    return words


def _exit_leaf(
    e: _Emitter, words: list[str], n_leaves: int | None, by_exponent: bool = False, bits: int = 64
) -> str:
    """Per lane, the lowest set bit of the leaf mask ``words``: the exit leaf (QuickScorer's
    Theorem 1). The last word always has a bit set (the rightmost leaf is in no left subtree);
    an earlier word that is not empty holds the exit leaf. Given the tree's ``n_leaves``, a last
    word of at most 52 leaves is counted by ``_low_bit_by_exponent``. Words of 32 or 16 bits
    (``bits``) are ``ir_narrow.exit_leaf_narrow``'s."""
    if bits < 64:
        return exit_leaf_narrow(e, words, by_exponent, bits)
    last = len(words) - 1
    if n_leaves is not None and n_leaves - 64 * last <= 52:
        leaf = _low_bit_by_exponent(e, words[last])
    else:
        leaf = e(f"call {e.I} @llvm.cttz.v{e.L}i64({e.I} {words[last]}, i1 true)")
    if last:
        leaf = e(f"add {e.I} {leaf}, {_splat('i64', str(64 * last))}")
    for w in range(last - 1, -1, -1):
        low = e(f"call {e.I} @llvm.cttz.v{e.L}i64({e.I} {words[w]}, i1 false)")
        if w:
            low = e(f"add {e.I} {low}, {_splat('i64', str(64 * w))}")
        some = e(f"icmp ne {e.I} {words[w]}, zeroinitializer")
        leaf = e(f"select {e.B} {some}, {e.I} {low}, {e.I} {leaf}")
    return leaf


def _low_bit_by_exponent(e: _Emitter, word: str) -> str:
    """Per lane, the index of the lowest set bit of ``word``, known to be below bit 52: the bit
    alone (``word & -word``, a power of two below 2**52) ORed into the mantissa of 2**52 is
    the double 2**52 + 2**k exactly, so subtracting 2**52 leaves 2**k, whose exponent field is
    1023 + k. Six operations on any ISA, where a vector count-trailing-zeros without AVX-512's
    or SVE's instructions is a byte-wise population count (about ten with AVX2; llvm-mca on 64 of
    Adult's trees: 5% fewer cycles for AVX2 blocks, 3% more for AVX-512 ones)."""
    alone = e(f"and {e.I} {word}, {e(f'sub {e.I} zeroinitializer, {word}')}")
    two52 = _splat("i64", str(0x4330000000000000))
    biased = e(f"bitcast {e.I} {e(f'or {e.I} {alone}, {two52}')} to {e.V}")
    power = e(f"fsub {e.V} {biased}, {_splat('double', '0x4330000000000000')}")
    exponent = e(f"lshr {e.I} {e(f'bitcast {e.V} {power} to {e.I}')}, {_splat('i64', '52')}")
    return e(f"sub {e.I} {exponent}, {_splat('i64', '1023')}")


def _ranges(f: Forest, node: int, lo: int, out: list[tuple[int, int, int]]) -> int:
    """Append ``(split, first leaf, first leaf of its right subtree)`` for the splits under
    ``node`` (leaves numbered from ``lo``); return the number after its last leaf."""
    if f.feature[node] < 0:
        return lo + 1
    mid = _ranges(f, int(f.children_left[node]), lo, out)
    out.append((node, lo, mid))
    return _ranges(f, int(f.children_right[node]), mid, out)


def _goes_right(e: _Emitter, f: Forest, node: int, v: str, globals_: list[str], key: str) -> str:
    """Per lane, whether the split sends the row right (``ir_scalar._split_ir``'s rule)."""
    default_right = not bool(f.missing_left[node])
    true, false = _splat("i1", "true"), _splat("i1", "false")
    if f.cat_start[node] >= 0:
        words = [
            int(w) & 0xFFFFFFFF
            for w in f.cat_bitsets[f.cat_start[node] : f.cat_start[node] + f.cat_size[node]]
        ]
        nan = e(f"fcmp uno {e.V} {v}, zeroinitializer")
        above = e(f"fcmp ogt {e.V} {v}, {_splat('double', double(-1.0))}")
        below = e(f"fcmp olt {e.V} {v}, {_splat('double', double(32.0 * len(words)))}")
        inside = e(f"and {e.B} {above}, {below}")
        # fptosi truncates toward zero, as the interpreter's int() does; lanes outside the
        # set's range convert 0.0 (their outcome is "right" whatever the bit says).
        safe = e(f"select {e.B} {inside}, {e.V} {v}, {e.V} zeroinitializer")
        # Through 32-bit integers (the codes are below 2**31): AVX2 and NEON convert doubles to
        # them in one instruction, where a 64-bit conversion goes lane by lane.
        code = e(f"zext <{e.L} x i32> {e(f'fptosi {e.V} {safe} to <{e.L} x i32>')} to {e.I}")
        if len(words) <= 2:
            word = words[0] | ((words[1] if len(words) > 1 else 0) << 32)
            shifted = e(f"lshr {e.I} {_splat('i64', str(_signed(word, 64)))}, {code}")
        else:
            name = f"@vcat_{key}_{node}"
            globals_.append(
                f"{name} = private unnamed_addr constant [{len(words)} x i32] ["
                + ", ".join(f"i32 {_signed(w, 32)}" for w in words)
                + "]"
            )
            at = e(f"lshr {e.I} {code}, {_splat('i64', '5')}")
            word32 = e.gather("i32", e(f"getelementptr i32, ptr {name}, {e.I} {at}"), true)
            wide = e(f"zext <{e.L} x i32> {word32} to {e.I}")
            low = e(f"and {e.I} {code}, {_splat('i64', '31')}")
            shifted = e(f"lshr {e.I} {wide}, {low}")
        # The set's bit tested in 64-bit lanes (a truncation to i1 would repack the lanes on
        # targets without mask registers).
        low_bit = e(f"and {e.I} {shifted}, {_splat('i64', '1')}")
        member = e(f"icmp ne {e.I} {low_bit}, zeroinitializer")
        left = e(f"and {e.B} {inside}, {member}")
        right = e(f"xor {e.B} {left}, {true}")
        return e(f"select {e.B} {nan}, {e.B} {true if default_right else false}, {e.B} {right}")
    thr = double(f.threshold[node])
    mt = int(f.missing_type[node])
    if np.isnan(f.threshold[node]) and mt != MISSING_ZERO:
        # No value is <= NaN: NaN takes the default child (or, read as 0.0, goes right).
        if mt == MISSING_AS_ZERO or default_right:
            return true
        return e(f"xor {e.B} {e(f'fcmp uno {e.V} {v}, zeroinitializer')}, {true}")
    if mt == MISSING_ZERO:
        size = e(f"call {e.V} @llvm.fabs.v{e.L}f64({e.V} {v})")
        zero = e(f"fcmp ule {e.V} {size}, {_splat('double', double(ZERO))}")
        # Unordered: a NaN threshold sends every value right, as ``x <= NaN`` fails (NaN
        # itself is missing here, taken by the select).
        right = e(f"fcmp ugt {e.V} {v}, {_splat('double', thr)}")
        return e(f"select {e.B} {zero}, {e.B} {true if default_right else false}, {e.B} {right}")
    # NaN goes to the default child (MISSING_NAN) or is read as 0.0 (MISSING_AS_ZERO).
    nan_left = (0.0 <= f.threshold[node]) if mt == MISSING_AS_ZERO else bool(f.missing_left[node])
    return e(f"fcmp {'ogt' if nan_left else 'ugt'} {e.V} {v}, {_splat('double', thr)}")
