"""Cost-efficient gradient boosting (Peter et al., NIPS 2017) on LightGBM's ``cegb_*`` engine.

LightGBM grows each tree best-first and subtracts from a split's gain (its ``cegb_*`` code,
``cost_effective_gradient_boosting.hpp``)::

    cegb_tradeoff * (cegb_penalty_split * n_leaf                     # every row of the leaf
                     + coupled[f] * [f unused by the model so far]   # once per model
                     + lazy[f] * #(rows of the leaf that have not used f yet))

which is Eq. (13) of the paper, ``alpha |I_p| + gamma_m (1 - D) + beta_m sum (1 - C)``, with the
rows of the training set. LightGBM's gain ``G_L^2/H_L + G_R^2/H_R - G^2/H`` is twice the
bracket of Eq. (12) (it drops the 1/2), so the paper's lambda is ``cegb_tradeoff / 2``: this
module's ``tradeoff`` *is* the paper's lambda, a loss (per example, in the model's loss) per
unit of cost (per example).

Translation of a :class:`thrifty.CostModel` (see :func:`cegb_penalties`):

* per-example acquisition cost -> ``lazy[f]``. LightGBM charges each feature on its own, so
  groups and dependencies are approximated by charging a feature what acquiring it *alone*
  costs (:meth:`CostModel.acquisition_cost`: its group's price, plus its inputs for a derived
  feature). Training may therefore over-charge a feature whose group or inputs an example has
  already paid for; it never under-charges. Reported costs stay exact: they come from
  :func:`thrifty.evaluate`, which knows groups and dependencies.
* evaluation cost -> ``cegb_penalty_split``: ``split_cost`` per split visited, plus
  ``tree_cost`` spread over the splits on a path of a balanced tree (``max_depth``, else
  ``ceil(log2(num_leaves))``), since LightGBM has no per-tree penalty.
* fixed (once per model) cost -> ``coupled[f]``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from numbers import Integral
from typing import Any

import lightgbm
import numpy as np
import pandas as pd
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d

from thrifty._param_validation import Interval
from thrifty._validation import class_labels
from thrifty.costs import CostModel
from thrifty.exceptions import BudgetError, InputError
from thrifty.forest import Forest
from thrifty.frontier import frontier
from thrifty.train._cegb_base import ClassifierOutputs, CostAwareBoosting, tradeoff_scale
from thrifty.train._cegb_dask import is_dask, warn_data_parallel

__all__ = [
    "BudgetError",
    "CEGBClassifier",
    "CEGBRanker",
    "CEGBRegressor",
    "cegb_frontier",
    "cegb_params",
    "cegb_penalties",
]

# The paper's lambda is half of LightGBM's cegb_tradeoff (LightGBM's gain omits Eq. (12)'s 1/2).
GAIN_SCALE = 2.0


def cegb_penalties(costs: CostModel, *, num_leaves: int = 31, max_depth: int = -1) -> dict[str, Any]:
    """LightGBM's CEGB penalties for a cost model, in cost units (Eq. (13), Peter et al.).

    Parameters
    ----------
    costs : CostModel
        Prices of the model's features (one per column of the training data).
    num_leaves, max_depth : int
        The tree shape, to spread a per-tree cost over the splits of a path.

    Returns
    -------
    dict
        ``cegb_penalty_feature_lazy`` (list, one per feature: what acquiring the feature alone
        costs one example, groups and inputs included), ``cegb_penalty_feature_coupled``
        (list: ``costs.fixed_costs``) and ``cegb_penalty_split`` (float:
        ``split_cost + tree_cost / depth``).
    """
    if not isinstance(costs, CostModel):
        raise TypeError(f"costs must be a thrifty CostModel, got {type(costs).__name__}")
    lazy = costs.prices().tolist()
    depth = max_depth if max_depth and max_depth > 0 else max(1, math.ceil(math.log2(max(2, num_leaves))))
    return {
        "cegb_penalty_feature_lazy": lazy,
        "cegb_penalty_feature_coupled": [float(c) for c in costs.fixed_costs],
        "cegb_penalty_split": float(costs.split_cost + costs.tree_cost / depth),
    }


def cegb_params(
    costs: CostModel, tradeoff: float, *, num_leaves: int = 31, max_depth: int = -1
) -> dict[str, Any]:
    """LightGBM parameters training with the paper's penalty ``lambda * Psi`` (Eqs. (7), (12)).

    ``cegb_tradeoff = 2 * tradeoff`` (LightGBM's split gain is twice Eq. (12)'s), penalties from
    :func:`cegb_penalties`. ``tradeoff == 0`` returns ``{}``: plain LightGBM.
    """
    tradeoff = float(tradeoff)
    if not (tradeoff >= 0 and math.isfinite(tradeoff)):
        raise InputError(f"tradeoff must be a finite number >= 0, got {tradeoff!r}")
    if tradeoff == 0:
        return {}
    return {
        "cegb_tradeoff": GAIN_SCALE * tradeoff,
        **cegb_penalties(costs, num_leaves=num_leaves, max_depth=max_depth),
    }


class _CEGBBase(CostAwareBoosting):
    """LightGBM's CEGB with a thrifty cost model and an optional budget search."""

    _task = "regression"
    _parameter_constraints = {
        **CostAwareBoosting._parameter_constraints,
        "num_leaves": [Interval(Integral, 2, None, closed="left")],
        "max_depth": [Interval(Integral, -1, None, closed="left")],
    }

    def __init__(
        self,
        *,
        costs: Any = None,
        tradeoff: float | None = None,
        budget: float | None = None,
        n_estimators: int = 100,
        learning_rate: float = 0.1,
        num_leaves: int = 31,
        max_depth: int = -1,
        min_child_samples: int = 20,
        lgbm_params: dict | None = None,
        tolerance: float = 0.05,
        max_fits: int = 12,
        truncate: bool = True,
        random_state: int | None = None,
        n_jobs: int | None = None,
        progress: bool = True,
        warm_start: bool = False,
    ) -> None:
        self.costs = costs
        self.tradeoff = tradeoff
        self.budget = budget
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.max_depth = max_depth
        self.min_child_samples = min_child_samples
        self.lgbm_params = lgbm_params
        self.tolerance = tolerance
        self.max_fits = max_fits
        self.truncate = truncate
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.progress = progress
        self.warm_start = warm_start

    def _lgbm(self, tradeoff: float) -> Any:
        params: dict[str, Any] = {
            "n_estimators": int(self.n_estimators),
            "learning_rate": float(self.learning_rate),
            "num_leaves": int(self.num_leaves),
            "max_depth": int(self.max_depth),
            "min_child_samples": int(self.min_child_samples),
            "random_state": self.random_state,
            "n_jobs": self.n_jobs,
            "verbose": -1,
        }
        params.update(self.lgbm_params or {})
        params.update(
            cegb_params(
                self.costs_,
                tradeoff,
                num_leaves=int(params["num_leaves"]),
                max_depth=int(params["max_depth"]),
            )
        )
        cls = {
            "binary": lightgbm.LGBMClassifier,
            "regression": lightgbm.LGBMRegressor,
            "ranking": lightgbm.LGBMRanker,
        }[self._task]
        return cls(**params)

    def _train(
        self, X: Any, y: np.ndarray, sample_weight: Any, tradeoff: float, fit_params: dict
    ) -> tuple[Any, Any]:
        model = self._lgbm(tradeoff).fit(X, y, sample_weight=sample_weight, **fit_params)
        return Forest.from_model(model), model.booster_

    def _train_dask(
        self, client: Any, X: Any, y: Any, sample_weight: Any, tradeoff: float, n_rows: float
    ) -> tuple[Any, Any]:
        """One model trained through ``lightgbm.dask`` with the same parameters as in memory
        (see :mod:`thrifty.train._cegb_dask` for how LightGBM's data-parallel CEGB differs)."""
        import lightgbm.dask as lgb_dask  # needs the optional extra thrifty[dask]

        params = self._lgbm(tradeoff).get_params()
        warn_data_parallel(params, len(client.scheduler_info()["workers"]))
        cls = {"binary": lgb_dask.DaskLGBMClassifier, "regression": lgb_dask.DaskLGBMRegressor}[self._task]
        model = cls(client=client, **params).fit(X, y, sample_weight=sample_weight).to_local()
        return Forest.from_model(model), model.booster_

    def _start(self, y: np.ndarray, budget: float) -> float:
        return 0.1 * tradeoff_scale(y, self._task) / budget

    # ------------------------------------------------------------------ prediction
    def predict(self, X: Any) -> np.ndarray:
        """Predictions of the fitted forest (equal to LightGBM's)."""
        X = self._check_X(X)
        return self.forest_.predict(X)


