"""``CronusClassifier``: a scikit-learn meta-estimator turning a binary tree ensemble into a
Cronus cascade, optionally within a target mean cost."""

from __future__ import annotations

from typing import Any, cast

import numpy as np
from scipy.optimize import minimize_scalar
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from thrifty._validation import check_width, class_labels, validate_frame
from thrifty.cascade.cronus import CronusResult, _check, cronus
from thrifty.exceptions import InputError
from thrifty.forest.names import named_as

_HALVINGS = 2.0  # the budget sweep tries lam = lambda_max / 2**j, j = 0 .. n_lams - 1


class CronusClassifier(ClassifierMixin, BaseEstimator):
    """Re-weight and re-order a binary tree ensemble into a cascade of early rejects (Cronus).

    ``fit`` solves eq. (8) of Chen et al. (AISTATS 2012) on ``(X, y)``: stages re-weighting
    the ensemble's trees, each rejecting inputs whose score is below its threshold, trading
    a class-weighted squared loss against the expected per-input cost of the trees evaluated
    and the features acquired (see :func:`thrifty.cascade.cronus`). With ``budget``, it sweeps
    ``lam`` and keeps the most accurate cascade whose mean cost on ``X`` (measured by
    ``thrifty.evaluate``) is within the budget.

    Parameters
    ----------
    estimator : fitted binary tree model or Forest
        Any additive ensemble ``Forest.from_model`` imports (LightGBM, XGBoost, scikit-learn
        gradient boosting, a CEGB model), possibly wrapped in ``sklearn.frozen.FrozenEstimator``.
        An unfitted estimator is cloned and fitted on ``(X, y)`` first.
    costs : CostModel, optional
        Feature acquisition costs and the per-tree cost; default 1 per feature, trees free.
    budget : float, optional
        Target mean cost per example on the fit data. ``None``: use ``lam``.
    lam : float, optional
        The trade-off when ``budget`` is None (default: ``lambda_max(..., exact=False) / 16``,
        see :func:`thrifty.cascade.lambda_max`).
    n_stages, rho, delta, eps, gamma, init_only, max_cycles
        As in :func:`thrifty.cascade.cronus`.
    class_weight : float, dict, "balanced" or None, default=3.5
        Loss weight of the positive class (the paper's 3.5), or weights keyed by class label,
        or "balanced" (``n / (2 n_class)``).
    n_lams : int, default=8
        Values of the budget sweep: ``lambda_max / 2**j`` for ``j = 0 .. n_lams - 1``
        (``lambda_max`` keeps no tree, so the sweep always has a feasible point).
    progress : bool, default=True
        Progress bar over the sweep (shown only when stderr is a TTY).
    n_threads : int or None, default=1
        BLAS threads during fit (see :func:`thrifty.cascade.cronus`).

    Attributes
    ----------
    estimator_ : object
    forest_ : Forest
    plan_ : Cascade
        ``thrifty.evaluate(plan_, X, costs)`` runs it and reports each example's cost.
    result_ : CronusResult
    lam_ : float
        The trade-off of the chosen cascade.
    sweep_ : list of dict
        With ``budget``: ``lam``, ``mean_cost`` and ``accuracy`` on the fit data of each cascade.
    slope_ : float
        Platt slope mapping ``decision_function`` to probabilities.
    classes_ : ndarray of shape (2,)
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    """

    def __init__(
        self,
        estimator: Any,
        costs: Any = None,
        *,
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
        n_lams: int = 8,
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
        tags.input_tags.allow_nan = True  # a missing value follows each split's default direction
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any) -> CronusClassifier:
        """Build the cascade on ``(X, y)``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
        y : array-like of shape (n,)
            Binary labels (the estimator's classes).

        Returns
        -------
        self
        """
        from tqdm.auto import tqdm

        from thrifty.cascade.cronus import lambda_max
        from thrifty.costs import CostModel
        from thrifty.forest import Forest
        from thrifty.runtime.evaluate import evaluate

        _check(
            self.n_stages, 0.0 if self.lam is None else self.lam, self.rho, self.delta, self.eps, self.gamma
        )
        if self.budget is not None and (
            not isinstance(self.budget, (int, float, np.integer, np.floating))
            or not np.isfinite(self.budget)
            or self.budget < 0
        ):
            raise InputError(f"budget must be a finite mean cost >= 0, got {self.budget!r}")
        if isinstance(self.n_lams, bool) or not isinstance(self.n_lams, (int, np.integer)) or self.n_lams < 1:
            raise InputError(f"n_lams must be an integer >= 1, got {self.n_lams!r}")
        if self.costs is not None and not isinstance(self.costs, CostModel):
            raise TypeError(f"costs must be a thrifty CostModel, got {type(self.costs).__name__}")
        from sklearn.utils.multiclass import type_of_target

        y = class_labels(y, type(self).__name__)[0]
        X, y = validate_frame(self, X, y)
        y_type = type_of_target(y, input_name="y", raise_unknown=True)
        if y_type != "binary":
            raise InputError(
                f"Only binary classification is supported. The type of the target is {y_type} "
                "(Cronus cascades reject inputs as negative)"
            )
        model = (
            getattr(self.estimator, "estimator", self.estimator)
            if _is_frozen(self.estimator)
            else self.estimator
        )
        try:
            forest = Forest.from_model(model)
        except NotFittedError:
            model = clone(model).fit(X, y)
            forest = Forest.from_model(model)
        forest = named_as(forest, X)
        if forest.task != "binary":
            raise InputError(
                f"CronusClassifier needs a binary classifier; the estimator's task is "
                f"{forest.task!r} (use thrifty.cascade.cronus for rankers and regressors "
                "with binary targets)"
            )
        check_width(X.shape[1], forest.n_features, "the estimator's model was fitted on")
        classes = np.asarray(forest.classes) if forest.classes is not None else np.array([0, 1])
        unknown = np.setdiff1d(np.unique(y), classes)
        if len(unknown):
            raise InputError(
                f"y has label(s) {unknown[:5].tolist()} the estimator does not know; its "
                f"classes are {classes.tolist()}"
            )

        class_weight = _class_weight(self.class_weight, y, classes)
        opts = dict(
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
        )
        if self.budget is None:
            # opts holds return_result=True: cronus returns its CronusResult
            result = cast(CronusResult, cronus(forest, X, y, self.costs, lam=self.lam, **opts))
            lam_ = result.lam
            self.sweep_ = []
        else:
            top = lambda_max(forest, X, y, self.costs, class_weight=class_weight)
            if not np.isfinite(top):
                raise InputError(
                    "some trees cost nothing (no priced feature, tree_cost 0), so no lam "
                    "drops them and the budget sweep has no scale; give trees a cost "
                    "(CostModel(..., tree_cost=1)) or pass lam= instead of budget="
                )
            sweep, best = [], None
            for j in tqdm(
                range(int(self.n_lams)),
                desc="Cronus budget sweep",
                unit="lam",
                disable=None if self.progress else True,
            ):
                lam = top / _HALVINGS**j
                res = cast(CronusResult, cronus(forest, X, y, self.costs, lam=lam, **opts))
                ev = evaluate(res.plan, X, self.costs)
                row = {"lam": lam, "mean_cost": ev.cost.mean, "accuracy": float(np.mean(ev.labels == y))}
                sweep.append(row)
                better = best is None or row["accuracy"] > best[0]["accuracy"]
                if row["mean_cost"] <= self.budget and better:
                    best = (row, res)
            if best is None:
                cheapest = min(r["mean_cost"] for r in sweep)
                raise InputError(
                    f"no cascade met the budget {self.budget:g}: the cheapest costs "
                    f"{cheapest:g} per example; raise the budget"
                )
            lam_, result = best[0]["lam"], best[1]
            self.sweep_ = sweep
        self.estimator_ = model
        self.forest_ = forest
        self.result_ = result
        self.plan_ = result.plan
        self.lam_ = lam_
        self.classes_ = classes
        self.slope_ = _platt_slope(self._decision(evaluate(self.plan_, X)), y == classes[1])
        return self

    # ------------------------------------------------------------------ prediction
    def _evaluate(self, X: Any, costs: Any = None) -> Any:
        from thrifty.runtime.evaluate import evaluate

        check_is_fitted(self, "plan_")
        return evaluate(self.plan_, validate_frame(self, X), costs)

    def _decision(self, ev: Any) -> np.ndarray:
        raw = np.asarray(ev.raw, dtype=np.float64).reshape(-1)
        return raw - self.plan_.stage_thresholds[ev.exit]

    def predict(self, X: Any) -> np.ndarray:
        """Labels: negative when a stage rejects, else the last stage's sign."""
        return self._evaluate(X).labels

    def decision_function(self, X: Any) -> np.ndarray:
        """The score at the exit stage minus that stage's threshold, shape (n,).

        Negative for rejected examples; for the others the last stage's score (its threshold
        is 0). Its sign is always the prediction's.
        """
        return self._decision(self._evaluate(X))

    def predict_proba(self, X: Any) -> np.ndarray:
        """``sigmoid(slope_ * decision_function)``, shape (n, 2); its argmax is ``predict``.

        The stage scores regress -1/+1 targets, so they are not log-odds; ``slope_`` is fitted
        by logistic regression on the fit data (Platt scaling without intercept).
        """
        d = self.decision_function(X)
        p = 1.0 / (1.0 + np.exp(-np.clip(self.slope_ * d, -500, 500)))
        return np.column_stack([1.0 - p, p])

    def cost_report(self, X: Any, costs: Any = None) -> Any:
        """The per-example ``CostReport`` of predicting ``X`` (default prices: ``self.costs``)."""
        return self._evaluate(X, self.costs if costs is None else costs).cost


