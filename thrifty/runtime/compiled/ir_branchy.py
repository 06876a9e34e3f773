"""LLVM IR of one tree as branches for the branchy blocks: the scalar blocks of a forest whose
skewed trees a row leaves after a few splits (``choice``).

The tree is ``ir_scalar._tree_ir``'s walk (one branch per split visited, each split decided by
``ir_scalar._split_ir``), with its leaf's record split in two. What depends only on the tree's
shape, the splits on the leaf's path and the features that path tests (bits), are constants
merged at the tree's exit (a ``phi`` per word): no load and no index arithmetic for them, so a
short path costs little more than its splits. The leaf's weighted value stays a load from the
table ``leaf`` (at the ``phi``'s offset), so plans that differ only in leaf values still share
code, and the value added is the table's, the interpreter's, bit for bit.

Measured on lleaves' NYC_taxi (100 trees of 31 leaves, rows visiting about 3 of 30 splits, 10,000
rows, one thread, the ``run`` entry alone): 1.45 ns per tree and row for ``_tree_ir``'s walk in
blocks of 32 trees, 0.96 for this one compiled at ``BRANCHY_LEVEL``, 0.79 in blocks of
``BRANCHY_CHUNK``, 0.75 with the counters packed (``Packing``); 1.28 for vector blocks and 0.65
for lleaves. Without any cost accounting the walk takes 0.51.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from thrifty.runtime.compiled.ir_scalar import leaf_values_ir, module_irs, walk_ir
from thrifty.runtime.compiled.layout import Layout

# LLVM's speed level for modules of branchy blocks. Level 1 (every other module's) left the
# same walk at 1.45 ns per tree and row on NYC_taxi; level 2 takes 0.96, level 3 no less,
# for about a third more compile time.
BRANCHY_LEVEL = 2
# Positions per branchy block (``ir_scalar`` blocks take ``layout.CHUNK``, 32). Each block
# loads and stores a row's state once; on NYC_taxi's 100 trees at 10,000 rows, blocks of 32
# positions took 1.00 ns per tree and row, of 50 0.81 and of 100 0.79.
BRANCHY_CHUNK = 100


def branchy_module_irs(lay: Layout, key: str, trees_per_module: int) -> list[str]:
    """``ir_scalar.module_irs`` with branchy blocks of up to ``BRANCHY_CHUNK`` positions, their
    counters packed in one word where they fit (``packing_of``)."""
    n = len(lay.order)
    blocks = [(p, min(BRANCHY_CHUNK, n - p)) for p in range(0, n, BRANCHY_CHUNK)]
    packing = packing_of(lay, max((k for _, k in blocks), default=0))
    tree_ir = branchy_tree_ir if packing is None else partial(branchy_tree_ir, packing=packing)
    return module_irs(lay, key, trees_per_module, blocks, tree_ir=tree_ir, packing=packing)


@dataclass(frozen=True)
class Packing:
    """A block's counters in one word a tree adds one constant to: per feature ``f`` a count
    of the trees whose path tested it, ``width`` bits from bit ``f * width``, and above them,
    from bit ``F * width``, the splits visited. A count is never above the block's trees, so
    fields never carry into each other; a feature was tested when its count is not 0.

    One add per tree instead of an add and an or (and one constant per leaf instead of two):
    on NYC_taxi 0.75 ns per tree and row against 0.83."""

    F: int
    width: int

    def word(self, depth: int, words: list[int]) -> int:
        """The constant of a leaf at ``depth`` whose path tests the features of ``words``."""
        feats = [f for f in range(self.F) if (words[0] >> f) & 1]
        return (depth << (self.F * self.width)) + sum(1 << (f * self.width) for f in feats)

    def unpack(self, lines: list[str], packed: str, prefix: str) -> tuple[str, list[str]]:
        """``ir_scalar.Packing.unpack``: the row's node count and bits from ``packed``."""
        u = f"%u{prefix}"
        lines += [f"  {u}d = lshr i64 {packed}, {self.F * self.width}", f"  {u}n = add i64 %nodes_0, {u}d"]
        bits = "%bits_0"
        for f in range(self.F):
            lines += [
                f"  {u}c{f} = lshr i64 {packed}, {f * self.width}",
                f"  {u}m{f} = and i64 {u}c{f}, {(1 << self.width) - 1}",
                f"  {u}z{f} = icmp ne i64 {u}m{f}, 0",
                f"  {u}s{f} = select i1 {u}z{f}, i64 {1 << f}, i64 0",
                f"  {u}b{f} = or i64 {bits}, {u}s{f}",
            ]
            bits = f"{u}b{f}"
        return f"{u}n", [bits]


def packing_of(lay: Layout, trees: int) -> Packing | None:
    """The packing of blocks of up to ``trees`` trees when its fields fit in 63 bits (the
    constants stay positive), else None (the counters stay apart)."""
    if trees == 0:
        return None
    width = trees.bit_length()
    depth = trees * int(lay.depth.max(initial=0))
    return Packing(lay.F, width) if lay.F * width + depth.bit_length() <= 63 else None


def path_words(lay: Layout, node: int) -> list[int]:
    """The features tested on the path to ``node`` as ``lay.words`` signed 64-bit words (feature
    ``f`` is bit ``f % 64`` of word ``f // 64``), as the ``leaf`` table's record holds them."""
    words = np.zeros(lay.words, dtype=np.uint64)
    for f in lay.path_feat[lay.path_ptr[node] : lay.path_ptr[node + 1]].tolist():
        words[f // 64] |= np.uint64(1) << np.uint64(f % 64)
    return words.view(np.int64).tolist()


def branchy_tree_ir(
    lay: Layout,
    t: int,
    x: str,
    acc: list[str],
    nodes: str,
    bits: list[str],
    globals_: list[str],
    key: str,
    packing: Packing | None = None,
) -> tuple[list[str], list[str], str, list[str], str]:
    """Tree ``t`` for the row at ``%row`` (names prefixed ``x``): ``ir_scalar._tree_ir``'s
    contract for dense blocks (``bits`` holds all ``lay.words`` words), returning the code, the
    new scores, node count and bits, and the label the code ends in. With ``packing``, ``nodes``
    is the block's packed counters and the leaf's word is added to it (``bits`` unchanged)."""
    R = lay.K + 1 + lay.words
    lines, leaves = walk_ir(lay, t, x, globals_, key)

    def phi(values: list[int]) -> str:
        return "phi i64 " + ", ".join(f"[{v}, %{x}n{leaf}]" for v, leaf in zip(values, leaves))

    words = lay.tree_words(t)
    per_leaf = [path_words(lay, leaf) for leaf in leaves]
    depths = [int(lay.depth[leaf]) for leaf in leaves]
    # The phis first (LLVM wants them at the top of the block), then what they feed.
    head = [f"{x}leaf:", f"  %{x}r = {phi([leaf * R for leaf in leaves])}"]
    bits = list(bits)
    body = [f"  %{x}nodes = add i64 {nodes}, %{x}dp"]
    if packing is not None:
        head.append(f"  %{x}dp = {phi([packing.word(d, p) for d, p in zip(depths, per_leaf)])}")
    else:
        head.append(f"  %{x}dp = {phi(depths)}")
        head += [f"  %{x}mk{w} = {phi([p[w] for p in per_leaf])}" for w in words]
        for w in words:
            body.append(f"  %{x}bits{w} = or i64 {bits[w]}, %{x}mk{w}")
            bits[w] = f"%{x}bits{w}"
    code, acc = leaf_values_ir(lay, t, x, acc)
    return lines + head + body + code, acc, f"%{x}nodes", bits, f"{x}leaf"