class CEGBClassifier(ClassifierMixin, ClassifierOutputs, _CEGBBase):
    """Cost-efficient gradient boosting classifier (Peter et al. 2017) with a budget search.

    Trains LightGBM's best-first trees with the paper's cost penalty: a split is chosen to
    maximise Eq. (12), its loss reduction minus ``tradeoff`` times the cost it adds (Eq. (13)):
    the per-example acquisition cost of a feature for the rows of the leaf that have not
    acquired it yet, the evaluation cost of the split for every row of the leaf, and a model's
    once-only (fixed) cost of a feature it has not used yet. Trees become deep where few
    examples go and cheap where most go. See the module docstring for how a CostModel's groups
    and dependencies are approximated during training (reported costs are exact).

    ``sample_weight`` weights the loss of Eq. (7), ``sum_i w_i L(y_i, F(x_i))``: LightGBM
    multiplies each row's gradient and hessian by ``w_i``, so the loss reduction of Eq. (12) is
    the weighted one. The penalty of Eq. (13) is not weighted: LightGBM's CEGB counts the rows
    of a leaf (``alpha |I_p|`` and the lazy ``beta sum(1 - C)``), so a row of weight ``k`` pays
    its split and acquisition penalties once, not ``k`` times (with weights of mean 1 the two
    scales agree on average), and ``min_child_samples`` counts rows too: integer weights are
    not the same as repeated rows. The budget is a mean over the calibration rows, weighted by
    their weights when they have them.

    Parameters
    ----------
    costs : CostModel or array-like of shape (n_features,), optional
        Feature prices (default: 1 per feature, no evaluation cost).
    tradeoff : float >= 0, optional
        The paper's lambda (Eq. (2)): loss per example worth one unit of cost per example.
        0 is plain LightGBM. Default 0.01 when ``budget`` is not given either.
    budget : float > 0, optional
        Target mean cost per example instead of ``tradeoff``: the trade-off is searched
        (bisection in log space) until the mean cost that :func:`thrifty.evaluate` measures on
        the calibration rows (``calibration`` of ``fit``, else the training rows) is within the
        budget and within ``tolerance`` of it. Every model trained is a candidate; the most
        expensive one within the budget is kept (the shared selection rule with no metric).
        Raises :class:`BudgetError` when none is within it.
    n_estimators, learning_rate, num_leaves, max_depth, min_child_samples
        LightGBM's parameters (best-first growth with ``num_leaves`` leaves per tree).
    lgbm_params : dict, optional
        Any other LightGBM parameter, passed through (``cegb_*`` are set by this class).
    tolerance : float, default=0.05
        Relative width of the accepted band below the budget.
    max_fits : int, default=12
        Most models trained by the budget search.
    truncate : bool, default=True
        When no trade-off lands within ``tolerance`` of the budget (a model's cost jumps
        between two trade-offs), also consider the cheapest over-budget model cut after the
        last boosting iteration that keeps it within the budget (GreedyMiser's stopping
        rule), and keep it when it spends more of the budget.
    random_state, n_jobs
        As in LightGBM.
    progress : bool, default=True
        Progress bar over the budget search's fits (only when stderr is a terminal).
    warm_start : bool, default=False
        When ``fit`` is called again (a sweep of budgets: ``set_params(budget=b).fit(...)``)
        with the same data, calibration rows, costs and model parameters, start the budget
        search from every model the earlier fits trained: their ``(tradeoff, cost)`` bracket
        the new budget (often leaving one to three fits, or none) and the models compete with
        the new ones. The trade-off-to-cost curve is one curve for all budgets, so nothing is
        lost; the data are fingerprinted, and a change starts afresh.

    Attributes
    ----------
    forest_ : Forest
        The fitted model (predictions equal ``booster_``'s).
    booster_ : lightgbm.Booster
    costs_ : CostModel
        The cost model aligned to the columns of ``X``.
    tradeoff_ : float
        The trade-off of the fitted model (searched when ``budget`` was given).
    plan_ : Full
        ``Full(forest_)``, the plan ``cost_report`` and ``evaluate`` run.
    n_fits_ : int
        Models trained by this fit (reused ones not counted).
    calibration_cost_ : float
        Mean cost per example on the calibration rows.
    budget_search_ : DataFrame
        One row per candidate (``candidate``, ``tradeoff``, ``truncated``, ``reused``,
        ``cost``, ``metric`` (NaN: cost only), ``chosen``): the earlier fits' models reused by
        ``warm_start`` (``reused``), every model the search trained, in order, then the
        truncated one when truncation was tried; one row without a budget.
    search_models_ : list of Forest
        The model of each row of ``budget_search_``, in its order (to choose among them by
        another rule, e.g. a metric on held-out rows among those within the budget).
    n_estimators_ : int
        Boosting iterations in ``forest_`` (LightGBM stops early when no split pays for its
        cost; a truncated model keeps fewer than ``booster_`` holds).
    truncated_ : bool
        Whether ``forest_`` is ``booster_`` cut to its first ``n_estimators_`` iterations.
    classes_ : ndarray
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.

    Examples
    --------
    >>> clf = CEGBClassifier(costs=costs, budget=5.0).fit(X, y)  # doctest: +SKIP
    >>> clf.cost_report(X_test).mean  # doctest: +SKIP
    """

    _task = "binary"

    def fit(self, X: Any, y: Any, sample_weight: Any = None, *, calibration: Any = None) -> CEGBClassifier:
        """Train (searching the trade-off when ``budget`` is set).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features), or a Dask DataFrame or Array
            DataFrame ``category`` columns are LightGBM categorical features; polars and
            pyarrow tables are read as pandas DataFrames (names and categories kept). A Dask
            collection (with ``y``, ``sample_weight`` and the calibration rows as Dask
            collections partitioned like it) trains through ``lightgbm.dask`` on the current
            ``distributed.Client``, and the budget is measured on the cluster (see
            docs/scale.md: LightGBM's data-parallel CEGB does not charge a trade-off as one
            machine does).
        y : array-like of shape (n,)
        sample_weight : array-like of shape (n,), optional
            Weights of the loss (see the class docstring).
        calibration : tuple (X_cal, y_cal) or (X_cal, y_cal, sample_weight_cal), optional
            Rows the budget is measured on (their weighted mean cost); default the training
            rows, weighted by ``sample_weight``. The search measures cost only, so ``y_cal``
            is not used beyond its length.

        Returns
        -------
        self
        """
        if is_dask(X):
            return self._fit_dask(X, y, sample_weight, calibration)
        y, self.classes_, _ = class_labels(y, type(self).__name__)
        self._n_outputs = 1 if len(self.classes_) == 2 else len(self.classes_)
        return self._fit(X, y, sample_weight, calibration, {})


