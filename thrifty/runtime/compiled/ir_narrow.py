"""Exit leaves of rank blocks' leaf masks, held as words of 32 or 16 leaves (``ir_vector``).

Rank blocks (``ir_ranks``) compare 32-bit or 16-bit ranks, so their lanes are 32 or 16 bits
wide, and so are the words of their leaf masks: leaf ``l`` of a tree is bit ``l % bits`` of word
``l // bits`` (``ir_vector._leaf_mask``). The exit leaf is the lowest set bit of the mask
(QuickScorer's Theorem 1, Lucchese et al., SIGIR 2015): the words before the exit leaf's are all
zero, so scanning the words from the last to the first for the last non-zero one, and counting
that word's trailing zeros, finds it.
"""

from __future__ import annotations

from thrifty.runtime.compiled import ir_avx2


def exit_leaf_narrow(e, words: list[str], by_exponent: bool, bits: int = 32) -> str:
    """Per lane, the exit leaf of the leaf mask ``words`` of ``bits`` (32 or 16) leaves each,
    as 64-bit lanes (the leaf record's index). The last word always has a bit set (the
    rightmost leaf is in no left subtree); an earlier word that is not empty holds the exit
    leaf. With ``by_exponent`` (no vector count-trailing-zeros on the ISA), that word's lowest
    bit is counted by ``low_bit32`` (16-bit words widened to 32 bits first)."""
    if ir_avx2.pair16(e, words, bits, by_exponent):
        return ir_avx2.exit_leaf_pair16(e, words)
    T, i = f"<{e.L} x i{bits}>", f"i{bits}"

    def low(word: str) -> str:
        if not by_exponent:
            return e(f"call {T} @llvm.cttz.v{e.L}{i}({T} {word}, i1 false)")
        if bits == 32:
            return low_bit32(e, word)
        wide = low_bit32(e, e(f"zext {T} {word} to <{e.L} x i32>"))
        return e(f"trunc <{e.L} x i32> {wide} to {T}")

    # The first non-empty word and its first leaf's number, then one count in that word
    # (rather than one per word: a 255-leaf tree's mask is 8 or 16 words).
    last = len(words) - 1
    word, base = words[last], f"splat ({i} {bits * last})"
    for w in range(last - 1, -1, -1):
        some = e(f"icmp ne {T} {words[w]}, zeroinitializer")
        word = e(f"select {e.B} {some}, {T} {words[w]}, {T} {word}")
        base = e(f"select {e.B} {some}, {T} splat ({i} {bits * w}), {T} {base}")
    leaf = low(word)
    if last:
        leaf = e(f"add {T} {leaf}, {base}")
    return e(f"zext {T} {leaf} to {e.I}")


def low_bit32(e, word: str) -> str:
    """Per lane, the index of the lowest set bit of the 32-bit ``word`` (not zero): the bit alone
    (``word & -word``, ``2**k``; ``-2**31`` as a signed integer when ``k = 31``) converts exactly
    to a float whose exponent field, sign bit dropped, is ``127 + k``: five operations where
    AVX2 and NEON have no vector count-trailing-zeros."""
    W = f"<{e.L} x i32>"
    alone = e(f"and {W} {word}, {e(f'sub {W} zeroinitializer, {word}')}")
    as_float = e(f"sitofp {W} {alone} to <{e.L} x float>")
    field = e(f"lshr {W} {e(f'bitcast <{e.L} x float> {as_float} to {W}')}, splat (i32 23)")
    exponent = e(f"and {W} {field}, splat (i32 255)")
    return e(f"sub {W} {exponent}, splat (i32 127)")
