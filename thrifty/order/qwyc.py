"""QWYC, "Quit When You Can" (Wang, Gupta et al.): joint base-model order and early exits.

Problem (2) of the paper: over an order ``pi`` and thresholds ``eps_neg <= eps_pos``,
minimise the mean cost of the base models evaluated on the examples ``x_1..x_n``,

    (1/n) sum_r c_{pi(r)} |C_{r-1}|,

subject to: the fraction of examples whose early decision differs from the full ensemble's is
at most ``alpha``. After position ``r`` an undecided example exits positive when its partial
score ``g_r > eps_pos[r]`` and negative when ``g_r < eps_neg[r]``; ``C_r`` is the set still
undecided after ``r`` positions (``C_0`` = all examples).

* Algorithm 2 (``thresholds_one`` in the kernels): thresholds of position ``r`` given the
  earlier positions. Lines 4-5 optimise (2) "with T = r": the disagreements made at positions
  ``1..r`` together must stay within ``alpha n`` -- so position ``r`` may spend whatever the
  earlier positions left of the budget (greedy). Line 4 picks ``eps_neg[r]`` first (largest
  negative exit set within the budget, positive exit disabled), line 5 then ``eps_pos[r]``
  with what the negative side left.
* Algorithm 1: for ``r = 1..T`` try every unused base model at position ``r`` (paper's swap
  loop, lines 5-14), keep the one minimising ``J_r = c_{pi(r)} |C_{r-1}| / n_{pi(r)}`` where
  ``n_{pi(r)} = |C_{r-1} - C_r|`` (strict ``<``, so ties keep the earlier candidate of the
  swap order; no candidate deciding anything leaves ``pi(r)`` in place with exits disabled,
  line 4's ``eps* = (+inf, -inf)``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Real
from typing import Any

import numpy as np

from thrifty._param_validation import Interval, StrOptions, validate_params
from thrifty._validation import as_forest, check_sample_weight
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest.scores import leaf_paths, tree_scores
from thrifty.order import _qwyc_kernels as _k
from thrifty.order import _qwyc_targets as _targets
from thrifty.order._qwyc_multiclass import qwyc_multiclass
from thrifty.order.orderings import FIXED_ORDERINGS, check_kind, order_from_scores, positive_labels
from thrifty.runtime.evaluate import evaluate
from thrifty.runtime.plans import Sequential

ORDERINGS = ("optimize",) + FIXED_ORDERINGS
UNLABELLED = ("optimize", "given", "random")  # the orderings that need no class labels
TOLERANCE = [Interval(Real, 0, None, closed="neither")]  # a regressor's (> 0: see qwyc_regression)
MODES = ("both", "negative")
_OPTIONS: dict[str, list[Any]] = {
    "alpha": [Interval(Real, 0, 1, closed="left")],
    "mode": [StrOptions(set(MODES))],
    "ordering": [StrOptions(set(ORDERINGS))],
}


@dataclass
class QWYCResult:
    """Everything QWYC decided, and what it costs on the examples it was fitted on.

    Attributes
    ----------
    order : ndarray of int64, shape (T,)
        Base-model indices in evaluation order (0-based).
    eps_pos, eps_neg : ndarray of float64, shape (T,)
        Exit thresholds per position (``+inf`` / ``-inf`` disable an exit).
    mean_cost : float
        ``(1/n) sum_r c_{order[r]} |C_{r-1}|`` on the fitted examples (objective of (2));
        with sample weights, counts are sums of weights.
    n_disagree : float
        Examples whose early decision differs from the full ensemble's (their total weight
        with sample weights), at most ``budget``.
    budget : float
        ``alpha n`` (``alpha`` times the total weight).
    n_exit : ndarray of float64, shape (T,)
        Examples exiting at each position (their total weight with sample weights).
    J : ndarray of float64, shape (T,)
        The ratio ``J_r`` of the base model chosen at each position (``inf``: none exited).
    """

    order: np.ndarray
    eps_pos: np.ndarray
    eps_neg: np.ndarray
    mean_cost: float
    n_disagree: float
    budget: float
    n_exit: np.ndarray = field(repr=False)
    J: np.ndarray = field(repr=False)


def qwyc(
    model: Any,
    X: Any,
    y: Any = None,
    *,
    alpha: float = 0.005,
    threshold: float | None = None,
    costs: Any = None,
    mode: str = "both",
    ordering: str = "optimize",
    random_state: Any = None,
    return_result: bool = False,
    progress: bool = False,
    feature_costs: bool = False,
    sample_weight: Any = None,
    tolerance: float | None = None,
) -> Any:
    """Order the trees of a binary forest (or a regressor's) and choose early exits with QWYC.

    Parameters
    ----------
    model : Forest or fitted model
        A binary classifier (thrifty ``Forest`` or anything ``Forest.from_model`` imports).
        Base model ``t`` is tree ``t``: ``F[i, t] = tree_weight[t] * value[leaf of x_i in tree
        t]``. A multiclass boosted model is also accepted (beyond the paper): its base models
        are boosting rounds, and an example exits when its leading class's partial score
        exceeds the runner-up's by the position's threshold (``ordering`` "optimize" or
        "given", ``mode="both"``). A regressor is also accepted (beyond the paper): an exit
        disagrees when its partial score is farther than ``tolerance`` from the full score
        (``ordering`` "optimize", "given" or "random"; see ``qwyc_regression``).
    X : array-like of shape (n, n_features)
        Examples the order and thresholds are fitted on (labels are not needed).
    y : array-like of shape (n,), optional
        Labels of ``X``, only for ``ordering="individual_mse"`` / ``"greedy_mse"`` (the
        forest's classes, 0/1, -1/+1 or booleans).
    alpha : float in [0, 1), default=0.005
        Largest fraction of examples of ``X`` whose decision may differ from the full forest's.
    threshold : float, optional
        Decision threshold on raw scores; must be the forest's ``decision_threshold`` (the
        default), since the returned plan decides examples that never exit with it.
    costs : CostModel or array-like of shape (T,), optional
        Per-tree cost ``c_t``: ``costs.tree_cost`` for a CostModel with ``tree_cost > 0``,
        the values of an array, else 1 for every tree.
    mode : {"both", "negative"}
        ``"negative"``: early-negative exits only (``eps_pos = +inf``, filter-and-score).
    ordering : {"optimize", "given", "random", "individual_mse", "greedy_mse"}
        ``"optimize"``: Algorithm 1 (order and thresholds jointly). The others fix the order
        first (``thrifty.order.fixed_order``, the paper's Appendix B) and choose its
        thresholds with Algorithm 2: ``"given"``: trees ``0..T-1``; ``"random"``: a
        permutation drawn from ``random_state``; ``"individual_mse"``, ``"greedy_mse"``:
        from the labels ``y``.
    random_state : int, Generator or None
    return_result : bool, default=False
        Also return the ``QWYCResult`` (cost and disagreements on ``X``).
    progress : bool, default=False
        Show a tqdm progress bar over the positions (off anyway when stderr is not a TTY).
    feature_costs : bool, default=False
        With a ``CostModel`` in ``costs``: a tree also costs, for each example still undecided,
        the features it would newly acquire on that example's path (groups and dependencies
        included, each paid once per example), so the objective is the mean per-example cost
        ``thrifty.evaluate`` reports (``tree_cost`` per tree plus features; split costs are not
        part of it). Binary forests only.
    sample_weight : array-like of shape (n,), optional
        Weights of the examples of ``X``, as an empirical distribution for the expectations of
        problem (1): in its empirical analogue (2) every count becomes a sum of weights (the
        mean cost ``sum_r c_{pi(r)} w(C_{r-1}) / w(C_0)``, the disagreements
        ``w(differ) <= alpha w(C_0)``, Algorithm 1's ``J_r = c w(C_{r-1}) / w(C_{r-1} -
        C_r)``), so integer weights act as repeated rows and zero weights as dropped rows.
    tolerance : float > 0, optional
        Regressors only: the largest distance, in target units, from the full prediction at
        which an early prediction still agrees (default: ``default_tolerance``, 5% of the
        standard deviation of ``y``, or of the full predictions on ``X`` without ``y``).

    Returns
    -------
    Sequential, or (Sequential, QWYCResult) with ``return_result=True``.
    """

    forest = as_forest(model, who="qwyc")
    if forest.task == "regression":
        from thrifty.order.regression import qwyc_regression

        return qwyc_regression(
            forest,
            X,
            y,
            alpha=alpha,
            tolerance=tolerance,
            costs=costs,
            mode=mode,
            ordering=ordering,
            random_state=random_state,
            return_result=return_result,
            progress=progress,
            feature_costs=feature_costs,
            sample_weight=sample_weight,
        )
    if tolerance is not None:
        raise InputError("tolerance applies to regressors only; a classifier's exits agree on the label")
    _check_options(alpha, mode, ordering, y, "qwyc")
    if forest.task == "multiclass":
        return _qwyc_multiclass(
            forest,
            X,
            alpha=alpha,
            costs=costs,
            mode=mode,
            ordering=ordering,
            return_result=return_result,
            progress=progress,
            sample_weight=sample_weight,
        )
    if forest.n_outputs != 1 or forest.task != "binary":
        raise InputError(
            f"qwyc needs a binary or multiclass classifier or a regressor; this forest's task is "
            f"{forest.task!r} with {forest.n_outputs} outputs"
            + (
                "; a ranker's exits keeping each query's top k: qwyc_ranking"
                if forest.task == "ranking"
                else ""
            )
        )
    if threshold is not None and float(threshold) != forest.decision_threshold:
        raise InputError(
            f"threshold={threshold!r} differs from the forest's decision threshold "
            f"{forest.decision_threshold:g}, which the returned plan uses for examples "
            "that never exit; use qwyc_scores for another threshold"
        )
    w, keep, F, acquisition, cost = _inputs(forest, X, costs, feature_costs, sample_weight)
    acc32 = forest.accumulate == "float32"
    base = float(forest.base_score[0])
    order = None
    if ordering != "optimize":
        positive = None if y is None else positive_labels(y, forest.classes, X.shape[0])[keep]
        order = order_from_scores(
            F,
            positive,
            kind=ordering,
            base_score=base,
            threshold=forest.decision_threshold,
            half_margin=0.5 if forest.link == "proba" else 1.0,
            random_state=random_state,
            weight=w,
        )
    res = _fit(F, base, forest.decision_threshold, cost, alpha, mode, order, acc32, progress, acquisition, w)
    plan = Sequential(forest, res.order, res.eps_pos, res.eps_neg)
    return (plan, res) if return_result else plan


def _inputs(forest: Any, X: Any, costs: Any, feature_costs: bool, sample_weight: Any) -> tuple:
    """``(w, keep, F, acquisition, cost)`` for ``_fit`` from a forest and the rows ``X``: the
    kept rows' weights (``_weights``), their tree scores, and the costs of the trees."""
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    if X.shape[0] == 0:
        raise InputError("qwyc needs at least one example in X")
    w, keep = _weights(sample_weight, X.shape[0])
    F = tree_scores(forest, X)[keep]
    acquisition = None
    if feature_costs:
        acquisition, cost = _acquisition(forest, X, costs, keep)
    else:
        cost = _tree_costs(costs, forest.n_trees)
    return w, keep, F, acquisition, cost


