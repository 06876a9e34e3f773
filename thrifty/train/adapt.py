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

The L1 baseline of the paper's section 5 is :func:`l1_baseline`. :class:`ADAPTClassifier` and
:class:`ADAPTRegressor` (the same (OPT) with squared losses, :class:`ADAPTRegressionProblem`) wrap
them as scikit-learn estimators whose fitted ``plan_`` is a thrifty ``Gated(gate, low, high)``
plan: ``thrifty.evaluate`` runs it and reports exact per-example costs (features acquired by the
gate are free for the model it picks).

Conventions: the gate's raw score ``g(x) > 0`` routes to ``f0`` (``sigma(g)`` is the paper's
``q(z=0|x)``), which is the runtime's ``Gated`` rule "gate raw score > 0 -> high".
"""

from __future__ import annotations

from collections.abc import Iterator
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from thrifty._estimator import Candidate, ThriftyEstimator, WrapsModel
from thrifty._param_validation import HasMethods, Interval, StrOptions
from thrifty._validation import (
    check_sample_weight,
    class_labels,
    fitted_model,
    validate_frame,
)
from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.forest import to_matrix
from thrifty.runtime.evaluate import evaluate as evaluate_plan
from thrifty.runtime.plans import Gated, Plan
from thrifty.train._adapt_gbrt import adapt_gbrt
from thrifty.train._adapt_hpc import hpc_columns, hpc_plan
from thrifty.train._adapt_lin import adapt_lin, l1_baseline, lin_objective, truncate_lin
from thrifty.train._adapt_problem import ADAPTFit, ADAPTProblem, q_step
from thrifty.train._adapt_regression import ADAPTRegressionProblem

__all__ = [
    "ADAPTClassifier",
    "ADAPTEstimator",
    "ADAPTFit",
    "ADAPTProblem",
    "ADAPTRegressionProblem",
    "ADAPTRegressor",
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


class ADAPTEstimator(WrapsModel, ThriftyEstimator):
    """What :class:`ADAPTClassifier` and :class:`ADAPTRegressor` share: their parameters (see
    :class:`ADAPTClassifier`), the fit of (OPT) on the training rows, the budget sweep over
    ``(p_full, gamma)`` and the fitted ``Gated`` plan. A subclass says how its targets are checked,
    which expensive model is the default, how (OPT)'s problem is built from the expensive model's
    outputs and which calibration metric ranks the candidates."""

    _parameter_constraints = {
        **ThriftyEstimator._parameter_constraints,
        "costs": ["cost-model", None],
        "budget": [Interval(Real, 0, None, closed="left"), None],
        "method": [StrOptions(set(METHODS))],
        "p_full": [Interval(Real, 0, 1, closed="both")],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "max_depth": [Interval(Integral, 1, 12, closed="both")],
        "learning_rate": [Interval(Real, 0, None, closed="neither")],
        "n_iter": [Interval(Integral, 0, None, closed="left")],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left")],
        "p_full_grid": ["array-like", None],
        "gamma_grid": ["array-like", None],
        "calibration_fraction": [Interval(Real, 0, 1, closed="neither")],
        "hpc_features": ["array-like", None],
        "warm_start": ["boolean"],
        "max_features": [Interval(Integral, 1, None, closed="left"), None],
        "random_state": ["random_state"],
        "progress": ["boolean"],
    }

    def __init__(
        self,
        hpc: Any = None,
        *,
        costs: Any = None,
        budget: float | None = None,
        method: str = "gbrt",
        p_full: float = 0.3,
        gamma: float | None = None,
        n_estimators: int = 100,
        max_depth: int = 3,
        learning_rate: float = 0.1,
        n_iter: int = 10,
        min_samples_leaf: int = 5,
        p_full_grid: Any = None,
        gamma_grid: Any = None,
        calibration_fraction: float = 0.25,
        hpc_features: Any = None,
        warm_start: bool = False,
        max_features: int | None = None,
        random_state: Any = None,
        progress: bool = True,
    ) -> None:
        self.hpc = hpc
        self.costs = costs
        self.budget = budget
        self.method = method
        self.p_full = p_full
        self.gamma = gamma
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.n_iter = n_iter
        self.min_samples_leaf = min_samples_leaf
        self.p_full_grid = p_full_grid
        self.gamma_grid = gamma_grid
        self.calibration_fraction = calibration_fraction
        self.hpc_features = hpc_features
        self.warm_start = warm_start
        self.max_features = max_features
        self.random_state = random_state
        self.progress = progress

    _wrapped = "hpc"

    def _method_takes_nan(self) -> bool:
        # the trees route missing values; the linear models need numbers
        return self.method == "gbrt"

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()  # NaN: WrapsModel, where the hpc takes it too
        tags.input_tags.categorical = self.method == "gbrt"  # the trees split on category codes
        return tags

    # The subclass's part: its default expensive model, (OPT)'s problem from the expensive
    # model's evaluation ``ev0`` on the training rows, and the calibration metric (higher wins).
    def _default_hpc(self) -> Any:
        raise NotImplementedError

    def _build(
        self, M: np.ndarray, y: np.ndarray, ev0: Any, names: Any, w: Any, categories: dict
    ) -> ADAPTProblem:
        raise NotImplementedError

    def _metric(self, ev: Any, y: np.ndarray, w: np.ndarray | None) -> float:
        raise NotImplementedError

    def _check_params(self) -> None:
        self._validate_params()
        if self.max_features is not None and self.method != "lin":
            raise InvalidParameterError(
                f"max_features applies to method='lin' only (got method={self.method!r}); "
                "for 'gbrt' and 'l1' raise gamma to use fewer features"
            )

    def _fit(self, X: Any, y: np.ndarray, sample_weight: Any, calibration: Any, *, stratify: bool) -> Any:
        """Fit (OPT) on the checked ``(X, y)``: the steps after the subclass checked its targets."""
        sample_weight = check_sample_weight(sample_weight, X.shape[0])
        self._fit_costs(X)
        split = self._calibration(
            X,
            y,
            sample_weight,
            calibration,
            default="train" if self.budget is None else "split",
            fraction=self.calibration_fraction,
            random_state=self.random_state,
            stratify=stratify,
        )
        self._fit_hpc(split.X, split.y, split.w)
        prob = self._problem(split.X, split.y, split.w)
        chosen = self._select(self._candidates(prob, split))
        result: ADAPTFit = chosen.model
        self.result_ = result
        self.p_full_, self.gamma_ = float(chosen.params["p_full"]), float(chosen.params["gamma"])
        self.gate_, self.low_ = result.gate, result.low
        self.plan_ = Gated(result.gate, result.low, self._high)
        return self

    def _fit_hpc(self, X: Any, y: np.ndarray, w: np.ndarray | None) -> None:
        """Fit (if needed) and import the expensive model: sets ``hpc_`` and the plan of ``f0``."""
        hpc = self._default_hpc() if self.hpc is None else self.hpc
        names = list(self.feature_names_in_) if hasattr(self, "feature_names_in_") else None
        # An unfitted hpc is fitted on the columns it will be given (its hpc_features).
        columns = hpc_columns(self.hpc_features, X.shape[1])
        rows = X.iloc[:, columns] if hasattr(X, "iloc") else X[:, columns]
        hpc = fitted_model(hpc, rows, y, w, who=type(self).__name__)
        self._high = hpc_plan(
            hpc,
            X.shape[1],
            getattr(self, "classes_", None),  # None: a regressor
            self.hpc_features,
            feature_names=names,
            categories=_frame_categories(X),
        )
        self.hpc_ = hpc

    def _problem(self, X: Any, y: np.ndarray, w: np.ndarray | None) -> ADAPTProblem:
        """The training rows as ADAPT's numeric problem (categories coded as the hpc codes them)."""
        names = list(self.feature_names_in_) if hasattr(self, "feature_names_in_") else None
        categories = dict(self._high.categories) or _frame_categories(X)
        if categories and self.method != "gbrt":
            raise InputError(
                f"method={self.method!r} needs numeric features but X has categorical columns "
                f"{[names[j] if names else j for j in sorted(categories)][:5]}; use method='gbrt' "
                "or encode them"
            )
        M = to_matrix(X, X.shape[1], names, categories)
        return self._build(M, y, evaluate_plan(self._high, X), names, w, categories)

    def _candidates(self, prob: ADAPTProblem, split: Any) -> Iterator[Candidate]:
        """Each (p_full, gamma) trained on ``prob`` and measured on the calibration rows."""
        if self.budget is None:
            grid = [(float(self.p_full), self._gamma())]
        else:
            p_grid = P_FULL_GRID if self.p_full_grid is None else self.p_full_grid
            g_grid = GAMMA_GRID[self.method] if self.gamma_grid is None else self.gamma_grid
            # gamma from large to small: each fit starts from the sparser previous one
            grid = [(float(p), float(g)) for p in p_grid for g in sorted(g_grid, reverse=True)]
        init = self._warm_init(prob) if self.warm_start and self.budget is None else None
        memo: dict[float, tuple] = {}  # the L1 steps of each gamma, shared across p_full
        for i, (p_full, gamma) in enumerate(grid):
            if self.budget is not None and (i == 0 or p_full != grid[i - 1][0]):
                init = None
            result = self._train(prob, p_full, gamma, init, memo)
            if self.method == "lin" and self.budget is not None:
                init = result.state
            plan = Gated(result.gate, result.low, self._high)
            ev = evaluate_plan(plan, split.X_cal, self.costs_)
            w = split.w_cal
            metric = self._metric(ev, np.asarray(split.y_cal), w)
            cost = float(np.average(ev.cost.total, weights=w))
            yield Candidate({"p_full": p_full, "gamma": gamma}, cost, metric, result)

    def _gamma(self) -> float:
        return DEFAULT_GAMMA[self.method] if self.gamma is None else float(self.gamma)

    def _train(
        self, prob: ADAPTProblem, p_full: float, gamma: float, init: Any, memo: dict[float, tuple]
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
            result = adapt_lin(
                prob, p_full=p_full, gamma=gamma, n_iter=int(self.n_iter), init=init, progress=progress
            )
            if self.max_features is not None:
                result = truncate_lin(
                    prob,
                    result,
                    int(self.max_features),
                    p_full=p_full,
                    gamma=gamma,
                    n_iter=int(self.n_iter),
                    progress=progress,
                )
            return result
        return l1_baseline(prob, p_full=p_full, gamma=gamma, memo=memo)

    def _warm_init(self, prob: ADAPTProblem) -> Any:
        """The previous fit's parameters (ADAPT-LIN) or raw scores on the training rows (GBRT)."""
        prev: ADAPTFit | None = getattr(self, "result_", None)
        if prev is None or self.method == "l1" or prev.gate.n_features != prob.X.shape[1]:
            return None
        if self.method == "lin":
            return prev.state
        if prev.state is not None:  # the previous fit was ADAPT-LIN
            return None
        g = np.asarray(evaluate_plan(prev.gate, prob.X).raw).reshape(-1)
        F = np.asarray(evaluate_plan(prev.low, prob.X).raw).reshape(len(prob.y), -1)
        return g, F

    # ------------------------------------------------------------------ prediction
    def evaluate(self, X: Any, costs: Any = None) -> Any:
        """``thrifty.evaluate`` of ``plan_``: predictions, routes (``exit``) and exact costs."""
        check_is_fitted(self, "plan_")
        X = validate_frame(self, X)
        if not self._takes_nan() and not hasattr(X, "iloc") and np.isnan(X).any():
            hpc = f"the hpc {type(self.hpc).__name__}"
            needs = f"method={self.method!r}" if self.method != "gbrt" else hpc
            raise InputError(f"X has NaN values; {needs} needs complete data (impute them first)")
        return evaluate_plan(self.plan_, X, self.costs_ if costs is None else costs)

    def route(self, X: Any) -> np.ndarray:
        """1 where the gate sends the example to the hpc, 0 where ``f1`` answers."""
        return self.evaluate(X).exit


class ADAPTClassifier(ClassifierMixin, ADAPTEstimator):
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
        estimator): a clone is fitted on the training rows first. None: a 100-tree random
        forest is fitted. Tree models are evaluated by thrifty's runtime (exact per-example
        cost); other classifiers are ``Opaque`` plans charged ``hpc_features`` (see
        :func:`hpc_plan`).
    costs : CostModel, array-like of shape (n_features,) or dict, optional
        Feature prices (default: 1 per feature).
    budget : float, optional
        Target mean cost per example. ``fit`` then sweeps ``p_full`` over ``p_full_grid`` and
        ``gamma`` over ``gamma_grid``, measures each system's accuracy and mean cost on the
        calibration rows with ``thrifty.evaluate`` and keeps the most accurate within budget.
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
        Least total sample weight of a leaf (the number of rows when unweighted).
    p_full_grid, gamma_grid : sequence of float, optional
        Grids of the budget sweep (defaults: ``P_FULL_GRID``, ``GAMMA_GRID[method]``).
    calibration_fraction : float in (0, 1), default=0.25
        Share of the training rows held out (stratified) to calibrate ``budget=`` when
        ``fit`` gets no ``calibration`` set.
    hpc_features : array-like of int or bool, optional
        Features a non-tree ``hpc`` reads (default: all): it is charged them on every example it
        predicts, and is given only those columns (an unfitted ``hpc`` is fitted on them).
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
        ``Gated(gate, low, high)``: ``thrifty.evaluate(plan_, X, costs_)`` gives predictions
        and exact costs.
    gate_, low_ : Forest or Linear
    hpc_ : object
        The fitted expensive model.
    result_ : ADAPTFit
        The chosen training: the oracle routing ``q`` of the training rows, the iteration
        history and (ADAPT-LIN) the standardized parameters.
    p_full_, gamma_ : float
        The chosen ``p_full`` and ``gamma``.
    budget_search_ : pandas.DataFrame
        Every ``(p_full, gamma)`` tried (one row without ``budget=``) with its mean ``cost`` and
        accuracy (``metric``) on the calibration rows, and whether it was ``chosen``.
    costs_ : CostModel
    classes_ : ndarray
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    """

    _parameter_constraints = {
        **ADAPTEstimator._parameter_constraints,
        "hpc": [None, HasMethods(["predict_proba"]), Plan],
    }

    # ------------------------------------------------------------------ fit
    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, calibration: tuple | None = None
    ) -> ADAPTClassifier:
        """Learn the gate and the low-cost model (and the hpc, when it is not fitted).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
            DataFrames (pandas, polars, pyarrow) reach the hpc as they are, categorical columns
            included; the gate and ``f1`` of ADAPT-GBRT split on the category codes.
        y : array-like of shape (n,)
        sample_weight : array-like of shape (n,), optional
            Each example's weight in (OPT): it multiplies the example's losses and entropy in
            (OPT1) and its share of the constraint ``E[q] <= p_full`` (a weighted mean), its terms
            of (OPT2) and impurities (1)/(2) (gradients, hessians and squared errors), and its
            accuracy and cost on the calibration rows. Integer weights are repeated rows; 0 drops
            the row. An unfitted ``hpc`` is fitted with the weights.
        calibration : (X_cal, y_cal) or (X_cal, y_cal, w_cal), optional
            Rows on which ``budget=`` measures accuracy and cost (default: a stratified
            ``calibration_fraction`` of ``X`` held out from training when ``budget`` is given,
            else the training rows).

        Returns
        -------
        self
        """
        self._check_params()
        y, classes, _ = class_labels(y, type(self).__name__)
        X, y = validate_frame(self, X, y)
        self.classes_ = classes
        return self._fit(X, y, sample_weight, calibration, stratify=True)

    def _default_hpc(self) -> Any:
        from sklearn.ensemble import RandomForestClassifier

        return RandomForestClassifier(n_estimators=100, random_state=self.random_state, n_jobs=1)

    def _build(
        self, M: np.ndarray, y: np.ndarray, ev0: Any, names: Any, w: Any, categories: dict
    ) -> ADAPTProblem:
        return ADAPTProblem.build(M, y, ev0.proba, self.costs_, names, sample_weight=w, categories=categories)

    def _metric(self, ev: Any, y: np.ndarray, w: np.ndarray | None) -> float:
        """Accuracy on the calibration rows."""
        return float(np.average(ev.labels == y, weights=w))

    # ------------------------------------------------------------------ prediction
    def predict(self, X: Any) -> np.ndarray:
        """Labels from ``f1`` where the gate keeps the example, from the hpc elsewhere."""
        return self.evaluate(X).labels

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of the model each example is routed to, shape (n, n_classes)."""
        return self.evaluate(X).proba


