"""GreedyMiser (Xu, Weinberger and Chapelle, ICML 2012) as the special case of CEGB of Peter et
al. (2017, Sec. 4.3): first-order boosting, depth-4 trees of 16 leaves, coupled feature costs.

Each tree is a least-squares fit of the negative gradient (unit hessian: a custom LightGBM
objective returning the gradient and ones), grown to depth ``max_depth`` with
``2 ** max_depth`` leaves. A feature's cost is *coupled*: it is charged once per model, the
first time any tree uses it, as if it were "computed for all inputs at once". Charging it to
every one of the ``N`` training examples, the coupled penalty is ``N * c_f`` with the same
trade-off lambda as CEGB's (see :mod:`thrifty.train.cegb`), so both methods minimise Eq. (7)
of Peter et al. with the same lambda. A tree's evaluation cost is a constant per tree in
GreedyMiser, which does not change which split is best: training has no split penalty, and the
number of trees bounds the evaluation cost (``n_estimators``; with ``budget=``, boosting may
also stop where the budget runs out, GreedyMiser's own stopping rule, see ``truncate``).

LightGBM grows trees best-first; with a depth limit of 4 and 16 leaves every node that can
split is split, so a tree is the complete depth-4 tree breadth-first growth gives (only the
order in which nodes are split differs, which decides when a feature's coupled cost is first
paid within a tree).

The model is a thrifty :class:`~thrifty.Forest` whose raw scores are the booster's raw scores
plus the initial score (``init_score_``: the log-odds, log-priors or mean of the training
labels), which the custom objective leaves out of the booster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from numbers import Integral
from typing import Any

import lightgbm
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import column_or_1d

from thrifty._param_validation import Interval
from thrifty._validation import class_labels
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.train._cegb_base import ClassifierOutputs, CostAwareBoosting, tradeoff_scale
from thrifty.train._cegb_dask import is_dask, warn_data_parallel
from thrifty.train.cegb import GAIN_SCALE, run_frontier

__all__ = ["GreedyMiserClassifier", "GreedyMiserRegressor", "greedymiser_frontier", "greedymiser_params"]


def greedymiser_params(costs: CostModel, tradeoff: float, n_rows: float) -> dict[str, Any]:
    """LightGBM parameters of GreedyMiser's coupled penalty (Eq. (13) with ``beta = alpha = 0``).

    Parameters
    ----------
    costs : CostModel
    tradeoff : float >= 0
        The paper's lambda (``cegb_tradeoff = 2 * tradeoff``, as for CEGB).
    n_rows : float
        Training examples, counted by weight (their total ``sample_weight``): a feature's
        first use is charged as if every example acquired it.

    Returns
    -------
    dict
        ``{}`` for ``tradeoff == 0``, else ``cegb_tradeoff`` and
        ``cegb_penalty_feature_coupled`` (``n_rows * acquisition cost + fixed cost``).
    """
    if not tradeoff:
        return {}
    coupled = n_rows * costs.prices() + costs.fixed_costs
    return {"cegb_tradeoff": GAIN_SCALE * float(tradeoff), "cegb_penalty_feature_coupled": coupled.tolist()}


class _GreedyMiserBase(CostAwareBoosting):
    _task = "regression"
    _parameter_constraints = {
        **CostAwareBoosting._parameter_constraints,
        "max_depth": [Interval(Integral, 1, 16, closed="both")],
    }

    def __init__(
        self,
        *,
        costs: Any = None,
        tradeoff: float | None = None,
        budget: float | None = None,
        n_estimators: int = 100,
        learning_rate: float = 0.1,
        max_depth: int = 4,
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

    def _params(self, tradeoff: float, n_rows: float) -> dict[str, Any]:
        params = {
            "learning_rate": float(self.learning_rate),
            "max_depth": int(self.max_depth),
            "num_leaves": 2 ** int(self.max_depth),
            "min_data_in_leaf": int(self.min_child_samples),
            "verbose": -1,
            "seed": self.random_state,
            "boost_from_average": False,
        }
        if self.n_jobs is not None:
            params["num_threads"] = int(self.n_jobs)
        if self.random_state is None:
            del params["seed"]
        params.update(self.lgbm_params or {})
        params.update(greedymiser_params(self.costs_, tradeoff, n_rows))
        return params

    def _start(self, y: np.ndarray, budget: float) -> float:
        return 0.1 * tradeoff_scale(y, self._task) / budget

    def _train(
        self, X: Any, y: np.ndarray, sample_weight: Any, tradeoff: float, fit_params: dict
    ) -> tuple[Any, Any]:
        n = X.shape[0]
        params = self._params(tradeoff, n if sample_weight is None else float(np.sum(sample_weight)))
        target, init, objective, n_out = self._objective(y, sample_weight)
        params["objective"] = objective
        if n_out > 1:
            params["num_class"] = n_out
        init_score = np.broadcast_to(init, (n, n_out)) if n_out > 1 else np.full(n, init[0])
        # Without pre-filtering: a custom objective on a dataset whose every feature was
        # filtered out (too few rows for min_data_in_leaf) is a LightGBM fatal error.
        data = lightgbm.Dataset(
            X, target, weight=sample_weight, init_score=init_score, params={"feature_pre_filter": False}
        )
        booster = lightgbm.train(params, data, num_boost_round=int(self.n_estimators))
        return self._forest(booster, init), booster

    def _train_dask(
        self, client: Any, X: Any, y: Any, sample_weight: Any, tradeoff: float, n_rows: float
    ) -> tuple[Any, Any]:
        """One model trained through ``lightgbm.dask`` (binary and regression): the same
        parameters as in memory, the unit-hessian objective and the initial score per row."""
        import lightgbm.dask as lgb_dask  # needs the optional extra thrifty[dask]

        if self._n_outputs > 1:
            raise InputError(
                "multiclass GreedyMiser on Dask collections is not supported; "
                "fit it in memory, or use CEGBClassifier"
            )
        params = self._params(tradeoff, n_rows)
        warn_data_parallel(params, len(client.scheduler_info()["workers"]))
        import dask  # the optional extra thrifty[dask], present with a Dask collection

        binary = self._task == "binary"
        target = (y == self.classes_[1]) if binary else y
        target = target.astype(np.float64)
        w = target * 0 + 1 if sample_weight is None else sample_weight
        total, weight = dask.compute((w * target).sum(), w.sum())
        mean = float(total / weight)  # the prior (binary) or the mean target, weighted
        if binary:
            p = min(max(mean, 1e-12), 1 - 1e-12)
            init = np.array([np.log(p / (1 - p))])
            params["objective"] = _sigmoid_unit_hessian
        else:
            init = np.array([mean])
            params["objective"] = "regression"
        params.pop("verbose", None)
        model = lgb_dask.DaskLGBMRegressor(
            client=client, n_estimators=int(self.n_estimators), verbose=-1, feature_pre_filter=False, **params
        )
        model.fit(X, target, sample_weight=sample_weight, init_score=target * 0 + init[0])
        booster = model.to_local().booster_
        return self._forest(booster, init), booster

    def _forest(self, booster: Any, init: np.ndarray) -> Any:
        raise NotImplementedError

    def predict(self, X: Any) -> np.ndarray:
        """Predictions of the fitted forest."""
        X = self._check_X(X)
        return self.forest_.predict(X)


def _sigmoid_unit_hessian(label: np.ndarray, raw: np.ndarray, weight: np.ndarray | None) -> tuple:
    """The binary log-loss gradient with a unit hessian, as a scikit-learn-API objective
    (picklable, for ``lightgbm.dask``'s workers)."""
    grad = 1.0 / (1.0 + np.exp(-raw)) - label
    hess = np.ones_like(grad)
    if weight is not None:
        grad, hess = grad * weight, hess * weight
    return grad, hess


def _unit_hessian(link: str, weight: Any) -> Any:
    """A LightGBM objective returning the log-loss gradient and a unit hessian (first order)."""
    w = None if weight is None else np.asarray(weight, dtype=np.float64)

    def objective(raw: np.ndarray, data: Any) -> tuple[np.ndarray, np.ndarray]:
        label = data.get_label()
        if link == "sigmoid":
            return _sigmoid_unit_hessian(label, raw, w)
        z = np.exp(raw - raw.max(axis=1, keepdims=True))
        grad = z / z.sum(axis=1, keepdims=True)
        grad[np.arange(len(label)), label.astype(np.int64)] -= 1.0
        hess = np.ones_like(grad)
        if w is not None:
            grad, hess = grad * w[:, None], hess * w[:, None]
        return grad, hess

    return objective


class GreedyMiserClassifier(ClassifierMixin, ClassifierOutputs, _GreedyMiserBase):
    """GreedyMiser classifier (Xu et al. 2012) as the CEGB special case (Peter et al. 2017, 4.3).

    ``sample_weight`` weights both terms of Eq. (7) of Peter et al.: each row's gradient and
    (unit) hessian are multiplied by ``w_i``, so the loss is ``sum_i w_i L(y_i, F(x_i))``, and
    a feature's coupled penalty charges the examples by weight, ``lambda * c_f * sum_i w_i``
    (see :func:`greedymiser_params`); ``init_score_`` is the weighted prior (weighted mean for
    regression). ``min_child_samples`` and LightGBM's histogram bins still count rows, so
    integer weights equal repeated rows only up to them.

    Parameters
    ----------
    costs : CostModel or array-like of shape (n_features,), optional
        Feature prices (default: 1 per feature).
    tradeoff : float >= 0, optional
        The lambda of Peter et al.'s Eq. (2) (same meaning as in :class:`CEGBClassifier`).
        Default 0.01 when ``budget`` is not given either.
    budget : float > 0, optional
        Target mean cost per example; the trade-off is searched as in :class:`CEGBClassifier`.
    n_estimators : int, default=100
        Trees (per class); their evaluation cost is not penalised during training.
    learning_rate : float, default=0.1
    max_depth : int, default=4
        Depth of every tree (``2 ** max_depth`` leaves).
    min_child_samples : int, default=20
    lgbm_params : dict, optional
        Other LightGBM parameters, passed through.
    tolerance, max_fits, truncate, random_state, n_jobs, progress, warm_start
        As in :class:`CEGBClassifier`.

    Attributes
    ----------
    forest_ : Forest
        The model; ``forest_.predict_raw(X)`` equals ``booster_.predict(X, raw_score=True)``
        plus ``init_score_``.
    booster_ : lightgbm.Booster
    init_score_ : ndarray of shape (n_outputs,)
    costs_, plan_, tradeoff_, n_fits_, calibration_cost_, budget_search_, search_models_,
    n_estimators_, truncated_, classes_, n_features_in_, feature_names_in_
        As in :class:`CEGBClassifier`.
    """

    _task = "binary"

    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, calibration: Any = None
    ) -> GreedyMiserClassifier:
        """Train (searching the trade-off when ``budget`` is set); see :meth:`CEGBClassifier.fit`."""
        if is_dask(X):
            return self._fit_dask(X, y, sample_weight, calibration)
        _, self.classes_, codes = class_labels(y, type(self).__name__)
        self._n_outputs = 1 if len(self.classes_) == 2 else len(self.classes_)
        return self._fit(X, codes, sample_weight, calibration, {})

    def _objective(self, codes: np.ndarray, weight: Any) -> tuple[np.ndarray, np.ndarray, Any, int]:
        w = np.ones(len(codes)) if weight is None else np.asarray(weight, dtype=np.float64)
        k = len(self.classes_)
        prior = np.bincount(codes, weights=w, minlength=k) / w.sum()
        prior = np.clip(prior, 1e-12, 1.0)
        if k == 2:
            init = np.array([np.log(prior[1] / prior[0])])
            return codes.astype(np.float64), init, _unit_hessian("sigmoid", weight), 1
        return codes.astype(np.float64), np.log(prior), _unit_hessian("softmax", weight), k

    def _forest(self, booster: Any, init: np.ndarray) -> Any:
        k = len(self.classes_)
        objective = "binary sigmoid:1" if k == 2 else f"multiclass num_class:{k}"
        # The custom objective leaves no link in the model file; declare the one it trained
        # (the trees are untouched) so the importer reads classification trees.
        lines = booster.model_to_string().splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("max_feature_idx=")) + 1
        declared = lightgbm.Booster(
            model_str="\n".join(lines[:at] + [f"objective={objective}"] + lines[at:]) + "\n"
        )
        forest = Forest.from_model(declared)
        self.init_score_ = np.asarray(init, dtype=np.float64)
        return dataclasses.replace(forest, base_score=forest.base_score + init, classes=self.classes_)


