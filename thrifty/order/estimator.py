"""``QWYCClassifier``: a scikit-learn meta-estimator making a fitted tree classifier quit early."""

from __future__ import annotations

from numbers import Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.validation import column_or_1d

from thrifty._estimator import Candidate, ThriftyEstimator, WrapsModel
from thrifty._param_validation import Interval, StrOptions
from thrifty._validation import (
    check_sample_weight,
    class_labels,
    fitted_forest,
    validate_frame,
)
from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.forest import raw_to_proba
from thrifty.order.orderings import LABELLED_ORDERINGS
from thrifty.order.qwyc import ORDERINGS, qwyc
from thrifty.order.regression import TOLERANCE, default_tolerance
from thrifty.runtime import evaluate

# The disagreement bounds tried under a budget: from exact (0) to one example in five.
ALPHAS = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2)


class _Wrapper(WrapsModel):
    """What the QWYC estimators share as wrappers of a model: its tags and NaN handling
    (:class:`~thrifty._estimator.WrapsModel`) and the alpha search (a mixin left of the
    task's, whose tags it amends)."""

    estimator: Any

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = False  # a fitted estimator needs no labels
        return tags

    def _search(
        self, model: Any, forest: Any, split: Any, costs: Any, alphas: list[float], wrong: Any, **kw: Any
    ) -> None:
        """QWYC for each of ``alphas`` on the calibration rows, then ``_select`` (cost under
        ``costs``, metric minus the weighted share of ``wrong(evaluation)`` rows); sets the
        fitted attributes every QWYC estimator has."""
        w_cal = np.ones(split.X_cal.shape[0]) if split.w_cal is None else split.w_cal
        est: Any = self

        def candidate(alpha: float) -> Candidate:
            plan, res = qwyc(
                forest,
                split.X_cal,
                split.y_cal,
                alpha=alpha,
                costs=costs,
                mode=est.mode,
                ordering=est.ordering,
                random_state=est.random_state,
                return_result=True,
                progress=bool(est.progress),
                feature_costs=bool(est.feature_costs),
                sample_weight=split.w_cal,
                **kw,
            )
            ev = evaluate(plan, split.X_cal, costs)
            cost = float(w_cal @ ev.cost.total / w_cal.sum())
            disagreement = float(w_cal @ wrong(ev) / w_cal.sum())
            mean_models = float(w_cal @ ev.cost.n_trees / w_cal.sum())
            return Candidate({"alpha": alpha}, cost, -disagreement, (plan, res, mean_models))

        chosen = est._select(candidate(a) for a in alphas)
        plan, res, est.mean_models_ = chosen.model
        est.estimator_ = model
        est.forest_ = forest
        est.plan_ = plan
        est.result_ = res
        est.alpha_ = chosen.params["alpha"]


def _alphas(est: Any) -> list[float]:
    """The disagreement bounds to try: ``alpha`` alone without a budget, else ``alphas``."""
    if est.budget is None:
        return [float(est.alpha)]
    alphas = ALPHAS if est.alphas is None else np.asarray(est.alphas, dtype=np.float64).reshape(-1)
    if len(alphas) == 0 or not all(0.0 <= a < 1.0 for a in alphas):
        raise InvalidParameterError(
            f"{type(est).__name__}: alphas must be one or more floats in [0, 1), got {est.alphas!r}"
        )
    return sorted({float(a) for a in alphas})


