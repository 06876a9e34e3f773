"""LLVM IR of a forest plan's blocks evaluated eight rows at a time, without branches per split.

Each tree is evaluated the QuickScorer way (Lucchese et al., SIGIR 2015), on vectors of
``LANES`` rows: the leaves are numbered left to right, every split of the tree is tested on
all lanes at once (its feature, threshold, missing-value rule and category set inlined as
constants, exactly as ``ir_scalar._split_ir`` and the interpreter decide), and a split that sends
a row right clears the leaves of its left subtree from that row's leaf mask. The leftmost
leaf left in the mask is the row's exit leaf (QuickScorer's Theorem 1), found with one
count-trailing-zeros. A data-dependent branch per split costs a misprediction about every
other tree; the vector form has none, and one comparison and one mask update per split serve
eight rows.

The block has ``ir_scalar.scalar_block_ir``'s signature and contract (rows of a work list in, the
rows that did not exit compacted to its front, state in ``S``), so ``run``, ``serve`` and
the executors are unchanged. Leaf records (the weighted values, the splits on the path and
the features it tests as bits) are read from the table ``vleaf``, in the leaves' left-to-right
order per tree (``layout.inorder_leaves``); the tested-feature set is one vector per 64 features,
and after a tree only the words its features lie in are gathered and ORed. A tree of more than
64 leaves has a leaf mask of one vector per 64 leaves. Used when every tree has at most
``VECTOR_LEAVES`` leaves and the plan no bin exits (``vector_ok``); other plans use
``ir_scalar``'s scalar blocks.
"""

from __future__ import annotations

import numpy as np

from thrifty.forest import Forest
from thrifty.forest.kernels import MISSING_AS_ZERO, MISSING_ZERO, ZERO
from thrifty.runtime.compiled.ir_scalar import module_irs, scalar_block_ir
from thrifty.runtime.compiled.layout import TABLES, Layout, double, state_fields, word_field

# Rows per vector (one 512-bit register of doubles; narrower machines split it).
LANES = 8
# Trees of up to this many leaves take vector blocks (a leaf mask of one word per 64 leaves).
# Measured on LightGBM trees of 255 leaves (higgs_small, 100 trees): 20 ns per tree and row on
# vector blocks against 31 on scalar ones; at 1,023 leaves (60 trees) 125-130 against 59-60.
VECTOR_LEAVES = 256
# Positions per block without exits; with exits, blocks grow 1, 2, 4, ... up to this, so that
# rows which exit early (most do under QWYC) are dropped from the vectors soon.
VCHUNK = 64
_V = f"<{LANES} x double>"
_I = f"<{LANES} x i64>"
_B = f"<{LANES} x i1>"
_P = f"<{LANES} x ptr>"

INTRINSICS = f"""
declare {_V} @llvm.masked.gather.v{LANES}f64.v{LANES}p0({_P}, i32 immarg, {_B}, {_V})
declare {_I} @llvm.masked.gather.v{LANES}i64.v{LANES}p0({_P}, i32 immarg, {_B}, {_I})
declare <{LANES} x i32> @llvm.masked.gather.v{LANES}i32.v{LANES}p0({_P}, i32 immarg, {_B}, <{LANES} x i32>)
declare void @llvm.masked.scatter.v{LANES}f64.v{LANES}p0({_V}, {_P}, i32 immarg, {_B})
declare void @llvm.masked.scatter.v{LANES}i64.v{LANES}p0({_I}, {_P}, i32 immarg, {_B})
declare {_I} @llvm.masked.load.v{LANES}i64.p0(ptr, i32 immarg, {_B}, {_I})
declare void @llvm.masked.compressstore.v{LANES}i64({_I}, ptr, {_B})
declare {_I} @llvm.cttz.v{LANES}i64({_I}, i1 immarg)
declare {_V} @llvm.fabs.v{LANES}f64({_V})
declare i8 @llvm.ctpop.i8(i8)
"""


def vector_ok(lay: Layout) -> bool:
    """Whether the plan runs on vector blocks: every visited tree has at most ``VECTOR_LEAVES``
    leaves and no position has a bin exit (any number of features)."""
    leaves = np.diff(lay.leaf_ptr)[np.asarray(lay.order, dtype=np.int64)]
    return bool(np.all(leaves <= VECTOR_LEAVES)) and not lay.any_bins


