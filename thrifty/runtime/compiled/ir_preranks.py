"""Ranks formed once per pass of rows for the scores-only entry of a wide forest (issue 29).

A rank block (``ir_ranks``) gathers each feature its splits test and searches it among the
block's own thresholds, once per block and vector of rows. On the 300-feature ranker (500 trees
of 63 leaves in two blocks of about 250 trees, 192 and 174 features) that is 366 column gathers
and 1,487 search steps per vector of rows, 0.22 of a whole batch call (``benchmarks/wide_parts.py``).
Here ``raw``'s driver (``ir_raw.driver_ir``) first calls ``prerank_{key}``, which ranks every
rankable feature the forest tests among the *forest's* thresholds of that feature (194 features,
826 steps on the ranker) for the pass's rows into a buffer of 16-bit ranks, one column of
``RAW_ROWS`` per feature; each block (``ir_vraw``) then loads a vector of ranks where it gathered
and searched (``ir_vector.split_tests``).

Why the ranks among the forest's thresholds decide each split as the block's own ranks do:
``ir_ranks``' proof holds for any sorted set of distinct thresholds that contains the split's
(``goes_right_rank`` finds its index with ``searchsorted`` in the same set), and the forest's
set contains every split's threshold. NaN's rank is ``-1`` in 16 bits, sign-extended to 32 for
32-bit rank blocks, so each split keeps its NaN side. Features with a categorical or "zero as
missing" split (``ir_ranks.rankable``) are not ranked here: the blocks gather them as before.

Only for forests of more than 64 features (``Layout.words > 1``) whose scores-only blocks
compare ranks, where each feature is tested by few splits of a block, so the searches weigh;
narrower forests (Adult, higgs_small) test each feature by many splits and keep their blocks.
"""

from __future__ import annotations

import numpy as np

from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.ir_ranks import MAX_RANKS16, block_thresholds, forced_ranks, rank_ir
from thrifty.runtime.compiled.ir_raw import RAW_ROWS, row_vectors
from thrifty.runtime.compiled.ir_vector import _Emitter, _splat, intrinsics
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.targets import env_choice

# Environment variable: "auto" (the rule, ``forest_ranks``), "on" (every plan whose scores-only
# blocks compare ranks) or "off" (each block ranks its own features).
PRERANKS_ENV = "THRIFTY_PRERANKS"
PRERANKS_KINDS = ("auto", "on", "off")
# Targets where the rule forms ranks once per pass (where it was measured).
PRERANKS_TARGETS = ("avx512",)
# Bytes of the pass's buffer at most (on the driver's stack: 2 bytes per feature and row of a
# pass, 97 KB for the ranker's 194 features): 512 ranked features. A thread's stack may be
# small (512 KB for secondary threads on macOS); wider forests rank in their blocks.
MAX_BUFFER = 1 << 18


def forest_ranks(lay: Layout, ranks: int, lanes: int) -> dict[int, np.ndarray] | None:
    """Per feature ranked once per pass, the forest's sorted distinct thresholds of it (as
    ``ir_ranks.block_thresholds`` over every position), or None when the scores-only blocks
    rank their own features: they compare doubles (``ranks`` 0), ``THRIFTY_PRERANKS=off``, a
    vector of ``lanes`` rows does not divide ``RAW_ROWS``, a feature has more than
    ``MAX_RANKS16`` thresholds (its rank would not fit the buffer's 16 bits), the buffer would
    exceed ``MAX_BUFFER`` bytes, or, by the rule,
    the forest has at most 64 features or the target is not one of ``PRERANKS_TARGETS``."""
    kind = env_choice(PRERANKS_ENV, PRERANKS_KINDS, "a choice")
    if not ranks or kind == "off" or RAW_ROWS % lanes:
        return None
    if kind == "auto" and (lay.words == 1 or targets.current().name not in PRERANKS_TARGETS):
        return None
    thresholds = block_thresholds(lay, 0, len(lay.order))
    if not thresholds or any(len(t) > MAX_RANKS16 for t in thresholds.values()):
        return None
    if 2 * RAW_ROWS * len(thresholds) > MAX_BUFFER:
        return None
    return thresholds


