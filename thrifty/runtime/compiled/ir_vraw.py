"""LLVM IR of ``raw``'s blocks for plans on vector blocks: scores only, rows in vector lanes.

``ir_raw`` makes ``raw`` (a plan without exits from its inputs to its raw scores, for calls
that read nothing else) from branchy trees; this module makes its blocks for plans on vector
blocks (``ir_vector``). Each tree is decided as ``ir_vector.vblock_ir`` decides it (the same
leaf masks, rank searches, oblivious levels and split rules, so the same exit leaf in every
lane) and its weighted leaf value added to the lanes' scores in the plan's order, so the sums
are the serving path's bit for bit. What a vector block does besides is left out: no work list
(the rows are ``[lo, hi)`` in order, so a vector of rows is one contiguous load and store of
the scores' buffer), no state gathered and scattered, no splits counted and no tested features
ORed from the leaf records (one to three gathers per tree and vector of rows).

A ``raw`` block holds the vector block's trees: on Adult's first 128 trees, blocks of 8 and 16
trees took 1.01 to 1.03 times as long as blocks of 64 with AVX2, 0.99 with AVX-512.
"""

from __future__ import annotations

from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled import ir_catshift, ir_vloop
from thrifty.runtime.compiled.ir_oblivious import oblivious_leaf
from thrifty.runtime.compiled.ir_preranks import forest_ranks, prerank_ir, rank_loader
from thrifty.runtime.compiled.ir_ranks import MAX_RANKS16, block_thresholds
from thrifty.runtime.compiled.ir_raw import driver_ir, row_vectors
from thrifty.runtime.compiled.ir_ternlog import DECLARE as TERNLOG_DECLARE
from thrifty.runtime.compiled.ir_ternlog import leaf_mask_ternlog
from thrifty.runtime.compiled.ir_vector import (
    _Emitter,
    _exit_leaf,
    _leaf_mask,
    _splat,
    intrinsics,
    split_tests,
)
from thrifty.runtime.compiled.layout import TABLES, Layout
from thrifty.runtime.compiled.vblocks import RAW_TREES_ENV, raw_blocks


