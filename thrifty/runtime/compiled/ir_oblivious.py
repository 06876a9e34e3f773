"""Oblivious trees on vector blocks: the leaf index from one comparison per level.

An oblivious (symmetric) tree tests one rule per level (``layout.oblivious_levels``), so a
row's leaf, numbered left to right, is the bit pattern of its ``depth`` outcomes, level 0 the
highest bit. On a vector of rows that is ``depth`` comparisons (each the very rule
``ir_vector._goes_right`` applies to a split, NaN and categories included), each selecting its
bit into an index vector, and one gather of the leaf's values from ``oleaf`` (the values alone,
``tables.forest_code``): no leaf mask over ``2^depth`` leaves, as QuickScorer keeps for other
trees, and any depth. Every leaf lies at the same depth
under the same splits, so the splits visited (``depth``) and the features tested are constants
of the tree rather than reads of the leaf's record.

``ir_vector.vblock_ir`` takes this path tree by tree, so a forest may mix oblivious trees and
others; exits, the row state and the one-row scalar blocks are unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from thrifty.runtime.compiled.layout import Layout


def _signed(word: int) -> int:
    """The unsigned 64-bit ``word`` as LLVM's signed integer constant."""
    return word - (1 << 64) if word >= 1 << 63 else word


def oblivious_leaf(emit: Callable[[str], str], rights: list[str], lanes: int, scale: int = 1) -> str:
    """Per lane, ``scale`` times the left-to-right number of the leaf reached: bit
    ``depth - 1 - l`` set when the row goes right at level ``l`` (``rights[l]``, a
    ``<lanes x i1>`` mask).

    Each level is one add under its mask (AVX-512's merge-masked ``vpaddq``), the leaf's scale
    folded into the constants: 512-bit operations issue on two ports only, so the count of
    vector operations per level, not their latency, bounds a tree's speed."""
    ty, mask = f"<{lanes} x i64>", f"<{lanes} x i1>"
    index = "zeroinitializer"
    for level, right in enumerate(rights):
        bit = scale << (len(rights) - 1 - level)
        if index == "zeroinitializer":
            index = emit(f"select {mask} {right}, {ty} splat (i64 {bit}), {ty} zeroinitializer")
            continue
        # An add, not an or: scaled bits (K = 3 outputs: 3, 6, 12, ...) overlap.
        set_ = emit(f"add {ty} {index}, splat (i64 {bit})")
        index = emit(f"select {mask} {right}, {ty} {set_}, {ty} {index}")
    if index == "zeroinitializer":  # a tree of one leaf
        return emit(f"add {ty} zeroinitializer, zeroinitializer")
    return index


def oblivious_counts(
    emit: Callable[[str], str], lay: Layout, tree: int, nodes: str, bits: list[str], lanes: int
) -> tuple[str, list[str]]:
    """``nodes`` plus the tree's depth and the words ``bits`` ORed with its features: the same
    for every leaf, so constants (the leaf records hold the same numbers, ``tables.leaf_tables``)."""
    ty = f"<{lanes} x i64>"
    levels = lay.levels(tree)
    assert levels is not None  # only oblivious trees come here
    if levels:
        nodes = emit(f"add {ty} {nodes}, splat (i64 {len(levels)})")
    feats = {int(lay.forest.feature[node]) for node in levels}
    bits = list(bits)
    for word in sorted({q // 64 for q in feats}):
        mask = sum(1 << (q % 64) for q in feats if q // 64 == word)
        bits[word] = emit(f"or {ty} {bits[word]}, splat (i64 {_signed(mask)})")
    return nodes, bits
