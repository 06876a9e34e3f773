"""What the generated code of a forest plan is specialised for, and the memory it works on.

Per-row state lives in one float64/int64 buffer ``S`` of ``n`` rows, field after field (see
``STATE_FIELDS``); read-only tables (leaf values, exit thresholds, bins) are reached through
``T``, an array of their addresses (``TABLES``), and the cost tables through ``C``
(``COST_TABLES``). Leaf values and thresholds are tables, not constants, so plans that differ
only in them share code. ``Layout`` holds the rest: the forest, the plan's order and exits, and
the per-leaf tables (``tables.leaf_tables``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from thrifty.forest import Forest
from thrifty.runtime.compiled.lanes import LANE_TABLES
from thrifty.runtime.compiled.lranks import RANK_TABLES

# Positions per block (one function).
CHUNK = 32
# Rows a block runs over before the next block starts.
ROW_GROUP = 256
# Rows from which ``run`` takes vector blocks (``ir_vector``) rather than scalar ones.
VECTOR_ROWS = 2
# Forests of up to this many features (and paths of fewer than 256 splits) keep a vector leaf
# record's splits on the path in the top byte of its tested-feature word (``Layout.packed``).
PACK_FEATURES = 56
# Fields of the per-row state after the K raw scores, one 8-byte word per row each: splits
# visited, features tested (bits), positions evaluated, exit side, frozen by a bin table,
# feature cost and acquired features (bits) once settled, and the work list of rows.
# ``serve`` also writes each row's evaluation cost and total cost. A forest of more than 64
# features has one more word of each of the two bit sets per further 64 features (feature f is
# bit f % 64 of word f // 64), as further fields after these (``state_fields``).
STATE_FIELDS = ("nodes", "bits", "pos", "dir", "frozen", "cost", "acq", "work", "evaluation", "total")
# Fields of a lazy evaluation's per-row state after the K raw scores (``ir_lazy``): splits
# visited and features tested (bits) by the trees finished, positions evaluated, exit side,
# frozen, the node a row stopped at in the tree at its position (-1: its root), the feature it
# waits for (-1: none), and the work list.
LAZY_FIELDS = ("nodes", "bits", "pos", "dir", "frozen", "cur", "blocked", "work")
# Indices of the cost tables' addresses in ``C``: ``CostModel``'s closures, each unit's features
# as bits (a word per 64 features), (tree_cost, split_cost), and the words of a set of units.
COST_TABLES = ("closure_ptr", "closure_units", "unit_cost", "unit_bits", "prices", "unit_words")
# Indices of the table addresses in ``T``.
TABLES = (
    "leaf",
    "eps_pos",
    "eps_neg",
    "bin_width",
    "bin_ptr",
    "bin_key",
    "bin_pos",
    "bin_neg",
    "base",
    "vleaf",
    "oleaf",
    *LANE_TABLES,
    *RANK_TABLES,
)


def n_words(n_features: int) -> int:
    """64-bit words of a set of ``n_features`` features (at least one)."""
    return max(1, -(-n_features // 64))


def word_field(name: str, w: int) -> str:
    """The state field holding word ``w`` of the bit set ``name`` (``bits`` or ``acq``)."""
    return name if w == 0 else f"{name}{w}"


def state_fields(words: int) -> tuple[str, ...]:
    """The per-row state's fields after the raw scores, with bit sets of ``words`` words:
    ``STATE_FIELDS``, then the further words of ``bits``, then those of ``acq``."""
    more = tuple(word_field(name, w) for name in ("bits", "acq") for w in range(1, words))
    return STATE_FIELDS + more


def double(x: float) -> str:
    """A double constant written bit for bit (LLVM's hexadecimal form)."""
    return f"0x{struct.unpack('<Q', struct.pack('<d', float(x)))[0]:016X}"


def formed_ir(
    finish: np.ndarray, acc: list[str], ty: str, prefix: str, const: Callable[[str], str] = str
) -> tuple[list[str], list[str]]:
    """The scores exits compare (``Schedule.finish``): ``acc`` itself when ``finish`` is empty,
    else each output's ``finish[0] * acc_k + finish[1 + k]``, a multiplication then an addition
    (no fused multiply-add: ``Forest.finish``'s roundings). ``ty`` is the values' type, a
    scalar or vector of doubles, ``prefix`` names the results (fresh per exit), ``const(text)``
    writes a constant of ``ty`` (a splat for vectors). Returns the lines and the scores' names."""
    if not len(finish):
        return [], acc
    lines, out = [], []
    for k, v in enumerate(acc):
        m, s = f"%{prefix}fm{k}", f"%{prefix}fs{k}"
        lines += [
            f"  {m} = fmul {ty} {const(double(finish[0]))}, {v}",
            f"  {s} = fadd {ty} {m}, {const(double(finish[1 + k]))}",
        ]
        out.append(s)
    return lines, out


def exit_score_ir(
    lines: list[str], finish: np.ndarray, acc: list[str], x: str, margin: Callable[..., str]
) -> str:
    """The score a scalar exit compares (``interpret.kernels._exit_score``): the row's score
    or, for several outputs, ``margin(lines, scores, x)``, of the scores ``formed_ir`` forms
    (named from ``x``); the lines computing it are appended to ``lines``."""
    code, scores = formed_ir(finish, acc, "double", f"{x}f")
    lines += code
    return scores[0] if len(scores) == 1 else margin(lines, scores, x)


def blocks_of(n_positions: int) -> list[tuple[int, int]]:
    """Blocks ``(start, length)`` of up to ``CHUNK`` positions."""
    return [(p, min(CHUNK, n_positions - p)) for p in range(0, n_positions, CHUNK)]


class Layout:
    """What the generated code is specialised for besides the trees (all part of the cache key).

    Parameters
    ----------
    forest : Forest
    order : ndarray of int64
        Trees in the order the plan visits them.
    exits : ndarray of int8
        Per position: 0 no exit, 1 threshold exits, 2 threshold and bin exits.
    depth, path_ptr, path_feat : ndarray
        Per node: splits on its path, and the features it tests (``tables.leaf_tables``).
    finish : ndarray, optional
        ``Schedule.finish``: empty, or ``[scale, *base]`` when exits compare the raw score
        formed from the sums.

    Attributes
    ----------
    leaf_ptr, leaves : ndarray
        Each tree's leaves from left to right (``inorder_leaves``).
    """

    def __init__(
        self,
        forest: Forest,
        order: np.ndarray,
        exits: np.ndarray,
        depth: np.ndarray,
        path_ptr: np.ndarray,
        path_feat: np.ndarray,
        finish: np.ndarray | None = None,
    ) -> None:
        self.forest, self.order, self.exits = forest, order, exits
        # ``Schedule.finish``: exits compare ``scale * sum + base`` (baked into the code, and so
        # part of the cache key) when not empty.
        self.finish = np.zeros(0) if finish is None else np.asarray(finish, dtype=np.float64)
        self.depth, self.path_ptr, self.path_feat = depth, path_ptr, path_feat
        self.F = forest.n_features
        self.K = forest.n_outputs
        # One word of tested features (lazy blocks keep bits only then: wider forests mark
        # ``touched``); the dense blocks and ``serve`` keep ``words`` words whatever the width.
        self.masked = self.F <= 64
        self.words = n_words(self.F)
        self.acc32 = forest.accumulate == "float32"
        self.any_bins = bool(np.any(exits == 2))
        # Vector leaf records with the splits on the path in the top byte of the tested-feature
        # word (``tables``, ``ir_vector._counts``): one gather per tree and lane fewer.
        self.packed = self.words == 1 and self.F <= PACK_FEATURES and int(depth.max(initial=0)) < 256
        # Wider forests fold their tested-feature words into a few (``folds``), the splits on the
        # path in the top byte of the first: the vector records then hold the values and
        # ``n_folds`` words (``tables``, ``ir_vector._counts``).
        self.folded = not self.packed and int(depth.max(initial=0)) < 256
        self.leaf_ptr, self.leaves = inorder_leaves(forest)
        self._tree_words: dict[int, list[int]] = {}
        self._folds: dict[int, list[tuple[int, int, int, int]]] = {}
        self._levels: dict[int, tuple[int, ...] | None] = {}

    def levels(self, t: int) -> tuple[int, ...] | None:
        """Tree ``t``'s levels when it is oblivious (``oblivious_levels``): one split node per
        level standing for all of that level's splits; None for other trees."""
        if t not in self._levels:
            self._levels[t] = oblivious_levels(self.forest, int(self.forest.roots[t]))
        return self._levels[t]

    @property
    def vrecord(self) -> int:
        """Words of a vector leaf record (``tables._vector_records``): the ``K`` values, then
        the ``n_folds`` folded words, or the splits on the path and the ``words`` words."""
        return self.K + (self.n_folds if self.folded else 1 + self.words)

    @property
    def n_folds(self) -> int:
        """Folded words of a vector leaf record: the most any tree needs (``folds``)."""
        if "_n_folds" not in self.__dict__:
            self._n_folds = max((self.tree_folds(t) for t in range(self.forest.n_trees)), default=1)
        return self._n_folds

    def tree_folds(self, t: int) -> int:
        """Folded words tree ``t``'s records use (at least fold 0, which holds the splits)."""
        return 1 + max((i for _, i, _, _ in self.folds(t)), default=0)

    def folds(self, t: int) -> list[tuple[int, int, int, int]]:
        """How tree ``t``'s tested-feature words fold into the words of its vector leaf records:
        ``(word, fold, r, mask)`` per word its splits test, ``mask`` the features of the tree in
        that word as bits. On every path of the tree, word ``word`` is the record's word ``fold``
        rotated right by ``r`` bits and ANDed with ``mask``: the rotated masks of the words
        sharing a fold never overlap, and fold 0 keeps its top byte for the splits on the path.

        A 300-feature ranker's tree of 63 leaves tests 42 features over all 5 words; its paths
        fold into 1 or 2 words, so a vector of rows gathers 2 or 3 words of a leaf record per tree
        rather than 6 (gathers are the dearest part of a wide forest's trees).
        """
        if t not in self._folds:
            self._folds[t] = _fold(self._tree_masks(t))
        return self._folds[t]

    def _tree_masks(self, t: int) -> dict[int, int]:
        """Per word of the tested-feature set, the features tree ``t``'s splits test there."""
        f = self.forest
        nodes = f._tree_nodes(t)
        feats = np.unique(f.feature[nodes][f.feature[nodes] >= 0]).tolist()
        masks: dict[int, int] = {}
        for feat in feats:
            masks[feat // 64] = masks.get(feat // 64, 0) | (1 << (feat % 64))
        return masks

    def tree_words(self, t: int) -> list[int]:
        """The words of the tested-feature set that tree ``t``'s paths can set (the words of
        the features its splits test): the others need no update after this tree."""
        if t not in self._tree_words:
            leaves = self.leaves[self.leaf_ptr[t] : self.leaf_ptr[t + 1]]
            feats = [self.path_feat[self.path_ptr[leaf] : self.path_ptr[leaf + 1]] for leaf in leaves]
            words = np.unique(np.concatenate(feats) // 64) if feats else np.zeros(0, dtype=np.int64)
            self._tree_words[t] = words.tolist()
        return self._tree_words[t]


def _rotl(x: int, r: int) -> int:
    """The 64-bit word ``x`` rotated left by ``r`` bits."""
    return ((x << r) | (x >> (64 - r))) & ((1 << 64) - 1) if r else x


def _fold(masks: dict[int, int]) -> list[tuple[int, int, int, int]]:
    """``Layout.folds`` of a tree whose splits test ``masks`` (features per word as bits):
    first fit, words with the most features first, each into the first fold where some rotation
    (the smallest; none is cheapest) overlaps nothing placed there."""
    taken = [0xFF << 56]
    out = []
    for word, mask in sorted(masks.items(), key=lambda wm: (-bin(wm[1]).count("1"), wm[0])):
        i, r = _place(mask, taken)
        if i == len(taken):
            taken.append(0)
        taken[i] |= _rotl(mask, r)
        out.append((word, i, r, mask))
    return sorted(out)


def _place(mask: int, taken: list[int]) -> tuple[int, int]:
    """The first fold of ``taken`` (bits in use per fold) and least rotation where ``mask``
    overlaps nothing; a new fold (unrotated) when none has room."""
    for i, busy in enumerate(taken):
        for r in range(64):
            if not _rotl(mask, r) & busy:
                return i, r
    return len(taken), 0


def oblivious_levels(forest: Forest, root: int) -> tuple[int, ...] | None:
    """One split node per level of the tree at ``root`` when the tree is oblivious, else None.

    A tree is oblivious (symmetric, as CatBoost grows them) when it is complete, every leaf at
    the same depth, and all splits of a level apply the same rule: the same feature, threshold
    (bit for bit), missing-value type and direction, and category set. A row's leaf, numbered
    left to right, is then the bit pattern of its outcomes, level 0 the highest bit. Detected
    from the arrays whatever library grew the tree (a LightGBM or XGBoost tree can be one).
    """
    f = forest
    feature, left, right = f.feature, f.children_left, f.children_right
    level = np.array([root])
    reps: list[int] = []
    while True:
        feats = feature[level]
        if np.all(feats < 0):
            return tuple(reps)
        if np.any(feats < 0):
            return None
        rules = {_rule(f, node) for node in level}
        if len(rules) > 1:
            return None
        reps.append(int(level[0]))
        level = np.stack([left[level], right[level]], axis=1).ravel()


def _rule(f: Forest, node: int) -> tuple:
    """What a split decides by: two splits of equal rules send every row the same way."""
    start, size = int(f.cat_start[node]), int(f.cat_size[node])
    cats = tuple(f.cat_bitsets[start : start + size].tolist()) if start >= 0 else None
    return (
        int(f.feature[node]),
        f.threshold[node : node + 1].view(np.int64)[0].item(),
        int(f.missing_type[node]),
        bool(f.missing_left[node]),
        cats,
    )


def inorder_leaves(forest: Forest) -> tuple[np.ndarray, np.ndarray]:
    """Each tree's leaves from left to right: ``nodes[ptr[t]:ptr[t + 1]]`` (CSR over trees)."""
    f = forest
    left, right, feature = f.children_left.tolist(), f.children_right.tolist(), f.feature.tolist()
    ptr, nodes = [0], []
    for root in f.roots.tolist():
        stack = [root]
        while stack:
            node = stack.pop()
            if feature[node] < 0:
                nodes.append(node)
            else:
                stack += [right[node], left[node]]
        ptr.append(len(nodes))
    return np.asarray(ptr, dtype=np.int64), np.asarray(nodes, dtype=np.int64)