class GreedyMiserRegressor(RegressorMixin, _GreedyMiserBase):
    """GreedyMiser regressor (squared loss, whose hessian is already 1); parameters and
    attributes as :class:`GreedyMiserClassifier` (no ``classes_``)."""

    _task = "regression"

    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, calibration: Any = None
    ) -> GreedyMiserRegressor:
        """Train (searching the trade-off when ``budget`` is set); see :meth:`CEGBClassifier.fit`."""
        if is_dask(X):
            return self._fit_dask(X, y, sample_weight, calibration)
        y = column_or_1d(np.asarray(y), warn=True).astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise InputError("y contains NaN or infinity; regression targets must be finite")
        self._n_outputs = 1
        return self._fit(X, y, sample_weight, calibration, {})

    def _objective(self, y: np.ndarray, weight: Any) -> tuple[np.ndarray, np.ndarray, Any, int]:
        init = np.array([np.average(y, weights=weight)])
        return y, init, "regression", 1

    def _forest(self, booster: Any, init: np.ndarray) -> Any:
        forest = Forest.from_model(booster)
        self.init_score_ = np.asarray(init, dtype=np.float64)
        return dataclasses.replace(forest, base_score=forest.base_score + init)


def greedymiser_frontier(
    X: Any,
    y: Any,
    costs: CostModel | None,
    *,
    budgets: Sequence[float],
    calibration: tuple | None = None,
    test: tuple | None = None,
    metric: str | None = None,
    return_models: bool = False,
    **params: Any,
) -> Any:
    """One GreedyMiser model per budget, evaluated into a frontier table (see
    :func:`thrifty.train.cegb.cegb_frontier`; ``method`` is "GreedyMiser")."""
    factory = (
        GreedyMiserClassifier
        if type_of_target(np.asarray(y)) in ("binary", "multiclass")
        else GreedyMiserRegressor
    )
    return run_frontier(
        factory,
        "GreedyMiser",
        X,
        y,
        costs,
        budgets=budgets,
        calibration=calibration,
        test=test,
        qid=None,
        metric=metric,
        return_models=return_models,
        params=params,
    )
