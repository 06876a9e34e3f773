"""QWYC and the margin-style early exit for regressors (beyond the paper).

The paper's disagreement is a changed label. For a regressor an early prediction (the partial
score ``g_r`` after ``r`` trees) disagrees with the full prediction ``f`` when it is farther
than a ``tolerance`` in target units: ``|f(x) - g_r(x)| > tolerance``.

* ``qwyc_regression``: QWYC's problem (2) with that disagreement, solved by Algorithms 1 and 2
  (``thrifty.order.qwyc``): at most ``alpha`` of the calibration rows may disagree.
* ``remaining_bound``: the margin-style rule, needing no calibration: after position ``r`` the
  trees still to come add ``R`` with ``sum_t min_leaf_t <= R <= sum_t max_leaf_t``, so every
  example may exit once ``max(sum max_leaf, -sum min_leaf) <= tolerance``
  (``thrifty.order.margin_early_exit`` builds the plan).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty._param_validation import validate_params
from thrifty._validation import as_forest
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.order.orderings import order_from_scores
from thrifty.order.qwyc import _OPTIONS, TOLERANCE, _fit, _full_scores, _inputs, check_unlabelled
from thrifty.runtime.plans import Sequential

__all__ = ["TOLERANCE_FRACTION", "default_tolerance", "qwyc_regression", "remaining_bound"]

# The default regression tolerance, as a fraction of the target's standard deviation.
TOLERANCE_FRACTION = 0.05


def qwyc_regression(
    model: Any,
    X: Any,
    y: Any = None,
    *,
    alpha: float = 0.005,
    tolerance: float | None = None,
    costs: Any = None,
    mode: str = "both",
    ordering: str = "optimize",
    random_state: Any = None,
    return_result: bool = False,
    progress: bool = False,
    feature_costs: bool = False,
    sample_weight: Any = None,
) -> Any:
    """QWYC for a regressor (beyond the paper): early predictions within ``tolerance``.

    Problem (2) with the regression disagreement: over an order ``pi`` and thresholds
    ``eps_neg <= eps_pos`` minimise ``(1/n) sum_r c_{pi(r)} |C_{r-1}|`` subject to

        |{i : i exits at some r with |f(x_i) - g_r(x_i)| > tolerance}| <= alpha n,

    where ``g_r`` is the partial score after ``r`` trees (the early prediction: an example
    exits when ``g_r > eps_pos[r]`` or ``g_r < eps_neg[r]``, i.e. outside the band
    ``[eps_neg[r], eps_pos[r]]``) and ``f`` the full score. Algorithms 1 and 2 carry over
    unchanged once an exit's error is this distance: Algorithm 2's line 4 takes the largest
    low exit set ``{g_r < eps_neg}`` whose rows farther than ``tolerance`` weigh at most the
    budget left, line 5 the largest high exit set with what remains. The constraint holds
    exactly on ``X`` (``QWYCResult.n_disagree <= alpha n``), since examples that never exit
    get every tree and the full score up to the rounding of the order they are summed in.

    Parameters
    ----------
    model : Forest or fitted regressor ``Forest.from_model`` imports
    X, y, alpha, costs, mode, random_state, return_result, progress, feature_costs,
    sample_weight
        As in ``qwyc`` (``y``, optional, only sets the default ``tolerance``).
    tolerance : float > 0, optional
        Default: ``default_tolerance(y)`` or, without ``y``, of the full predictions on ``X``.
    ordering : {"optimize", "given", "random"}

    Returns
    -------
    Sequential, or (Sequential, QWYCResult) with ``return_result=True``.
    """
    validate_params(_OPTIONS, {"alpha": alpha, "mode": mode, "ordering": ordering}, "qwyc")
    forest = as_forest(model, who="qwyc")
    if forest.task != "regression" or forest.n_outputs != 1:
        raise InputError(f"qwyc_regression needs a regressor; this forest's task is {forest.task!r}")
    check_unlabelled(ordering, "regressor")
    w, keep, F, acquisition, cost = _inputs(forest, X, costs, feature_costs, sample_weight)
    acc32 = forest.accumulate == "float32"
    base = float(forest.base_score[0])
    if tolerance is None:
        spread = _full_scores(F, base, acc32) if y is None else np.asarray(y, dtype=np.float64)[keep]
        tolerance = default_tolerance(spread, w)
    validate_params({"tolerance": TOLERANCE}, {"tolerance": tolerance}, "qwyc")
    order = None
    if ordering != "optimize":
        order = order_from_scores(
            F, None, kind=ordering, base_score=base, random_state=random_state, weight=w
        )
    res = _fit(F, base, 0.0, cost, alpha, mode, order, acc32, progress, acquisition, w, float(tolerance))
    plan = Sequential(forest, res.order, res.eps_pos, res.eps_neg)
    return (plan, res) if return_result else plan


def default_tolerance(y: Any, sample_weight: Any = None) -> float:
    """``TOLERANCE_FRACTION`` (5%) of the (weighted) standard deviation of ``y``: an early
    prediction this close to the full one is as good as it for most uses of a regressor.

    A constant ``y`` has no spread; its tolerance is then the float64 rounding of ``y``'s
    magnitude (``1e-12 * max(1, max |y|)``), so that only exact agreement counts.
    """
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    std = float(np.sqrt(np.cov(y, aweights=sample_weight, bias=True))) if len(y) > 1 else 0.0
    tol = TOLERANCE_FRACTION * std
    if not tol > 0:
        tol = 1e-12 * max(1.0, float(np.max(np.abs(y), initial=0.0)))
    return tol


def tree_ranges(forest: Forest) -> tuple[np.ndarray, np.ndarray]:
    """``(lo, hi)``, shape (T,): the smallest and largest contribution ``contribution_weight[t] *
    value[leaf]`` over the leaves reachable from tree ``t``'s root (rounded to float32, as the
    runtime adds them, for a float32-accumulating forest)."""
    T = forest.n_trees
    lo = np.full(T, np.inf)
    hi = np.full(T, -np.inf)
    # breadth-first from every root at once: one level of all trees per step
    nodes = np.asarray(forest.roots, dtype=np.int64)
    tree = np.arange(T, dtype=np.int64)
    while nodes.size:
        leaf = forest.feature[nodes] < 0
        c = forest.contribution_weight[tree[leaf]] * forest.value[nodes[leaf], 0]
        if forest.accumulate == "float32":
            c = c.astype(np.float32).astype(np.float64)
        np.minimum.at(lo, tree[leaf], c)
        np.maximum.at(hi, tree[leaf], c)
        inner, t_inner = nodes[~leaf], tree[~leaf]
        nodes = np.r_[forest.children_left[inner], forest.children_right[inner]].astype(np.int64)
        tree = np.r_[t_inner, t_inner]
    return lo, hi


def remaining_bound(forest: Forest, order: Any) -> np.ndarray:
    """``B[r]``: a bound on ``|f(x) - g_r(x)|`` for every ``x``, after position ``r`` of ``order``.

    The trees after position ``r`` add ``R`` with ``sum lo_t <= R <= sum hi_t`` (``tree_ranges``),
    so ``|R| <= max(sum hi_t, -sum lo_t)``, which is at most the sum of the trees' largest
    ``|contribution|``. The runtime's float sums of ``f`` and ``g_r`` each err by at most
    ``T eps M`` with ``M = |base| + sum_t max(|lo_t|, |hi_t|)`` (``eps`` of the accumulation
    type), so ``2 T eps M`` is added to keep the bound exact for the computed predictions.
    ``order`` must list every tree (``f`` is the full score).
    """
    order = np.asarray(order, dtype=np.int64)
    lo, hi = tree_ranges(forest)
    lo, hi = lo[order], hi[order]
    # suffix sums over the trees after r: position r's tail starts at r + 1
    tail_hi = np.r_[np.cumsum(hi[::-1])[::-1][1:], 0.0]
    tail_lo = np.r_[np.cumsum(lo[::-1])[::-1][1:], 0.0]
    eps = np.finfo(np.float32 if forest.accumulate == "float32" else np.float64).eps
    M = abs(float(forest.base_score[0])) + float(np.maximum(np.abs(lo), np.abs(hi)).sum())
    return np.maximum(np.maximum(tail_hi, -tail_lo), 0.0) + 2.0 * len(order) * eps * M