def check_unlabelled(ordering: str, task: str) -> None:
    """Regressors and rankers have no class labels for the MSE orderings."""
    if ordering not in UNLABELLED:
        raise InputError(f"ordering={ordering!r} needs class labels; a {task} takes one of {UNLABELLED}")


def _acquisition(forest: Any, X: Any, costs: Any, keep: Any) -> tuple[tuple, np.ndarray]:
    """What ``_fit`` needs to price the features each tree would newly acquire."""

    if not isinstance(costs, CostModel):
        raise InputError("feature_costs=True needs costs= a thrifty CostModel (the feature prices)")
    costs = costs.for_features(forest.feature_names, forest.n_features)
    path_ptr, path_feat = leaf_paths(forest)
    leaves = np.ascontiguousarray(forest.apply(X)[keep], dtype=np.int64)
    acquisition = (leaves, path_ptr, path_feat, costs.closure_ptr, costs.closure_units, costs.unit_cost)
    return acquisition, np.full(forest.n_trees, float(costs.tree_cost))


def _qwyc_multiclass(
    forest: Any,
    X: Any,
    *,
    alpha: float,
    costs: Any,
    mode: str,
    ordering: str,
    return_result: bool,
    progress: bool,
    sample_weight: Any,
) -> Any:
    """Multiclass QWYC (beyond the paper): see ``thrifty.order._qwyc_multiclass``."""

    if mode != "both":
        raise InputError(
            f"mode={mode!r} has no meaning for multiclass models (an exit predicts "
            "the leading class); use mode='both'"
        )
    if ordering not in ("optimize", "given"):
        raise InputError(
            f"ordering={ordering!r} is not available for multiclass models; use 'optimize' or 'given'"
        )
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    if X.shape[0] == 0:
        raise InputError("qwyc needs at least one example in X")
    w, keep = _weights(sample_weight, X.shape[0])
    from tqdm.auto import tqdm

    # disable=None: tqdm shows the bar only when stderr is a TTY
    bar = tqdm(
        total=forest.n_trees // forest.n_outputs,
        desc="QWYC rounds",
        unit="round",
        disable=None if progress else True,
    )
    plan, _, _, mean_cost, n_disagree = qwyc_multiclass(
        forest,
        X,
        alpha=alpha,
        cost_per_tree=_tree_costs(costs, forest.n_trees),
        optimize=ordering == "optimize",
        progress=bar.update,
        weight=w,
        rows=keep,
    )
    bar.close()
    if not return_result:
        return plan
    exits = evaluate(plan, X).exit[keep]
    early = exits[exits < len(plan.order)]
    res = QWYCResult(
        order=plan.order,
        eps_pos=plan.eps_pos,
        eps_neg=plan.eps_neg,
        mean_cost=mean_cost,
        n_disagree=n_disagree,
        budget=float(alpha) * (len(exits) if w is None else float(w.sum())),
        n_exit=np.bincount(
            early - 1, weights=None if w is None else w[exits < len(plan.order)], minlength=len(plan.order)
        ).astype(np.float64),
        J=np.full(len(plan.order), np.nan),
    )
    return plan, res


