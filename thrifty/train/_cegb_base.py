"""The estimator machinery CEGB and GreedyMiser share: input checks, cost alignment, budget search."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d, validate_data

from thrifty._validation import costs_for_X
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.importers import from_model
from thrifty.forest.names import lightgbm_frame
from thrifty.train._search import SearchResult, search_tradeoff

# Trade-off used when neither ``tradeoff`` nor ``budget`` is given: a mild penalty (a feature of
# cost 1 must reduce the loss by 0.01 per example it is acquired for).
DEFAULT_TRADEOFF = 0.01


def as_frame_or_array(X: Any) -> Any:
    """``X`` as LightGBM and the runtime read it: DataFrames kept (categorical columns intact),
    anything else a float64 array (NaN allowed, infinities rejected)."""
    if hasattr(X, "columns") and hasattr(X, "iloc"):
        return X
    return check_array(X, dtype=np.float64, ensure_all_finite="allow-nan")


def calibration_X(eval_set: Any, X: Any) -> Any:
    """The rows the budget is measured on: ``eval_set``'s X (as LightGBM's ``[(X, y)]``, a
    ``(X, y)`` tuple or a bare matrix), else the training rows."""
    if eval_set is None:
        return X
    if isinstance(eval_set, list):
        if len(eval_set) != 1:
            raise InputError(
                f"eval_set holds {len(eval_set)} sets; give one calibration set, "
                "e.g. eval_set=[(X_cal, y_cal)] or eval_set=X_cal"
            )
        eval_set = eval_set[0]
    if isinstance(eval_set, tuple):
        eval_set = eval_set[0]
    return as_frame_or_array(eval_set)


def _check_weight(sample_weight: Any, n: int) -> np.ndarray | None:
    if sample_weight is None:
        return None
    w = column_or_1d(np.asarray(sample_weight, dtype=np.float64))
    if w.shape != (n,):
        raise InputError(f"sample_weight has {w.shape[0]} values for {n} rows of X")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InputError("sample_weight must be finite and >= 0")
    if w.sum() <= 0:
        raise InputError(
            "sample_weight is zero for every row (all weights zero); give at least one row a positive weight"
        )
    return w


def _names(X: Any) -> list[str] | None:
    if hasattr(X, "columns"):
        return [str(c) for c in X.columns]
    return None


class ClassifierOutputs:
    """``predict_proba`` and ``decision_function`` of a fitted boosted classifier's ``forest_``."""

    # Provided by the estimator this is mixed into (annotations only: nothing is shadowed).
    forest_: Forest
    _check_X: Callable[[Any], np.ndarray]

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, shape (n, n_classes)."""
        X = self._check_X(X)
        return self.forest_.predict_proba(X)

    def decision_function(self, X: Any) -> np.ndarray:
        """Raw scores: shape (n,) for binary, (n, n_classes) for multiclass."""
        X = self._check_X(X)
        raw = self.forest_.predict_raw(X)
        return raw[:, 0] if raw.ndim == 2 and raw.shape[1] == 1 else raw


class CostAwareBoosting(BaseEstimator):
    """Base of the CEGB and GreedyMiser estimators: subclasses say how one model is trained.

    A subclass implements ``_train(X, y, sample_weight, tradeoff, fit_params)`` returning
    ``(forest, booster)`` and ``_start(y, budget)``, a first guess of the trade-off.
    """

    def _validate_common(self) -> None:
        if self.tradeoff is not None and self.budget is not None:
            raise InputError(
                "give either tradeoff= (the penalty lambda) or budget= (a target mean "
                "cost per example, the trade-off is then searched), not both"
            )
        if self.tradeoff is not None and not (
            isinstance(self.tradeoff, (int, float, np.number))
            and self.tradeoff >= 0
            and math.isfinite(self.tradeoff)
        ):
            raise InputError(f"tradeoff must be a finite number >= 0, got {self.tradeoff!r}")
        if self.budget is not None and not (
            isinstance(self.budget, (int, float, np.number))
            and self.budget > 0
            and math.isfinite(self.budget)
        ):
            raise InputError(f"budget must be a finite number > 0, got {self.budget!r}")
        if not (isinstance(self.n_estimators, (int, np.integer)) and self.n_estimators >= 1):
            raise InputError(f"n_estimators must be an integer >= 1, got {self.n_estimators!r}")
        if not 0 < float(self.tolerance) < 1:
            raise InputError(f"tolerance must be in (0, 1), got {self.tolerance!r}")
        if not (isinstance(self.max_fits, (int, np.integer)) and self.max_fits >= 2):
            raise InputError(f"max_fits must be an integer >= 2, got {self.max_fits!r}")
        if self.lgbm_params is not None and not isinstance(self.lgbm_params, dict):
            raise InputError(
                f"lgbm_params must be a dict of LightGBM parameters, got {type(self.lgbm_params).__name__}"
            )

    def _fit(self, X: Any, y: Any, sample_weight: Any, eval_set: Any, fit_params: dict) -> Any:
        from thrifty.runtime.evaluate import evaluate

        self._validate_common()
        X = as_frame_or_array(X)
        validate_data(self, X, reset=True, skip_check_array=True)
        if X.shape[1] < 1:
            raise InputError(f"0 feature(s) (shape={X.shape}) while a minimum of 1 is required.")
        if X.shape[0] < 2:
            raise InputError(
                f"Found array with {X.shape[0]} sample(s) (shape={X.shape}) while a minimum of 2 is required."
            )
        if len(y) != X.shape[0]:
            raise InputError(f"X has {X.shape[0]} rows but y has {len(y)} labels; give one label per row")
        sample_weight = _check_weight(sample_weight, X.shape[0])
        names = _names(X)
        costs = costs_for_X(self.costs, names, X.shape[1])
        X_cal = calibration_X(eval_set, X)
        if X_cal.shape[1] != X.shape[1]:
            raise InputError(f"eval_set has {X_cal.shape[1]} features but X has {X.shape[1]}")
        self.costs_ = costs
        # LightGBM refuses or rewrites some names; it trains on names it keeps, and the forest
        # reads the user's.
        X_fit = lightgbm_frame(X)

        def measure(forest: Any) -> float:
            return evaluate(forest, X_cal, costs).cost.mean

        def fit_one(lam: float) -> tuple[Any, float]:
            forest, booster = self._train(X_fit, y, sample_weight, lam, fit_params)
            forest = from_model(forest, feature_names=names)
            return (forest, booster), measure(forest)

        return self._search(fit_one, measure, costs, y)

    def _fit_dask(self, X: Any, y: Any, sample_weight: Any, eval_set: Any) -> Any:
        """``fit`` on Dask collections: trains through ``lightgbm.dask`` on the current
        ``distributed.Client``; budgets are measured with :func:`thrifty.dask.evaluate`."""
        from sklearn.base import is_classifier

        from thrifty.train import _cegb_dask as dk

        self._validate_common()
        if self._task == "ranking":
            raise InputError("ranking on Dask collections is not supported; fit CEGBRanker in memory")
        X, y, sample_weight, X_cal = dk.check_dask_inputs(X, y, sample_weight, eval_set)
        client = dk.dask_client()
        names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
        self.n_features_in_ = int(X.shape[1])
        if names is not None:
            self.feature_names_in_ = np.asarray(names, dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self._n_outputs = 1
        if is_classifier(self):
            self.classes_ = dk.dask_labels(y)
            if len(self.classes_) < 2:
                raise InputError(
                    f"y has one class only ({self.classes_[0]!r}); a classifier needs at least 2 classes"
                )
            self._n_outputs = 1 if len(self.classes_) == 2 else len(self.classes_)
        costs = costs_for_X(self.costs, names, X.shape[1])
        self.costs_ = costs
        n_rows = int(len(y))

        def measure(forest: Any) -> float:
            return dk.mean_cost(forest, X_cal, costs)

        def fit_one(lam: float) -> tuple[Any, float]:
            forest, booster = self._train_dask(client, X, y, sample_weight, lam, n_rows)
            return (forest, booster), measure(forest)

        return self._search(fit_one, measure, costs, y)

    def _search(self, fit_one: Any, measure: Any, costs: CostModel, y: Any) -> Any:
        """Train at the given trade-off, or search the one meeting the budget (``fit_one(lam) ->
        ((forest, booster), mean cost)``; ``measure(forest)`` is a model's mean cost)."""
        if self.budget is None:
            lam = DEFAULT_TRADEOFF if self.tradeoff is None else float(self.tradeoff)
            (forest, booster), cost = fit_one(lam)
            result = SearchResult(lam, cost, (forest, booster), 1, [(lam, cost)])
        else:
            result = search_tradeoff(
                fit_one,
                float(self.budget),
                start=self._start(y, float(self.budget)),
                tolerance=float(self.tolerance),
                max_fits=int(self.max_fits),
                floor=self._floor(costs),
                progress=bool(self.progress),
                desc=type(self).__name__,
            )
        (forest, booster), tradeoff, cost = result.model, result.tradeoff, result.cost
        self.truncated_ = False
        if self.budget is not None and self.truncate and cost < (1.0 - self.tolerance) * self.budget:
            # The cost jumps over the budget between two trade-offs (a feature enters for many
            # examples at once): stop boosting the cheapest over-budget model where the budget
            # runs out, as GreedyMiser does, when that spends more of the budget.
            over = [(lam, i) for i, (lam, c) in enumerate(result.history) if c > self.budget and lam > 0]
            if over:
                lam, i = max(over)
                big_forest, big_booster = result.models[i]
                cut, cut_cost = _truncate(big_forest, measure, float(self.budget))
                if cut is not None and cut_cost > cost:
                    forest, booster, tradeoff, cost = cut, big_booster, lam, cut_cost
                    self.truncated_ = True
        self.forest_, self.booster_ = forest, booster
        self.tradeoff_ = float(tradeoff)
        self.n_fits_ = int(result.n_fits)
        self.calibration_cost_ = float(cost)
        self.search_history_ = list(result.history)
        self.n_estimators_ = int(self.forest_.n_trees // max(1, self.forest_.n_outputs))
        return self

    def _floor(self, costs: CostModel) -> float:
        """Mean cost of the cheapest model: one iteration of constant trees (no features)."""
        return costs.tree_cost * self._n_outputs

    def _check_X(self, X: Any) -> Any:
        check_is_fitted(self, "forest_")
        X = as_frame_or_array(X)
        validate_data(self, X, reset=False, skip_check_array=True)
        return X

    def cost_report(self, X: Any, costs: CostModel | None = None) -> Any:
        """The per-example ``CostReport`` of predicting ``X`` (exact, from thrifty's runtime).

        ``costs`` defaults to the cost model the estimator was fitted with.
        """
        from thrifty.runtime.evaluate import evaluate

        X = self._check_X(X)
        return evaluate(self.forest_, X, self.costs_ if costs is None else costs).cost

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


def _truncate(forest: Any, measure: Any, budget: float) -> tuple[Any, float]:
    """The longest prefix of boosting iterations whose mean cost (``measure(forest)``, on the
    calibration rows) is within ``budget`` (cost never falls as trees are added, so bisect on
    the prefix length), and its cost; ``(None, 0.0)`` when even one iteration costs more."""
    per_iter = max(1, forest.n_outputs)
    n_iter = forest.n_trees // per_iter

    def prefix(k: int) -> Any:
        return forest.subset(range(k * per_iter))

    lo, hi, best = 0, n_iter, (None, 0.0)
    while lo < hi:
        k = (lo + hi + 1) // 2
        c = measure(prefix(k))
        if c <= budget:
            lo, best = k, (prefix(k), c)
        else:
            hi = k - 1
    return best


def tradeoff_scale(y: np.ndarray, task: str) -> float:
    """Typical loss reduction per example of one tree, to guess a first trade-off.

    Half the variance of the targets for squared loss; 0.5 (a Newton step's ``g^2 / 2h`` at the
    prior, averaged) for the log-losses and ranking.
    """
    if task == "regression":
        if hasattr(y, "__dask_graph__"):  # a Dask collection: its variance, on the cluster
            return max(0.5 * float(y.astype(np.float64).var().compute()), 1e-12)
        return max(0.5 * float(np.var(np.asarray(y, dtype=np.float64))), 1e-12)
    return 0.5
