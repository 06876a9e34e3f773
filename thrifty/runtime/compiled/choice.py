"""Which kind of blocks a forest plan compiles to: vector blocks (``ir_vector``, every split of
a tree tested for eight rows at once), branchy blocks (``ir_branchy``, one branch per split
visited, path constants inlined, compiled at a higher LLVM level) or plain scalar blocks
(``ir_scalar``).

The choice is made once per forest plan at compile time (it is part of the cache key). Forcing
one kind (``THRIFTY_BLOCKS``) is for measuring the others; every kind gives the interpreter's
results bit for bit. The rule: branchy blocks for a skewed forest (``skewed``), else vector
blocks wherever the plan allows them and the target (``targets.current``) has vector lanes,
else scalar blocks. Measured with AVX-512 against each kind forced on seven models
(docs/runtime.md, "Which kind"): branchy blocks were faster only on lleaves' NYC_taxi (rows visit
3 of a tree's 30 splits), by 1.3 times in batch; vector blocks everywhere else, by 1.5 to 3.9
times in batch. A plan with a scores-only entry may get a second one in the other kind for some
row counts (``second_scores``: vector scores for a skewed forest's large calls, branchy scores
for one row of a vector plan whose paths are short).
"""

from __future__ import annotations

import numpy as np

from thrifty.forest import Forest
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.targets import env_choice
from thrifty.runtime.compiled.vblocks import vector_ok

# Environment variable forcing the kind of blocks: "vector", "scalar", "branchy" or "auto"
# (the rule).
BLOCKS_ENV = "THRIFTY_BLOCKS"
KINDS = ("auto", "vector", "scalar", "branchy")
# A forest is skewed (``skewed``) when a coin-flip walk through its trees visits at most this
# fraction of their splits and at most ``SKEW_PATH`` of them (a balanced tree of 31 splits: 5,
# 0.16 of them; NYC_taxi's: 3.9, 0.13) ...
SKEW_SHARE = 1 / 7
SKEW_PATH = 4.0
# ... and it tests at most this many features and no categorical split (a branchy categorical
# split costs 3 to 4 times a numeric one: docs/runtime.md, "Which kind").
SKEW_FEATURES = 16
# Environment variable forcing the scores-only entry's leaf masks to ``vpternlogq`` updates
# ("on", ``ir_ternlog``; 512-bit targets only), to selects ("off") or the rule ("auto",
# ``ternlog_masks``).
TERNLOG_ENV = "THRIFTY_TERNLOG"
TERNLOG_KINDS = ("auto", "on", "off")


def forced_kind() -> str:
    """``THRIFTY_BLOCKS`` (default ``"auto"``), checked."""
    return env_choice(BLOCKS_ENV, KINDS, "a kind of blocks")


def vector_blocks(lay: Layout, lanes: int) -> bool:
    """Whether the plan ``lay`` compiles to vector blocks.

    Parameters
    ----------
    lay : Layout
        The forest, the plan's order and exit kinds.
    lanes : int
        The target's float64 lanes per vector (``targets.Target.lanes``; 0 for the scalar
        target, which has no vector blocks to force).

    Returns
    -------
    bool
        False when the plan cannot take vector blocks (``vblocks.vector_ok``: bin exits, trees
        past ``VECTOR_LEAVES`` leaves); else the forced kind, when ``THRIFTY_BLOCKS`` forces
        one; else whether the target has lanes.
    """
    if not vector_ok(lay) or lanes == 0:
        return False
    kind = forced_kind()
    if kind != "auto":
        return kind == "vector"
    return not skewed(lay)


def branchy_blocks(lay: Layout) -> bool:
    """Whether a plan not on vector blocks (``vector_blocks``) compiles to branchy blocks
    (``ir_branchy``: scalar blocks with path constants, at ``ir_branchy.BRANCHY_LEVEL``) rather
    than plain scalar ones: the kind ``THRIFTY_BLOCKS`` forces, else whether the forest is
    ``skewed``."""
    kind = forced_kind()
    if kind != "auto":
        return kind == "branchy"
    return skewed(lay)


