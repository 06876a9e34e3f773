"""AVX2's own steps of 16-bit rank blocks: the exit leaf of a tree of at most 32 leaves.

On AVX2, rank blocks of small trees compare 16-bit ranks (``ir_ranks.RANKS16_AVX2_LEAVES``): a
register holds sixteen rows, and a tree's leaf mask is words of 16 leaves
(``ir_vector._leaf_mask``). A tree of 17 to 32 leaves (Adult's trees have 32) has two words,
and ``ir_narrow.exit_leaf_narrow`` would find the first non-empty one with a compare and two
blends, widen it to 32 bits (two registers) for ``ir_narrow.low_bit32`` and pack the result
back with a cross-lane permute.

Here the two words are interleaved instead into one 32-bit word per row (``vpunpcklwd`` and
``vpunpckhwd``: word 0 in the low half, word 1 in the high half), which is the tree's mask as
one 32-bit word: leaf ``l`` is its bit ``l``. Its lowest set bit is the exit leaf (QuickScorer's
Theorem 1, Lucchese et al., SIGIR 2015), counted through a float's exponent as
``ir_narrow.low_bit32`` counts it, and the two halves' counts are packed back into sixteen
16-bit lanes (``vpackusdw``). The interleave and the pack both work within each 128-bit half
of the register, so the pack restores the rows' order with no permute: 13 operations against
about 25.
"""

from __future__ import annotations

# The rows each interleaved half takes (within 128-bit halves, as ``vpunpck[lh]wd`` do).
_HALVES = ((0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15))


def pair16(e, words: list[str], bits: int, by_exponent: bool) -> bool:
    """Whether ``exit_leaf_pair16`` finds the exit leaf of the mask ``words`` of ``bits``-bit
    words in the emitter ``e``'s lanes: two 16-bit words on sixteen lanes (AVX2's register)
    where the ISA has no vector count-trailing-zeros (``by_exponent``)."""
    return by_exponent and bits == 16 and len(words) == 2 and e.L == 16


def exit_leaf_pair16(e, words: list[str]) -> str:
    """Per lane, the exit leaf (lowest set bit) of the two 16-bit mask ``words`` (``pair16``),
    as 64-bit lanes; the mask is never empty (its rightmost leaf is in no left subtree)."""
    W16, W32 = "<16 x i16>", "<8 x i32>"
    fields = []
    for half in _HALVES:
        # Row r's word 0, then its word 1: one 32-bit word, leaf l at bit l.
        pick = ", ".join(f"i32 {r}, i32 {16 + r}" for r in half)
        both = e(f"shufflevector {W16} {words[0]}, {W16} {words[1]}, <16 x i32> <{pick}>")
        word = e(f"bitcast {W16} {both} to {W32}")
        # The lowest bit alone, 2**k, converts exactly to a float of exponent field 127 + k
        # (with the sign bit when k = 31, dropped below).
        alone = e(f"and {W32} {word}, {e(f'sub {W32} zeroinitializer, {word}')}")
        as_float = e(f"sitofp {W32} {alone} to <8 x float>")
        field = e(f"lshr {W32} {e(f'bitcast <8 x float> {as_float} to {W32}')}, splat (i32 23)")
        fields.append(e(f"and {W32} {field}, splat (i32 255)"))
    # Back in the rows' order: the halves' lanes 0-3 and 4-7 alternate per 128-bit half.
    order = ", ".join(f"i32 {i}" for i in (0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15))
    rows = e(f"shufflevector {W32} {fields[0]}, {W32} {fields[1]}, <16 x i32> <{order}>")
    narrow = e(f"trunc <16 x i32> {rows} to {W16}")
    # Less the bias after widening, so that LLVM folds it into the record's offset and scales
    # the field (below 256) in 16-bit lanes before widening.
    return e(f"sub {e.I} {e(f'zext {W16} {narrow} to {e.I}')}, splat (i64 127)")