def _class_weight(class_weight: Any, y: np.ndarray, classes: np.ndarray) -> Any:
    """scikit-learn's ``class_weight`` (a dict keyed by class label, or "balanced") as the
    ``{-1: w, +1: w}`` of :func:`thrifty.cascade.cronus`; a number stays the positives' weight."""
    if isinstance(class_weight, str):
        if class_weight != "balanced":
            raise InputError(f"class_weight must be a number, a dict or 'balanced', got {class_weight!r}")
        n_pos = float(np.sum(y == classes[1]))
        n = float(len(y))
        return {1: n / (2.0 * n_pos), -1: n / (2.0 * (n - n_pos))}
    if isinstance(class_weight, dict):
        unknown = [k for k in class_weight if k not in classes.tolist()]
        if unknown:
            raise InputError(
                f"class_weight names unknown class(es) {unknown}; the classes are {classes.tolist()}"
            )
        return {-1: float(class_weight.get(classes[0], 1.0)), 1: float(class_weight.get(classes[1], 1.0))}
    return class_weight


def _platt_slope(d: np.ndarray, positive: np.ndarray) -> float:
    s = np.where(positive, 1.0, -1.0)

    def loss(log_a: float) -> float:
        return float(np.mean(np.logaddexp(0.0, -np.exp(log_a) * s * d)))

    return float(np.exp(minimize_scalar(loss, bounds=(-5.0, 8.0), method="bounded").x))


def _is_frozen(est: Any) -> bool:
    return type(est).__name__ == "FrozenEstimator" and hasattr(est, "estimator")
