"""Vector blocks that compare 32-bit or 16-bit integer ranks instead of doubles (``ir_vector``'s
rank mode).

A vector block tests every split of a tree on a vector of rows. With doubles, a 256-bit AVX2
register holds four rows; with 32-bit integers it holds eight (sixteen in AVX-512's), with
16-bit integers sixteen (thirty-two; ``rank_bits`` picks the width). So each
row's value of a feature is *quantized* once per block into its rank among the sorted distinct
thresholds that the block's splits on that feature use, and every split then compares the rank
with its threshold's rank as a constant (the leaf masks are words of as many bits, ``ir_vector``).

Why the comparison is exact. Let ``t_0 < t_1 < ... < t_{n-1}`` be the distinct non-NaN
thresholds (compared as doubles: ``-0.0`` and ``+0.0`` are one value) and, for a value ``x`` that
is not NaN, ``r(x) = #{i : t_i < x}``, counted with the same IEEE comparison ``<`` the double
split uses. For a split of threshold ``t_j``:

* if ``x <= t_j`` then every ``t_i < x`` has ``t_i < t_j``, so ``i < j``: ``r(x) <= j``;
* if ``x > t_j`` then ``t_0, ..., t_j`` are all ``< x``: ``r(x) >= j + 1 > j``.

So ``x > t_j`` (the split sends ``x`` right) exactly when ``r(x) > j``, for every non-NaN ``x``
(infinities, signed zeros and subnormals included: only ``<`` between doubles is used, and
the IEEE order is total on non-NaN values up to ``-0.0 == +0.0``). NaN, for which every
comparison is false, gets the rank ``-1`` (all bits set): a signed comparison ``-1 > j`` is
false (NaN goes left, the double split's ``fcmp ogt``) and an unsigned one is true
(``0xFFFFFFFF > j``, or ``0xFFFF > j``: NaN goes right, ``fcmp ugt``; in 16 bits the ranks
of numbers stay below ``2**15``, ``MAX_RANKS16``, so that they are non-negative), so each split
keeps its own NaN side (the default child, or LightGBM's "NaN as zero" side) with one
comparison. A split whose threshold is NaN sends every number right, and NaN right or to its
default side. Features with a categorical or "zero as missing" split keep doubles
(``rankable``), and their splits are ``ir_vector._goes_right``'s.

The rank is a branch-free binary search: the ``n`` thresholds padded with NaN to ``2**s - 1``
entries (a comparison with NaN is false, so the predicate ``t_i < x`` stays true on a prefix
and false after it), ``s = ceil(log2(n + 1))`` steps each adding ``2**(s-1-step)`` where the
probe is below ``x``; the first probe is a constant, the second a choice of two constants, the
others gathered from the block's table of the feature.
"""

from __future__ import annotations

import numpy as np

from thrifty.forest import Forest
from thrifty.forest.kernels import MISSING_AS_ZERO, MISSING_ZERO
from thrifty.runtime.compiled.layout import Layout, double
from thrifty.runtime.compiled.targets import env_choice

# Environment variable forcing rank blocks on ("on", at the rule's width; "32" or "16", at that
# width), off ("off") or the rule ("auto").
RANKS_ENV = "THRIFTY_RANKS"
RANK_KINDS = ("auto", "on", "off", "32", "16")
# Thresholds of one feature in one block up to which its ranks fit 16 bits: NaN's rank is -1
# (all bits set) and the others ``0..n`` must stay non-negative as signed 16-bit integers
# (``goes_right_rank``'s signed comparison), so ``n <= 2**15 - 1``.
MAX_RANKS16 = (1 << 15) - 1
# Targets whose rank blocks compare 16-bit ranks unless forced (``rank_bits``) ...
RANKS16_TARGETS = ("avx512",)
# ... for plans whose trees have more than this many leaves on average (``rank_bits``).
RANKS16_LEAVES = 64
# AVX2's rank blocks compare 16-bit ranks unless forced for plans whose trees have at most this
# many leaves on average (``rank_bits``): its register then holds sixteen rows as AVX-512's holds
# sixteen 32-bit ranks, so that a split's compare and its two mask operations (AVX2 has no OR
# under a mask) serve as many rows as AVX-512's one masked OR does; categorical splits keep
# codes (``ir_catshift``) and two-word masks find their exit leaf as one word (``ir_avx2``).
# Measured on Adult's 32-leaf trees only; larger trees keep 32 bits on AVX2.
RANKS16_AVX2_LEAVES = 32
# Splits per quantizing step from which vector blocks compare ranks (``use_ranks``): measured
# break-even between 6 (the wide forests: ranks lose on AVX-512) and 31 (Adult: ranks win on
# both x86 targets); lleaves' airline model, at 14.5, was level.
MIN_SPLITS_PER_STEP = 16.0


