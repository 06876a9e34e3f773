"""The tables of a one-row evaluation with trees in the lanes of vectors (``ir_lanes``).

One row gives a vector of rows nothing to share; eight trees do. Each group of ``LANES``
consecutive positions of the plan descends its trees together, one level per step, every lane
reading its node's record from tables rather than branching on it (a branch per split costs
a misprediction about every other split when each call brings a new row). The tables hold
each node once, renumbered so that a split's two children are adjacent (its right child is its
left child plus one: a lane's next node is its left child plus its decision), and a leaf is its
own left child that every value sends left, so lanes that reached their leaf stay there while
the deepest tree of the group finishes.
"""

from __future__ import annotations

import numpy as np

from thrifty.forest import Forest
from thrifty.forest.kernels import MISSING_AS_ZERO, MISSING_ZERO

# Trees per vector of node indices (512 bits; narrower machines split it).
LANES = 8
# Vectors descended together: independent gathers in flight while each waits for memory (one
# vector at a time waits out the latency of a gather of nodes, then one of values, per level).
# Measured one row per call on shapes.py's Adult model (500 trees), native time: 2 took 1.3
# times as long as 4, and 8 0.95 of it (on its 1,000 trees over 136 features 0.82, on the
# ranker 0.87).
GROUPS = 8
# Trees descended together (a block).
BLOCK = LANES * GROUPS
# Positions whose trees are descended before their leaves are added in the plan's order (a
# chunk): a block where the plan has exits (no tree past an exit's block is descended), else
# a few blocks whose trees are sorted by depth (trees of alike depth descend together).
CHUNK_EXITS, CHUNK_FULL = BLOCK, 8 * BLOCK
# Bits of a node record's flags (bits 56-63 of its first word): NaN goes right; zero counts as
# missing (LightGBM's ``Zero`` type: NaN and |x| <= 1e-35 take the default child); the default
# child is the right one; a categorical split (its second word holds its set of up to 64 codes,
# word 1 of ``cat_bits`` above word 0); its set is larger (its second word holds the set's first
# word in ``cat_bits`` and, above them, its number of words); a leaf (every value sends it to
# its left child, itself; its second word is its index in the forest, for its leaf record).
NAN_RIGHT, ZERO_MISSING, DEFAULT_RIGHT, CATEGORICAL, LEAF, CAT_WORDS = 1, 2, 4, 8, 16, 32
# Bits of a record: the left child's index (0-31), the feature (32-55), the flags (56-63).
FEATURE_SHIFT, FLAG_SHIFT = 32, 56
# Features a record can name.
MAX_FEATURES = 1 << (FLAG_SHIFT - FEATURE_SHIFT)
# Nodes the tables can number (a left child's index is 32 bits).
MAX_NODES = (1 << 31) - 1
# The names of the tables, appended to ``layout.TABLES`` (``lleaf`` is made by ``forest_code``
# from the leaf records).
LANE_TABLES = ("lrec", "lblock", "lslot", "lclass", "cat_bits", "ltop", "lleaf")
# Levels of each block read from ``ltop`` with plain loads rather than gathers (``ir_lanes``):
# measured on Adult's trees (8 vectors), 3 took 0.86 of the time of none, 2 0.89; 4 longer than 3
# (16 candidates a lane).
TOP_LEVELS = 3
# Rows of ``BLOCK`` words per block of ``ltop``: per level ``d`` below ``TOP_LEVELS``, the two
# record words of each lane's ``2 ** d`` candidate nodes (``top_rows``).
TOP_ROWS = 2 * (2**TOP_LEVELS - 1)


