"""The forests of BudgetPrune's solutions: a pruned forest from a closed set, and the accuracy (or
squared error) of every point of a lambda path in one pass (numba)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from thrifty.forest.builder import ForestBuilder, flatten_tree
from thrifty.forest.kernels import child
from thrifty.prune._problem import ClosureProblem

__all__ = ["path_score", "pruned_forest"]


def pruned_forest(forest: Any, problem: ClosureProblem, chosen: np.ndarray) -> Any:
    """The forest keeping the split nodes in ``chosen``; a leaf predicts ``problem.node_value``
    (a class distribution, or a regressor's value), and the trees are averaged."""
    classifier = forest.is_classifier
    n_classes = len(forest.classes) if classifier else 1
    dist = problem.node_value
    keep = np.zeros(forest.n_nodes, dtype=bool)
    keep[problem.split_node] = chosen[: problem.n_split]
    width = n_classes if n_classes > 2 else 1
    builder = ForestBuilder(width)
    T = forest.n_trees
    for t in range(T):
        nodes, left, right = _kept_tree(
            int(forest.roots[t]), keep, forest.children_left, forest.children_right
        )
        split = left >= 0
        cat_words = {}
        for j in np.flatnonzero(split & (forest.cat_start[nodes] >= 0)):
            s = forest.cat_start[nodes[j]]
            cat_words[int(j)] = forest.cat_bitsets[s : s + forest.cat_size[nodes[j]]]
        value = dist[nodes]
        # one output: a binary class's probability, or a regressor's value (its only column)
        value = value[:, 1] if n_classes == 2 else value[:, 0] if width == 1 else value
        builder.add_tree(
            forest.feature[nodes],
            forest.threshold[nodes],
            left,
            right,
            value,
            missing_left=forest.missing_left[nodes],
            missing_type=forest.missing_type[nodes],
            cat_words=cat_words,
            weight=1.0 / T,
            tree_class=-1 if width > 1 else 0,
        )
    return builder.build(
        base_score=np.zeros(width),
        n_features=forest.n_features,
        link="proba" if classifier else "identity",
        task=forest.task,
        classes=forest.classes,
        feature_names=forest.feature_names,
        categories=forest.categories,
        input_dtype=forest.input_dtype,
        aggregation="mean",
        source=f"budgetprune({forest.source})",
    )


def _kept_tree(
    root: int, keep: np.ndarray, children_left: np.ndarray, children_right: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Preorder nodes of the pruned tree with local children (``-1``: leaf)."""
    nodes, left, right = flatten_tree(
        root, lambda node: (int(children_left[node]), int(children_right[node])) if keep[node] else None
    )
    return np.asarray(nodes, dtype=np.int64), left, right


@njit(cache=True)
def path_score(
    X,
    target,
    weight,
    classify,
    use_mask,
    mask,
    levels,
    keep_until,
    dist,
    roots,
    nodes,
):
    """Weighted score of the averaged leaves at each path level (a split is kept while
    ``keep_until[node] > level``; ``levels`` increase): with ``classify`` the accuracy of the
    averaged class distributions (ties go to the first class, as argmax does), else minus the
    mean squared error of the averaged values against ``target``. With ``use_mask`` an example
    averages the trees ``mask[i]`` marks only (none: left out).

    Each example walks each tree once, down the splits kept at the lowest level; at a higher
    level it stops at the first node of that path no longer kept, which only moves up as the
    level rises, so all levels cost one walk plus one step per level.
    """
    feature = nodes[0]
    n = X.shape[0]
    T = roots.shape[0]
    K = levels.shape[0]
    n_classes = dist.shape[1]
    correct = np.zeros(K)
    prob = np.empty((K, n_classes))
    path = np.empty(feature.shape[0] + 1, dtype=np.int64)
    # least keep_until of the path's splits down to each depth: the example stops above depth d
    # at a level exactly when this is at most the level
    least = np.empty(feature.shape[0] + 1)
    total = 0.0
    for i in range(n):
        n_used = T
        if use_mask:
            n_used = 0
            for t in range(T):
                n_used += mask[i, t]
            if n_used == 0:
                continue
        total += weight[i]
        w = 1.0 / n_used
        prob[:, :] = 0.0
        for t in range(T):
            if use_mask and not mask[i, t]:
                continue
            node = roots[t]
            depth = 0
            path[0] = node
            while feature[node] >= 0 and keep_until[node] > levels[0]:
                least[depth] = keep_until[node] if depth == 0 else min(least[depth - 1], keep_until[node])
                node = child(nodes, node, X[i, feature[node]])
                depth += 1
                path[depth] = node
            d = depth
            for k in range(K):
                while d > 0 and least[d - 1] <= levels[k]:
                    d -= 1
                # summed tree by tree as the runtime sums a mean-aggregated forest, so ties
                # break alike
                for c in range(n_classes):
                    prob[k, c] += w * dist[path[d], c]
        for k in range(K):
            if not classify:
                correct[k] -= weight[i] * (prob[k, 0] - target[i]) ** 2
                continue
            if n_classes == 2:
                best = 1 if prob[k, 1] > 0.5 else 0
            else:
                best = 0
                for c in range(1, n_classes):
                    if prob[k, c] > prob[k, best]:
                        best = c
            if best == target[i]:
                correct[k] += weight[i]
    return correct / max(total, 1e-300)