def qwyc_scores(
    F: Any,
    y: Any = None,
    *,
    alpha: float = 0.005,
    threshold: float = 0.0,
    base_score: float = 0.0,
    costs: Any = None,
    mode: str = "both",
    ordering: str = "optimize",
    random_state: Any = None,
    return_result: bool = False,
    progress: bool = False,
    sample_weight: Any = None,
    tolerance: float | None = None,
) -> Any:
    """QWYC on a score matrix of any base models: ``F[i, t]`` is base model ``t`` on example ``i``.

    The full score is ``base_score + F[i].sum()``; it is positive when ``> threshold``. Exits
    compare the partial score ``base_score + sum of the base models so far`` to the thresholds.
    ``y`` (labels: 0/1, -1/+1 or booleans) is needed by the MSE orderings only, whose targets
    are ``threshold -/+ 1``. With ``tolerance`` the scores are a regressor's: an exit disagrees
    when its partial score is farther than ``tolerance`` from the full one (``threshold``
    unused; see ``qwyc_regression``). Other parameters (``sample_weight`` included) as in
    ``qwyc``.

    Returns
    -------
    (order, eps_pos, eps_neg) arrays, or the ``QWYCResult`` with ``return_result=True``.
    """
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2:
        raise InputError(f"F must be a 2-d score matrix (n_examples, n_base_models), got shape {F.shape}")
    if F.shape[0] == 0:
        raise InputError("qwyc_scores needs at least one example (row of F)")
    if F.shape[1] == 0:
        raise InputError("qwyc_scores needs at least one base model (column of F)")
    if not np.all(np.isfinite(F)):
        raise InputError("F must be finite")
    _check_options(alpha, mode, ordering, y, "qwyc_scores")
    if tolerance is not None:
        validate_params({"tolerance": TOLERANCE}, {"tolerance": tolerance}, "qwyc_scores")
        check_unlabelled(ordering, "regressor")
    cost = _tree_costs(costs, F.shape[1])
    w, keep = _weights(sample_weight, F.shape[0])
    positive = None if y is None else positive_labels(y, None, F.shape[0])[keep]
    F = F[keep]
    order = None
    if ordering != "optimize":
        order = order_from_scores(
            F,
            positive,
            kind=ordering,
            base_score=float(base_score),
            threshold=float(threshold),
            random_state=random_state,
            weight=w,
        )
    tol = None if tolerance is None else float(tolerance)
    res = _fit(
        F, float(base_score), float(threshold), cost, alpha, mode, order, False, progress, None, w, tol
    )
    return res if return_result else (res.order, res.eps_pos, res.eps_neg)


