"""ADAPT: a cheap gate and a cheap model that take over from an expensive model where they do as well.

Nan & Saligrama, "Adaptive Classification for Prediction Under a Budget" (NIPS 2017). A gate
``g`` sends each example either to a low-prediction-cost model ``f1`` or to the given
high-prediction-cost model ``f0`` (the "hpc"); ``g`` and ``f1`` are learned jointly by
alternating minimisation of (OPT):

* the q-step (OPT1) solves for the oracle routing ``q_i`` (probability that example ``i`` goes to
  ``f0``) in closed form, ``q_i = 1 / (1 + exp(B_i - A_i + beta))``, with ``beta >= 0`` such that
  ``mean(q) <= p_full`` (:func:`q_step`);
* the (g, f1)-step fits the gate to ``q`` (a KL projection: logistic loss with soft targets ``q``)
  and ``f1`` to the labels weighted by ``1 - q``, under a feature-cost penalty shared by both:
  boosted cost-aware trees (ADAPT-GBRT, Algorithm 2, :func:`adapt_gbrt`) or linear models with
  a group-sparse penalty (ADAPT-LIN, Algorithm 1, :func:`adapt_lin`).

The L1 baseline of the paper's section 5 is :func:`l1_baseline`. :class:`ADAPTClassifier` wraps
them as a scikit-learn estimator whose fitted ``plan_`` is a thrifty ``Gated(gate, low, high)``
plan: ``thrifty.evaluate`` runs it and reports exact per-example costs (features acquired by the
gate are free for the model it picks).

Conventions: the gate's raw score ``g(x) > 0`` routes to ``f0`` (``sigma(g)`` is the paper's
``q(z=0|x)``), which is the runtime's ``Gated`` rule "gate raw score > 0 -> high".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

from thrifty._validation import class_labels, costs_for_X
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.runtime.plans import Gated, Plan
from thrifty.train._adapt_gbrt import adapt_gbrt
from thrifty.train._adapt_hpc import hpc_plan
from thrifty.train._adapt_lin import adapt_lin, l1_baseline, lin_objective, truncate_lin
from thrifty.train._adapt_problem import ADAPTFit, ADAPTProblem, q_step

__all__ = [
    "ADAPTClassifier",
    "ADAPTFit",
    "ADAPTProblem",
    "adapt_gbrt",
    "adapt_lin",
    "hpc_plan",
    "l1_baseline",
    "lin_objective",
    "q_step",
    "truncate_lin",
]

METHODS = ("gbrt", "lin", "l1")
# Default gamma per method when gamma=None, in units of the mean positive feature price: the
# GBRT penalty is compared with a split's reduction of the mean squared gradient (around
# 1e-3..1e-2 for a useful split), the linear ones with the mean logistic loss.
DEFAULT_GAMMA = {"gbrt": 1e-3, "lin": 1e-2, "l1": 1e-2}
# Sweep grids of budget= (gamma again in units of the mean positive feature price).
# (the benchmark's letter systems within 1 point of f0 need p_full around 0.5-0.65)
P_FULL_GRID = (0.1, 0.2, 0.35, 0.5, 0.65, 0.8)
GAMMA_GRID = {"gbrt": (1e-2, 1e-3, 3e-4, 1e-4), "lin": (0.1, 0.03, 0.01, 3e-3), "l1": (0.1, 0.03, 0.01, 3e-3)}


def _is_fitted(model: Any) -> bool:
    if isinstance(model, (Forest, Plan)) or not hasattr(model, "fit"):
        return True
    try:
        check_is_fitted(model)
    except NotFittedError:
        return False
    except TypeError:
        return True
    return True


# ------------------------------------------------------------------------------ estimator
class ADAPTClassifier(ClassifierMixin, BaseEstimator):
    """A cheap gate and a cheap model that take over from an expensive classifier (ADAPT).

    At prediction time the gate ``g`` looks at a few cheap features and either answers with
    the low-cost model ``f1`` (which reuses the gate's features for free) or hands the example
    to the expensive model ``hpc`` (``f0``). ``fit`` learns ``g`` and ``f1`` by the alternating
    minimisation of Nan & Saligrama (2017): fewer examples reach ``f0`` when ``p_full`` is
    smaller, fewer features are used by ``g`` and ``f1`` when ``gamma`` is larger.

    Parameters
    ----------
    hpc : classifier, Forest or plan, optional
        The expensive model ``f0``. Fitted: used as is. Unfitted (a scikit-learn style
        estimator): a clone is fitted on the training data first. None: a 100-tree random
        forest is fitted. Tree models are evaluated by thrifty's runtime (exact per-example
        cost); other classifiers are charged ``hpc_features`` (see :func:`hpc_plan`).
    costs : CostModel or array-like of shape (n_features,), optional
        Feature prices (default: 1 per feature).
    method : {"gbrt", "lin", "l1"}, default="gbrt"
        ADAPT-GBRT, ADAPT-LIN or the paper's L1 baseline.
    p_full : float in [0, 1], default=0.3
        Largest mean probability of sending a training example to ``f0`` (OPT's constraint;
        for ``"l1"``: the fraction of training examples the gate sends to ``f0``).
    gamma : float, optional
        Feature-cost penalty, per unit of the mean positive feature price (so that it means the
        same for prices in dollars or in milliseconds). Default: 1e-3 for ``"gbrt"``, 1e-2 for
        ``"lin"`` and ``"l1"``.
    n_estimators : int, default=100
        Boosting rounds of the gate and of ``f1`` per outer iteration (``"gbrt"``).
    max_depth : int, default=3
    learning_rate : float, default=0.1
    n_iter : int, default=10
        Outer (q-step, model-step) iterations (stops earlier once ``q`` settles).
    min_samples_leaf : int, default=5
    budget : float, optional
        Target mean cost per example. ``fit`` then sweeps ``p_full`` over ``p_full_grid`` and
        ``gamma`` over ``gamma_grid``, measures each system's accuracy and mean cost on
        calibration data with ``thrifty.evaluate`` and keeps the most accurate within budget.
    p_full_grid, gamma_grid : sequence of float, optional
        Grids of the budget sweep (defaults: ``P_FULL_GRID``, ``GAMMA_GRID[method]``).
    validation_fraction : float, default=0.25
        Calibration share of the training data held out by ``budget=`` when ``fit`` gets no
        ``calibration`` set.
    hpc_features : array-like of int or bool, optional
        Features a non-tree ``hpc`` reads (default: all).
    warm_start : bool, default=False
        Start from the previous fit's gate and ``f1`` (same method).
    max_features : int, optional
        ``"lin"`` only: keep the gate and ``f1`` to their ``max_features`` strongest features
        and refit on them (:func:`truncate_lin`, the support sweep of the authors' code). Pair
        it with a small ``gamma`` and enough ``n_iter`` (the authors ran 50): a weak penalty
        lets the gate and ``f1`` agree on which features they need before the cut.
    random_state : int or None
        Seed of the random forest default ``hpc`` and of the calibration split.
    progress : bool, default=True
        Progress bar over iterations (only when stderr is a TTY).

    Attributes
    ----------
    plan_ : Gated
        ``Gated(gate, low, high)``: ``thrifty.evaluate(plan_, X, costs)`` gives predictions
        and exact costs (for a black-box ``hpc`` the ``high`` branch is a cost stand-in and
        predictions must come from this estimator).
    gate_, low_ : Forest or Linear
    hpc_ : object
        The fitted expensive model.
    hpc_exact_ : bool
        False when ``hpc_`` is a black box evaluated outside the plan.
    costs_ : CostModel
    classes_ : ndarray
    n_features_in_ : int
    fit_ : ADAPTFit
        ``q`` and the iteration history.
    sweep_ : list of dict
        With ``budget=``: every ``(p_full, gamma)`` tried with its calibration accuracy, mean
        cost and fraction sent to ``f0``.
    best_params_ : dict
        With ``budget=``: the chosen ``p_full`` and ``gamma``.
    """

    def __init__(
        self,
        hpc: Any = None,
        costs: Any = None,
        *,
        method: str = "gbrt",
        p_full: float = 0.3,
        gamma: float | None = None,
        n_estimators: int = 100,
        max_depth: int = 3,
        learning_rate: float = 0.1,
        n_iter: int = 10,
        min_samples_leaf: int = 5,
        budget: float | None = None,
        p_full_grid: Any = None,
        gamma_grid: Any = None,
        validation_fraction: float = 0.25,
        hpc_features: Any = None,
        warm_start: bool = False,
        max_features: int | None = None,
        random_state: Any = None,
        progress: bool = True,
    ) -> None:
        self.hpc = hpc
        self.costs = costs
        self.method = method
        self.p_full = p_full
        self.gamma = gamma
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.n_iter = n_iter
        self.min_samples_leaf = min_samples_leaf
        self.budget = budget
        self.p_full_grid = p_full_grid
        self.gamma_grid = gamma_grid
        self.validation_fraction = validation_fraction
        self.hpc_features = hpc_features
        self.warm_start = warm_start
        self.max_features = max_features
        self.random_state = random_state
        self.progress = progress

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.method == "gbrt"
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, calibration: tuple[Any, Any] | None = None) -> ADAPTClassifier:
        """Learn the gate and the low-cost model (and the hpc, when it is not fitted).

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        y : array-like of shape (n,)
        calibration : (X_cal, y_cal), optional
            Data on which ``budget=`` measures accuracy and cost (default: a stratified
            ``validation_fraction`` of ``X`` held out from training).

        Returns
        -------
        self
        """
        self._check_params()
        y, classes, codes = class_labels(y, type(self).__name__)
        X, y = validate_data(
            self, X, y, ensure_all_finite="allow-nan" if self.method == "gbrt" else True, dtype=np.float64
        )
        self.classes_ = classes
        names = list(self.feature_names_in_) if hasattr(self, "feature_names_in_") else None
        costs = costs_for_X(self.costs, names, X.shape[1])
        self.costs_ = costs
        if self.budget is None:
            self._fit_one(X, codes, self.p_full, self._gamma(), warm=self.warm_start)
            return self
        if calibration is None:
            from sklearn.model_selection import train_test_split

            idx = np.arange(len(y))
            stratify = codes if np.bincount(codes).min() >= 2 else None
            tr, cal = train_test_split(
                idx, test_size=self.validation_fraction, stratify=stratify, random_state=self.random_state
            )
            X_fit, c_fit, X_cal, y_cal = X[tr], codes[tr], X[cal], y[cal]
        else:
            X_fit, c_fit = X, codes
            X_cal = np.asarray(calibration[0], dtype=np.float64)
            y_cal = np.asarray(calibration[1])
            if X_cal.ndim != 2 or X_cal.shape[1] != X.shape[1]:
                raise InputError(f"calibration X has shape {X_cal.shape}; it needs {X.shape[1]} features")
        self._sweep(X_fit, c_fit, X_cal, y_cal)
        return self

    def _check_params(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"method must be one of {METHODS}, got {self.method!r}")
        if not (isinstance(self.p_full, (int, float)) and 0.0 <= self.p_full <= 1.0):
            raise InputError(f"p_full must be a number in [0, 1], got {self.p_full!r}")
        if self.gamma is not None and not (
            isinstance(self.gamma, (int, float)) and self.gamma >= 0 and math.isfinite(self.gamma)
        ):
            raise InputError(f"gamma must be a finite number >= 0 (or None), got {self.gamma!r}")
        for name in ("n_estimators", "max_depth", "min_samples_leaf"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise InputError(f"{name} must be an integer >= 1, got {v!r}")
        if not isinstance(self.n_iter, (int, np.integer)) or self.n_iter < 0:
            raise InputError(f"n_iter must be an integer >= 0, got {self.n_iter!r}")
        if self.max_depth > 12:
            raise InputError(f"max_depth={self.max_depth} is too deep for ADAPT's trees; use at most 12")
        if not (isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0):
            raise InputError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if self.budget is not None and not (isinstance(self.budget, (int, float)) and self.budget >= 0):
            raise InputError(f"budget must be a mean cost >= 0 (or None), got {self.budget!r}")
        if self.max_features is not None:
            if self.method != "lin":
                raise InputError(
                    f"max_features applies to method='lin' only (got method={self.method!r}); "
                    "for 'gbrt' and 'l1' raise gamma to use fewer features"
                )
            if not isinstance(self.max_features, (int, np.integer)) or self.max_features < 1:
                raise InputError(f"max_features must be an integer >= 1 (or None), got {self.max_features!r}")
        if not 0.0 < self.validation_fraction < 1.0:
            raise InputError(f"validation_fraction must be in (0, 1), got {self.validation_fraction!r}")

    def _gamma(self) -> float:
        return DEFAULT_GAMMA[self.method] if self.gamma is None else float(self.gamma)

    def _hpc(self, X: np.ndarray, codes: np.ndarray) -> None:
        """Fit (if needed) and import the expensive model; set hpc_, high_, hpc_exact_."""
        hpc = self.hpc
        if hpc is None:
            from sklearn.ensemble import RandomForestClassifier

            hpc = RandomForestClassifier(n_estimators=100, random_state=self.random_state, n_jobs=1)
        if not _is_fitted(hpc):
            hpc = clone(hpc).fit(X, self.classes_[codes])
        high, exact = hpc_plan(hpc, X.shape[1], self.classes_, self.hpc_features)
        self.hpc_, self.high_, self.hpc_exact_ = hpc, high, exact

    def _hpc_proba(self, X: np.ndarray) -> np.ndarray:
        if self.hpc_exact_:
            from thrifty.runtime.evaluate import evaluate

            return evaluate(self.high_, X).proba
        return np.asarray(self.hpc_.predict_proba(X), dtype=np.float64)

    def _problem(self, X: np.ndarray, codes: np.ndarray) -> ADAPTProblem:
        names = list(self.feature_names_in_) if hasattr(self, "feature_names_in_") else None
        return ADAPTProblem.build(X, self.classes_[codes], self._hpc_proba(X), self.costs_, names)

    def _train(
        self, prob: ADAPTProblem, p_full: float, gamma: float, init: Any = None, memo: dict | None = None
    ) -> ADAPTFit:
        progress = bool(self.progress)
        if self.method == "gbrt":
            return adapt_gbrt(
                prob,
                p_full=p_full,
                gamma=gamma,
                n_estimators=int(self.n_estimators),
                max_depth=int(self.max_depth),
                learning_rate=float(self.learning_rate),
                n_iter=int(self.n_iter),
                min_samples_leaf=int(self.min_samples_leaf),
                init=init,
                progress=progress,
            )
        if self.method == "lin":
            fit = adapt_lin(
                prob, p_full=p_full, gamma=gamma, n_iter=int(self.n_iter), init=init, progress=progress
            )
            if self.max_features is not None:
                fit = truncate_lin(
                    prob,
                    fit,
                    int(self.max_features),
                    p_full=p_full,
                    gamma=gamma,
                    n_iter=int(self.n_iter),
                    progress=progress,
                )
            return fit
        return l1_baseline(prob, p_full=p_full, gamma=gamma, memo=memo)

    def _warm_init(self, prob: ADAPTProblem) -> Any:
        prev = getattr(self, "fit_", None)
        if prev is None or getattr(self, "_fitted_method", None) != self.method or self.method == "l1":
            return None
        if self.method == "lin":
            state = prev.state
            return state if state is not None and state.shape[0] == prob.X.shape[1] + 1 else None
        if prev.gate.n_features != prob.X.shape[1]:
            return None
        g = np.asarray(prev.gate.predict_raw(prob.X)).reshape(-1)
        F = np.asarray(prev.low.predict_raw(prob.X)).reshape(len(prob.y), -1)
        return g, F

    def _fit_one(self, X: np.ndarray, codes: np.ndarray, p_full: float, gamma: float, warm: bool) -> None:
        self._hpc(X, codes)
        prob = self._problem(X, codes)
        init = self._warm_init(prob) if warm else None
        self._set_fit(self._train(prob, p_full, gamma, init))

    def _set_fit(self, fit: ADAPTFit) -> None:
        self.fit_ = fit
        self._fitted_method = self.method
        self.gate_, self.low_ = fit.gate, fit.low
        self.plan_ = Gated(fit.gate, fit.low, self.high_)

    def _sweep(self, X: np.ndarray, codes: np.ndarray, X_cal: np.ndarray, y_cal: np.ndarray) -> None:
        """budget=: every (p_full, gamma) of the grids, scored on calibration data."""
        from thrifty.runtime.evaluate import evaluate

        self._hpc(X, codes)
        prob = self._problem(X, codes)
        p_grid = tuple(P_FULL_GRID if self.p_full_grid is None else self.p_full_grid)
        g_grid = tuple(GAMMA_GRID[self.method] if self.gamma_grid is None else self.gamma_grid)
        rows: list[dict[str, float]] = []
        best: tuple[float, float] | None = None
        best_fit: ADAPTFit | None = None
        memo: dict = {}  # the L1 steps of one gamma on this training set, shared across p_full
        for p_full in p_grid:
            init = None
            # gamma from large to small: each fit starts from the sparser previous one
            for gamma in sorted(g_grid, reverse=True):
                fit = self._train(prob, float(p_full), float(gamma), init, memo)
                if self.method == "lin":
                    init = fit.state
                self._set_fit(fit)
                ev = evaluate(self.plan_, X_cal, self.costs_)
                labels = self._labels(ev, X_cal)
                acc = float(np.mean(labels == y_cal))
                cost = ev.cost.mean
                rows.append(
                    {
                        "p_full": float(p_full),
                        "gamma": float(gamma),
                        "accuracy": acc,
                        "mean_cost": cost,
                        "to_hpc": float(np.mean(ev.exit == 1)),
                    }
                )
                if cost <= self.budget + 1e-12:
                    key = (acc, -cost)
                    if best is None or key > best:
                        best, best_fit = key, fit
                        self.best_params_ = {"p_full": float(p_full), "gamma": float(gamma)}
        self.sweep_ = rows
        if best_fit is None:
            cheapest = min(r["mean_cost"] for r in rows)
            raise InputError(
                f"budget={self.budget:g} is below the cheapest system the sweep found "
                f"(mean cost {cheapest:.4g} on the calibration data); raise the budget, or "
                "add larger gamma / smaller p_full values to gamma_grid / p_full_grid"
            )
        self._set_fit(best_fit)

    # ------------------------------------------------------------------ prediction
    def _labels(self, ev: Any, X: np.ndarray) -> np.ndarray:
        labels = ev.labels
        if self.hpc_exact_:
            return labels
        labels = labels.copy()
        high = np.flatnonzero(ev.exit == 1)
        if len(high):
            labels[high] = self.classes_[np.argmax(self.hpc_.predict_proba(X[high]), axis=1)]
        return labels

    def _evaluate(self, X: Any, costs: Any = None) -> tuple[Any, np.ndarray]:
        from thrifty.runtime.evaluate import evaluate

        check_is_fitted(self, "plan_")
        X = validate_data(
            self,
            X,
            reset=False,
            dtype=np.float64,
            ensure_all_finite="allow-nan" if self.method == "gbrt" else True,
        )
        return evaluate(self.plan_, X, self.costs_ if costs is None else costs), X

    def predict(self, X: Any) -> np.ndarray:
        """Labels from ``f1`` where the gate keeps the example, from the hpc elsewhere."""
        ev, X = self._evaluate(X)
        return self._labels(ev, X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of the model each example is routed to, shape (n, n_classes)."""
        ev, X = self._evaluate(X)
        proba = ev.proba
        if not self.hpc_exact_:
            proba = proba.copy()
            high = np.flatnonzero(ev.exit == 1)
            if len(high):
                proba[high] = self.hpc_.predict_proba(X[high])
        return proba

    def route(self, X: Any) -> np.ndarray:
        """1 where the gate sends the example to the hpc, 0 where ``f1`` answers."""
        return self._evaluate(X)[0].exit

    def cost_report(self, X: Any, costs: Any = None) -> Any:
        """The per-example ``CostReport`` (default prices: ``costs_``)."""
        return self._evaluate(X, costs)[0].cost
