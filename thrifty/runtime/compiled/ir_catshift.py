"""Categorical splits of x86 rank blocks as one variable shift of 32-bit lanes per set word.

Rank blocks (``ir_ranks``) with 32-bit ranks hold eight rows in an AVX2 register, but a
categorical feature is not ranked: ``ir_vector._goes_right`` tests its splits on the rows'
doubles, two registers of four 64-bit lanes, and packs the two halves' outcomes back into one
register of eight 32-bit lanes for the leaf-mask update. In the AVX2 assembly of 64 of Adult's
trees (a fifth of their splits categorical) the packing, extracts and 64-bit shifts were a
third of the block's instructions. Here a categorical feature is instead *coded* once per block
and vector of rows (``code_ir``), as a rank is: the category ``c = trunc(x)`` as a 32-bit lane
when ``-1 < x < 64`` (the interpreter's ``int(x)``, truncating toward zero), else 64 (every
other number) or 65 (NaN). A split whose category set has at most two 32-bit words
(categories 0 to 63) then tests membership on the codes (``goes_right_ir``):

* word ``w`` (categories ``32 w .. 32 w + 31``) shifted left by ``32 w + 31 - c``
  (``vpsllvd``) has bit ``c - 32 w`` of the word in its sign bit when ``c`` lies in the word;
  when it does not, the count is negative or above 31, which ``vpsllvd`` (unlike LLVM's
  ``shl``, poison there) defines as a zero result: sign clear;
* so the row's category is in the set exactly when the OR of the shifted words is negative,
  and the split sends it right otherwise (codes of 64, and of categories past the set's words,
  are in no word: right, as the interpreter sends categories outside the set right).

NaN's code (65) is in no set either, so NaN goes right, which is the split's outcome for NaN
when its default child is the right one; a split whose default is left ANDs in "the code is not
NaN's". Sets of more than two words keep ``ir_vector._goes_right``.

Used where the target takes it (``targets.Target.cat_shift``): both x86 targets, in blocks of
32-bit ranks (AVX2's eight lanes, ``llvm.x86.avx2.psllv.d.256``; AVX-512's sixteen,
``llvm.x86.avx512.psllv.d.512``). On Adult's 500 trees it took 0.72 of the time with AVX2 and
0.78 with AVX-512 (docs/runtime.md, "Categorical splits on codes"). Plans of 16-bit ranks or of
doubles keep ``ir_vector._goes_right`` (AVX2 has no 16-bit variable shift, and doubles' 64-bit
lanes need no packing).
"""

from __future__ import annotations

from thrifty.forest import Forest
from thrifty.runtime.compiled.layout import double

# Categories a code tells apart (two 32-bit words); every other number is coded as this, and
# NaN as ``NAN_CODE`` (both in no set).
OUTSIDE = 64
NAN_CODE = 65
# The variable shift, per count of 32-bit lanes: one AVX2 or one AVX-512 register.
_SHIFT = {8: "llvm.x86.avx2.psllv.d.256", 16: "llvm.x86.avx512.psllv.d.512"}


def declarations(lanes: int) -> str:
    """Declarations of the intrinsics ``goes_right_ir`` calls on ``lanes`` 32-bit lanes."""
    W = f"<{lanes} x i32>"
    return f"declare {W} @{_SHIFT[lanes]}({W}, {W})\n"


def supported(lanes: int, ranks: int) -> bool:
    """Whether blocks of ``lanes`` lanes comparing ``ranks``-bit ranks can code categories:
    32-bit ranks on a lane count with a variable shift here (``_SHIFT``)."""
    return ranks == 32 and lanes in _SHIFT


def fits(f: Forest, node: int) -> bool:
    """Whether categorical split ``node``'s set has at most two 32-bit words (``goes_right_ir``)."""
    return 0 <= int(f.cat_start[node]) and int(f.cat_size[node]) <= OUTSIDE // 32


def code_ir(e, v: str) -> str:
    """Per lane of the doubles ``v``: the category code (``<L x i32>``, the module docstring's;
    ``NAN_CODE`` for NaN)."""
    L = e.L
    above = e(f"fcmp ogt {e.V} {v}, splat (double {double(-1.0)})")
    below = e(f"fcmp olt {e.V} {v}, splat (double {double(float(OUTSIDE))})")
    inside = e(f"and {e.B} {above}, {below}")
    # fptosi of a value outside (-1, 64) would be poison: those lanes convert 0.0, then take 64.
    safe = e(f"select {e.B} {inside}, {e.V} {v}, {e.V} zeroinitializer")
    cat = e(f"fptosi {e.V} {safe} to <{L} x i32>")
    code = e(f"select {e.B} {inside}, <{L} x i32> {cat}, <{L} x i32> splat (i32 {OUTSIDE})")
    nan = e(f"fcmp uno {e.V} {v}, zeroinitializer")
    return e(f"select {e.B} {nan}, <{L} x i32> splat (i32 {NAN_CODE}), <{L} x i32> {code}")


def goes_right_ir(e, f: Forest, node: int, code: str) -> str:
    """Per lane, whether categorical split ``node`` (``fits``) sends the row right, from its
    feature's ``code_ir``: ``ir_vector._goes_right``'s outcome exactly."""
    L = e.L
    W = f"<{L} x i32>"
    start, size = int(f.cat_start[node]), int(f.cat_size[node])
    words = [int(w) & 0xFFFFFFFF for w in f.cat_bitsets[start : start + size]]
    shifted = []
    for w, word in enumerate(words):
        if word == 0:
            continue
        constant = word - (1 << 32) if word >= 1 << 31 else word
        # Bit c - 32 w of the word to the sign: count 32 w + 31 - c (out of [0, 31]: zero).
        count = e(f"sub {W} splat (i32 {32 * w + 31}), {code}")
        shifted.append(e(f"call {W} @{_SHIFT[L]}({W} splat (i32 {constant}), {W} {count})"))
    if not shifted:
        inset = "zeroinitializer"
    else:
        inset = shifted[0]
        for other in shifted[1:]:
            inset = e(f"or {W} {inset}, {other}")
    right = e(f"icmp sge {W} {inset}, zeroinitializer")
    if bool(f.missing_left[node]):
        # NaN's code is in no set (right): its default child is the left one here.
        number = e(f"icmp ne {W} {code}, splat (i32 {NAN_CODE})")
        right = e(f"and {e.B} {right}, {number}")
    return right
