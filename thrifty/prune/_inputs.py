"""BudgetPrune's inputs: the forest, data and cost model checked, and the node loss of (IP3) that
the forest's task and ``leaf_values`` ask for."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from thrifty._validation import as_forest, check_width
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.prune._node_loss import ClassVote, SquaredError

# What leaves predict, per task ("auto" picks one of the others).
CLASS_LEAF_VALUES = ("auto", "keep", "distribution", "majority")
REGRESSION_LEAF_VALUES = ("auto", "keep", "mean")
LEAF_VALUES = tuple(dict.fromkeys(CLASS_LEAF_VALUES + REGRESSION_LEAF_VALUES))


def prune_inputs(forest: Any, X: Any, y: Any, costs: Any) -> tuple:
    """``(forest, X as its matrix, target, cost model)``: the target is each example's class
    index for a classifier, its float value for a regressor."""
    f = as_forest(forest, who="BudgetPrune")
    if not (f.is_classifier or (f.task == "regression" and f.n_outputs == 1)):
        raise InputError(
            f"BudgetPrune prunes classifiers (errors counted against labels) and single-output "
            f"regressors (squared errors); this forest's task is {f.task!r} with {f.n_outputs} outputs"
        )
    if f.aggregation == "sum" and f.n_trees > f.n_outputs:
        boosted = (
            "make the boosted model cheaper with QWYCClassifier or CronusClassifier"
            if f.is_classifier
            else "train a boosted model under the costs with CEGBRegressor or GreedyMiserRegressor"
        )
        raise InputError(
            f"BudgetPrune prunes averaging ensembles (random forests, extra-trees, BudgetRF, "
            f"LightGBM boosting='rf'), whose every tree predicts on its own; this "
            f"{f.source or 'forest'} model is boosted (its {f.n_trees} trees add up to one score), "
            f"so a pruning of it would not predict like it: prune a random forest, or {boosted}"
        )
    if f.is_classifier and f.classes is None:
        f = copy.copy(f)  # never relabel the caller's forest
        f.classes = np.arange(max(2, f.n_outputs))
    Xm = f._as_matrix(X)
    check_width(Xm.shape[1], f.n_features, "the forest was fitted on")
    y = np.asarray(y).reshape(-1)
    if y.shape[0] != Xm.shape[0]:
        raise InputError(f"X has {Xm.shape[0]} rows but y has {y.shape[0]} labels")
    if Xm.shape[0] == 0:
        raise InputError("BudgetPrune needs at least one labelled example")
    target = _class_index(f.classes, y) if f.is_classifier else _values(y)
    if costs is None:
        costs = CostModel.uniform(f.n_features)
    elif not isinstance(costs, CostModel):
        costs = CostModel(costs)
    costs = costs.for_features(f.feature_names, f.n_features)
    return f, Xm, target, costs


def _class_index(classes: Any, y: np.ndarray) -> np.ndarray:
    classes = np.asarray(classes)
    order = np.argsort(classes, kind="stable")
    pos = np.clip(np.searchsorted(classes[order], y), 0, len(classes) - 1)
    cls = order[pos]
    unknown = classes[cls] != y
    if np.any(unknown):
        raise InputError(
            f"y holds label(s) {np.unique(y[unknown])[:5].tolist()} that are not among "
            f"the forest's classes {classes.tolist()}"
        )
    return cls.astype(np.int64)


def _values(y: np.ndarray) -> np.ndarray:
    try:
        values = y.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"a regression forest is pruned on numeric targets; y holds {y.dtype}") from exc
    if not np.all(np.isfinite(values)):
        raise InputError("y contains NaN or infinity; regression targets must be finite")
    return values


def node_loss(f: Any, leaf_values: str) -> tuple[ClassVote | SquaredError, np.ndarray | None]:
    """The loss of (IP3) for ``f``'s task, and (classifiers keeping their leaves) the original
    leaves' class distributions, which the pruned forest's leaves keep.

    A regressor's original leaf keeps what its tree predicts there: ``base_score + T w_t v``,
    the leaf value scaled so that the mean over trees is the forest's prediction.
    """
    allowed = CLASS_LEAF_VALUES if f.is_classifier else REGRESSION_LEAF_VALUES
    if leaf_values not in allowed:
        kind = "classifier" if f.is_classifier else "regressor"
        raise InputError(f"leaf_values={leaf_values!r} is not for a {kind}; use one of {list(allowed)}")
    leaf = f.feature < 0
    if not f.is_classifier:
        if leaf_values == "mean":
            return SquaredError(), None
        own = f.base_score[0] + f.n_trees * f.tree_weight[_tree_of(f)] * f.value[:, 0]
        return SquaredError(leaf_value=np.where(leaf, own, np.nan)), None
    n_classes = len(f.classes)
    keep = leaf_values == "keep" or (leaf_values == "auto" and f.link == "proba")
    if not keep:
        return ClassVote(n_classes), None
    if f.link != "proba":
        raise InputError(
            f"leaf_values='keep' needs leaves holding class distributions (link "
            f"'proba', as in random forests); this forest's link is {f.link!r}: use "
            "leaf_values='distribution'"
        )
    original = np.zeros((f.n_nodes, n_classes))
    if n_classes == 2:
        original[:, 1] = f.value[:, 0]
        original[:, 0] = 1.0 - f.value[:, 0]
    else:
        original[:] = f.value
    # the class a leaf votes for (a binary leaf of exactly 1/2 counts as the first class, as
    # the runtime's "raw > 0.5" does)
    return ClassVote(n_classes, np.where(leaf, np.argmax(original, axis=1), -1)), original


def _tree_of(f: Any) -> np.ndarray:
    """The tree each node belongs to."""
    tree = np.zeros(f.n_nodes, dtype=np.int64)
    for t in range(f.n_trees):
        stack = [int(f.roots[t])]
        while stack:
            node = stack.pop()
            tree[node] = t
            if f.feature[node] >= 0:
                stack += [int(f.children_left[node]), int(f.children_right[node])]
    return tree