def forced_ranks() -> str:
    """``THRIFTY_RANKS`` (default ``"auto"``), checked."""
    return env_choice(RANKS_ENV, RANK_KINDS, "a choice")


def rankable(f: Forest) -> np.ndarray:
    """Per feature, whether its splits can compare ranks: none is categorical or "zero as
    missing" (those decide on the value itself, not its order among the thresholds)."""
    split = f.feature >= 0
    odd = split & ((f.cat_start >= 0) | (f.missing_type == MISSING_ZERO))
    out = np.ones(f.n_features, dtype=bool)
    out[f.feature[odd]] = False
    return out


def block_thresholds(lay: Layout, p0: int, k: int) -> dict[int, np.ndarray]:
    """Per rankable feature split on by the trees at positions ``[p0, p0 + k)``, the sorted
    distinct non-NaN thresholds of those splits (``-0.0`` and ``+0.0`` as one)."""
    f = lay.forest
    ok = rankable(f)
    trees = np.asarray(lay.order[p0 : p0 + k], dtype=np.int64)
    nodes = np.concatenate([f._tree_nodes(int(t)) for t in trees]) if k else np.zeros(0, dtype=np.int64)
    nodes = nodes[f.feature[nodes] >= 0]
    nodes = nodes[ok[f.feature[nodes]]]
    out: dict[int, np.ndarray] = {}
    for feat in np.unique(f.feature[nodes]).tolist():
        thr = f.threshold[nodes[f.feature[nodes] == feat]]
        # np.unique keeps one of -0.0 and +0.0 (equal as doubles), which is all the proof needs.
        out[int(feat)] = np.unique(thr[~np.isnan(thr)])
    return out


def rank_ir(e, x: str, thresholds: np.ndarray, name: str, globals_: list[str], bits: int = 32) -> str:
    """Per lane, the rank ``#{t in thresholds : t < x}`` of the doubles ``x`` as ``bits``-bit
    integers (32 or 16), ``-1`` for NaN (the module docstring's ``r``); ``name`` is the global
    the table is emitted as (into ``globals_``) when the search needs more than two probes."""
    L = e.L
    W, V, B = f"<{L} x i{bits}>", e.V, e.B
    i = f"i{bits}"
    n = len(thresholds)
    steps = int(n).bit_length()  # 2**steps > n
    size = 1 << steps
    padded = [double(t) for t in thresholds] + ["0x7FF8000000000000"] * (size - 1 - n)
    if steps > 2:
        globals_.append(
            f"{name} = private unnamed_addr constant [{size - 1} x double] ["
            + ", ".join(f"double {t}" for t in padded)
            + "]"
        )
    pos, first = "zeroinitializer", ""
    for step in range(steps):
        h = size >> (step + 1)
        if step == 0:
            probe = f"splat (double {padded[h - 1]})"
        elif step == 1:
            # pos is 0 or size / 2: the probe is one of two constants, chosen by the first test.
            probe = e(
                f"select {B} {first}, {V} splat (double {padded[size // 2 + h - 1]}), "
                f"{V} splat (double {padded[h - 1]})"
            )
        else:
            # Below 2**15 with 16-bit ranks (``MAX_RANKS16``): the index is sign-extended.
            at = e(f"add {W} {pos}, splat ({i} {h - 1})")
            probe = e.gather("double", e(f"getelementptr double, ptr {name}, {W} {at}"), "splat (i1 true)")
        below = e(f"fcmp olt {V} {probe}, {x}")
        if step == 0:
            first = below
        pos = e(f"add {W} {pos}, {e(f'select {B} {below}, {W} splat ({i} {h}), {W} zeroinitializer')}")
    nan = e(f"fcmp uno {V} {x}, zeroinitializer")
    return e(f"select {B} {nan}, {W} splat ({i} -1), {W} {pos}")


def goes_right_rank(e, f: Forest, node: int, rank: str, thresholds: np.ndarray, bits: int = 32) -> str:
    """Per lane, whether the numeric split ``node`` sends the row right, from the rank of its
    value among ``thresholds`` (``rank_ir``, ``bits``-bit ranks): ``ir_vector._goes_right``'s
    outcome exactly."""
    W, true, i = f"<{e.L} x i{bits}>", "splat (i1 true)", f"i{bits}"
    thr = float(f.threshold[node])
    mt = int(f.missing_type[node])
    default_right = not bool(f.missing_left[node])
    if np.isnan(thr):
        # No value is <= NaN: numbers go right; NaN to the default child (or, read as 0.0, right).
        if mt == MISSING_AS_ZERO or default_right:
            return true
        return e(f"icmp ne {W} {rank}, splat ({i} -1)")
    nan_left = (0.0 <= thr) if mt == MISSING_AS_ZERO else bool(f.missing_left[node])
    j = int(np.searchsorted(thresholds, thr))
    # NaN's rank -1: below every j signed (left), above every j unsigned (right).
    return e(f"icmp {'sgt' if nan_left else 'ugt'} {W} {rank}, splat ({i} {j})")