def raw_rank_bits(lay: Layout, ranks: int, lanes: int) -> int:
    """The bits of the ranks the scores-only blocks compare, given the vector blocks' ``ranks``
    (``ir_ranks.rank_bits``) on a target of ``lanes`` doubles: those, except that where the
    vector blocks compare doubles, a forest whose ranks would be formed once per pass
    (``forest_ranks`` at 32 bits, by the rule, not forced) compares 32-bit ranks. The vector
    blocks' rule weighs a search per block and feature against the splits that share it
    (``ir_ranks.use_ranks``); here a search is paid once per pass for all blocks. Measured on
    the 136-feature synthetic forest (1,000 trees of 31 leaves, AVX-512, whole batch calls in
    thread CPU time, paired over 15 rounds, ``benchmarks/batch_ab.py``): 0.707 [0.656, 0.747]
    of the doubles' time (16-bit ranks: 0.710)."""
    # Forced ranks (``THRIFTY_RANKS``) or preranks (``THRIFTY_PRERANKS``) keep the blocks' own.
    if ranks or forced_ranks() != "auto" or env_choice(PRERANKS_ENV, PRERANKS_KINDS, "a choice") != "auto":
        return ranks
    return 32 if forest_ranks(lay, 32, 2 * lanes) is not None else 0


def prerank_ir(lay: Layout, key: str, thresholds: dict[int, np.ndarray], lanes: int) -> str:
    """``prerank_{key}(X, R, lo, hi, n)``: for the rows ``[lo, hi)`` (at most ``RAW_ROWS``) of
    the matrix ``X``, the 16-bit rank of each feature of ``thresholds`` (in feature order,
    slot ``s``) among its thresholds (``ir_ranks.rank_ir``; ``-1`` for NaN), row ``i`` at
    ``R[s * RAW_ROWS + i - lo]``. Vectors of ``lanes`` rows: the last may run past ``hi``
    (its lanes read row ``lo`` and are stored where no block reads them)."""
    e = _Emitter(lanes)
    L, Q = e.L, e.I
    every = _splat("i1", "true")
    globals_: list[str] = []
    e.lines += [
        f"define void @prerank_{key}(ptr noalias %X, ptr noalias %R, i64 %lo, i64 %hi, i64 %n) {{",
        "entry:",
        *row_vectors(e),
        "  %off = sub i64 %i, %lo",
    ]
    xo = e(f"mul {Q} %idx, {_splat('i64', str(lay.F))}")
    for s, feat in enumerate(sorted(thresholds)):
        cell = e.gep("%X", "double", e(f"add {Q} {xo}, {_splat('i64', str(feat))}"))
        rank = rank_ir(
            e, e.gather("double", cell, every), thresholds[feat], f"@prthr_{key}_{feat}", globals_, 16
        )
        at = e(f"getelementptr i16, ptr %R, i64 {e(f'add i64 %off, {s * RAW_ROWS}')}")
        e.lines.append(f"  store <{L} x i16> {rank}, ptr {at}, align 2")
    e.lines += [f"  %i1 = add i64 %i, {L}", "  br label %loop", "exit:", "  ret void", "}"]
    return intrinsics(L) + "\n".join(globals_ + e.lines) + "\n"


def rank_loader(e: _Emitter, thresholds: dict[int, np.ndarray], ranks: int):
    """``load(feature)``: in a scores-only block of ``e``'s lanes (``ir_vraw``, whose rows
    ``%i`` onward of the pass from ``%lo`` are ranked in ``%R``), the vector of the feature's
    ranks as ``ranks``-bit integers (16-bit ranks sign-extended to 32 bits: NaN stays -1)."""
    slots = {feat: s for s, feat in enumerate(sorted(thresholds))}
    L = e.L

    def load(feat: int) -> str:
        at = e(f"add i64 {e('sub i64 %i, %lo')}, {slots[feat] * RAW_ROWS}")
        rank = e(f"load <{L} x i16>, ptr {e(f'getelementptr i16, ptr %R, i64 {at}')}, align 2")
        return rank if ranks == 16 else e(f"sext <{L} x i16> {rank} to <{L} x i{ranks}>")

    return load