# ---------------------------------------------------------------------------------- internals
def _check_options(alpha: float, mode: str, ordering: str, y: Any, caller: str) -> None:
    validate_params(_OPTIONS, {"alpha": alpha, "mode": mode, "ordering": ordering}, caller)
    if ordering != "optimize":
        check_kind(ordering, y)


def _tree_costs(costs: Any, T: int) -> np.ndarray:

    if costs is None:
        return np.ones(T)
    if isinstance(costs, CostModel):
        return np.full(T, float(costs.tree_cost)) if costs.tree_cost > 0 else np.ones(T)
    c = np.asarray(costs, dtype=np.float64)
    if c.shape != (T,):
        raise InputError(f"costs must be a CostModel or an array of {T} per-model costs, got shape {c.shape}")
    if not np.all(np.isfinite(c)) or np.any(c <= 0):
        raise InputError("per-model costs must be finite and > 0")
    return c


def _weights(sample_weight: Any, n: int) -> tuple[np.ndarray | None, Any]:
    """``(weights of the kept rows or None, rows kept)``: rows of weight 0 are dropped, so a
    zero weight is exactly a missing row."""
    w = check_sample_weight(sample_weight, n)
    if w is None:
        return None, slice(None)
    keep = np.flatnonzero(w > 0)
    return w[keep], keep