class CEGBRegressor(RegressorMixin, _CEGBBase):
    """Cost-efficient gradient boosting regressor (Peter et al. 2017); see :class:`CEGBClassifier`
    for the parameters and attributes (all but ``classes_``)."""

    _task = "regression"

    def fit(self, X: Any, y: Any, sample_weight: Any = None, *, calibration: Any = None) -> CEGBRegressor:
        """Train (searching the trade-off when ``budget`` is set); see :meth:`CEGBClassifier.fit`."""
        if is_dask(X):
            return self._fit_dask(X, y, sample_weight, calibration)
        y = column_or_1d(np.asarray(y), warn=True).astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise InputError("y contains NaN or infinity; regression targets must be finite")
        self._n_outputs = 1
        return self._fit(X, y, sample_weight, calibration, {})


class CEGBRanker(_CEGBBase):
    """Cost-efficient gradient boosting ranker (LightGBM lambdarank, Peter et al. 2017, Sec. 5).

    Parameters and attributes as :class:`CEGBClassifier` (no ``classes_``). Queries are given
    to ``fit`` as ``group`` (sizes of consecutive queries, as LightGBM) or ``qid`` (the query id
    of each row, rows of a query consecutive).
    """

    _task = "ranking"

    def fit(
        self,
        X: Any,
        y: Any,
        group: Any = None,
        *,
        qid: Any = None,
        sample_weight: Any = None,
        calibration: Any = None,
    ) -> CEGBRanker:
        """Train (searching the trade-off when ``budget`` is set).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
        y : array-like of int, shape (n,)
            Relevance labels (0 = irrelevant).
        group : array-like of int, optional
            Sizes of the consecutive queries (summing to n).
        qid : array-like of shape (n,), optional
            Query id of each row instead of ``group``. Without either, all rows form one query.
        sample_weight : array-like of shape (n,), optional
        calibration : tuple (X_cal, y_cal) or (X_cal, y_cal, sample_weight_cal), optional
            Rows the budget is measured on (default: the training rows).

        Returns
        -------
        self
        """
        y = column_or_1d(np.asarray(y), warn=True)
        if group is not None and qid is not None:
            raise InputError("give the queries as group= or as qid=, not both")
        if qid is not None:
            group = group_sizes(qid)
        if group is None:
            group = [len(y)]
        group = np.asarray(group, dtype=np.int64)
        if group.sum() != len(y):
            raise InputError(f"group sizes sum to {int(group.sum())} but y has {len(y)} rows")
        self._n_outputs = 1
        return self._fit(X, y, sample_weight, calibration, {"group": group})

    def predict(self, X: Any) -> np.ndarray:
        """Ranking scores (higher ranks first)."""
        X = self._check_X(X)
        return self.forest_.predict_raw(X).reshape(-1)