class ADAPTRegressor(RegressorMixin, ADAPTEstimator):
    """A cheap gate and a cheap regressor that take over from an expensive regressor (ADAPT).

    ADAPT's (OPT) with squared losses (see ``thrifty/train/_adapt_regression.py``): sending
    example ``i`` to the low-cost model ``f1`` costs ``(f1(x_i) - y_i)^2 / (2 s^2)``, sending it
    to the expensive model ``f0`` costs ``(f0(x_i) - y_i)^2 / (2 s^2)``, each plus the gate's
    log-loss, where ``s`` is ``f0``'s root mean squared error on the training rows (the losses
    are Gaussian negative log-likelihoods at ``f0``'s noise level, in the units of the gate's
    log-loss and of the entropy of (OPT1)). The gate learns to keep the examples on which ``f1``
    comes as close to ``y`` as ``f0``; ``f1`` is fitted by least squares on the examples the gate
    keeps. ``fit`` alternates the closed-form q-step (OPT1) with ADAPT-LIN's group-sparse
    (OPT2) or ADAPT-GBRT's cost-aware trees, as :class:`ADAPTClassifier` does.

    Parameters are :class:`ADAPTClassifier`'s, except:

    hpc : regressor, Forest or plan, optional
        The expensive model ``f0`` (default: a 100-tree random forest regressor, fitted on the
        training rows). A model ``Forest.from_model`` does not import is a black box charged
        ``hpc_features`` and asked for its ``predict``.
    method : {"gbrt", "lin"}, default="gbrt"
        ADAPT-GBRT or ADAPT-LIN (the paper's L1 baseline gates on a classifier's mistakes and
        has no regression counterpart).
    budget : float, optional
        As for the classifier; the candidates are ranked by minus the mean squared error on the
        calibration rows (``metric`` of ``budget_search_``).

    Attributes are :class:`ADAPTClassifier`'s, without ``classes_``, and ``scale_``, the
    ``s`` of the losses.
    """

    _parameter_constraints = {
        **ADAPTEstimator._parameter_constraints,
        "hpc": [None, HasMethods(["predict"]), Plan],
        "method": [StrOptions({"gbrt", "lin"})],
    }

    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, calibration: tuple | None = None
    ) -> ADAPTRegressor:
        """Learn the gate and the low-cost regressor (and the hpc, when it is not fitted).

        Parameters as :meth:`ADAPTClassifier.fit`, with ``y`` real targets; without
        ``calibration`` and with a budget, the held-out ``calibration_fraction`` is a plain
        random split.

        Returns
        -------
        self
        """
        self._check_params()
        X, y = validate_frame(self, X, y)
        y = np.asarray(y, dtype=np.float64)
        if not np.all(np.isfinite(y)):
            raise InputError("y contains NaN or infinity; regression targets must be finite")
        return self._fit(X, y, sample_weight, calibration, stratify=False)

    def _default_hpc(self) -> Any:
        from sklearn.ensemble import RandomForestRegressor

        return RandomForestRegressor(n_estimators=100, random_state=self.random_state, n_jobs=1)

    def _build(
        self, M: np.ndarray, y: np.ndarray, ev0: Any, names: Any, w: Any, categories: dict
    ) -> ADAPTProblem:
        pred0 = np.asarray(ev0.raw, dtype=np.float64).reshape(-1)
        prob = ADAPTRegressionProblem.build(
            M, y, pred0, self.costs_, names, sample_weight=w, categories=categories
        )
        self.scale_ = prob.scale
        return prob

    def _metric(self, ev: Any, y: np.ndarray, w: np.ndarray | None) -> float:
        """Minus the mean squared error on the calibration rows."""
        return -float(np.average((np.asarray(ev.raw).reshape(-1) - y) ** 2, weights=w))

    def predict(self, X: Any) -> np.ndarray:
        """``f1``'s prediction where the gate keeps the example, the hpc's elsewhere."""
        return np.asarray(self.evaluate(X).raw, dtype=np.float64).reshape(-1)


def _frame_categories(X: Any) -> dict[int, list]:
    """The categories of a DataFrame's categorical columns, by column position."""
    if not hasattr(X, "dtypes"):
        return {}
    import pandas as pd

    return {
        j: list(dtype.categories)
        for j, dtype in enumerate(X.dtypes)
        if isinstance(dtype, pd.CategoricalDtype)
    }
