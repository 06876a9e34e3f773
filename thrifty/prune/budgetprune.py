"""BudgetPrune: "Optimally Pruning Decision Tree Ensembles With Feature Cost" (Nan, Wang, Saligrama).

The integer program (IP3) of the paper -- mean per-tree error on labelled data plus ``lam``
times the mean feature cost per example, where a feature acquired for an example is paid once
however many trees test it -- is solved exactly as a minimum-weight closure, i.e. one minimum
s-t cut (``thrifty.prune._problem`` builds the graph, ``thrifty.prune._closure`` cuts it). The
paper proves the LP relaxation of (IP3) integral (Theorem 4.2); the cut gives the same optimum
without an LP solver.

The whole lambda path is computed by the breakpoint search of Eisner and Severance on the
(concave, piecewise-linear) optimal value: solutions are nested in lambda, so each cut is
restricted to the nodes on which the two solutions around it disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Real
from typing import Any

import numpy as np

from thrifty._param_validation import Interval, StrOptions, validate_params
from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.prune._closure import min_weight_closure
from thrifty.prune._inputs import LEAF_VALUES, node_loss, prune_inputs
from thrifty.prune._problem import ClosureProblem, build_problem
from thrifty.prune._pruned import path_score, pruned_forest

MODES = ("ensemble", "individual")
# When splits that raise the error on the data leave the path: before lambda = 0 itself.
_HARMFUL = -1.0
# The functions' parameters, checked as the estimators' are.
_PARAMS: dict[str, list[Any]] = {
    "lam": [Interval(Real, 0, None, closed="left"), None],
    "budget": [Interval(Real, 0, None, closed="left"), None],
    "mode": [StrOptions(set(MODES))],
    "evaluation": ["boolean"],
    "leaf_values": [StrOptions(set(LEAF_VALUES))],
    "progress": ["boolean"],
}


@dataclass
class PrunePath:
    """Every distinct optimal pruning of a forest along lambda, from none to the most.

    Point ``k`` is optimal for ``lambdas[k] <= lam < lambdas[k + 1]``. Point 0 is the
    unpruned forest (with its leaf values as ``leaf_values`` says). When some splits raise the
    error on the data (kept leaves voting worse than their parent), the next point, also at
    ``lambda = 0``, is the largest optimal pruning at 0: it drops only those. Every later point
    is the smallest optimal pruning from its lambda on (the first may start at 0: splits that
    change no error go for any positive lambda).

    Attributes
    ----------
    lambdas : ndarray of shape (K,)
        Where each solution starts being optimal (increasing; ``lambdas[0] == 0``).
    error : ndarray of shape (K,)
        Mean per-tree error on the data (the error term of (IP3)): the share of examples a
        tree misclassifies, or for a regressor a tree's mean squared error.
    cost : ndarray of shape (K,)
        Mean cost per example on the data as ``thrifty.evaluate`` reports it (feature
        acquisition plus evaluation costs of the cost model).
    n_splits : ndarray of int, shape (K,)
        Split nodes kept.
    mode : {"ensemble", "individual"}
    seconds : float
        Wall time of the path search.
    n_cuts : int
        Minimum cuts solved.
    """

    lambdas: np.ndarray
    error: np.ndarray
    cost: np.ndarray
    n_splits: np.ndarray
    mode: str
    seconds: float
    n_cuts: int
    _forest: Any = field(repr=False)
    _problem: ClosureProblem = field(repr=False)
    _leave: np.ndarray = field(repr=False)
    _X: np.ndarray = field(repr=False)
    _target: np.ndarray = field(repr=False)
    _levels: np.ndarray = field(repr=False)

    def __len__(self) -> int:
        return int(self.lambdas.shape[0])

    def chosen(self, k: int) -> np.ndarray:
        """Boolean mask over the closure's nodes of point ``k``'s solution."""
        return self._leave > self._levels[k]

    def forest(self, k: int) -> Any:
        """The pruned forest of point ``k``."""
        if not -len(self) <= k < len(self):
            raise IndexError(f"path point {k} out of range; the path has {len(self)} points")
        k = k % len(self)
        return pruned_forest(self._forest, self._problem, self.chosen(k))

    def accuracy(self, *, out_of_bag: bool = False) -> np.ndarray:
        """Accuracy of each point's pruned classifier on the data the path was computed on
        (weighted by the sample weights).

        ``out_of_bag=True`` (for a path computed with a ``count_mask``): each example is
        predicted by the trees that count it only (its out-of-bag trees); examples no tree
        counts are left out.
        """
        if not self._forest.is_classifier:
            raise InputError("accuracy is for classifiers; a regressor's path has score() (minus the MSE)")
        return self.score(out_of_bag=out_of_bag)

    def score(self, *, out_of_bag: bool = False) -> np.ndarray:
        """What the path chooses by, higher is better: each point's accuracy (classifier), or
        minus the mean squared error of its averaged prediction (regressor), on the data the
        path was computed on (weighted; ``out_of_bag`` as in :meth:`accuracy`)."""
        p = self._problem
        dist = p.node_value
        keep_until = np.full(self._forest.n_nodes, -1.0)
        keep_until[p.split_node] = self._leave[: p.n_split]
        f = self._forest
        mask = p.count_mask
        if out_of_bag and mask is None:
            raise InputError("out_of_bag=True needs a path computed with a count_mask")
        use_mask = out_of_bag and mask is not None
        return path_score(
            self._X,
            self._target,
            p.weight,
            f.is_classifier,
            use_mask,
            mask if use_mask else np.zeros((0, 0), dtype=np.bool_),
            self._levels,
            keep_until,
            dist,
            f.roots,
            f.nodes,
        )

    def best_within(self, budget: float) -> int:
        """Index of the best point (on the data, by :meth:`score`) whose mean cost is within ``budget``.

        Ties go to the cheaper point.
        """
        ok = np.flatnonzero(self.cost <= budget * (1 + 1e-12) + 1e-12)
        if ok.shape[0] == 0:
            raise InputError(
                f"budget={budget:g} is below the cheapest pruning's mean cost "
                f"{self.cost.min():g} (every tree cut to its root still pays "
                "what the roots' features and the evaluation cost); raise the budget"
            )
        acc = self.score()[ok]
        best = np.flatnonzero(acc == acc.max())
        return int(ok[best[np.argmin(self.cost[ok][best])]])


def budget_prune(
    forest: Any,
    X: Any,
    y: Any,
    costs: Any = None,
    *,
    lam: float | None = None,
    budget: float | None = None,
    mode: str = "ensemble",
    evaluation: bool = False,
    leaf_values: str = "auto",
    count_mask: Any = None,
    sample_weight: Any = None,
    progress: bool = True,
) -> Any:
    """Prune a tree ensemble to trade error against feature cost, optimally ((IP3), Nan et al.).

    Solves

    .. math:: \\min_{z, w} \\frac{1}{NT} \\sum_t \\sum_h e^{(t)}_h z^{(t)}_h
              + \\lambda \\sum_k c_k \\frac{1}{N} \\sum_i w_{k,i}

    over valid prunings (problem (IP3) of the paper), exactly, as one minimum s-t cut. Every
    leaf of the result predicts the class distribution (or majority class) of the examples of
    ``(X, y)`` reaching it (see ``leaf_values``); ``e_h`` counts the examples of ``S_h`` its
    class misclassifies. With ``sample_weight``, example ``i`` counts ``w_i`` times: ``e_h`` and
    the leaf distributions are weighted counts, and ``1/N sum_i`` (errors and costs) becomes
    ``sum_i w_i / sum_i w_i``, so integer weights are repeated rows and a zero weight drops
    the row.

    For a regression forest, a leaf predicts a value ``v_h`` and ``e_h`` is the squared error

    .. math:: e^{(t)}_h = \\sum_{i \\in S_h} w_i \\, (y_i - v^{(t)}_h)^2,

    ``v_h`` the (weighted) mean of the targets of ``S_h`` for a leaf made by pruning (or
    the tree's own value for a kept original leaf). ``e_h`` is a constant per node, so the
    objective stays linear in ``z`` and (IP3) is still solved by one minimum cut; its error term
    is the mean over trees of each tree's mean squared error, an upper bound (by Jensen) of the
    averaged forest's.

    Parameters
    ----------
    forest : Forest or fitted tree ensemble
        Anything ``Forest.from_model`` imports that averages its trees (BudgetRF, scikit-learn
        trees and forests, LightGBM random forests), classifier or single-output regressor.
    X : array-like of shape (n, n_features)
    y : array-like of shape (n,)
        Labels among the forest's classes, or a regressor's numeric targets.
    costs : CostModel, optional
        Feature prices (groups and dependencies honoured); default 1 per feature.
    lam : float >= 0, optional
        The trade-off ``lambda`` of (IP3), in error per unit of mean cost. ``lam=0`` keeps
        every split that does not raise the error on ``(X, y)`` (all of them when leaves are
        re-labelled); ``lam > 0`` gives the smallest optimal pruning.
    budget : float, optional
        Instead of ``lam``: the most accurate pruning on ``(X, y)`` along the lambda path
        whose mean cost per example on ``X`` is at most ``budget``.
    mode : {"ensemble", "individual"}
        ``"individual"`` prunes each tree as if features were not shared across trees (the
        paper's comparison); the result's cost is still measured with sharing.
    evaluation : bool, default=False
        Also charge the cost model's ``split_cost`` per split visited (beyond the paper).
    leaf_values : {"auto", "keep", "distribution", "majority", "mean"}
        What a leaf predicts. Leaves made by pruning predict the class distribution of the
        examples of ``(X, y)`` reaching them (``"majority"``: one-hot majority class, and so do
        the original leaves). The original leaves keep their own class distribution with
        ``"keep"`` (then ``e_h`` counts the errors of their vote) or are re-labelled from the
        data with ``"distribution"``; ``"auto"`` keeps them when the forest averages class
        distributions (BudgetRF, scikit-learn forests and trees) and re-labels them otherwise
        (boosted or LightGBM random-forest leaves are not class distributions). For a
        regressor: ``"keep"`` (and ``"auto"``) keeps each original leaf's value, ``"mean"``
        re-fits every leaf to the mean target of its ``(X, y)`` examples.
    count_mask : array-like of bool, shape (n, n_trees), optional
        Which examples count toward each tree's errors ``e_h`` and leaf distributions, e.g.
        the out-of-bag rows of a random forest fitted on ``X`` (as the authors' code counts
        them); every example counts by default. Feature costs always count every example.
    sample_weight : array-like of shape (n,), optional
        Non-negative weight of each example in (IP3) (default: 1 each).
    progress : bool, default=True
        Progress bar along the lambda path (only when stderr is a TTY).

    Returns
    -------
    Forest
        Same number of trees, averaged leaf distributions (``link="proba"``), or for a
        regressor averaged leaf values (``link="identity"``).
    """
    validate_params(_PARAMS, {"lam": lam, "budget": budget, "progress": progress}, "budget_prune")
    if (lam is None) == (budget is None):
        raise InvalidParameterError(
            "give exactly one of lam= (the (IP3) trade-off) or budget= (a mean cost per example)"
        )
    options = {
        "mode": mode,
        "evaluation": evaluation,
        "leaf_values": leaf_values,
        "count_mask": count_mask,
        "sample_weight": sample_weight,
    }
    if budget is not None:
        path = budget_prune_path(forest, X, y, costs, progress=progress, **options)
        return path.forest(path.best_within(float(budget)))
    problem, f, _, _ = prepare(forest, X, y, costs, **options)
    return pruned_forest(f, problem, solve(problem, float(lam)))  # type: ignore[arg-type]  # lam given


def budget_prune_path(
    forest: Any,
    X: Any,
    y: Any,
    costs: Any = None,
    *,
    mode: str = "ensemble",
    evaluation: bool = False,
    leaf_values: str = "auto",
    count_mask: Any = None,
    sample_weight: Any = None,
    progress: bool = True,
) -> PrunePath:
    """All distinct optimal prunings of (IP3) as lambda grows from 0 (none) to infinity.

    Breakpoints are found by intersecting the objective lines of two known solutions and
    cutting at the intersection (Eisner & Severance 1976): either a new solution lies below
    both lines, or none exists between them. Solutions are nested (a larger lambda keeps a
    subset of the splits), so each cut involves only the nodes the two solutions disagree on.
    Parameters are those of :func:`budget_prune`.

    Returns
    -------
    PrunePath
    """
    import time

    from tqdm.auto import tqdm

    t0 = time.perf_counter()
    problem, f, Xm, target = prepare(
        forest,
        X,
        y,
        costs,
        mode=mode,
        evaluation=evaluation,
        leaf_values=leaf_values,
        count_mask=count_mask,
        sample_weight=sample_weight,
    )
    # disable=None: tqdm shows the bar only when stderr is a TTY
    bar = tqdm(desc="BudgetPrune path", unit="cut", disable=None if progress else True)
    leave, n_cuts = _breakpoints(problem, bar.update)
    bar.close()
    # Point k keeps the nodes that leave after levels[k]: -inf for the unpruned forest, then
    # _HARMFUL for the largest optimal pruning at lam = 0 (when some splits raise the error),
    # then each breakpoint.
    finite = np.unique(leave[np.isfinite(leave) & (leave >= 0.0)])
    levels = np.concatenate([[-np.inf], [_HARMFUL] if np.any(leave == _HARMFUL) else [], finite])
    lambdas = np.maximum(levels, 0.0)
    # sums over the nodes sorted by when they leave
    order = np.argsort(leave, kind="stable")
    ls = leave[order]
    cum_a = np.concatenate([[0.0], np.cumsum(problem.a[order])])
    cum_c = np.concatenate([[0.0], np.cumsum(problem.cost[order])])
    split = order < problem.n_split
    cum_s = np.concatenate([[0], np.cumsum(split)])
    first_kept = np.searchsorted(ls, levels, side="right")
    NT = problem.n_examples * problem.n_trees
    error = (problem.e_root + cum_a[-1] - cum_a[first_kept]) / NT
    cost = (cum_c[-1] - cum_c[first_kept]) / NT + problem.fixed_cost
    n_splits = cum_s[-1] - cum_s[first_kept]
    return PrunePath(
        lambdas=lambdas,
        error=error,
        cost=cost,
        n_splits=n_splits,
        mode=mode,
        seconds=time.perf_counter() - t0,
        n_cuts=n_cuts,
        _forest=f,
        _problem=problem,
        _leave=leave,
        _X=Xm,
        _target=target,
        _levels=levels,
    )


def prepare(
    forest: Any,
    X: Any,
    y: Any,
    costs: Any = None,
    *,
    mode: str = "ensemble",
    evaluation: bool = False,
    leaf_values: str = "auto",
    count_mask: Any = None,
    sample_weight: Any = None,
) -> tuple:
    """The closure problem of (IP3) with the leaf values ``leaf_values`` asks for.

    Rows of zero weight are left out. Returns ``(problem, forest, X as the forest's matrix,
    class index of each example)`` over the rows kept (their weights: ``problem.weight``).
    """
    validate_params(
        _PARAMS, {"mode": mode, "evaluation": evaluation, "leaf_values": leaf_values}, "budget_prune"
    )
    f, Xm, target, costs = prune_inputs(forest, X, y, costs)
    w = np.ones(Xm.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if w.shape != (Xm.shape[0],):
        raise InputError(f"sample_weight has shape {w.shape}; it needs one weight per row ({Xm.shape[0]})")
    if not (np.all(np.isfinite(w)) and np.all(w >= 0) and w.sum() > 0):
        raise InputError("sample_weight must be finite, >= 0 and not all zero")
    loss, original = node_loss(f, leaf_values)
    if count_mask is not None:
        count_mask = np.asarray(count_mask, dtype=bool)
        if count_mask.shape != (Xm.shape[0], f.n_trees):
            raise InputError(
                f"count_mask must have shape (n_examples, n_trees) = "
                f"{(Xm.shape[0], f.n_trees)}, got {count_mask.shape}"
            )
    kept = w > 0
    if not kept.all():
        Xm, target, w = Xm[kept], target[kept], w[kept]
        count_mask = None if count_mask is None else count_mask[kept]
    problem = build_problem(
        f,
        Xm,
        target,
        costs,
        loss=loss,
        mode=mode,
        evaluation=evaluation,
        count_mask=count_mask,
        sample_weight=w,
    )
    if leaf_values == "majority":
        problem.node_value = np.eye(problem.node_value.shape[1])[np.argmax(problem.node_value, axis=1)]
    if original is not None:
        problem.node_value[f.feature < 0] = original[f.feature < 0]
    return problem, f, Xm, target


def solve(problem: ClosureProblem, lam: float) -> np.ndarray:
    """An optimal closed set at ``lam``: the smallest for ``lam > 0``, the largest at 0 (so that
    ``lam = 0`` prunes only what does not lower the error)."""
    return min_weight_closure(problem.a + lam * problem.b, problem.tail, problem.head, largest=lam == 0.0)


def objective(problem: ClosureProblem, chosen: np.ndarray, lam: float) -> float:
    """Value of (IP3) (not scaled) of a closed set: ``error + lam * cost term``."""
    NT = problem.n_examples * problem.n_trees
    return float((problem.e_root + problem.a[chosen].sum() + lam * problem.b[chosen].sum()) / NT)


def _breakpoints(problem: ClosureProblem, tick: Any) -> tuple[np.ndarray, int]:
    """Lambda at which each node leaves the optimal set (``inf``: never)."""
    a, b = problem.a, problem.b
    n = problem.n_vars
    leave = np.full(n, np.inf)
    # The largest optimal set at lam = 0 contains every later solution; splits outside it
    # raise the error (kept leaves voting worse than their parent) and go at once.
    top = min_weight_closure(a, problem.tail, problem.head, largest=True)
    tick(1)
    leave[~top] = _HARMFUL
    total_gain = -a[a < 0].sum()
    positive = b[b > 0]
    if positive.shape[0] == 0:  # nothing costs anything: no positive lambda prunes more
        return leave, 1
    # Beyond lam_max any priced node costs more than all error gains together.
    lam_max = 2.0 * (total_gain + 1.0) / positive.min()
    last = min_weight_closure(a + lam_max * b, problem.tail, problem.head)
    n_cuts = 2
    tick(1)
    everything = np.arange(n)
    edges = np.arange(problem.tail.shape[0])
    # intervals: (nodes of the larger solution not in the smaller, edges among them,
    #             (A, B) of the larger solution, (A, B) of the smaller)
    A_top, B_top = a[top].sum(), b[top].sum()
    A_last, B_last = a[last].sum(), b[last].sum()
    free = everything[top & ~last]
    keep_e = top[problem.tail] & ~last[problem.tail] & top[problem.head] & ~last[problem.head]
    stack = [(free, edges[keep_e], (A_top, B_top), (A_last, B_last))]
    local = np.full(n, -1, dtype=np.int64)
    while stack:
        free, sub_edges, (A1, B1), (A2, B2) = stack.pop()
        if free.shape[0] == 0:
            continue
        if B1 - B2 <= 1e-12 * max(abs(B1), 1.0):
            # same cost: the smaller solution is as cheap and no less accurate from lam = 0 on
            leave[free] = 0.0
            continue
        lam = max((A2 - A1) / (B1 - B2), 0.0)
        local[free] = np.arange(free.shape[0])
        r = min_weight_closure(
            a[free] + lam * b[free], local[problem.tail[sub_edges]], local[problem.head[sub_edges]]
        )
        n_cuts += 1
        tick(1)
        gained = a[free[r]].sum() + lam * b[free[r]].sum()
        A_mid, B_mid = A2 + a[free[r]].sum(), B2 + b[free[r]].sum()
        line = A1 - A2 + lam * (B1 - B2)  # the larger solution's value above the smaller's
        scale = abs(A1) + abs(A2) + lam * (abs(B1) + abs(B2)) + 1.0
        if gained < min(line, 0.0) - 1e-9 * scale and 0 < r.sum() < free.shape[0]:
            inner = free[r]
            outer = free[~r]
            in_r = np.zeros(n, dtype=bool)
            in_r[inner] = True
            t, h = problem.tail[sub_edges], problem.head[sub_edges]
            stack.append((outer, sub_edges[~in_r[t] & ~in_r[h]], (A1, B1), (A_mid, B_mid)))
            stack.append((inner, sub_edges[in_r[t] & in_r[h]], (A_mid, B_mid), (A2, B2)))
        else:
            leave[free] = lam
    return leave, n_cuts