def coin_path(forest: Forest, root: int) -> float:
    """The splits a row visits in the tree at ``root`` when each split sends it either way with
    probability 1/2: the sum over leaves of ``depth * 2**-depth``. Short against the tree's splits
    on skewed trees (a chain of 30 splits: 2.0; a balanced tree of 31 leaves: about 5)."""
    f = forest
    total, stack = 0.0, [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if f.feature[node] < 0:
            total += depth * 0.5**depth
        else:
            stack += [(int(f.children_left[node]), depth + 1), (int(f.children_right[node]), depth + 1)]
    return total


def mean_coin_path(forest: Forest) -> float:
    """``coin_path`` averaged over the trees of ``forest`` (0 without trees)."""
    if forest.n_trees == 0:
        return 0.0
    return sum(coin_path(forest, r) for r in forest.roots.tolist()) / forest.n_trees


def skewed(lay: Layout) -> bool:
    """Whether branchy blocks beat vector blocks on the forest of ``lay`` by its shape: numeric
    splits only, at most ``SKEW_FEATURES`` features, and the coin-flip path (``coin_path``)
    averaged over trees at most ``SKEW_PATH`` splits and ``SKEW_SHARE`` of their splits.

    Vector blocks test every split of a tree for eight rows at once; branchy ones only the
    splits on a row's path, each about seven times a vector split's cost on lleaves' NYC_taxi
    (docs/runtime.md, "Which kind"), and more where branches mispredict, which the shape
    cannot tell. The rule is fitted on the seven models measured there: only NYC_taxi (coin
    path 3.9 of 30 splits, 5 numeric features) is skewed."""
    f = lay.forest
    if f.n_features > SKEW_FEATURES or f.n_trees == 0 or bool(np.any(f.cat_start[f.feature >= 0] >= 0)):
        return False
    path = mean_coin_path(f)
    splits = np.count_nonzero(f.feature >= 0) / f.n_trees
    return bool(path <= SKEW_PATH and path <= SKEW_SHARE * splits)


def ternlog_masks(target: str, ranks: int) -> bool:
    """Whether the scores-only entry's vector blocks update leaf masks with ``vpternlogq``
    (``ir_ternlog``): only on AVX-512 (``target``), where ``THRIFTY_TERNLOG`` forces either way;
    the rule is 16-bit ranks (``ir_ranks.rank_bits``), whose masks have no OR under a mask of
    16-bit lanes. Measured: see docs/runtime.md, "Ternlog masks"."""
    kind = env_choice(TERNLOG_ENV, TERNLOG_KINDS, "a choice")
    if target != "avx512":
        return False
    if kind != "auto":
        return kind == "on"
    return ranks == 16


# Environment variable forcing the second scores-only entry (``second_scores``): "auto" (the
# rule), "off" (none) or "on" (the other kind's entry wherever the plan can have one).
SECOND_ENV = "THRIFTY_SECOND_SCORES"
SECOND_KINDS = ("auto", "off", "on")
# Plans of more positions than this get no second entry unless forced: it compiles every tree
# again (NYC_taxi's 100 trees, loaded machine, empty cache: the branchy plan with its scores
# 15.4 s, then the 16-bit vector scores 3.6 s).
SECOND_TREES = 1000
# A branchy plan's calls of at least this many rows take its vector scores (``second_scores``).
VECTOR_FROM = 512
# The serving path's largest call (``serving.LARGE``; larger calls take the general path).
_LARGE = 1 << 16


def second_scores(
    lay: Layout, lanes: int, vector: bool, ranks16: bool, lane_row: bool = True
) -> tuple[str, int, int]:
    """A second scores-only entry beside a plan's ``raw`` (``objects.second_entry``; only plans
    with one ask), in the other kind of blocks: ``(kind, lo, hi)``, calls of ``lo`` to ``hi``
    rows taking it, kind ``""`` for none.

    - A plan on branchy blocks (skewed) gets vector scores on 16-bit ranks (``ranks16``: they
      fit, on a target that has them) for calls of at least ``VECTOR_FROM`` rows. On NYC_taxi
      (paired, thread CPU, loaded machine; medians of 9 to 15 rounds) their time over the
      branchy scores' was 1.12 at 100 rows, 0.86, 1.03 and 0.96 at 300 (three runs), 0.89
      at 600, 0.90 and 0.84 at 1,000, 0.88 at 3,000, 0.97 and 0.93 at 10,000; 32-bit ranks
      0.93 to 1.01 from 300 rows.
    - A plan on vector blocks gets branchy scores for one row where one row takes no lanes
      (``lane_row`` False: ``ir_serving.lane_rows`` is 0 for fewer positions than a block of
      lanes), so that it would take the vector scores, a vector of rows' work for one: on
      higgs_small's 50 trees of 255 leaves the branchy scores took 0.22 of their time (0.21 to
      0.26 over 9 rounds). Where one row takes the lanes it keeps them: on lleaves' mtpl2
      (1,000 trees, coin path 2.77), the shape where branchy scores had beaten the lanes' node
      records (0.815 of their time over 41 paired rounds), they took 1.27 times the lanes' time
      on rank records (``ir_lranks``; 1.07 to 1.48 over 21 rounds, LightGBM's calls before
      every block).

    Only when ``THRIFTY_BLOCKS`` is ``auto`` (a forced kind is measured alone) and the plan has
    at most ``SECOND_TREES`` positions; ``THRIFTY_SECOND_SCORES`` forces the entry on or off."""
    asked = env_choice(SECOND_ENV, SECOND_KINDS, "a choice")
    if asked == "off" or (asked == "auto" and (forced_kind() != "auto" or len(lay.order) > SECOND_TREES)):
        return "", 0, 0
    if vector:
        one = asked == "on" or not lane_row
        return ("branchy", 1, 1) if one else ("", 0, 0)
    if lanes and vector_ok(lay) and (asked == "on" or ranks16):
        return "vector", VECTOR_FROM, _LARGE
    return "", 0, 0