def group_sizes(qid: Any) -> np.ndarray:
    """Sizes of the consecutive runs of ``qid`` (LightGBM's ``group``); ValueError if a query's
    rows are not consecutive."""
    q = np.asarray(qid).reshape(-1)
    if len(q) == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    if len(np.unique(q)) != len(starts):
        raise InputError("the rows of each query must be consecutive (sort the data by qid)")
    return np.diff(np.r_[starts, len(q)]).astype(np.int64)


def cegb_frontier(
    X: Any,
    y: Any,
    costs: CostModel | None,
    *,
    budgets: Sequence[float],
    calibration: tuple | None = None,
    test: tuple | None = None,
    qid: Any = None,
    metric: str | None = None,
    return_models: bool = False,
    **params: Any,
) -> Any:
    """One CEGB model per budget, evaluated into a frontier table.

    Parameters
    ----------
    X, y : training data
    costs : CostModel or None
        Prices (None: 1 per feature).
    budgets : sequence of float
        Target mean costs per example; each gets its own budget search, started from every
        model the earlier budgets' searches trained (``warm_start``).
    calibration : tuple (X_cal, y_cal), optional
        As in ``fit``; default the training rows.
    test : tuple (X_test, y_test) or (X_test, y_test, qid_test), optional
        Rows the table is measured on (default: ``calibration``, else the training rows).
    qid : array-like, optional
        Query ids of the training rows (ranking: trains :class:`CEGBRanker`).
    metric : str, optional
        As in :func:`thrifty.frontier.frontier` (default: the task's).
    return_models : bool, default=False
        Also return the fitted estimators.
    **params
        Estimator parameters (``n_estimators``, ``num_leaves``, ``lgbm_params``, ...).

    Returns
    -------
    DataFrame (and list of estimators with ``return_models``)
        :func:`thrifty.frontier.frontier`'s table with columns ``method`` ("CEGB"),
        ``budget``, ``tradeoff``, ``n_fits`` and ``calibration_cost``; budgets below the
        cheapest model's cost are skipped.
    """
    if qid is not None:
        factory: Any = CEGBRanker
    elif type_of_target(np.asarray(y)) in ("binary", "multiclass"):
        factory = CEGBClassifier
    else:
        factory = CEGBRegressor
    return run_frontier(
        factory,
        "CEGB",
        X,
        y,
        costs,
        budgets=budgets,
        calibration=calibration,
        test=test,
        qid=qid,
        metric=metric,
        return_models=return_models,
        params=params,
    )


