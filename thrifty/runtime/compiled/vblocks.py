"""Which positions of a plan form each vector block, and whether a plan takes vector blocks
at all (``ir_vector`` generates the blocks; ``objects`` keys the code by them)."""

from __future__ import annotations

import os

import numpy as np

from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled.layout import Layout

# Trees of up to this many leaves take vector blocks (a leaf mask of one word per 64 leaves).
# Measured on LightGBM trees of 255 leaves (higgs_small, 100 trees): 20 ns per tree and row on
# vector blocks against 31 on scalar ones; at 1,023 leaves (60 trees) 125-130 against 59-60.
VECTOR_LEAVES = 256
# Positions per block with exits: blocks grow 1, 2, 4, ... up to this, so that rows which exit
# early (most do under QWYC) are dropped from the vectors soon.
VCHUNK = 64
# Without exits, a block of a forest of more than 64 features (``vblocks``) takes up to this
# many positions and splits (``vblocks_of``): a block
# gathers each feature it tests once per vector of rows, and loads and stores the rows' state
# once (rank blocks also quantize each feature once), so trees gain from long blocks. Measured
# on a loaded machine: 256 trees of the 300-feature ranker (63 leaves), 9.6 ns per tree and row
# in blocks of 64 trees, 8.8 in blocks of 128, 7.8 in blocks of 256, for 1.6 times the compile
# time. 255-leaf trees keep blocks of 64: on higgs_small's 500 trees, blocks of 128 took 0.43
# of lleaves' time against 0.38 for blocks of 64 (128 of its trees alone had measured faster in
# one block of 128 than in two of 64).
VCHUNK_FULL = 256
VSPLITS = 64 * 255


def vector_ok(lay: Layout) -> bool:
    """Whether the plan runs on vector blocks: every visited tree has at most ``VECTOR_LEAVES``
    leaves or is oblivious, and no position has a bin exit (any number of features)."""
    order = np.asarray(lay.order, dtype=np.int64)
    leaves = np.diff(lay.leaf_ptr)[order]
    # Oblivious trees take no leaf mask (``ir_oblivious``): any depth suits the vectors.
    deep = order[leaves > VECTOR_LEAVES].tolist()
    return all(lay.levels(t) is not None for t in deep) and not lay.any_bins


def vblocks(lay: Layout) -> list[tuple[int, int]]:
    """The plan's vector blocks (``vblocks_of``): in forests of more than 64 features, given
    the splits of each position's tree (long blocks gather a wide forest's many features once);
    narrower forests keep ``VCHUNK`` positions (Adult's 14 features: long blocks took 0.40 of
    lleaves' time against 0.34)."""
    if lay.words == 1:
        return vblocks_of(lay.exits)
    # A binary tree of n leaves has n - 1 splits.
    splits = np.diff(lay.leaf_ptr) - 1
    return vblocks_of(lay.exits, splits[np.asarray(lay.order, dtype=np.int64)])


def vblocks_of(exits: np.ndarray, splits: np.ndarray | None = None) -> list[tuple[int, int]]:
    """Blocks ``(start, length)``: with exits, growing from 1 to ``VCHUNK`` positions; else
    ``VCHUNK`` positions, or given the ``splits`` of each position, as many positions as keep a
    block within ``VCHUNK_FULL`` positions and ``VSPLITS`` splits (at least one)."""
    n = len(exits)
    if splits is not None and not np.any(exits != 0):
        return _by_splits(np.asarray(splits, dtype=np.int64))
    size = 1 if np.any(exits != 0) else VCHUNK
    out, p = [], 0
    while p < n:
        k = min(size, n - p)
        out.append((p, k))
        p += k
        size = min(2 * size, VCHUNK)
    return out


def _by_splits(splits: np.ndarray) -> list[tuple[int, int]]:
    """Blocks of consecutive positions, each within ``VCHUNK_FULL`` positions and ``VSPLITS``
    splits (a position of more splits alone)."""
    out, p, n = [], 0, len(splits)
    while p < n:
        k, total = 0, 0
        while p + k < n and k < VCHUNK_FULL and (k == 0 or total + splits[p + k] <= VSPLITS):
            total += int(splits[p + k])
            k += 1
        out.append((p, k))
        p += k
    return out


# Environment variable setting the positions per block of the scores-only entry (``ir_vraw``,
# ``raw_blocks``): a positive number, or unset for the rule.
RAW_TREES_ENV = "THRIFTY_RAW_TREES"


def _count(name: str, what: str) -> int:
    """The setting ``name`` (0 when unset or empty), checked: a positive whole number."""
    text = os.environ.get(name, "").strip()
    if not text:
        return 0
    if not text.isdigit() or int(text) < 1:
        raise InvalidParameterError(
            f"{name}={text!r} is not {what}: set it to a positive whole number or unset it"
        )
    return int(text)


def raw_trees() -> int:
    """``THRIFTY_RAW_TREES``: the positions per block of the scores-only entry (0: the rule)."""
    return _count(RAW_TREES_ENV, "a number of trees")


def raw_blocks(lay: Layout) -> list[tuple[int, int]]:
    """The blocks ``(start, length)`` of the scores-only entry (``ir_vraw``): ``THRIFTY_RAW_TREES``
    positions each when set, else ``vblocks``'s. Its blocks have no row state to load and
    store, so what a longer block saves is the gathers and rank searches of the features it
    tests, and the compares its trees share. Measured (docs/runtime.md, "Block size of the
    scores-only entry"): the 300-feature ranker's 500 trees in one block took 0.947 to 0.989 of
    the time in two blocks of 256, but its one module compiles on one core (40 to 56 s of wall
    time against 29); higgs_small's blocks of 100 or 128 and synth136's of 512 measured within
    the noise. So the rule is the vector blocks'. With the ranks formed once per pass
    (``ir_preranks``), the ranker's one block took 1.015 of two blocks' time."""
    size = raw_trees()
    if not size:
        return vblocks(lay)
    n = len(lay.exits)
    return [(p, min(size, n - p)) for p in range(0, n, size)]


def raw_blocks_key() -> str:
    """What of ``raw_blocks`` the cache key must name: the forced positions per block."""
    size = raw_trees()
    return f"|rawtrees={size}" if size else ""