def vblocks_of(exits: np.ndarray) -> list[tuple[int, int]]:
    """Blocks ``(start, length)``: ``VCHUNK`` positions, or with exits, growing from 1."""
    n = len(exits)
    size = 1 if np.any(exits != 0) else VCHUNK
    out, p = [], 0
    while p < n:
        k = min(size, n - p)
        out.append((p, k))
        p += k
        size = min(2 * size, VCHUNK)
    return out


def _signed(word: int, bits: int) -> int:
    """The unsigned ``bits``-bit ``word`` as LLVM's signed integer constant."""
    return word - (1 << bits) if word >= 1 << (bits - 1) else word


def _splat(ty: str, value: str) -> str:
    return f"splat ({ty} {value})"


class _Emitter:
    """IR lines of one vector block, with fresh names."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.k = 0

    def __call__(self, rhs: str) -> str:
        self.k += 1
        name = f"%v{self.k}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def gep(self, base: str, ty: str, index: str) -> str:
        return self(f"getelementptr {ty}, ptr {base}, {_I} {index}")

    def gather(self, ty: str, ptrs: str, mask: str) -> str:
        vt = f"<{LANES} x {ty}>"
        suffix = {"double": "f64", "i64": "i64", "i32": "i32"}[ty]
        return self(
            f"call {vt} @llvm.masked.gather.v{LANES}{suffix}.v{LANES}p0({_P} {ptrs}, i32 8, {_B} {mask}, "
            f"{vt} poison)"
        )

    def scatter(self, ty: str, value: str, ptrs: str, mask: str) -> None:
        suffix = {"double": "f64", "i64": "i64"}[ty]
        self.lines.append(
            f"  call void @llvm.masked.scatter.v{LANES}{suffix}.v{LANES}p0(<{LANES} x {ty}> {value}, "
            f"{_P} {ptrs}, i32 8, {_B} {mask})"
        )

    def any(self, mask: str) -> str:
        bits = self(f"bitcast {_B} {mask} to i8")
        return self(f"icmp ne i8 {bits}, 0")

    def label(self, name: str) -> None:
        self.lines.append(f"{name}:")


def vector_module_irs(lay: Layout, key: str, trees_per_module: int) -> list[str]:
    """``ir_scalar.module_irs`` with vector blocks (``vblocks_of``)."""

    def block(lay: Layout, p0: int, k: int, b: int, key: str) -> str:
        # Both kinds of each block: ``run`` serves a single row with the scalar one.
        return vblock_ir(lay, p0, k, b, key) + scalar_block_ir(lay, p0, k, b, key)

    return module_irs(lay, key, trees_per_module, vblocks_of(lay.exits), block, INTRINSICS)


def vblock_ir(lay: Layout, p0: int, k: int, b: int, key: str) -> str:
    """Block ``b`` (positions ``[p0, p0 + k)``) as ``ir_scalar.scalar_block_ir`` makes it, on vectors;
    tree ``t``'s leaf records in ``vleaf`` start at ``lay.leaf_ptr[t]``."""
    K, W = lay.K, lay.words
    R = K + 1 + W
    t = {name: i for i, name in enumerate(TABLES)}
    off = {name: (K + j) for j, name in enumerate(state_fields(W))}
    e = _Emitter()
    globals_: list[str] = []
    e.lines += [
        f"define i64 @vblock_{key}_{b}(ptr noalias %X, ptr noalias %S, ptr noalias %T, "
        "ptr noalias %touched, ptr noalias %rows, i64 %m, i64 %n) {",
        "entry:",
    ]
    for name in ("vleaf", "eps_pos", "eps_neg"):
        e.lines += [
            f"  %{name}a = getelementptr ptr, ptr %T, i64 {t[name]}",
            f"  %{name} = load ptr, ptr %{name}a",
        ]
    e.lines += [
        f"  %n1 = insertelement {_I} poison, i64 %n, i64 0",
        f"  %nv = shufflevector {_I} %n1, {_I} poison, <{LANES} x i32> zeroinitializer",
        "  br label %loop",
        "loop:",
        "  %a = phi i64 [0, %entry], [%a1, %next]",
        "  %kept = phi i64 [0, %entry], [%kept1, %next]",
        "  %go = icmp slt i64 %a, %m",
        "  br i1 %go, label %body, label %exit",
        "body:",
        "  %left = sub i64 %m, %a",
        f"  %l1 = insertelement {_I} poison, i64 %left, i64 0",
        f"  %lv = shufflevector {_I} %l1, {_I} poison, <{LANES} x i32> zeroinitializer",
        f"  %valid = icmp slt {_I} <{', '.join(f'i64 {i}' for i in range(LANES))}>, %lv",
        "  %rp = getelementptr i64, ptr %rows, i64 %a",
        "  %r0 = load i64, ptr %rp",
        f"  %r01 = insertelement {_I} poison, i64 %r0, i64 0",
        f"  %r0v = shufflevector {_I} %r01, {_I} poison, <{LANES} x i32> zeroinitializer",
        # Lanes past the end repeat the first row: every lane reads valid memory.
        f"  %idx = call {_I} @llvm.masked.load.v{LANES}i64.p0(ptr %rp, i32 8, {_B} %valid, {_I} %r0v)",
    ]
    every = _splat("i1", "true")
    # Per-row state pointers: field f of row i is S[f * n + i].
    ptrs: dict[str, str] = {}
    words = [word_field("bits", w) for w in range(W)]
    for name in ("nodes", *words, "pos", "dir"):
        at = e(f"mul {_I} %nv, {_splat('i64', str(off[name]))}")
        ptrs[name] = e.gep("%S", "i64", e(f"add {_I} {at}, %idx"))
    acc: list[str] = []
    for c in range(K):
        at = e(f"mul {_I} %nv, {_splat('i64', str(c))}")
        ptrs[f"raw{c}"] = e.gep("%S", "double", e(f"add {_I} {at}, %idx"))
        acc.append(e.gather("double", ptrs[f"raw{c}"], every))
    nodes = e.gather("i64", ptrs["nodes"], every)
    bits = [e.gather("i64", ptrs[name], every) for name in words]
    xo = e(f"mul {_I} %idx, {_splat('i64', str(lay.F))}")
    f = lay.forest
    columns: dict[int, str] = {}

    def column(feat: int) -> str:
        if feat not in columns:
            columns[feat] = e.gather(
                "double", e.gep("%X", "double", e(f"add {_I} {xo}, {_splat('i64', str(feat))}")), every
            )
        return columns[feat]

    live = "%valid"
    exits_to_next: list[str] = []
    for j in range(k):
        p = p0 + j
        tree = int(lay.order[p])
        leaf = _exit_leaf(e, _leaf_mask(e, f, tree, column, globals_, key))
        scaled = e(f"mul {_I} {leaf}, {_splat('i64', str(R))}")
        rec = e(f"add {_I} {scaled}, {_splat('i64', str(R * int(lay.leaf_ptr[tree])))}")
        cls = int(f.tree_class[tree])
        acc = list(acc)
        for o in [cls] if cls >= 0 else range(K):
            col = 0 if cls >= 0 else o
            at = rec if col == 0 else e(f"add {_I} {rec}, {_splat('i64', str(col))}")
            w = e.gather("double", e.gep("%vleaf", "double", at), every)
            v = e(f"fadd {_V} {acc[o]}, {w}")
            if lay.acc32:
                # XGBoost sums in float32 (the table holds float32(weight * value)).
                v = e(f"fpext <{LANES} x float> {e(f'fptrunc {_V} {v} to <{LANES} x float>')} to {_V}")
            acc[o] = v
        depth = e.gather("i64", e.gep("%vleaf", "i64", e(f"add {_I} {rec}, {_splat('i64', str(K))}")), every)
        nodes = e(f"add {_I} {nodes}, {depth}")
        bits = list(bits)
        # Only the words this tree's features lie in can change.
        for word in lay.tree_words(tree):
            at = e(f"add {_I} {rec}, {_splat('i64', str(K + 1 + word))}")
            bits[word] = e(f"or {_I} {bits[word]}, {e.gather('i64', e.gep('%vleaf', 'i64', at), every)}")
        if not int(lay.exits[p]):
            continue
        g = acc[0] if K == 1 else _vmargin(e, acc)
        ep = e(f"load double, ptr {e(f'getelementptr double, ptr %eps_pos, i64 {p}')}")
        en = e(f"load double, ptr {e(f'getelementptr double, ptr %eps_neg, i64 {p}')}")
        gp = e(f"fcmp ogt {_V} {g}, {_broadcast(e, ep)}")
        gn = e(f"fcmp olt {_V} {g}, {_broadcast(e, en)}")
        out = e(f"and {_B} {e(f'or {_B} {gp}, {gn}')}, {live}")
        live = e(f"xor {_B} {live}, {out}")
        has, stay = e.any(out), f"x{p}_stay"
        e.lines.append(f"  br i1 {has}, label %x{p}_store, label %{stay}")
        e.label(f"x{p}_store")
        direction = e(f"select {_B} {gp}, {_I} {_splat('i64', '1')}, {_I} {_splat('i64', '-1')}")
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
    e.lines.append(f"  call void @llvm.masked.compressstore.v{LANES}i64({_I} %idx, ptr %keptp, {_B} {live})")
    live_bits = e(f"bitcast {_B} {live} to i8")
    count = e(f"zext i8 {e(f'call i8 @llvm.ctpop.i8(i8 {live_bits})')} to i64")
    e.lines += [
        f"  %kept_in = add i64 %kept, {count}",
        "  br label %rowend",
        "rowend:",
        "  br label %next",
        "next:",
        "  %kept1 = phi i64 [%kept_in, %rowend]" + "".join(f", [%kept, {x}]" for x in exits_to_next),
        f"  %a1 = add i64 %a, {LANES}",
        "  br label %loop",
        "exit:",
        "  ret i64 %kept",
        "}",
    ]
    return "\n".join(globals_ + e.lines) + "\n"