def splits_per_step(lay: Layout, blocks: list[tuple[int, int]]) -> float:
    """The plan's splits that compare ranks over its quantizing steps: per block, each
    rankable feature's search takes ``ceil(log2(n + 1))`` steps for its ``n`` thresholds in the
    block (``rank_ir``), paid once per vector of rows, where each of its splits saves about
    half its vector operations. 0 when no split compares ranks."""
    f = lay.forest
    ok = rankable(f)
    splits = steps = 0
    for p0, k in blocks:
        steps += sum(int(len(t)).bit_length() for t in block_thresholds(lay, p0, k).values())
        for t in lay.order[p0 : p0 + k].tolist():
            # An oblivious tree compares once per level (``ir_oblivious``).
            levels = lay.levels(t)
            nodes = f._tree_nodes(t) if levels is None else np.asarray(levels, dtype=np.int64)
            feats = f.feature[nodes]
            splits += int(np.sum((feats >= 0) & ok[np.maximum(feats, 0)]))
    return splits / steps if steps else 0.0


def use_ranks(lay: Layout, lanes: int, blocks: list[tuple[int, int]]) -> bool:
    """Whether the plan's vector blocks (``blocks``, on a target of ``lanes`` float64 lanes)
    compare ranks: ``THRIFTY_RANKS`` forces it either way; the rule is at least
    ``MIN_SPLITS_PER_STEP`` splits per quantizing step (``splits_per_step``).

    Measured with both forced, AVX-512 and AVX2 on one AVX-512 host (paired, one thread; ns
    per tree and row, ranks over doubles): higgs_small's 255-leaf trees (64 splits per step)
    0.70 and 0.52; Adult's 32-leaf trees (31) 0.90 and 0.80; the 300-feature ranker (5.4) 1.08
    and 0.96; the synthetic 136-feature forest (5.4) 1.29 and 1.05. With AVX-512 on lleaves'
    models at 10 / 100 / 10,000 rows per call: NYC_taxi (65) 0.87 / 0.88 / 0.82, mtpl2 (72)
    0.99 / 0.96 / 0.83, airline (14.5) 0.96 / 1.02 / 0.93. Where a block's trees test many
    features few times each, quantizing them costs more than the narrower compares save. In
    blocks of 256 trees (``vblocks.VCHUNK_FULL``) the ranker has 18.8 splits per step, and
    ranks took 0.93 and 0.95 of the doubles' time (256 of its trees, AVX-512, two paired runs).
    """
    if lanes == 0:
        return False
    kind = forced_ranks()
    if kind != "auto":
        return kind != "off"
    return splits_per_step(lay, blocks) >= MIN_SPLITS_PER_STEP


def rank_bits(lay: Layout, target: str, lanes: int, blocks: list[tuple[int, int]]) -> int:
    """The width of the ranks the plan's vector blocks compare: 0 (doubles) when ``use_ranks``
    says no; else 16 where ``THRIFTY_RANKS`` forces ``"16"`` or, unforced, on the targets of
    ``RANKS16_TARGETS`` for trees of more than ``RANKS16_LEAVES`` leaves on average, and on AVX2
    for trees of at most ``RANKS16_AVX2_LEAVES``, when every
    block's features have at most ``MAX_RANKS16`` thresholds each (always, in blocks of at most
    ``vblocks.VSPLITS`` splits); else 32.

    16-bit ranks and leaf masks of 16-bit words put twice the rows in a vector (32 with
    AVX-512): a split's compare and mask update serve twice the rows, and a 255-leaf tree has
    about as many (split, mask word) pairs with 16 leaves a word as with 32. Measured with
    AVX-512 (paired, one thread, loaded machine, ``benchmarks/batch_ab.py``): higgs_small's
    first 64 trees of 255 leaves took 0.88 of the 32-bit blocks' time, all 500 0.853-0.876 (load
    2: 0.32 of lleaves' time against 0.37-0.38); the 300-feature ranker's
    first 256 trees of 63 leaves 1.29 (its blocks gather many features for few splits each,
    and gathers cost the same per row at any width), so narrower trees keep 32 bits."""
    if not use_ranks(lay, lanes, blocks):
        return 0
    kind = forced_ranks()
    if kind == "32":
        return 32
    if kind != "16":
        order = np.asarray(lay.order, dtype=np.int64)
        leaves = float(np.mean(np.diff(lay.leaf_ptr)[order])) if len(order) else 0.0
        wide = target in RANKS16_TARGETS and leaves > RANKS16_LEAVES
        small = target == "avx2" and leaves <= RANKS16_AVX2_LEAVES
        if not (wide or small):
            return 32
    fits = all(len(t) <= MAX_RANKS16 for p0, k in blocks for t in block_thresholds(lay, p0, k).values())
    return 16 if fits else 32
