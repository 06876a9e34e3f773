"""Per-tree scores of a forest, summed the way the runtime sums them, and each node's path features.

Shared by the methods that re-order, re-weight or cut a forest's trees (QWYC, Fan, the margin
exit, Cronus): ``F[i, t]`` is what tree ``t`` adds to example ``i``'s raw score.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty.forest._forest import Forest

__all__ = ["leaf_paths", "partial_scores", "tree_scores"]


def tree_scores(forest: Forest, X: Any) -> np.ndarray:
    """``F[i, t] = contribution_weight[t] * value[leaf of x_i in tree t]`` (single-output
    forests; ``tree_weight``, times ``scale`` for a ``base_last`` forest).

    For a forest that accumulates in float32 (XGBoost) each contribution is rounded to float32,
    as the runtime adds it. A ``base_last`` forest (CatBoost) rounds its scaled sum once, so
    ``partial_scores`` of it can differ from the runtime's by a few ulps.
    """
    leaves = forest.apply(X)
    values = forest.value[leaves, 0] if leaves.size else np.zeros(leaves.shape)
    F = forest.contribution_weight[None, :] * values
    if forest.accumulate == "float32":
        F = F.astype(np.float32).astype(np.float64)
    return F


def partial_scores(forest: Forest, F: np.ndarray, order: Any, at: Any = None) -> np.ndarray:
    """``G[:, j]``: base score plus the first ``at[j] + 1`` trees of ``order``, summed in that
    order (in float32 for a float32-accumulating forest, as the runtime does).

    ``at`` (increasing positions) keeps only those columns; default every position. A
    ``base_last`` forest's trees are summed from zero and the base added to each column, as
    its exits see the score (bit for bit when its scale is 1; ``F`` already holds the scale).
    """
    at = np.arange(len(order)) if at is None else np.asarray(at, dtype=np.int64)
    G = np.empty((F.shape[0], len(at)))
    base = float(forest.base_score[0])
    g = np.full(F.shape[0], 0.0 if forest.base_last else base)
    acc32 = forest.accumulate == "float32"
    j = 0
    for r, t in enumerate(order[: at[-1] + 1] if len(at) else []):
        g = g + F[:, t]
        if acc32:
            g = g.astype(np.float32).astype(np.float64)
        if r == at[j]:
            G[:, j] = g + base if forest.base_last else g
            j += 1
    return G


def leaf_paths(forest: Forest) -> tuple[np.ndarray, np.ndarray]:
    """For every node, the distinct features tested on the path from its root to it, as CSR
    arrays ``(path_ptr, path_feat)``: node ``v``'s features are ``path_feat[path_ptr[v]:
    path_ptr[v + 1]]``."""
    paths: list[tuple[int, ...]] = [()] * forest.n_nodes
    for root in forest.roots:
        stack: list[tuple[int, tuple[int, ...]]] = [(int(root), ())]
        while stack:
            node, path = stack.pop()
            paths[node] = path
            f = int(forest.feature[node])
            if f >= 0:
                below = path if f in path else path + (f,)
                stack.append((int(forest.children_left[node]), below))
                stack.append((int(forest.children_right[node]), below))
    ptr = np.zeros(forest.n_nodes + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(p) for p in paths])
    feat = np.fromiter((f for p in paths for f in p), dtype=np.int64, count=int(ptr[-1]))
    return ptr, feat
