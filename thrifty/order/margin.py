"""LightGBM's prediction early stopping (``pred_early_stop``) as a thrifty ``Sequential`` plan.

LightGBM's rule for a binary model (``src/boosting/prediction_early_stop.cpp`` and
``GBDT::PredictRaw``): trees are added in training order; after every ``freq``-th iteration
(``freq``, ``2 freq``, ... trees, including the last iteration when ``freq`` divides the
number of trees) it checks ``2 * |raw| > margin`` on the partial raw score ``raw`` (the sum of
the trees so far; the init score is folded into the first tree) and, if true, stops and
returns that partial score. ``2|s| > m`` is ``s > m/2`` or ``s < -m/2``, so the plan has exits
``eps_pos = m/2``, ``eps_neg = -m/2`` at positions ``k*every - 1`` and none elsewhere (the
halving and doubling are exact in floating point, so both rules decide identically).

For a multiclass model LightGBM checks, after every ``freq``-th boosting round (``K`` trees,
one per class), the gap between the two largest class scores: ``top1 - top2 > margin``. A
multiclass ``Sequential`` plan exits on exactly that margin of the leading class over the
runner-up, so the plan has ``eps_pos = margin`` after the last tree of rounds ``freq``,
``2 freq``, ... and predicts the leading class (``eps_neg`` stays ``-inf``).

For a regressor (beyond LightGBM) the margin is a ``tolerance`` in target units and the check
is the bound of the remaining trees (``thrifty.order.regression.remaining_bound``): at the
first check where no choice of leaves in the trees still to come can move the prediction by
more than ``tolerance``, every example stops. The rule is exact, so it needs no calibration.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any

import numpy as np
import pandas as pd

from thrifty._param_validation import Interval, validate_params
from thrifty._validation import as_forest
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.links import SOFTMAX_LINKS
from thrifty.forest.scores import partial_scores, tree_scores
from thrifty.order.regression import TOLERANCE, remaining_bound
from thrifty.runtime.plans import Sequential

__all__ = ["calibrate_margin", "margin_early_exit", "margin_frontier"]


# ------------------------------------------------------------------------------ helpers


def _forest(model: Any) -> Forest:
    forest = as_forest(model, who="the margin early exit")
    if forest.task == "multiclass":
        return _boosted_classes(forest)
    if forest.task != "binary" or forest.n_outputs != 1:
        raise InputError(
            f"margin early exits need a classifier; this model's task is {forest.task!r} with "
            f"{forest.n_outputs} outputs"
        )
    if forest.link == "proba" or forest.decision_threshold != 0.0:
        raise InputError(
            f"margin early exits need raw scores symmetric around 0 (a sigmoid "
            f"link); this model's link is {forest.link!r}"
        )
    return forest


def _boosted_classes(forest: Forest) -> Forest:
    """``forest`` when it is a boosted multiclass model in rounds of one tree per class (the
    layout LightGBM's check after every ``freq`` rounds reads)."""
    K, T = forest.n_outputs, forest.n_trees
    rounds = T % K == 0 and np.array_equal(forest.tree_class, np.tile(np.arange(K), T // K))
    if forest.link not in SOFTMAX_LINKS or not rounds:
        raise InputError(
            "multiclass margin exits need a boosted model whose rounds add one tree to each class "
            f"in turn (LightGBM, XGBoost, scikit-learn gradient boosting); this one has link "
            f"{forest.link!r} and {T} trees over {K} classes: use qwyc for other layouts"
        )
    return forest


_MARGIN = [Interval(Real, 0, None, closed="left")]  # inf disables every exit
_EVERY = [Interval(Integral, 1, None, closed="left")]


def _checks(n_trees: int, every: int, per_round: int = 1) -> np.ndarray:
    """0-based positions after which LightGBM checks: the last tree of rounds every, 2*every,
    ... (``per_round`` trees a round; < n_trees)."""
    return np.arange(every * per_round - 1, n_trees, every * per_round, dtype=np.int64)


def _check_statistics(forest: Forest, X: Any, every: int) -> tuple[np.ndarray, np.ndarray]:
    """At each check of each row: the statistic LightGBM compares with the margin (``2|s|``,
    or the gap between the two largest class scores) and whether the decision there differs
    from the full model's; two arrays of shape (n, n_checks).

    Partial scores are accumulated tree by tree in order from the base score, exactly as the
    runtime does, so comparisons against exit thresholds agree bit for bit.
    """
    K = forest.n_outputs
    checks = _checks(forest.n_trees, every, K)
    if K == 1:
        at = np.unique(np.r_[checks, forest.n_trees - 1])  # the checks, then the full score
        G = partial_scores(forest, tree_scores(forest, X), np.arange(forest.n_trees), at)
        S, full = G[:, : len(checks)], G[:, -1]
        return 2.0 * np.abs(S), (S > 0) != (full > 0)[:, None]
    F = tree_scores(forest, X)
    g = np.tile(forest.base_score.astype(np.float64), (F.shape[0], 1))
    acc32 = forest.accumulate == "float32"
    gaps, leads = [], []
    for t in range(forest.n_trees):
        c = forest.tree_class[t]
        g[:, c] = g[:, c] + F[:, t]
        if acc32:
            g[:, c] = g[:, c].astype(np.float32).astype(np.float64)
        if t in checks:
            top2 = np.sort(g, axis=1)[:, -2:]
            gaps.append(top2[:, 1] - top2[:, 0])
            leads.append(np.argmax(g, axis=1))
    full = np.argmax(g, axis=1)
    n = F.shape[0]
    A = np.column_stack(gaps) if gaps else np.zeros((n, 0))
    lead = np.column_stack(leads) if leads else np.zeros((n, 0), dtype=np.int64)
    return A, lead != full[:, None]


def _outcome(
    A: np.ndarray, W: np.ndarray, margin: float, every: int, n_trees: int
) -> tuple[np.ndarray, np.ndarray]:
    """Trees evaluated and disagreement with the full model of every row under ``margin``
    (``every``: trees between checks)."""
    fires = A > margin
    exits = fires.any(axis=1)
    first = np.argmax(fires, axis=1)
    trees = np.where(exits, (first + 1) * every, n_trees)
    wrong = W[np.arange(len(A)), first] if A.shape[1] else np.zeros(len(A), dtype=bool)
    return trees, exits & wrong


# ------------------------------------------------------------------------------ API


def margin_early_exit(
    model: Any, margin: float | None = None, *, every: int = 10, tolerance: float | None = None
) -> Sequential:
    """LightGBM's ``pred_early_stop`` rule for a binary or multiclass model, as a ``Sequential``
    plan; for a regressor, the exit on the bound of the remaining trees.

    Trees run in their training order; after ``every``, ``2*every``, ... trees an example
    stops when ``2 * |partial raw score| > margin`` and is decided by the sign of that score.
    A multiclass model is checked after every ``every``-th boosting round (one tree per class)
    and an example stops when its leading class's partial score exceeds the runner-up's by
    more than ``margin``, predicting that class.
    A regressor's examples all stop at the first of these checks, after position ``r``, where
    ``B_r = max(sum_{t > r} hi_t, -sum_{t > r} lo_t) <= tolerance`` (``lo_t``, ``hi_t``: tree
    ``t``'s smallest and largest leaf contribution; ``B_r`` also covers the float rounding of
    the sums, see ``thrifty.order.regression.remaining_bound``), so the early prediction is
    within ``tolerance`` of the full one on every input.

    Parameters
    ----------
    model : Forest or fitted classifier or regressor ``Forest.from_model`` imports
        A multiclass model must be boosted (rounds of one tree per class).
    margin : float
        Classifiers: LightGBM's ``pred_early_stop_margin`` (>= 0; ``inf`` disables every exit).
    every : int
        LightGBM's ``pred_early_stop_freq`` (>= 1): boosting rounds between checks.
    tolerance : float > 0
        Regressors: the largest distance from the full prediction an early one may have.

    Returns
    -------
    Sequential
    """
    validate_params({"every": _EVERY}, {"every": every}, "margin_early_exit")
    forest = as_forest(model, who="the margin early exit")
    if forest.task == "regression":
        return _regression_exit(forest, margin, every, tolerance)
    if tolerance is not None:
        raise InputError("tolerance applies to regressors; a binary model's exits take margin=")
    validate_params({"margin": _MARGIN}, {"margin": margin}, "margin_early_exit")
    m = float(margin)  # type: ignore[arg-type]
    forest = _forest(forest)
    T, K = forest.n_trees, forest.n_outputs
    eps_pos = np.full(T, np.inf)
    eps_neg = np.full(T, -np.inf)
    checks = _checks(T, every, K)
    if K > 1:  # the margin of the leading class over the runner-up (Sequential's multiclass exit)
        eps_pos[checks] = m
    else:
        eps_pos[checks] = m / 2.0
        eps_neg[checks] = -m / 2.0
    return Sequential(forest, np.arange(T, dtype=np.int64), eps_pos, eps_neg)


def _regression_exit(forest: Forest, margin: Any, every: int, tolerance: Any) -> Sequential:
    """Every example stops at the first check whose remaining-trees bound is within tolerance."""
    if margin is not None:
        raise InputError("a regressor's early exit takes tolerance= (target units), not margin=")
    validate_params({"tolerance": TOLERANCE}, {"tolerance": tolerance}, "margin_early_exit")
    T = forest.n_trees
    order = np.arange(T, dtype=np.int64)
    eps = np.full(T, np.inf)
    checks = _checks(T, every)
    checks = checks[checks < T - 1]  # an exit after the last tree is the full prediction
    safe = checks[remaining_bound(forest, order)[checks] <= float(tolerance)]
    if safe.size:
        # every finite partial score is above the lowest float, so all examples exit here
        # (not -inf: the runtime reads an infinite threshold as "no exit")
        eps[safe[0]] = np.finfo(np.float64).min
    return Sequential(forest, order, eps, np.full(T, -np.inf))


def calibrate_margin(
    model: Any, X: Any, *, max_disagreement: float, every: int = 10
) -> tuple[Sequential, float]:
    """The smallest margin whose decisions on ``X`` differ from the full model's on at most
    ``max_disagreement`` (a fraction) of the rows, and its plan.

    The decisions only change where the margin crosses a value ``2|s|`` of some partial score
    ``s`` at a check, and they are constant on ``[v_j, v_{j+1})`` between consecutive such
    values (exits fire on a strict ``>``). The disagreement is evaluated exactly on all these
    intervals with one sweep over the sorted values, so the result is the exact minimum even
    where the disagreement is not monotone in the margin (a larger margin can move an example
    from a right early exit to a wrong later one). Trees evaluated never decrease with the
    margin, so the smallest margin is also the cheapest plan meeting the budget.

    Returns
    -------
    (Sequential, float)
        The plan and its margin (``0.0`` when the budget allows exiting at every first check).
    """
    validate_params(
        {"max_disagreement": [Interval(Real, 0, 1, closed="both")], "every": _EVERY},
        {"max_disagreement": max_disagreement, "every": every},
        "calibrate_margin",
    )
    alpha = float(max_disagreement)
    forest = _forest(model)
    A, W = _check_statistics(forest, X, every)
    n = A.shape[0]
    if n == 0:
        raise InputError("calibrate_margin needs at least one row in X")
    # Records: checks whose statistic (2|s|, or the top-two gap) beats every earlier check's
    # (and 0). With margin m in [record_j, record_{j+1}) a row exits at record j+1; below the
    # first record at record 0; at or above its largest record it runs every tree.
    prev = np.zeros_like(A)
    if A.shape[1] > 1:
        prev[:, 1:] = np.maximum.accumulate(A, axis=1)[:, :-1]
    rows, cols = np.nonzero(A > prev)
    wrong = W[rows, cols].astype(np.int64)
    first = np.ones(len(rows), dtype=bool)
    first[1:] = rows[1:] != rows[:-1]
    last = np.ones(len(rows), dtype=bool)
    last[:-1] = rows[1:] != rows[:-1]
    nxt = np.zeros(len(rows), dtype=np.int64)
    nxt[:-1] = wrong[1:]
    nxt[last] = 0
    count0 = int(wrong[first].sum())
    best = 0.0
    if count0 / n > alpha:
        values, inverse = np.unique(A[rows, cols], return_inverse=True)
        counts = count0 + np.cumsum(np.bincount(inverse, weights=nxt - wrong, minlength=len(values)))
        ok = np.flatnonzero(np.rint(counts) / n <= alpha)
        # Above the largest value no row exits, so the disagreement is 0 there.
        best = float(values[ok[0]])
    return margin_early_exit(forest, best, every=every), best


def margin_frontier(model: Any, X: Any, margins: Any, *, every: int = 10) -> pd.DataFrame:
    """Cost and disagreement of the margin early exit for each of ``margins`` on ``X``.

    Returns
    -------
    pandas.DataFrame
        Columns ``margin``, ``mean_trees`` (trees evaluated per row) and ``disagreement``
        (fraction of rows decided differently from the full model).
    """
    validate_params({"every": _EVERY}, {"every": every}, "margin_frontier")
    ms = np.atleast_1d(np.asarray(margins, dtype=object)).tolist()
    for m in ms:
        validate_params({"each margin": _MARGIN}, {"each margin": m}, "margin_frontier")
    ms = [float(m) for m in ms]
    forest = _forest(model)
    A, W = _check_statistics(forest, X, every)
    n = A.shape[0]
    if n == 0:
        raise InputError("margin_frontier needs at least one row in X")
    out = []
    for m in ms:
        trees, wrong = _outcome(A, W, m, every * forest.n_outputs, forest.n_trees)
        out.append((m, float(trees.mean()), float(np.mean(wrong))))
    return pd.DataFrame(out, columns=["margin", "mean_trees", "disagreement"])
