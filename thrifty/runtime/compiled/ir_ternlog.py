"""Leaf masks updated by AVX-512's three-input logic instruction (``vpternlogq``), for the
scores-only vector blocks of 512-bit targets (``ir_vraw``, chosen by ``choice.ternlog_masks``).

``ir_vector._leaf_mask`` clears a split's left-subtree leaves as ``select(right, C, 0)`` ORed
into the word of cleared leaves. On 16-bit words with AVX-512 that is two operations per split
and word: AVX-512 has no OR under a mask of 16-bit lanes, so LLVM emits an OR and a masked
16-bit move (``vpord`` then ``vmovdqu16 {k}``), and the compare's mask register is spilled and
reloaded where LLVM shares one compare between trees (equal thresholds of a block's trees give
equal rank compares, RapidScorer's observation, Ye et al., KDD 2018). Here a split's outcome is
widened once to a vector of all-ones or zero lanes (``sext``: ``vpmovm2w``, shared as the
compare is), and each (split, word) is one ``vpternlogq`` computing ``kept & ~(right & C)``
with ``C`` a broadcast constant, from a word of all leaves kept. The intrinsic keeps LLVM from
folding the AND back into a select. The leaves left, the exit leaf (QuickScorer's Theorem 1,
Lucchese et al., SIGIR 2015) and so the scores are ``_leaf_mask``'s exactly: the same bits are
cleared, by another instruction.
"""

from __future__ import annotations

from thrifty.forest import Forest
from thrifty.runtime.compiled.ir_vector import _ranges, _signed, _splat

# Truth table of ``A & ~(B & C)`` for ``vpternlog`` (A = 0xF0, B = 0xCC, C = 0xAA): the leaves
# kept, ``A``, less the constant ``C``'s leaves in the lanes going right, ``B``.
CLEAR = 0xF0 & ~(0xCC & 0xAA) & 0xFF
DECLARE = "declare <8 x i64> @llvm.x86.avx512.pternlog.q.512(<8 x i64>, <8 x i64>, <8 x i64>, i32 immarg)\n"


def leaf_mask_ternlog(e, f: Forest, tree: int, right_of, bits: int = 64) -> list[str]:
    """``ir_vector._leaf_mask``'s leaf mask of ``tree`` (words of ``bits`` leaves, 64, 32 or 16)
    built with ``vpternlogq``; the emitter's vectors must be 512 bits (``e.L * bits``)."""
    assert e.L * bits == 512, "ternlog leaf masks need 512-bit vectors"
    ty, q = f"<{e.L} x i{bits}>", "<8 x i64>"
    ranges: list[tuple[int, int, int]] = []
    n_leaves = _ranges(f, int(f.roots[tree]), 0, ranges)
    ones = _splat(f"i{bits}", "-1")
    kept = [e(f"bitcast {ty} {ones} to {q}") for _ in range(-(-n_leaves // bits))]
    wide: dict[str, str] = {}
    for node, lo, mid in ranges:
        right = right_of(node)
        if right not in wide:
            # All ones in the lanes going right (one per distinct compare: LLVM shares it).
            wide[right] = e(f"bitcast {ty} {e(f'sext {e.B} {right} to {ty}')} to {q}")
        for w in range(lo // bits, (mid - 1) // bits + 1):
            a, b = max(lo, bits * w) - bits * w, min(mid, bits * w + bits) - bits * w
            clear = ((1 << b) - 1) ^ ((1 << a) - 1)
            constant = e(f"bitcast {ty} {_splat(f'i{bits}', str(_signed(clear, bits)))} to {q}")
            kept[w] = e(
                f"call {q} @llvm.x86.avx512.pternlog.q.512({q} {kept[w]}, {q} {wide[right]}, "
                f"{q} {constant}, i32 {CLEAR})"
            )
    return [e(f"bitcast {q} {word} to {ty}") for word in kept]