def _full_scores(F: np.ndarray, base: float, acc32: bool) -> np.ndarray:
    """Full-ensemble scores, summing in base-model order as the runtime does."""
    s = np.full(F.shape[0], base)
    for t in range(F.shape[1]):
        s = s + F[:, t]
        if acc32:
            s = s.astype(np.float32).astype(np.float64)
    return s


def _fit(
    F: np.ndarray,
    base: float,
    threshold: float,
    cost: np.ndarray,
    alpha: float,
    mode: str,
    order: np.ndarray | None,
    acc32: bool,
    progress: bool = False,
    acquisition: tuple | None = None,
    weight: np.ndarray | None = None,
    tolerance: float | None = None,
    ranking: tuple | None = None,
) -> QWYCResult:
    """Algorithm 1 when ``order`` is None, else Algorithm 2 thresholds for the fixed ``order``.

    A classifier's exit disagrees when it decides the other side of ``threshold`` than the
    full score; with ``tolerance`` (a regressor, ``threshold`` unused) when its partial score
    is farther than ``tolerance`` from the full one (``thrifty.order.qwyc_regression``); with
    ``ranking = (qid, k)`` (unit weights) the budget counts queries whose top-``k`` set an
    exit may change (``thrifty.order.ranking.qwyc_ranking``).

    With ``acquisition = (leaves, path_ptr, path_feat, closure_ptr, closure_units, unit_cost)``
    a base model costs ``cost[t]`` per undecided example plus what each of them pays for the
    features the tree would newly acquire on its path. With ``weight`` (all > 0) every count of
    problem (2) is a sum of weights: the cost ``sum_r c_{pi(r)} w(C_{r-1}) / w(C_0)``, the
    disagreements ``w({i: decision differs}) <= alpha w(C_0)`` and ``J_r = c_{pi(r)}
    w(C_{r-1}) / w(C_{r-1} - C_r)``; integer weights are repeated rows.
    """
    from tqdm.auto import tqdm

    n, T = F.shape
    unit = weight is None and ranking is None  # a query's documents cost 1, then 0
    w_all = np.ones(n) if weight is None else np.ascontiguousarray(weight, dtype=np.float64)
    W = float(w_all.sum())
    full = _full_scores(F, base, acc32)
    kind, target, budget_total = _targets.targets(full, threshold, tolerance, ranking, w_all, alpha)
    if ranking is not None:
        qid = np.asarray(ranking[0])
        broken = np.zeros(int(qid.max()) + 1, dtype=np.bool_)
    neg_only = mode == "negative"
    optimize = order is None
    pi = np.arange(T, dtype=np.int64) if optimize else np.array(order, dtype=np.int64)  # Alg. 1, line 1
    eps_pos = np.full(T, np.inf)
    eps_neg = np.full(T, -np.inf)
    n_exit = np.zeros(T)
    J = np.full(T, np.inf)

    Ft = np.ascontiguousarray(F.T)  # (T, n): one base model's outputs are contiguous
    cols = np.arange(n, dtype=np.int64)  # columns of Ft still undecided
    rows = np.arange(n, dtype=np.int64)  # the original examples they are
    w = w_all
    if acquisition is not None:
        leaves, path_ptr, path_feat, closure_ptr, closure_units, unit_cost = acquisition
        paid = np.zeros((n, unit_cost.shape[0]), dtype=np.bool_)
    g = np.full(n, base)
    if acc32:
        g = g.astype(np.float32).astype(np.float64)
    spent = 0.0
    total_cost = 0.0
    # disable=None: tqdm shows the bar only when stderr is a TTY
    bar = tqdm(total=T, desc="QWYC positions", unit="pos", disable=None if progress else True)
    for r in range(T):
        m = g.shape[0]
        if m == 0:
            break
        bar.update(1)
        budget = budget_total - spent
        cand = pi[r:] if optimize else pi[r : r + 1]
        k = cand.shape[0]
        out = np.zeros((5, k))
        we, wd, en, ep = out[_k.W_EXIT], out[_k.W_DIS], out[_k.EPS_NEG], out[_k.EPS_POS]
        ne = out[_k.N_EXIT]
        _k.scan_candidates(Ft, cols, g, target, kind, w, unit, cand, budget, neg_only, acc32, out)
        cand_cost = cost[cand] * (float(m) if unit else float(w.sum()))
        if acquisition is not None:
            feature_cost = np.zeros(k)
            _k.acquisition_costs(
                leaves,
                rows,
                w_all,
                cand,
                path_ptr,
                path_feat,
                closure_ptr,
                closure_units,
                unit_cost,
                paid,
                feature_cost,
            )
            cand_cost = cand_cost + feature_cost
        with np.errstate(divide="ignore"):
            Jc = np.where(ne > 0, cand_cost / np.where(ne > 0, we, 1.0), np.inf)
        # Algorithm 1 lines 3-15: k* = r, J* = inf; update on strictly smaller J only.
        j = 0
        best = np.inf
        for jj in range(k):
            if Jc[jj] < best:
                best, j = Jc[jj], jj
        pi[r], pi[r + j] = pi[r + j], pi[r]
        t = pi[r]
        total_cost += cand_cost[j]
        if acquisition is not None:
            _k.acquire(leaves, rows, t, path_ptr, path_feat, closure_ptr, closure_units, paid)
        s = g + Ft[t, cols]
        if acc32:
            s = s.astype(np.float32).astype(np.float64)
        if not np.isfinite(best):
            g = s  # nothing can exit here: eps* stays (+inf, -inf) (line 4)
            continue
        eps_pos[r], eps_neg[r] = ep[j], en[j]
        n_exit[r], J[r] = we[j], best
        keep = ~((s > ep[j]) | (s < en[j]))
        if ranking is None:
            spent += wd[j]
        else:
            spent += _targets.break_queries(target, s, ~keep, qid, broken)
            target[_k.DW] = ~broken[qid]  # a counted query's documents exit for free
            qid = qid[keep]
        g, cols, target, rows, w = s[keep], cols[keep], target[:, keep], rows[keep], w[keep]
        if cols.shape[0] < 0.75 * Ft.shape[1]:  # compact: later scans read fewer columns
            Ft = np.ascontiguousarray(Ft[:, cols])
            cols = np.arange(cols.shape[0], dtype=np.int64)
    bar.close()
    return QWYCResult(
        order=pi,
        eps_pos=eps_pos,
        eps_neg=eps_neg,
        mean_cost=total_cost / W,
        n_disagree=spent,
        budget=budget_total,
        n_exit=n_exit,
        J=J,
    )