def run_frontier(
    factory: Any,
    method: str,
    X: Any,
    y: Any,
    costs: CostModel | None,
    *,
    budgets: Sequence[float],
    calibration: tuple | None,
    test: tuple | None,
    qid: Any,
    metric: str | None,
    return_models: bool,
    params: dict[str, Any],
) -> Any:
    """Fit ``factory(costs=..., budget=b, **params)`` per budget and tabulate them (shared by
    :func:`cegb_frontier` and :func:`thrifty.train.greedymiser.greedymiser_frontier`)."""
    budgets = [float(b) for b in budgets]
    if not budgets:
        raise InputError("budgets is empty; give at least one target mean cost per example")
    models, rows = [], []
    # One estimator walks the budgets along one trade-off path (warm_start): each budget's
    # search starts from every model the earlier ones trained.
    path = factory(costs=costs, **{"warm_start": True, **params})
    for b in budgets:
        try:
            if qid is not None:
                path.set_params(budget=b).fit(X, y, qid=qid, calibration=calibration)
            else:
                path.set_params(budget=b).fit(X, y, calibration=calibration)
        except BudgetError:
            continue
        # a shallow copy keeps this budget's fitted attributes: the next fit rebinds them
        est = copy.copy(path)
        models.append(est)
        rows.append(
            {
                "method": method,
                "budget": b,
                "tradeoff": est.tradeoff_,
                "n_fits": est.n_fits_,
                "calibration_cost": est.calibration_cost_,
            }
        )
    if test is None:
        test = (calibration[0], calibration[1]) if calibration is not None else (X, y, qid)
    X_t, y_t, q_t = (tuple(test) + (None,))[:3]
    if not models:
        table = pd.DataFrame(
            columns=[
                "name",
                "mean_cost",
                "value",
                "method",
                "budget",
                "tradeoff",
                "n_fits",
                "calibration_cost",
            ]
        )
    else:
        extra = {k: [r[k] for r in rows] for k in rows[0]}
        table = frontier(
            [m.forest_ for m in models],
            X_t,
            y_t,
            models[0].costs_,
            qid=q_t,
            metric=metric,
            names=[f"{method} budget={r['budget']:g}" for r in rows],
            params=extra,
            progress=False,
        )
    return (table, models) if return_models else table