class QWYCClassifier(_Wrapper, ClassifierMixin, ThriftyEstimator):
    """Evaluate a tree ensemble tree by tree, stopping once the decision is safe (QWYC).

    ``fit`` chooses an order of the trees and, after each tree, two thresholds on the partial
    raw score: above ``eps_pos`` the example is declared positive, below ``eps_neg`` negative,
    and no further tree is evaluated. It minimises the mean evaluation cost of the calibration
    examples subject to at most a fraction ``alpha`` of them getting a label different from the
    full ensemble's (problem (2) of Wang, Gupta et al., "Quit When You Can"); on other data,
    measure it with ``disagreement``. Multiclass boosted models exit on the margin between the
    two leading classes after each boosting round (beyond the paper, see ``thrifty.order.qwyc``).

    With ``budget``, QWYC is solved for every ``alpha`` of ``alphas`` and the plan with the
    smallest disagreement on the calibration rows among those whose mean cost there (as
    ``thrifty.evaluate`` measures it under ``costs``) is within the budget is kept (ties: the
    cheaper); ``budget_search_`` lists them all (its ``metric`` is minus the disagreement).

    Parameters
    ----------
    estimator : fitted tree classifier or Forest
        A LightGBM, XGBoost or scikit-learn tree classifier (anything ``Forest.from_model``
        imports), a thrifty ``Forest``, or either wrapped in ``sklearn.frozen.FrozenEstimator``
        (which keeps it fitted through ``sklearn.base.clone``). An *unfitted* scikit-learn
        style estimator is accepted when ``fit`` gets labels: a clone of it is fitted on
        ``(X, y, sample_weight)`` first and kept as ``estimator_``.
    alpha : float in [0, 1), default=0.005
        Largest fraction of the calibration examples whose label may differ from the full
        model's (without ``budget``).
    mode : {"both", "negative"}, default="both"
        ``"negative"``: only early-negative exits (filter-and-score: positives always get the
        full model's score).
    ordering : {"optimize", "given", "random", "individual_mse", "greedy_mse"}, default="optimize"
        ``"optimize"`` is QWYC's joint order and thresholds (Algorithm 1); the others fix the
        order first (see ``thrifty.order.fixed_order``). The MSE orderings need ``y``.
    costs : CostModel, dict or array-like of feature costs, optional
        Feature prices (default: every feature costs 1) and ``tree_cost``. QWYC's objective
        charges each evaluated tree ``tree_cost`` (1 when it is 0) and, with
        ``feature_costs``, the features it newly acquires; ``cost_report`` and ``budget``
        use the full per-example cost ``thrifty.evaluate`` reports under these prices.
    budget : float, optional
        Largest mean cost per calibration example; ``None`` uses ``alpha``.
    alphas : array-like of floats in [0, 1), optional
        The disagreement bounds tried under a budget (default: ``ALPHAS``, 0 to 0.2).
    random_state : int, Generator or None
        Seed of ``ordering="random"``.
    progress : bool, default=True
        Progress bar over QWYC's positions (shown only when stderr is a TTY).
    feature_costs : bool, default=False
        Also count, in QWYC's objective, the features each tree would newly acquire, so that
        it minimises the mean per-example cost the runtime reports.

    Attributes
    ----------
    estimator_ : object
        The fitted model (``estimator`` itself unless a clone was fitted).
    forest_ : Forest
        The imported forest.
    plan_ : Sequential
        Order and thresholds; ``thrifty.evaluate(plan_, X, costs_)`` runs it.
    costs_ : CostModel
        ``costs`` aligned with ``X``'s columns.
    budget_search_ : pandas.DataFrame
        One row per ``alpha`` tried (one row without ``budget``): ``alpha``, ``cost``,
        ``metric`` (minus the disagreement on the calibration rows), ``chosen``.
    alpha_ : float
        The disagreement bound of the chosen plan.
    result_ : QWYCResult
        Order, thresholds, exits per position and cost on the calibration rows.
    classes_ : ndarray
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    mean_models_ : float
        Mean number of trees evaluated per calibration example.

    Notes
    -----
    ``sample_weight`` weights the calibration examples in problem (2): the mean cost
    ``sum_r c_{pi(r)} w(C_{r-1}) / w(C_0)`` and the disagreement ``w(differ) / w(C_0) <=
    alpha`` are weighted sums (see ``thrifty.order.qwyc``); it is also passed to the fit of
    an unfitted ``estimator``.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        # any model ``as_forest`` imports; checked when it is imported
        "estimator": [object],
        "alpha": [Interval(Real, 0, 1, closed="left")],
        "mode": [StrOptions({"both", "negative"})],
        "ordering": [StrOptions(set(ORDERINGS))],
        "costs": [None, "cost-model"],
        "budget": [None, Interval(Real, 0, None, closed="left")],
        "alphas": [None, "array-like"],
        "random_state": ["random_state"],
        "progress": ["boolean"],
        "feature_costs": ["boolean"],
    }

    def __init__(
        self,
        estimator: Any,
        *,
        alpha: float = 0.005,
        mode: str = "both",
        ordering: str = "optimize",
        costs: Any = None,
        budget: float | None = None,
        alphas: Any = None,
        random_state: Any = None,
        progress: bool = True,
        feature_costs: bool = False,
    ) -> None:
        self.estimator = estimator
        self.alpha = alpha
        self.mode = mode
        self.ordering = ordering
        self.costs = costs
        self.budget = budget
        self.alphas = alphas
        self.random_state = random_state
        self.progress = progress
        self.feature_costs = feature_costs

    def fit(
        self, X: Any, y: Any = None, sample_weight: Any = None, *, calibration: Any = None
    ) -> QWYCClassifier:
        """Choose the order and exits on the calibration rows (labels are optional).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
        y : array-like of shape (n,), optional
            Needed only by the MSE orderings and to fit an unfitted ``estimator``.
        sample_weight : array-like of shape (n,), optional
            Weights of the rows of ``X`` (see Notes).
        calibration : tuple, optional
            ``(X_cal, y_cal)`` or ``(X_cal, y_cal, w_cal)``: the rows QWYC is fitted on and the
            budget is measured on (default: ``X``, ``y`` and ``sample_weight``).

        Returns
        -------
        self
        """
        self._validate_params()
        alphas = _alphas(self)  # checked before an unfitted estimator is fitted
        if self.ordering in LABELLED_ORDERINGS and y is None and calibration is None:
            raise InputError(
                f"ordering={self.ordering!r} needs labels: call fit(X, y); the orderings "
                "'optimize', 'given' and 'random' need none"
            )
        if y is None:
            X = validate_frame(self, X, None)
        else:
            X, y = validate_frame(self, X, y)
            y = class_labels(y, type(self).__name__)[0]
        w = check_sample_weight(sample_weight, X.shape[0])
        model, forest = fitted_forest(self.estimator, X, y, w, who=type(self).__name__)
        if forest.task not in ("binary", "multiclass"):
            raise InputError(f"QWYCClassifier needs a classifier; the estimator's task is {forest.task!r}")
        if forest.classes is not None and len(forest.classes) < 2:
            only = np.asarray(forest.classes)[0].item()
            raise InputError(
                f"the estimator was fitted on one class only ({only!r}): it always predicts it, so "
                "there is nothing to quit early from; fit it on examples of at least 2 classes"
            )
        costs = self._fit_costs(X)
        split = self._calibration(X, y, w, calibration)
        full = forest.predict(split.X_cal)
        self._search(model, forest, split, costs, alphas, lambda ev: ev.labels != full)
        self.classes_ = np.asarray(forest.classes) if forest.classes is not None else np.array([0, 1])
        return self

    # ------------------------------------------------------------------ prediction
    def predict(self, X: Any) -> np.ndarray:
        """Labels decided by the early exits (the full model's where no exit fired)."""
        return self.evaluate(X).labels

    def decision_function(self, X: Any) -> np.ndarray:
        """How far past the deciding threshold each example's raw score is.

        Binary, shape (n,): for an example that exited, its partial raw score minus the
        threshold it crossed (``plan_.eps_pos`` or ``plan_.eps_neg`` of its exit position);
        for the others, the full raw score minus the decision threshold. Its sign is always
        the prediction's (positive for the second class). Multiclass, shape (n, n_classes):
        the partial raw scores at exit, whose argmax is the prediction.
        """
        return self._decision(self.evaluate(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """The model's link applied to ``decision_function`` (shifted back by the decision
        threshold), shape (n, n_classes); its argmax is ``predict``.

        Examples that never exit get the full model's probabilities; an exited example's
        probability says how far past its exit threshold it was, not the full model's.
        """
        d = self._decision(self.evaluate(X))
        if d.ndim == 2:
            return raw_to_proba(d, self.forest_.link)
        p = np.clip(raw_to_proba(d + self.forest_.decision_threshold, self.forest_.link)[:, 1], 0.0, 1.0)
        # a score just past its threshold can round to 0.5: keep the argmax on the prediction's side
        p = np.where(d > 0, np.maximum(p, np.nextafter(0.5, 1.0)), np.minimum(p, 0.5))
        return np.column_stack([1.0 - p, p])

    def _decision(self, ev: Any) -> np.ndarray:
        raw = np.asarray(ev.raw, dtype=np.float64)
        if raw.ndim == 2 and raw.shape[1] > 1:
            return raw
        raw = raw.reshape(-1)
        plan = self.plan_
        at = np.clip(ev.exit - 1, 0, len(plan.order) - 1)
        up, down = plan.eps_pos[at], plan.eps_neg[at]
        # the runtime's rule: positive exit first, then negative, else the full decision
        return np.where(
            raw > up, raw - up, np.where(raw < down, raw - down, raw - self.forest_.decision_threshold)
        )

    def disagreement(self, X: Any) -> float:
        """Fraction of the examples of ``X`` whose predicted label differs from the full model's."""
        labels = self.predict(X)
        if len(labels) == 0:
            return 0.0
        return float(np.mean(labels != self.forest_.predict(validate_frame(self, X))))


class QWYCRegressor(_Wrapper, RegressorMixin, ThriftyEstimator):
    """Evaluate a tree regressor tree by tree, stopping once the prediction is close enough (QWYC).

    ``fit`` chooses an order of the trees and, after each tree, a band ``[eps_neg, eps_pos]``
    on the partial score: an example whose partial score leaves the band stops and is
    predicted that partial score. It minimises the mean evaluation cost of the calibration
    examples subject to at most a fraction ``alpha`` of them getting a prediction farther than
    ``tolerance`` from the full model's (problem (2) of Wang, Gupta et al., "Quit When You
    Can", with that disagreement; see ``thrifty.order.regression.qwyc_regression``); on other
    data, measure it with ``disagreement``.

    With ``budget``, QWYC is solved for every ``alpha`` of ``alphas`` and the plan with the
    smallest disagreement on the calibration rows among those within the budget is kept (ties:
    the cheaper); ``budget_search_`` lists them all (its ``metric`` is minus the disagreement).

    Parameters
    ----------
    estimator : fitted tree regressor or Forest
        As ``QWYCClassifier``'s, a regressor (an unfitted one is fitted on ``fit``'s ``y``).
    alpha : float in [0, 1), default=0.005
        Largest fraction of the calibration examples whose prediction may be farther than
        ``tolerance`` from the full model's (without ``budget``).
    tolerance : float > 0, optional
        In target units. Default: 5% of the standard deviation of the calibration targets (of
        the full model's predictions on the calibration rows when ``fit`` gets no ``y``), a
        distance small against the spread the model explains (``default_tolerance``).
    mode : {"both", "negative"}, default="both"
        ``"negative"``: only exits below the band (small predictions stop early).
    ordering : {"optimize", "given", "random"}, default="optimize"
        ``"optimize"`` is QWYC's joint order and thresholds (Algorithm 1); the others fix the
        order first.
    costs, budget, alphas, random_state, progress, feature_costs
        As ``QWYCClassifier``'s.

    Attributes
    ----------
    estimator_, forest_, plan_, costs_, budget_search_, alpha_, result_, n_features_in_,
    feature_names_in_, mean_models_
        As ``QWYCClassifier``'s.
    tolerance_ : float
        The tolerance used.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **{k: v for k, v in QWYCClassifier._parameter_constraints.items() if k != "ordering"},
        "tolerance": [None, *TOLERANCE],
        "ordering": [StrOptions({"optimize", "given", "random"})],
    }

    def __init__(
        self,
        estimator: Any,
        *,
        alpha: float = 0.005,
        tolerance: float | None = None,
        mode: str = "both",
        ordering: str = "optimize",
        costs: Any = None,
        budget: float | None = None,
        alphas: Any = None,
        random_state: Any = None,
        progress: bool = True,
        feature_costs: bool = False,
    ) -> None:
        self.estimator = estimator
        self.alpha = alpha
        self.tolerance = tolerance
        self.mode = mode
        self.ordering = ordering
        self.costs = costs
        self.budget = budget
        self.alphas = alphas
        self.random_state = random_state
        self.progress = progress
        self.feature_costs = feature_costs

    def fit(
        self, X: Any, y: Any = None, sample_weight: Any = None, *, calibration: Any = None
    ) -> QWYCRegressor:
        """Choose the order and exits on the calibration rows (targets are optional).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
        y : array-like of shape (n,), optional
            Targets: to fit an unfitted ``estimator`` and for the default ``tolerance``.
        sample_weight : array-like of shape (n,), optional
            Weights of the rows of ``X`` in problem (2) (as ``QWYCClassifier``'s).
        calibration : tuple, optional
            ``(X_cal, y_cal)`` or ``(X_cal, y_cal, w_cal)``: the rows QWYC is fitted on and the
            budget is measured on (default: ``X``, ``y`` and ``sample_weight``).

        Returns
        -------
        self
        """
        self._validate_params()
        alphas = _alphas(self)
        if y is None:
            X = validate_frame(self, X, None)
        else:
            X, y = validate_frame(self, X, y)
            y = column_or_1d(np.asarray(y), warn=True).astype(np.float64)
            if not np.all(np.isfinite(y)):
                raise InputError("y contains NaN or infinity; regression targets must be finite")
        w = check_sample_weight(sample_weight, X.shape[0])
        model, forest = fitted_forest(self.estimator, X, y, w, who=type(self).__name__)
        if forest.task != "regression":
            raise InputError(f"QWYCRegressor needs a regressor; the estimator's task is {forest.task!r}")
        costs = self._fit_costs(X)
        split = self._calibration(X, y, w, calibration)
        full = forest.predict(split.X_cal)
        if self.tolerance is None:
            spread = full if split.y_cal is None else np.asarray(split.y_cal, dtype=np.float64)
            tol = default_tolerance(spread, split.w_cal)
        else:
            tol = float(self.tolerance)
        far = lambda ev: np.abs(ev.raw.reshape(-1) - full) > tol  # noqa: E731
        self._search(model, forest, split, costs, alphas, far, tolerance=tol)
        self.tolerance_ = tol
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The partial score at each example's exit (the full prediction where none fired)."""
        return np.asarray(self.evaluate(X).raw, dtype=np.float64).reshape(-1)

    def disagreement(self, X: Any) -> float:
        """Fraction of the examples of ``X`` predicted farther than ``tolerance_`` from the full model."""
        pred = self.predict(X)
        if len(pred) == 0:
            return 0.0
        return float(np.mean(np.abs(pred - self.forest_.predict(validate_frame(self, X))) > self.tolerance_))
