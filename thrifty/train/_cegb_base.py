"""The estimator machinery CEGB and GreedyMiser share: parameters, calibration, the budget search."""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import joblib
import numpy as np
import pandas as pd
from sklearn.base import is_classifier
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from thrifty._estimator import Candidate, ThriftyEstimator
from thrifty._param_validation import Interval
from thrifty._validation import check_sample_weight, to_frame, validate_frame
from thrifty.costs import CostModel
from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.forest import Forest, is_dataframe
from thrifty.forest.importers import from_model
from thrifty.forest.names import lightgbm_frame
from thrifty.runtime import Full
from thrifty.runtime.evaluate import evaluate
from thrifty.train import _cegb_dask as dk
from thrifty.train._search import search_tradeoff

# Trade-off used when neither ``tradeoff`` nor ``budget`` is given: a mild penalty (a feature of
# cost 1 must reduce the loss by 0.01 per example it is acquired for).
DEFAULT_TRADEOFF = 0.01


def as_frame_or_array(X: Any) -> Any:
    """``X`` as LightGBM and the runtime read it: DataFrames kept (categorical columns intact;
    polars and pyarrow tables become pandas), anything else a float64 array (NaN allowed,
    infinities rejected)."""
    X = to_frame(X)
    if is_dataframe(X):
        return X
    return check_array(X, dtype=np.float64, ensure_all_finite="allow-nan")


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


