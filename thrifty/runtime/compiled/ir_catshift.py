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
doubles keep ``ir_vector._goes_right`` (doubles' 64-bit lanes need no packing), except AVX2's
16-bit rank blocks (``ir_ranks.RANKS16_AVX2_LEAVES``): AVX2 has no 16-bit variable shift, so
their sixteen codes are shifted as two registers of eight 32-bit lanes and the two outcomes packed
into one register of sixteen 16-bit lanes with one signed saturating pack (``vpackssdw``, which
keeps each lane's sign). The pack works within each 128-bit half, so the halves take rows 0-3
and 8-11, and rows 4-7 and 12-15: the packed lanes are then in the rows' order with no
further shuffle.
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
# AVX2's pack of two registers of eight 32-bit lanes into sixteen 16-bit lanes (signed, saturating).
_PACK = "llvm.x86.avx2.packssdw"
# The rows of sixteen 16-bit lanes each 32-bit half takes, so that ``_PACK`` restores their order.
_HALVES = ((0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15))


def declarations(lanes: int, ranks: int = 32) -> str:
    """Declarations of the intrinsics ``goes_right_ir`` calls on ``lanes`` lanes of
    ``ranks``-bit rank blocks."""
    if ranks == 16:
        H = "<8 x i32>"
        return f"declare {H} @{_SHIFT[8]}({H}, {H})\ndeclare <16 x i16> @{_PACK}({H}, {H})\n"
    W = f"<{lanes} x i32>"
    return f"declare {W} @{_SHIFT[lanes]}({W}, {W})\n"


def supported(lanes: int, ranks: int) -> bool:
    """Whether blocks of ``lanes`` lanes comparing ``ranks``-bit ranks can code categories:
    32-bit ranks on a lane count with a variable shift here (``_SHIFT``), or 16-bit ranks on
    sixteen lanes (AVX2's register: two shifts of eight lanes and a pack, ``_PACK``)."""
    return (ranks == 32 and lanes in _SHIFT) or (ranks == 16 and lanes == 16)


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


def goes_right_ir(e, f: Forest, node: int, code: str, ranks: int = 32) -> str:
    """Per lane, whether categorical split ``node`` (``fits``) sends the row right, from its
    feature's ``code_ir``: ``ir_vector._goes_right``'s outcome exactly. With ``ranks`` 16
    (AVX2's sixteen lanes), the codes are shifted in two halves (``_HALVES``) and packed."""
    L = e.L
    start, size = int(f.cat_start[node]), int(f.cat_size[node])
    words = [int(w) & 0xFFFFFFFF for w in f.cat_bitsets[start : start + size]]
    if ranks == 16:
        halves = [e(f"shufflevector <{L} x i32> {code}, <{L} x i32> poison, {_lanes(h)}") for h in _HALVES]
        a, b = (_in_set(e, words, half, 8) for half in halves)
        # The sign of each lane survives the saturating pack: negative exactly when in the set.
        inset = e(f"call <16 x i16> @{_PACK}(<8 x i32> {a}, <8 x i32> {b})")
        right = e(f"icmp sge <16 x i16> {inset}, zeroinitializer")
    else:
        right = e(f"icmp sge <{L} x i32> {_in_set(e, words, code, L)}, zeroinitializer")
    if bool(f.missing_left[node]):
        # NaN's code is in no set (right): its default child is the left one here.
        number = e(f"icmp ne <{L} x i32> {code}, splat (i32 {NAN_CODE})")
        right = e(f"and {e.B} {right}, {number}")
    return right


def _lanes(rows: tuple[int, ...]) -> str:
    return f"<{len(rows)} x i32> <" + ", ".join(f"i32 {r}" for r in rows) + ">"


def _in_set(e, words: list[int], code: str, lanes: int) -> str:
    """Per lane of the ``lanes`` 32-bit ``code``: negative exactly when the category is in the
    set of 32-bit ``words`` (the module docstring's shifts, ORed)."""
    W = f"<{lanes} x i32>"
    shifted = []
    for w, word in enumerate(words):
        if word == 0:
            continue
        constant = word - (1 << 32) if word >= 1 << 31 else word
        # Bit c - 32 w of the word to the sign: count 32 w + 31 - c (out of [0, 31]: zero).
        count = e(f"sub {W} splat (i32 {32 * w + 31}), {code}")
        shifted.append(e(f"call {W} @{_SHIFT[lanes]}({W} splat (i32 {constant}), {W} {count})"))
    if not shifted:
        return "zeroinitializer"
    inset = shifted[0]
    for other in shifted[1:]:
        inset = e(f"or {W} {inset}, {other}")
    return inset