def vraw_module_irs(
    lay: Layout,
    key: str,
    lanes: int,
    vscale: int = 0,
    by_exponent: bool = False,
    ranks: int = 0,
    ternlog: bool = False,
    cat_shift: bool = False,
) -> list[str]:
    """The modules of ``raw`` for a plan on vector blocks: one ``rawblk`` per block of
    positions (``vblocks.raw_blocks``), then ``ir_raw``'s driver ``raw_{key}(ctx)``. ``lanes``
    are the target's doubles per vector, times ``64 // ranks`` with ``ranks`` (32 or 16: the
    bits of the ranks compared, as ``ir_vector.vector_module_irs``; ``cat_shift`` as there).
    With ``ternlog`` (512-bit targets: ``choice.ternlog_masks``), leaf masks are
    ``ir_ternlog``'s; on 16-bit ranks, blocks that ``ir_vloop`` supports are its loop blocks
    when ``ir_vloop.use_loops`` says so (the same scores, from code of a few hundred
    instructions: docs/runtime.md, "Where a scores-only block's time goes"). Otherwise a wide
    forest's ranks are formed once per pass of rows for every block (``ir_preranks``:
    ``prerank_{key}``, called by the driver)."""
    spans = raw_blocks(lay)
    rows = lanes * (64 // ranks) if ranks else lanes
    # Trees as records in loops (``ir_vloop``) for AVX-512's 16-bit rank blocks, in its longer
    # blocks where each of them can be one.
    loops = ternlog and ranks == ir_vloop.BITS and rows == ir_vloop.LANES and ir_vloop.use_loops(lay)
    if loops and all(ir_vloop.supported(lay, p, k) for p, k in ir_vloop.loop_blocks(lay)):
        spans = ir_vloop.loop_blocks(lay)
    if ranks == 16 and any(
        len(t) > MAX_RANKS16 for p, k in spans for t in block_thresholds(lay, p, k).values()
    ):
        raise InvalidParameterError(
            f"{RAW_TREES_ENV} makes blocks with too many thresholds of a feature for 16-bit ranks: "
            "set it lower or unset it"
        )
    # Loop blocks store their own ranks; the driver passes the pass's ranks to every block.
    pre = None if loops else forest_ranks(lay, ranks, rows)
    modules = [
        ir_vloop.vloop_block_ir(lay, key, m, p, k)
        if loops and ir_vloop.supported(lay, p, k)
        else vraw_block_ir(lay, key, m, p, k, rows, vscale, by_exponent, ranks, ternlog, cat_shift, pre)
        for m, (p, k) in enumerate(spans)
    ]
    if pre is None:
        return [*modules, driver_ir(lay, key, len(spans))]
    return [*modules, prerank_ir(lay, key, pre, rows) + driver_ir(lay, key, len(spans), len(pre))]


def raw_loops(lay: Layout, lanes: int, ranks: int, ternlog: bool) -> tuple[bool, bool]:
    """Whether ``vraw_module_irs`` makes loop blocks (``ir_vloop``) and whether it forms ranks
    once per pass (``ir_preranks``), for the cache key: the same rules as there."""
    rows = lanes * (64 // ranks) if ranks else lanes
    loops = ternlog and ranks == ir_vloop.BITS and rows == ir_vloop.LANES and ir_vloop.use_loops(lay)
    return loops, not loops and forest_ranks(lay, ranks, rows) is not None


def vraw_block_ir(
    lay: Layout,
    key: str,
    m: int,
    p0: int,
    k: int,
    lanes: int,
    vscale: int = 0,
    by_exponent: bool = False,
    ranks: int = 0,
    ternlog: bool = False,
    cat_shift: bool = False,
    preranks: dict | None = None,
) -> str:
    """``rawblk_{key}_{m}(X, out, T, lo, hi, n)`` (``ir_raw``'s contract) on vectors of
    ``lanes`` rows: positions ``[p0, p0 + k)`` add their trees' values to the scores in ``out``
    (output ``c`` of row ``i`` at ``c * n + i``) of the rows ``[lo, hi)``. ``lanes`` is the
    vector's rows (``64 // ranks`` times the target's doubles with ``ranks``, 32 or 16: ranks of
    that many bits among the block's thresholds, ``ir_ranks``, and leaf masks of words of as
    many leaves); ``vscale``, ``by_exponent`` and ``cat_shift`` as
    ``ir_vector.vector_module_irs``. With ``preranks`` (``ir_preranks.forest_ranks``) the
    function takes a seventh argument ``R``, the pass's ranks of those features, and reads them
    there."""
    K, R = lay.K, lay.vrecord
    f = lay.forest
    e = _Emitter(lanes)
    Q = e.I
    every = _splat("i1", "true")
    globals_: list[str] = []
    acc, at, xo = open_block(e, lay, key, m, vscale, preranks is not None)
    ranked = None if preranks is None else (preranks, rank_loader(e, preranks, ranks))
    right_of = split_tests(e, lay, p0, k, xo, f"@rthr_{key}_{m}", globals_, key, ranks, cat_shift, ranked)

    word_bits = ranks or 64
    for j in range(k):
        tree = int(lay.order[p0 + j])
        levels = lay.levels(tree)
        start = int(lay.leaf_ptr[tree])
        if levels is None:
            n_leaves = int(lay.leaf_ptr[tree + 1]) - start if by_exponent else None
            mask = (leaf_mask_ternlog if ternlog else _leaf_mask)(e, f, tree, right_of, word_bits)
            leaf = _exit_leaf(e, mask, n_leaves, by_exponent, word_bits)
            scaled = e(f"mul {Q} {leaf}, {_splat('i64', str(R))}")
            table, rec = "%vleaf", e(f"add {Q} {scaled}, {_splat('i64', str(R * start))}")
        else:
            rec = oblivious_leaf(e, [right_of(node) for node in levels], e.L, K)
            table = e(f"getelementptr double, ptr %oleaf, i64 {K * start}")
        cls = int(f.tree_class[tree])
        for o in [cls] if cls >= 0 else range(K):
            col = 0 if cls >= 0 else o
            where = rec if col == 0 else e(f"add {Q} {rec}, {_splat('i64', str(col))}")
            w = e.gather("double", e.gep(table, "double", where), every)
            acc[o] = e(f"fadd {e.V} {acc[o]}, {w}")
    return close_block(e, acc, at, globals_, ranks, ternlog, cat_shift)


def open_block(
    e: _Emitter, lay: Layout, key: str, m: int, vscale: int = 0, preranks: bool = False
) -> tuple[list[str], list[str], str]:
    """The start of ``rawblk_{key}_{m}`` into ``e``, up to the loop body over vectors of
    ``e.L`` rows: the scores of the body's rows (one vector per output, ``acc``), where they
    are stored (``at``), and the rows' offsets in ``%X`` (``xo``, for ``split_tests``). Lanes
    past ``hi`` read row ``i`` (valid memory) and store nothing. With ``preranks`` the block
    takes a seventh argument ``%R`` (``ir_preranks``). Shared by the block kinds of
    ``vraw_block_ir`` and ``benchmarks/deep_parts.py``'s throw-away variants."""
    L, Q, B = e.L, e.I, e.B
    e.lines += [
        f"define void @rawblk_{key}_{m}(ptr noalias %X, ptr noalias %out, ptr noalias %T, "
        "i64 %lo, i64 %hi, i64 %n"
        + (", ptr noalias %R" if preranks else "")
        + ")"
        + (f" vscale_range({vscale},16)" if vscale else "")
        + " {",
        "entry:",
    ]
    for name in ("vleaf", "oleaf"):
        e.lines += [
            f"  %{name}a = getelementptr ptr, ptr %T, i64 {TABLES.index(name)}",
            f"  %{name} = load ptr, ptr %{name}a",
        ]
    e.lines += row_vectors(e)
    acc, at = [], []
    for c in range(lay.K):
        base = e(f"mul i64 %n, {c}")
        ptr = e(f"getelementptr double, ptr %out, i64 {e(f'add i64 {base}, %i')}")
        at.append(ptr)
        acc.append(e(f"call {e.V} @llvm.masked.load.v{L}f64.p0(ptr {ptr}, i32 8, {B} %valid, {e.V} poison)"))
    return acc, at, e(f"mul {Q} %idx, {_splat('i64', str(lay.F))}")


def close_block(
    e: _Emitter,
    acc: list[str],
    at: list[str],
    globals_: list[str],
    ranks: int = 0,
    ternlog: bool = False,
    cat_shift: bool = False,
) -> str:
    """The end of the block ``open_block`` started: the scores ``acc`` stored at ``at``, the
    loop closed, and the module's text with its declarations and ``globals_``."""
    L, B = e.L, e.B
    for value, ptr in zip(acc, at, strict=True):
        store = f"{e.V} {value}, ptr {ptr}, i32 8, {B} %valid"
        e.lines.append(f"  call void @llvm.masked.store.v{L}f64.p0({store})")
    e.lines += [f"  %i1 = add i64 %i, {L}", "  br label %loop", "exit:", "  ret void", "}"]
    decl = (
        f"declare {e.V} @llvm.masked.load.v{L}f64.p0(ptr, i32 immarg, {B}, {e.V})\n"
        f"declare void @llvm.masked.store.v{L}f64.p0({e.V}, ptr, i32 immarg, {B})\n"
    )
    if ternlog:
        decl += TERNLOG_DECLARE
    if cat_shift and ir_catshift.supported(L, ranks):
        decl += ir_catshift.declarations(L, ranks=ranks)
    return intrinsics(L) + decl + "\n".join(globals_ + e.lines) + "\n"