class CostAwareBoosting(ThriftyEstimator):
    """Base of the CEGB and GreedyMiser estimators: subclasses say how one model is trained.

    A subclass implements ``_train(X, y, sample_weight, tradeoff, fit_params)`` returning
    ``(forest, booster)`` and ``_start(y, budget)``, a first guess of the trade-off, and
    declares its tree-shape parameters' constraints.
    """

    _parameter_constraints = {
        "costs": [None, "cost-model"],
        "tradeoff": [None, Interval(Real, 0, math.inf, closed="left")],
        "budget": [None, Interval(Real, 0, math.inf, closed="neither")],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "min_child_samples": [Interval(Integral, 0, None, closed="left")],
        "lgbm_params": [None, dict],
        "tolerance": [Interval(Real, 0, 1, closed="neither")],
        "max_fits": [Interval(Integral, 2, None, closed="left")],
        "truncate": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": [None, Interval(Integral, None, None, closed="neither")],
        "progress": ["boolean"],
        "warm_start": ["boolean"],
    }

    #: Parameters that do not change the model trained at a trade-off (``warm_start`` reuses
    #: trials across fits that differ in these only).
    _search_only = ("budget", "tolerance", "max_fits", "truncate", "progress", "warm_start", "n_jobs")

    def _check_params(self) -> None:
        self._validate_params()
        if self.tradeoff is not None and self.budget is not None:
            raise InvalidParameterError(
                f"{type(self).__name__}: give either tradeoff= (the penalty lambda) or budget= (a "
                "target mean cost per example, the trade-off is then searched), not both"
            )

    def _fit(self, X: Any, y: Any, sample_weight: Any, calibration: Any, fit_params: dict) -> Any:
        self._check_params()
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
        sample_weight = check_sample_weight(sample_weight, X.shape[0])
        names = _names(X)
        costs = self._fit_costs(X)
        split = self._calibration(X, y, sample_weight, calibration)
        X_cal, w_cal = as_frame_or_array(split.X_cal), split.w_cal
        # LightGBM refuses or rewrites some names; it trains on names it keeps, and the forest
        # reads the user's.
        X_fit = lightgbm_frame(X)

        def measure(forest: Any) -> float:
            return float(np.average(evaluate(forest, X_cal, costs).cost.total, weights=w_cal))

        def fit_one(lam: float) -> tuple[Any, float]:
            forest, booster = self._train(X_fit, y, sample_weight, lam, fit_params)
            forest = from_model(forest, feature_names=names)
            return (forest, booster), measure(forest)

        def fit_only(keep: tuple[int, ...]) -> tuple[Any, float]:
            # No penalty, every other feature blanked out: the limit of an infinite penalty on
            # them and none on ``keep`` (the features the path bought first).
            forest, booster = self._train(_only_features(X_fit, keep), y, sample_weight, 0.0, fit_params)
            forest = from_model(forest, feature_names=names)
            return (forest, booster), measure(forest)

        key = (X, y, sample_weight, fit_params, X_cal, w_cal) if self.warm_start else None
        return self._search(fit_one, measure, costs, y, key, fit_only)

    def _fit_dask(self, X: Any, y: Any, sample_weight: Any, calibration: Any) -> Any:
        """``fit`` on Dask collections: trains through ``lightgbm.dask`` on the current
        ``distributed.Client``; budgets are measured with :func:`thrifty.dask.evaluate`."""
        self._check_params()
        if self._task == "ranking":
            raise InputError("ranking on Dask collections is not supported; fit CEGBRanker in memory")
        X, y, sample_weight, X_cal = dk.check_dask_inputs(X, y, sample_weight, calibration)
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
        costs = self._fit_costs(X)
        # examples counted by weight, as in memory (GreedyMiser's coupled penalty charges them all)
        n_rows = float(len(y)) if sample_weight is None else float(sample_weight.sum().compute())

        def measure(forest: Any) -> float:
            return dk.mean_cost(forest, X_cal, costs)

        def fit_one(lam: float) -> tuple[Any, float]:
            forest, booster = self._train_dask(client, X, y, sample_weight, lam, n_rows)
            return (forest, booster), measure(forest)

        # a Dask collection's name is a hash of its graph: the same data, the same name
        names_of = tuple(getattr(a, "name", id(a)) for a in (X, y, sample_weight, X_cal))
        return self._search(fit_one, measure, costs, y, names_of if self.warm_start else None)

    def _candidates(
        self, fit_one: Any, measure: Any, costs: CostModel, y: Any, key: Any = None, fit_only: Any = None
    ) -> tuple[list[Candidate], int]:
        """The models to choose between, and the number trained: the one at the given
        trade-off, or every trial of the budget search (plus, with ``truncate``, the cheapest
        over-budget trial cut where the budget runs out); with ``warm_start``, also the trials
        of earlier fits on the same data (``key``), which the search starts from.
        ``fit_one(lam) -> ((forest, booster), mean cost)``; ``measure(forest)`` is a model's
        mean cost. ``fit_only(features) -> ((forest, booster), mean cost)``: a model of those
        features alone (see :meth:`_first_features`; None on Dask)."""
        if self.budget is None:
            lam = DEFAULT_TRADEOFF if self.tradeoff is None else float(self.tradeoff)
            model, cost = fit_one(lam)
            return [Candidate({"tradeoff": lam, "truncated": False, "reused": False}, cost, None, model)], 1
        budget = float(self.budget)
        known = self._warm_trials(costs, key)
        trials = search_tradeoff(
            fit_one,
            budget,
            start=self._start(y, budget),
            tolerance=float(self.tolerance),
            max_fits=int(self.max_fits),
            floor=self._floor(costs),
            progress=bool(self.progress),
            desc=type(self).__name__,
            history=[(lam, cost) for lam, cost, _ in known],
        )
        path = known + [
            (lam, cost, model) for (lam, cost), model in zip(trials.history, trials.models, strict=True)
        ]
        if key is not None:
            self._trials = path
        candidates = [
            Candidate({"tradeoff": lam, "truncated": False, "reused": i < len(known)}, cost, None, model)
            for i, (lam, cost, model) in enumerate(path)
        ]
        best = max((c for _, c, _ in path if c <= budget), default=None)
        if self.truncate and (best is None or best < (1.0 - self.tolerance) * budget):
            # The cost jumps over the budget between two trade-offs (a feature enters for many
            # examples at once): the cheapest over-budget model, stopped boosting where the
            # budget runs out as GreedyMiser does, may spend more of it.
            over = [(lam, i) for i, (lam, c, _) in enumerate(path) if c > budget and lam > 0]
            if over:
                lam, i = max(over)
                big_forest, big_booster = path[i][2]
                cut, cut_cost = _truncate(big_forest, measure, budget)
                if cut is not None:
                    candidates.append(
                        Candidate(
                            {"tradeoff": lam, "truncated": True, "reused": False},
                            cut_cost,
                            None,
                            (cut, big_booster),
                        )
                    )
        spent = max((c.cost for c in candidates if c.cost <= budget), default=None)
        unspent = spent is None or spent < (1.0 - self.tolerance) * budget
        if self.truncate and fit_only is not None and unspent:
            found, fits = self._first_features(fit_only, path, budget, costs)
            candidates += found
            return candidates, trials.n_fits + fits
        return candidates, trials.n_fits

    def _first_features(
        self, fit_only: Any, path: list, budget: float, costs: CostModel
    ) -> tuple[list[Candidate], int]:
        """Models of the first 1, 2, 4... features the path's richest model acquires, up to the
        first over ``budget``, and the number of fits. A feature whose price alone (with its
        group and what it depends on) is over the budget is skipped: these models have no
        penalty, so nearly every example reads each of their features, and one such feature
        would put every longer prefix over the budget. On flights the path buys ``dep_delay``
        (10) second, and the weather and aircraft lookups (1 each) after it: without the skip
        no model of the first features spent a budget of 2.4 on anything but the free ones.

        Where the cost jumps over the budget between two trade-offs, the path has no model
        spending the budget: a multiclass model grows one tree per class, each class's tree
        buys the feature best for its class, so one step of the trade-off buys several
        features at once (on letter, 26 classes: from no feature to seven). The limit of an
        infinite penalty on every feature but the first k bought, and none on those, is a
        model of those k alone: as cheap as the cheapest-k-features baseline, with features
        chosen by the path's own order (first use, tree by tree, root first) rather than by
        price alone. Cached across fits with ``warm_start`` (the same data and parameters).
        """
        richest = max(path, key=lambda p: p[1])[2][0]
        order = _affordable_order(richest, costs, budget)
        key = getattr(self, "_trials_key", None)
        cache: dict[Any, Any] = {}  # kept on the estimator only with warm_start
        if self.warm_start:
            if getattr(self, "_only_fits", {}).get("key") != key:
                self._only_fits = {"key": key}
            cache = self._only_fits
        found, fits, k = [], 0, 1
        while order and k <= len(order):
            keep = tuple(sorted(order[:k]))
            reused = keep in cache
            if not reused:
                cache[keep], fits = fit_only(keep), fits + 1
            model, cost = cache[keep]
            params = {"tradeoff": 0.0, "truncated": False, "reused": reused, "features": k}
            found.append(Candidate(params, cost, None, model))
            if cost > budget or k == len(order):
                break
            k = min(2 * k, len(order))
        return found, fits

    def _warm_trials(self, costs: CostModel, key: Any) -> list[tuple[float, float, Any]]:
        """The trials of earlier fits (``warm_start``) when they were trained with the same
        model parameters, costs and data (``key``) and measured on the same calibration rows:
        ``(tradeoff, mean cost, (forest, booster))``. Sets the fingerprint of this fit."""
        if key is None:
            self._trials, self._trials_key = [], None
            return []
        params = {k: v for k, v in self.get_params().items() if k not in self._search_only}
        fingerprint = joblib.hash((type(self).__name__, params, costs, key))
        if getattr(self, "_trials_key", None) != fingerprint:
            self._trials, self._trials_key = [], fingerprint
        return list(self._trials)

    def _search(
        self, fit_one: Any, measure: Any, costs: CostModel, y: Any, key: Any = None, fit_only: Any = None
    ) -> Any:
        """Fit the candidates and keep the one the shared rule selects (no metric: the most
        expensive within the budget); ``key``: the data, for ``warm_start``; ``fit_only``: see
        :meth:`_candidates`."""
        candidates, n_fits = self._candidates(fit_one, measure, costs, y, key, fit_only)
        chosen = self._select(candidates)
        self.search_models_ = [c.model[0] for c in candidates]
        self.forest_, self.booster_ = chosen.model
        self.plan_ = Full(self.forest_)
        self.tradeoff_ = float(chosen.params["tradeoff"])
        self.truncated_ = bool(chosen.params["truncated"])
        self.n_fits_ = int(n_fits)
        self.calibration_cost_ = float(chosen.cost)
        self.n_estimators_ = int(self.forest_.n_trees // max(1, self.forest_.n_outputs))
        return self

    def _floor(self, costs: CostModel) -> float:
        """Mean cost of the cheapest model: one iteration of constant trees (no features)."""
        return costs.tree_cost * self._n_outputs

    def _check_X(self, X: Any) -> Any:
        check_is_fitted(self, "forest_")
        return validate_frame(self, X)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


def _acquisition_order(forest: Any) -> list[int]:
    """The features of ``forest`` in the order it first uses them: tree by tree, each tree
    breadth-first from its root (a root's feature is acquired by every example)."""
    order: list[int] = []
    for t in range(forest.n_trees):
        level = [int(forest.roots[t])]
        while level:
            nxt = []
            for node in level:
                f = int(forest.feature[node])
                if f >= 0:
                    if f not in order:
                        order.append(f)
                    nxt += [int(forest.children_left[node]), int(forest.children_right[node])]
            level = nxt
    return order


def _affordable_order(forest: Any, costs: CostModel, budget: float) -> list[int]:
    """The features each priced within ``budget`` on its own (with its group and what it
    depends on), in the order ``forest`` first uses them (:func:`_acquisition_order`), then
    those it never uses, cheapest first (the column order among equal prices, as the
    cheapest-k-features baseline sorts them).

    The path's richest model need not use every feature the budget affords: on flights CEGB's
    (trade-off 0.037, mean cost 10.9) buys ``dep_delay`` and the free schedule features but
    only some of the weather lookup and none of the aircraft one, so its first-features models
    stopped at 12 features and a mean cost of 1 at every budget from 2.4 to 9, while a model
    of the 24 features under 10 costs 2. Appending the features it never bought lets the
    ladder of :meth:`CostAwareBoosting._first_features` reach every affordable feature."""
    price = costs.prices()
    used = [f for f in _acquisition_order(forest) if price[f] <= budget]
    bought = set(used)
    cheapest = np.argsort(price, kind="stable").tolist()
    return used + [f for f in cheapest if price[f] <= budget and f not in bought]


def _only_features(X: Any, keep: tuple[int, ...]) -> Any:
    """``X`` with every column but ``keep`` (positions) all missing: a missing column never
    wins a split, and the model still reads every column."""
    if hasattr(X, "iloc"):
        out = X.copy()
        for j, c in enumerate(X.columns):
            if j not in keep:
                out[c] = out[c].where(pd.Series(False, index=X.index))
        return out
    out = np.array(X, dtype=np.float64, copy=True)
    out[:, [j for j in range(out.shape[1]) if j not in keep]] = np.nan
    return out


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