def leaf_stride(words: int) -> int:
    """Words per leaf record in ``lleaf`` for records of ``words`` words: the next power of two
    up to a cache line's 8, then whole lines, so that on a table that starts on a line
    (``leaf_rows``) no record straddles two lines (unpadded, 3 in 4 of the ranker's records of
    7 words did, half of the 136-feature forest's of 5, a quarter of Adult's of 3)."""
    return 1 << max(0, (words - 1).bit_length()) if words <= 8 else -(-words // 8) * 8


def leaf_rows(leaf: np.ndarray, lorig: np.ndarray) -> np.ndarray:
    """``lleaf``: the records ``leaf`` (one row per node of the forest) of the renumbered nodes
    ``lorig``, each padded to ``leaf_stride`` words, in an array that starts on a 64-byte line."""
    n, words = len(lorig), leaf.shape[1]
    stride = leaf_stride(words)
    flat = np.zeros(n * stride + 8, dtype=np.float64)
    start = (-flat.ctypes.data // 8) % 8
    out = flat[start : start + n * stride].reshape(n, stride)
    out[:, :words] = leaf[lorig]
    return out


def set_words(f: Forest, nodes: np.ndarray) -> np.ndarray:
    """Per categorical split of ``nodes``, its set as a record's second word holds it: a set of
    up to two 32-bit words inline, word 0 then word 1 above it (0 for a one-word set); a larger
    one as ``cat_start + (cat_size << 32)`` (``CAT_WORDS``). Other nodes' words mean nothing."""
    start, size = f.cat_start[nodes].astype(np.int64), f.cat_size[nodes].astype(np.int64)
    words = np.append(f.cat_bitsets.astype(np.int64), 0)
    at = np.clip(start, 0, len(words) - 1)
    word1 = np.where(size > 1, words[np.minimum(at + 1, len(words) - 1)], 0)
    return np.where(size <= 2, words[at] | (word1 << 32), start + (size << 32))


def lanes_ok(forest: Forest) -> bool:
    """Whether the forest's nodes fit the records (features and node counts in their bits)."""
    return forest.n_features <= MAX_FEATURES and forest.n_nodes + 1 <= MAX_NODES


def chunk_of(exits: np.ndarray) -> int:
    """Positions per chunk for a plan with these exit kinds."""
    return CHUNK_EXITS if bool(np.any(exits)) else CHUNK_FULL


def lane_tables(
    forest: Forest, order: np.ndarray, chunk: int, tree: np.ndarray, depth: np.ndarray
) -> dict[str, np.ndarray]:
    """The tables ``ir_lanes`` reads, for the plan visiting ``forest``'s trees in ``order``
    in chunks of ``chunk`` positions (``chunk_of``; ``tree`` and ``depth``: each node's tree and
    splits from its root, ``tables.leaf_tables``).

    Returns
    -------
    dict
        ``lrec`` (two int64 words per renumbered node, side by side so that both come with
        one cache line: the left child, feature and flags, then the threshold's float64 bits,
        for a categorical split its set (up to 64 codes) or ``cat_start + (cat_size << 32)``,
        for a leaf its index in
        ``forest``, which the leaf records ``leaf`` are indexed by), ``lorig`` (each renumbered
        node's index in ``forest``: not read by the code),
        ``lblock`` (int64, ``1 + BLOCK`` per block: the levels its deepest tree has, then each
        lane's root; lanes past a chunk's end start at a spare leaf), ``lslot`` (int64 per
        position: the lane of its chunk's blocks that descends its tree),
        ``lclass`` (int64 per position: its tree's output, -1 for a vector leaf) and
        ``cat_bits`` (the forest's category sets, at least one word). ``forest_code`` adds
        ``lleaf``, the leaf records (``leaf``) of ``lorig``: a record per renumbered node.
    """
    f = forest
    n = f.n_nodes
    new = np.full(n, -1, dtype=np.int64)
    old = np.empty(n + 1, dtype=np.int64)
    left, right, feature = f.children_left.tolist(), f.children_right.tolist(), f.feature.tolist()
    nxt = 0
    for root in f.roots.tolist():
        # Breadth first: a split's children get the next two numbers, the top levels of a tree
        # share cache lines.
        new[root], old[nxt] = nxt, root
        nxt += 1
        queue = [root]
        for node in queue:
            if feature[node] < 0:
                continue
            a, b = left[node], right[node]
            new[a], new[b] = nxt, nxt + 1
            old[nxt], old[nxt + 1] = a, b
            nxt += 2
            queue += (a, b)
    spare = nxt
    old[spare] = 0
    renumbered = old[:spare]
    split = f.feature[renumbered] >= 0
    cat = split & (f.cat_start[renumbered] >= 0)
    mt = f.missing_type[renumbered]
    thr = f.threshold[renumbered]
    miss_left = f.missing_left[renumbered].astype(bool)
    # NaN's side: the side of 0.0 where NaN reads as zero (right of a NaN threshold: no value
    # is <= NaN), else the default child (the ``Zero`` type's override decides it anyway).
    nan_right = np.where(~cat & (mt == MISSING_AS_ZERO), ~(0.0 <= thr), ~miss_left)
    flags = (
        np.where(split & nan_right, NAN_RIGHT, 0)
        | np.where(split & ~cat & (mt == MISSING_ZERO), ZERO_MISSING, 0)
        | np.where(split & ~miss_left, DEFAULT_RIGHT, 0)
        | np.where(cat, CATEGORICAL, 0)
        | np.where(split, 0, LEAF)
        | np.where(cat & (f.cat_size[renumbered] > 2), CAT_WORDS, 0)
    ).astype(np.int64)
    lchild = np.where(split, new[np.asarray(f.children_left)[renumbered]], np.arange(spare))
    feat = np.where(split, f.feature[renumbered], 0).astype(np.int64)
    lnode = np.empty(spare + 1, dtype=np.int64)
    lnode[:spare] = lchild | (feat << FEATURE_SHIFT) | (flags << FLAG_SHIFT)
    lnode[spare] = spare | (LEAF << FLAG_SHIFT)
    second = np.zeros(spare + 1, dtype=np.int64)
    second[:spare] = np.where(split, thr.view(np.int64), renumbered)
    second[:spare][cat] = set_words(f, renumbered)[cat]
    # A tree's levels: the depth of its deepest leaf.
    tree_depth = np.zeros(f.n_trees, dtype=np.int64)
    np.maximum.at(tree_depth, tree, depth)
    lblock, lslot = _blocks(new[f.roots], tree_depth, np.asarray(order, dtype=np.int64), chunk, spare)
    bits = f.cat_bitsets if len(f.cat_bitsets) else np.zeros(1, dtype=np.uint32)
    lrec = np.empty((spare + 1, 2), dtype=np.int64)
    lrec[:, 0], lrec[:, 1] = lnode, second
    ltop = top_rows(lrec, lblock.reshape(-1, 1 + BLOCK)[:, 1:]).reshape(-1)
    return {
        "lrec": lrec,
        "lorig": old[: spare + 1].copy(),
        "lblock": lblock,
        "lslot": lslot,
        "lclass": f.tree_class[order].astype(np.int64),
        "cat_bits": np.ascontiguousarray(bits, dtype=np.uint32),
        "ltop": ltop,
    }


def top_rows(lrec: np.ndarray, root: np.ndarray) -> np.ndarray:
    """``ltop`` of blocks with lanes' roots ``root`` (blocks x ``BLOCK``), as (blocks,
    ``TOP_ROWS``, ``BLOCK``): for each level ``d < TOP_LEVELS`` and each ``q < 2 ** d``, the
    record words of the node a lane reaches from its root when its decision at level ``i`` is
    bit ``i`` of ``q`` (a split's left child is the low 32 bits of its record, its right one
    next to it; a leaf stays)."""
    rows, nodes = [], [root]
    for _ in range(TOP_LEVELS):
        rows += [lrec[n, w] for n in nodes for w in (0, 1)]
        split = [((lrec[n, 0] >> FLAG_SHIFT) & LEAF) == 0 for n in nodes]
        left = [lrec[n, 0] & 0xFFFFFFFF for n in nodes]
        # The next level's candidates: the left children, then the right ones (bit d of q set).
        nodes = left + [c + s for c, s in zip(left, split)]
    return np.ascontiguousarray(np.stack(rows, axis=1), dtype=np.int64)


def _blocks(
    roots: np.ndarray, tree_depth: np.ndarray, order: np.ndarray, chunk: int, spare: int
) -> tuple[np.ndarray, np.ndarray]:
    """``lblock`` and ``lslot``: each chunk's positions, deepest tree first, cut into blocks."""
    P = len(order)
    blocks, slots = [], np.zeros(P, dtype=np.int64)
    for c0 in range(0, P, chunk):
        pos = np.arange(c0, min(P, c0 + chunk))
        # Stable: positions of alike depth keep the plan's order.
        lanes = pos[np.argsort(-tree_depth[order[pos]], kind="stable")]
        slots[lanes] = np.arange(len(lanes))
        for b0 in range(0, len(lanes), BLOCK):
            part = lanes[b0 : b0 + BLOCK]
            block = np.full(1 + BLOCK, spare, dtype=np.int64)
            block[0] = tree_depth[order[part]].max()
            block[1 : 1 + len(part)] = roots[order[part]]
            blocks.append(block)
    lblock = np.concatenate(blocks) if blocks else np.zeros(1 + BLOCK, dtype=np.int64)
    return lblock, slots
