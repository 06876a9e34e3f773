"""Base-model scores of a forest, summed the way the runtime sums them."""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty.forest import Forest


def tree_scores(forest: Forest, X: Any) -> np.ndarray:
    """``F[i, t] = tree_weight[t] * value[leaf of x_i in tree t]`` (single-output forests).

    For a forest that accumulates in float32 (XGBoost) each contribution is rounded to float32,
    as the runtime adds it.
    """
    leaves = forest.apply(X)
    F = forest.tree_weight[None, :] * (forest.value[leaves, 0] if leaves.size else np.zeros(leaves.shape))
    if forest.accumulate == "float32":
        F = F.astype(np.float32).astype(np.float64)
    return F


def partial_scores(forest: Forest, F: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``G[:, r]``: base score plus the first ``r + 1`` trees of ``order``, summed in that order
    (in float32 for a float32-accumulating forest, as the runtime does)."""
    G = np.empty((F.shape[0], len(order)))
    g = np.full(F.shape[0], float(forest.base_score[0]))
    acc32 = forest.accumulate == "float32"
    for r, t in enumerate(order):
        g = g + F[:, t]
        if acc32:
            g = g.astype(np.float32).astype(np.float64)
        G[:, r] = g
    return G
