"""``CronusClassifier``: a scikit-learn meta-estimator turning a binary tree ensemble into a
Cronus cascade, optionally within a target mean cost."""

from __future__ import annotations

from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any, ClassVar, cast

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.base import ClassifierMixin
from sklearn.utils.multiclass import type_of_target

from thrifty._estimator import Candidate, ThriftyEstimator, WrapsModel
from thrifty._param_validation import Interval, StrOptions
from thrifty._validation import (
    check_sample_weight,
    class_labels,
    fitted_forest,
    validate_frame,
)
from thrifty.cascade.cronus import OPTIONS, CronusResult, cronus, lambda_max, stage_rho
from thrifty.exceptions import InputError
from thrifty.runtime import evaluate

# The budget search tries lam = lambda_max / 2**j, j = 0 .. n_lams - 1 (thrifty.compare too).
N_LAMS = 8


def lam_grid(lam_max: float, n_lams: int = N_LAMS) -> list[float]:
    """The values of ``lam`` a budget search tries: ``lam_max / 2**j`` for ``j = 0 .. n_lams - 1``
    (``lam_max`` from :func:`~thrifty.cascade.lambda_max` keeps no tree)."""
    return [lam_max / 2.0**j for j in range(int(n_lams))]


class CronusEstimator(WrapsModel, ThriftyEstimator):
    """What the Cronus estimators share: one cascade per ``lam`` (eq. (8) through
    :func:`~thrifty.cascade.cronus`), the ``lam`` grid of a budget search, the fitted state;
    NaN accepted where the wrapped model accepts it (:class:`~thrifty._estimator.WrapsModel`)."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        # any model ``as_forest`` imports; checked when it is imported
        "estimator": [object],
        "costs": [None, "cost-model"],
        "budget": [None, Interval(Real, 0, None, closed="left")],
        **OPTIONS,
        "n_lams": [Interval(Integral, 1, None, closed="left")],
        "progress": ["boolean"],
    }

    def _cascade(
        self, forest: Any, X: Any, y: Any, costs: Any, lam: float | None, class_weight: Any, w: Any
    ) -> CronusResult:
        """The cascade of eq. (8) for one ``lam`` on the training rows ``(X, y)`` (binary targets)."""
        result = cronus(
            forest,
            X,
            y,
            costs,
            lam=lam,
            n_stages=self.n_stages,
            rho=self.rho,
            delta=self.delta,
            eps=self.eps,
            gamma=self.gamma,
            class_weight=class_weight,
            init_only=self.init_only,
            max_cycles=self.max_cycles,
            n_threads=self.n_threads,
            return_result=True,
            sample_weight=w,
        )
        return cast(CronusResult, result)  # return_result=True: a CronusResult, not the plan

    def _lams(self, forest: Any, X: Any, y: Any, costs: Any, class_weight: Any, w: Any) -> Iterable[Any]:
        """``[self.lam]`` without a budget, else :func:`lam_grid` below ``lambda_max`` (which keeps
        no tree, so a budget >= 0 is always met) behind a progress bar."""
        from tqdm.auto import tqdm

        if self.budget is None:
            return [self.lam]
        top = lambda_max(forest, X, y, costs, class_weight=class_weight, sample_weight=w)
        if not np.isfinite(top):
            raise InputError(
                "some trees cost nothing (no priced feature, tree_cost 0), so no lam "
                "drops them and the budget search has no scale; give trees a cost "
                "(CostModel(..., tree_cost=1)) or pass lam= instead of budget="
            )
        return tqdm(
            lam_grid(top, self.n_lams),
            desc="Cronus budget search",
            unit="lam",
            disable=None if self.progress else True,
        )

    def _keep(self, result: CronusResult, model: Any, forest: Any) -> None:
        self.estimator_ = model
        self.forest_ = forest
        self.result_ = result
        self.plan_ = result.plan
        self.lam_ = result.lam


class CronusClassifier(ClassifierMixin, CronusEstimator):
    """Re-weight and re-order a binary tree ensemble into a cascade of early rejects (Cronus).

    ``fit`` solves eq. (8) of Chen et al. (AISTATS 2012) on ``(X, y)``: stages re-weighting
    the ensemble's trees, each rejecting inputs whose score is below its threshold, trading
    a class-weighted squared loss against the expected per-input cost of the trees evaluated
    and the features acquired (see :func:`thrifty.cascade.cronus`). With ``budget``, it tries
    ``lam = lambda_max / 2**j`` (``j = 0 .. n_lams - 1``) and keeps the most accurate cascade
    on the calibration rows whose mean cost there (measured by ``thrifty.evaluate``) is within
    the budget; ``budget_search_`` lists them all.

    Parameters
    ----------
    estimator : fitted binary tree model or Forest
        Any additive ensemble ``Forest.from_model`` imports (LightGBM, XGBoost, scikit-learn
        gradient boosting, a CEGB model), possibly wrapped in ``sklearn.frozen.FrozenEstimator``.
        An unfitted estimator is cloned and fitted on ``(X, y, sample_weight)`` first.
    costs : CostModel, dict or array-like of feature costs, optional
        Feature acquisition costs and the per-tree cost; default 1 per feature, trees free.
    budget : float, optional
        Largest mean cost per calibration example. ``None``: use ``lam``.
    lam : float, optional
        The trade-off when ``budget`` is None (default: ``lambda_max(..., exact=False) / 16``,
        see :func:`thrifty.cascade.lambda_max`).
    n_stages, rho, delta, eps, gamma, init_only, max_cycles
        As in :func:`thrifty.cascade.cronus`.
    class_weight : float, dict, "balanced" or None, default=3.5
        Loss weight of the positive class (the paper's 3.5), or weights keyed by class label,
        or "balanced" (``n / (2 n_class)``, counting rows by their sample weights).
    n_lams : int, default=8
        Values of ``lam`` tried under a budget: ``lambda_max / 2**j`` for ``j = 0 .. n_lams -
        1`` (``lambda_max`` keeps no tree, so some cascade always meets a budget >= 0).
    progress : bool, default=True
        Progress bar over the budget search (shown only when stderr is a TTY).
    n_threads : int or None, default=1
        BLAS threads during fit (see :func:`thrifty.cascade.cronus`).

    Attributes
    ----------
    estimator_ : object
    forest_ : Forest
    plan_ : Cascade
        ``thrifty.evaluate(plan_, X, costs_)`` runs it and reports each example's cost.
    costs_ : CostModel
        ``costs`` aligned with ``X``'s columns.
    result_ : CronusResult
    lam_ : float
        The trade-off of the chosen cascade.
    budget_search_ : pandas.DataFrame
        One row per cascade fitted (one without ``budget``): ``lam``, ``cost`` (mean on the
        calibration rows), ``metric`` (accuracy there) and ``chosen``.
    slope_ : float
        Platt slope mapping ``decision_function`` to probabilities.
    classes_ : ndarray of shape (2,)
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.

    Notes
    -----
    ``sample_weight`` weights eq. (8): each input's loss weight ``omega_i`` is its class weight
    times its share of the total sample weight, and each stage's reach ``d_k`` is the weighted
    mean of the inputs' soft reach (see :func:`thrifty.cascade.cronus`); the calibration
    accuracy and cost, ``slope_`` and an unfitted ``estimator``'s fit are weighted too.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **CronusEstimator._parameter_constraints,
        "class_weight": [None, Interval(Real, 0, None, closed="neither"), dict, StrOptions({"balanced"})],
    }

    def __init__(
        self,
        estimator: Any,
        *,
        costs: Any = None,
        budget: float | None = None,
        lam: float | None = None,
        n_stages: int = 10,
        rho: Any = 1e-3,
        delta: float = 1.3,
        eps: float = 0.15,
        gamma: float = 50.0,
        class_weight: Any = 3.5,
        init_only: bool = False,
        max_cycles: int = 5,
        n_lams: int = N_LAMS,
        progress: bool = True,
        n_threads: int | None = 1,
    ) -> None:
        self.estimator = estimator
        self.costs = costs
        self.budget = budget
        self.lam = lam
        self.n_stages = n_stages
        self.rho = rho
        self.delta = delta
        self.eps = eps
        self.gamma = gamma
        self.class_weight = class_weight
        self.init_only = init_only
        self.max_cycles = max_cycles
        self.n_lams = n_lams
        self.progress = progress
        self.n_threads = n_threads

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, sample_weight: Any = None, *, calibration: Any = None) -> CronusClassifier:
        """Build the cascade on ``(X, y)``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
        y : array-like of shape (n,)
            Binary labels (the estimator's classes).
        sample_weight : array-like of shape (n,), optional
            Weights of the rows (see Notes).
        calibration : tuple, optional
            ``(X_cal, y_cal)`` or ``(X_cal, y_cal, w_cal)``: the rows the budget and the
            accuracy of each cascade are measured on (default: the training rows).

        Returns
        -------
        self
        """
        self._validate_params()
        stage_rho(self.rho, self.n_stages)
        y = class_labels(y, type(self).__name__)[0]
        X, y = validate_frame(self, X, y)
        w = check_sample_weight(sample_weight, X.shape[0])
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        if y_type != "binary":
            raise InputError(
                f"Only binary classification is supported. The type of the target is {y_type} "
                "(Cronus cascades reject inputs as negative)"
            )
        model, forest = fitted_forest(self.estimator, X, y, w, who=type(self).__name__)
        if forest.task != "binary":
            raise InputError(
                f"CronusClassifier needs a binary classifier; the estimator's task is "
                f"{forest.task!r} (use CronusRanker for rankers, and regressors scoring "
                "relevance)"
            )
        classes = np.asarray(forest.classes) if forest.classes is not None else np.array([0, 1])
        unknown = np.setdiff1d(np.unique(y), classes)
        if len(unknown):
            raise InputError(
                f"y has label(s) {unknown[:5].tolist()} the estimator does not know; its "
                f"classes are {classes.tolist()}"
            )
        costs = self._fit_costs(X)
        split = self._calibration(X, y, w, calibration)
        class_weight = _class_weight(self.class_weight, split.y, classes, split.w)
        w_cal = np.ones(split.X_cal.shape[0]) if split.w_cal is None else split.w_cal

        def candidate(lam: float | None) -> Candidate:
            res = self._cascade(forest, split.X, split.y, costs, lam, class_weight, split.w)
            ev = evaluate(res.plan, split.X_cal, costs)
            cost = float(w_cal @ ev.cost.total / w_cal.sum())
            accuracy = float(w_cal @ (ev.labels == split.y_cal) / w_cal.sum())
            return Candidate({"lam": res.lam}, cost, accuracy, res)

        lams = self._lams(forest, split.X, split.y, costs, class_weight, split.w)
        self._keep(self._select(candidate(lam) for lam in lams).model, model, forest)
        self.classes_ = classes
        fit_w = np.ones(split.X.shape[0]) if split.w is None else split.w
        self.slope_ = _platt_slope(
            self._decision(evaluate(self.plan_, split.X)), split.y == classes[1], fit_w
        )
        return self

    # ------------------------------------------------------------------ prediction
    def _decision(self, ev: Any) -> np.ndarray:
        raw = np.asarray(ev.raw, dtype=np.float64).reshape(-1)
        return raw - self.plan_.stage_thresholds[ev.exit]

    def predict(self, X: Any) -> np.ndarray:
        """Labels: negative when a stage rejects, else the last stage's sign."""
        return self.evaluate(X).labels

    def decision_function(self, X: Any) -> np.ndarray:
        """The score at the exit stage minus that stage's threshold, shape (n,).

        Negative for rejected examples; for the others the last stage's score (its threshold
        is 0). Its sign is always the prediction's.
        """
        return self._decision(self.evaluate(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """``sigmoid(slope_ * decision_function)``, shape (n, 2); its argmax is ``predict``.

        The stage scores regress -1/+1 targets, so they are not log-odds; ``slope_`` is fitted
        by logistic regression on the fit data (Platt scaling without intercept).
        """
        d = self.decision_function(X)
        p = 1.0 / (1.0 + np.exp(-np.clip(self.slope_ * d, -500, 500)))
        return np.column_stack([1.0 - p, p])


def _class_weight(class_weight: Any, y: np.ndarray, classes: np.ndarray, w: np.ndarray | None) -> Any:
    """scikit-learn's ``class_weight`` (a dict keyed by class label, or "balanced") as the
    ``{-1: w, +1: w}`` of :func:`thrifty.cascade.cronus`; a number stays the positives' weight.
    "balanced" counts rows by their weights ``w``."""
    if isinstance(class_weight, str):
        w = np.ones(len(y)) if w is None else w
        n_pos = float(w @ (y == classes[1]))
        n = float(w.sum())
        return {1: n / (2.0 * n_pos), -1: n / (2.0 * (n - n_pos))}
    if isinstance(class_weight, dict):
        unknown = [k for k in class_weight if k not in classes.tolist()]
        if unknown:
            raise InputError(
                f"class_weight names unknown class(es) {unknown}; the classes are {classes.tolist()}"
            )
        return {-1: float(class_weight.get(classes[0], 1.0)), 1: float(class_weight.get(classes[1], 1.0))}
    return class_weight


def _platt_slope(d: np.ndarray, positive: np.ndarray, w: np.ndarray) -> float:
    s = np.where(positive, 1.0, -1.0)

    def loss(log_a: float) -> float:
        return float(w @ np.logaddexp(0.0, -np.exp(log_a) * s * d) / w.sum())

    return float(np.exp(minimize_scalar(loss, bounds=(-5.0, 8.0), method="bounded").x))