def _broadcast(e: _Emitter, scalar: str) -> str:
    one = e(f"insertelement {_V} poison, double {scalar}, i64 0")
    return e(f"shufflevector {_V} {one}, {_V} poison, <{LANES} x i32> zeroinitializer")


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
        gt = e(f"fcmp ogt {_V} {v}, {top}")
        gs = e(f"fcmp ogt {_V} {v}, {second}")
        s2 = e(f"select {_B} {gs}, {_V} {v}, {_V} {second}")
        second = e(f"select {_B} {gt}, {_V} {top}, {_V} {s2}")
        top = e(f"select {_B} {gt}, {_V} {v}, {_V} {top}")
    return e(f"fsub {_V} {top}, {second}")


def _leaf_mask(e: _Emitter, f: Forest, tree: int, column, globals_: list[str], key: str) -> list[str]:
    """Per lane, the mask of leaves of ``tree`` left after every split sending the row right
    cleared its left subtree's leaves, as words of 64 leaves (leaf ``l`` is bit ``l % 64`` of
    word ``l // 64``); its lowest set bit is the exit leaf."""
    ranges: list[tuple[int, int, int]] = []
    n_leaves = _ranges(f, int(f.roots[tree]), 0, ranges)
    keeps: list[list[str]] = [[] for _ in range(-(-n_leaves // 64))]
    for node, lo, mid in ranges:
        right = _goes_right(e, f, node, column(int(f.feature[node])), globals_, key)
        # The left subtree's leaves [lo, mid) cleared, word by word (only the words they lie in).
        for w in range(lo // 64, (mid - 1) // 64 + 1):
            a, b = max(lo, 64 * w) - 64 * w, min(mid, 64 * w + 64) - 64 * w
            clear = ((1 << b) - 1) ^ ((1 << a) - 1)
            keep = _signed((~clear) & ((1 << 64) - 1), 64)
            keeps[w].append(
                e(f"select {_B} {right}, {_I} {_splat('i64', str(keep))}, {_I} {_splat('i64', '-1')}")
            )
    words = []
    for word in keeps:
        # A balanced AND: log2(splits) steps of latency rather than one per split.
        while len(word) > 1:
            pairs = [e(f"and {_I} {a}, {b}") for a, b in zip(word[::2], word[1::2])]
            word = pairs + word[len(pairs) * 2 :]
        words.append(word[0] if word else _splat("i64", "-1"))
    return words


def _exit_leaf(e: _Emitter, words: list[str]) -> str:
    """Per lane, the lowest set bit of the leaf mask ``words``: the exit leaf (QuickScorer's
    Theorem 1). The last word always has a bit set (the rightmost leaf is in no left subtree);
    an earlier word that is not empty holds the exit leaf."""
    last = len(words) - 1
    leaf = e(f"call {_I} @llvm.cttz.v{LANES}i64({_I} {words[last]}, i1 true)")
    if last:
        leaf = e(f"add {_I} {leaf}, {_splat('i64', str(64 * last))}")
    for w in range(last - 1, -1, -1):
        low = e(f"call {_I} @llvm.cttz.v{LANES}i64({_I} {words[w]}, i1 false)")
        if w:
            low = e(f"add {_I} {low}, {_splat('i64', str(64 * w))}")
        some = e(f"icmp ne {_I} {words[w]}, zeroinitializer")
        leaf = e(f"select {_B} {some}, {_I} {low}, {_I} {leaf}")
    return leaf


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
        nan = e(f"fcmp uno {_V} {v}, zeroinitializer")
        above = e(f"fcmp ogt {_V} {v}, {_splat('double', double(-1.0))}")
        below = e(f"fcmp olt {_V} {v}, {_splat('double', double(32.0 * len(words)))}")
        inside = e(f"and {_B} {above}, {below}")
        # fptosi truncates toward zero, as the interpreter's int() does; lanes outside the
        # set's range convert 0.0 (their outcome is "right" whatever the bit says).
        safe = e(f"select {_B} {inside}, {_V} {v}, {_V} zeroinitializer")
        code = e(f"fptosi {_V} {safe} to {_I}")
        if len(words) <= 2:
            word = words[0] | ((words[1] if len(words) > 1 else 0) << 32)
            shifted = e(f"lshr {_I} {_splat('i64', str(_signed(word, 64)))}, {code}")
        else:
            name = f"@vcat_{key}_{node}"
            globals_.append(
                f"{name} = private unnamed_addr constant [{len(words)} x i32] ["
                + ", ".join(f"i32 {_signed(w, 32)}" for w in words)
                + "]"
            )
            at = e(f"lshr {_I} {code}, {_splat('i64', '5')}")
            word32 = e.gather("i32", e(f"getelementptr i32, ptr {name}, {_I} {at}"), true)
            wide = e(f"zext <{LANES} x i32> {word32} to {_I}")
            low = e(f"and {_I} {code}, {_splat('i64', '31')}")
            shifted = e(f"lshr {_I} {wide}, {low}")
        member = e(f"trunc {_I} {shifted} to {_B}")
        left = e(f"and {_B} {inside}, {member}")
        right = e(f"xor {_B} {left}, {true}")
        return e(f"select {_B} {nan}, {_B} {true if default_right else false}, {_B} {right}")
    thr = double(f.threshold[node])
    mt = int(f.missing_type[node])
    if np.isnan(f.threshold[node]) and mt != MISSING_ZERO:
        # No value is <= NaN: NaN takes the default child (or, read as 0.0, goes right).
        if mt == MISSING_AS_ZERO or default_right:
            return true
        return e(f"xor {_B} {e(f'fcmp uno {_V} {v}, zeroinitializer')}, {true}")
    if mt == MISSING_ZERO:
        size = e(f"call {_V} @llvm.fabs.v{LANES}f64({_V} {v})")
        zero = e(f"fcmp ule {_V} {size}, {_splat('double', double(ZERO))}")
        # Unordered: a NaN threshold sends every number right, as ``v <= NaN`` fails.
        right = e(f"fcmp ugt {_V} {v}, {_splat('double', thr)}")
        return e(f"select {_B} {zero}, {_B} {true if default_right else false}, {_B} {right}")
    # NaN goes to the default child (MISSING_NAN) or is read as 0.0 (MISSING_AS_ZERO).
    nan_left = (0.0 <= f.threshold[node]) if mt == MISSING_AS_ZERO else bool(f.missing_left[node])
    return e(f"fcmp {'ogt' if nan_left else 'ugt'} {_V} {v}, {_splat('double', thr)}")
