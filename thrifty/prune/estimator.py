"""``BudgetPrunedClassifier`` and ``BudgetPrunedRegressor``: scikit-learn meta-estimators pruning a
fitted forest to a budget."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from numbers import Real
from typing import Any

import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.validation import check_is_fitted, column_or_1d

from thrifty._estimator import Candidate, ThriftyEstimator
from thrifty._param_validation import HasMethods, Interval, StrOptions
from thrifty._validation import (
    check_sample_weight,
    class_labels,
    fitted_forest,
    validate_frame,
)
from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.forest import Forest
from thrifty.prune.budgetprune import (
    LEAF_VALUES,
    MODES,
    PrunePath,
    budget_prune_path,
    prepare,
    pruned_forest,
    solve,
)
from thrifty.runtime.evaluate import evaluate
from thrifty.runtime.plans import Full


class _BudgetPruned(ThriftyEstimator):
    """What both BudgetPrune estimators share: the parameters, the path or single solve of (IP3)
    and the choice within the budget; a subclass checks ``y`` and says what it predicts."""

    _classifier: bool

    _parameter_constraints = {
        **ThriftyEstimator._parameter_constraints,
        "estimator": [HasMethods(["predict"]), Forest],
        "costs": ["cost-model", None],
        "budget": [Interval(Real, 0, None, closed="left"), None],
        "lam": [Interval(Real, 0, None, closed="left"), None],
        "mode": [StrOptions(set(MODES))],
        "evaluation": ["boolean"],
        "leaf_values": [StrOptions(set(LEAF_VALUES))],
        "out_of_bag": ["boolean"],
        "progress": ["boolean"],
    }

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # a missing value follows each split's default direction
        tags.input_tags.categorical = True
        return tags

    def __init__(
        self,
        estimator: Any,
        *,
        costs: Any = None,
        budget: float | None = None,
        lam: float | None = None,
        mode: str = "ensemble",
        evaluation: bool = False,
        leaf_values: str = "auto",
        out_of_bag: bool = False,
        progress: bool = True,
    ) -> None:
        self.estimator = estimator
        self.costs = costs
        self.budget = budget
        self.lam = lam
        self.mode = mode
        self.evaluation = evaluation
        self.leaf_values = leaf_values
        self.out_of_bag = out_of_bag
        self.progress = progress

    def _check_params(self) -> None:
        self._validate_params()
        if self.lam is not None and self.budget is not None:
            raise InvalidParameterError(
                "give one of budget= (a mean cost per example) or lam= (the (IP3) trade-off), not both"
            )

    def _fit(self, X: Any, y: Any, sample_weight: Any, calibration: tuple | None) -> None:
        """Prune on the validated ``(X, y)``; sets every fitted attribute but ``classes_``."""
        X, y = validate_frame(self, X, y)
        sample_weight = check_sample_weight(sample_weight, X.shape[0])
        name = type(self).__name__
        model, forest = fitted_forest(self.estimator, X, y, sample_weight, who=name)
        if forest.is_classifier != self._classifier:
            kinds = ("classifiers", "regressors") if self._classifier else ("regressors", "classifiers")
            other = "BudgetPrunedRegressor" if self._classifier else "BudgetPrunedClassifier"
            raise InputError(
                f"{name} prunes {kinds[0]}; this {type(model).__name__} is a {forest.task} model: use {other}"
            )
        costs = self._fit_costs(X)
        mask = _oob_mask(model, X.shape[0], forest.n_trees) if self.out_of_bag else None
        split = self._calibration(X, y, sample_weight, calibration, default="train")
        options = {
            "mode": self.mode,
            "evaluation": bool(self.evaluation),
            "leaf_values": self.leaf_values,
            "count_mask": mask,
            "sample_weight": sample_weight,
        }
        if self.budget is not None:
            path = budget_prune_path(forest, X, y, costs, progress=bool(self.progress), **options)
            chosen = self._select(self._path_candidates(path, split, calibration is None))
            _warn_between(self.budget_search_, float(self.budget), _describe[self._classifier])
            self.forest_ = path.forest(chosen.model)
            self.lam_ = float(chosen.params["lam"])
        else:
            lam = 0.0 if self.lam is None else float(self.lam)
            problem, f, _, _ = prepare(forest, X, y, costs, **options)
            pruned = pruned_forest(f, problem, solve(problem, lam))
            cost, metric = _measure(pruned, split, costs, self._classifier)
            self._select([Candidate({"lam": lam}, cost, metric, pruned)])
            self.forest_ = pruned
            self.lam_ = lam
        self.plan_ = Full(self.forest_)
        self.estimator_ = model

    def _path_candidates(self, path: PrunePath, split: Any, on_fit_rows: bool) -> Iterator[Candidate]:
        """Every pruning of the path (its model: the point's index), measured on the fit rows
        (the path's own figures) or on the calibration rows."""
        score = path.score(out_of_bag=bool(self.out_of_bag)) if on_fit_rows else None
        for k in range(len(path)):
            if score is not None:
                cost, metric = float(path.cost[k]), float(score[k])
            else:
                cost, metric = _measure(path.forest(k), split, self.costs_, self._classifier)
            yield Candidate({"lam": float(path.lambdas[k])}, cost, metric, k)

    def _matrix(self, X: Any) -> Any:
        check_is_fitted(self, "forest_")
        return validate_frame(self, X)


class BudgetPrunedClassifier(ClassifierMixin, _BudgetPruned):
    """A tree ensemble pruned to trade accuracy against feature cost, optimally (BudgetPrune).

    ``fit(X, y)`` solves (IP3) of Nan, Wang & Saligrama, "Optimally Pruning Decision Tree
    Ensembles With Feature Cost" (2016) on ``(X, y)``: with ``budget=`` it computes the whole
    lambda path and keeps the most accurate pruning on the calibration rows whose mean cost
    per example there is within the budget; with ``lam=`` it solves once at that trade-off.
    Leaves of the pruned forest predict the class distribution of the ``(X, y)`` examples
    reaching them. Use data the forest was not trained on (a validation split), or
    ``out_of_bag=True`` on its training rows, when you can: training error rarely rises when
    pruning.

    Parameters
    ----------
    estimator : fitted tree classifier or Forest
        BudgetRF, scikit-learn trees / random forests / extra-trees, LightGBM (e.g. in random
        forest mode), XGBoost: anything ``Forest.from_model`` imports; or a thrifty Forest; or
        either wrapped in ``sklearn.frozen.FrozenEstimator``. An *unfitted* estimator is fitted
        on ``(X, y)`` first (a clone, kept as ``estimator_``).
    costs : CostModel, array-like of shape (n_features,) or dict, optional
        Feature prices (default 1 per feature).
    budget : float, optional
        Largest mean cost per example on the calibration rows.
    lam : float >= 0, optional
        The trade-off of (IP3), when no budget is given (default 0: only the splits that
        raise the error on ``(X, y)`` go).
    mode : {"ensemble", "individual"}, default="ensemble"
        ``"individual"``: prune each tree as if no feature were shared (the paper's baseline).
    evaluation : bool, default=False
        Charge the cost model's ``split_cost`` per split visited too.
    leaf_values : {"auto", "keep", "distribution", "majority"}, default="auto"
        What leaves predict (see ``budget_prune``): by default the original leaves of a
        random forest keep their class distributions and leaves made by pruning predict the
        class distribution of the ``(X, y)`` examples reaching them.
    out_of_bag : bool, default=False
        ``X`` holds the rows the forest was fitted on (in that order): each tree counts its
        errors on its out-of-bag rows only, and its in-bag rows decide what a node votes for
        (as the authors' code does); without a ``calibration`` set the prunings are compared
        by their out-of-bag accuracy. Needs a forest that records its bootstrap samples
        (BudgetRF, scikit-learn random forests with ``bootstrap=True``).
    progress : bool, default=True
        Progress bar along the lambda path (only when stderr is a TTY).

    Attributes
    ----------
    estimator_ : object
    forest_ : Forest
        The pruned forest.
    plan_ : Full
        ``Full(forest_)``: ``thrifty.evaluate(plan_, X, costs_)`` measures its cost.
    lam_ : float
        The trade-off of the chosen pruning (where its optimality interval starts).
    budget_search_ : pandas.DataFrame
        One row per pruning on the lambda path (``budget=``; one row with ``lam=``): its
        ``lam``, mean ``cost`` and accuracy (``metric``) on the calibration rows, and whether
        it was ``chosen``. The path object itself is ``budget_prune_path(...)``.
    costs_ : CostModel
    classes_ : ndarray
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    """

    _classifier = True

    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, calibration: tuple | None = None
    ) -> BudgetPrunedClassifier:
        """Prune the estimator's forest on ``(X, y)``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
            DataFrames (pandas, polars, pyarrow) go to the forest as they are, categorical
            columns included.
        y : array-like of shape (n,)
        sample_weight : array-like of shape (n,), optional
            Weight of each example in (IP3): its errors, its share of the leaf distributions and
            of the mean cost (integer weights are repeated rows; 0 drops the row).
        calibration : (X_cal, y_cal) or (X_cal, y_cal, w_cal), optional
            Rows on which each pruning's accuracy and mean cost are measured to choose within
            ``budget`` (default: the fit rows, out of bag with ``out_of_bag=True``).

        Returns
        -------
        self
        """
        self._check_params()
        self._fit(X, class_labels(y, type(self).__name__)[0], sample_weight, calibration)
        self.classes_ = np.asarray(self.forest_.classes)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Mean of the pruned trees' leaf class distributions, shape (n, n_classes)."""
        X = self._matrix(X)
        return self.forest_.predict_proba(X)

    def predict(self, X: Any) -> np.ndarray:
        """Labels of the pruned forest."""
        X = self._matrix(X)
        return self.forest_.predict(X)


class BudgetPrunedRegressor(RegressorMixin, _BudgetPruned):
    """A regression forest pruned to trade squared error against feature cost, optimally
    (BudgetPrune with squared errors).

    ``fit(X, y)`` solves (IP3) of Nan, Wang & Saligrama (2016) with each node's loss the squared
    error of what it predicts as a leaf, ``e_h = sum_{i in S_h} w_i (y_i - v_h)^2`` (see
    :func:`~thrifty.prune.budget_prune`): with ``budget=`` along the whole lambda path, keeping
    the pruning of least mean squared error on the calibration rows whose mean cost per example
    there is within the budget; with ``lam=`` once at that trade-off. Leaves made by pruning
    predict the mean target of the ``(X, y)`` rows reaching them; by default the original
    leaves keep their values (``leaf_values="mean"`` re-fits them too). As for the classifier,
    prune on rows the forest was not trained on, or with ``out_of_bag=True``.

    Parameters
    ----------
    estimator : fitted tree regressor or Forest
        BudgetRFRegressor, scikit-learn trees / random forests / extra-trees, LightGBM in
        random forest mode: any single-output averaging regressor ``Forest.from_model``
        imports; or a thrifty Forest; an unfitted one is fitted on ``(X, y)`` first.
    costs, budget, lam, mode, evaluation, out_of_bag, progress
        As for :class:`BudgetPrunedClassifier`.
    leaf_values : {"auto", "keep", "mean"}, default="auto"
        ``"auto"`` and ``"keep"``: the original leaves keep their values; ``"mean"``: every
        leaf predicts the mean target of its ``(X, y)`` rows.

    Attributes
    ----------
    estimator_, forest_, plan_, lam_, costs_, n_features_in_, feature_names_in_
        As for :class:`BudgetPrunedClassifier`.
    budget_search_ : pandas.DataFrame
        One row per pruning: its ``lam``, mean ``cost``, ``metric`` (minus the mean squared
        error on the calibration rows) and whether it was ``chosen``.
    """

    _classifier = False

    def fit(
        self, X: Any, y: Any, sample_weight: Any = None, *, calibration: tuple | None = None
    ) -> BudgetPrunedRegressor:
        """Prune the estimator's forest on ``(X, y)``; parameters as
        :meth:`BudgetPrunedClassifier.fit`, ``y`` numeric targets."""
        self._check_params()
        y = column_or_1d(np.asarray(y), warn=True).astype(np.float64)
        if not np.all(np.isfinite(y)):
            raise InputError("y contains NaN or infinity; regression targets must be finite")
        self._fit(X, y, sample_weight, calibration)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Mean of the pruned trees' leaf values."""
        X = self._matrix(X)
        return self.forest_.predict(X)


def _measure(forest: Forest, split: Any, costs: Any, classify: bool) -> tuple[float, float]:
    """Weighted mean cost and metric of ``forest`` on the calibration rows of ``split``: its
    accuracy (``classify``) or minus its mean squared error."""
    ev = evaluate(forest, split.X_cal, costs)
    w, y = split.w_cal, np.asarray(split.y_cal)
    hits = ev.labels == y if classify else -((ev.raw - y) ** 2)
    return float(np.average(ev.cost.total, weights=w)), float(np.average(hits, weights=w))


# How a calibration metric reads in a message, for a classifier (True) and a regressor.
_describe = {True: lambda m: f"accuracy {m:.4f}", False: lambda m: f"mean squared error {-m:.4g}"}


def _oob_mask(model: Any, n: int, n_trees: int) -> np.ndarray:
    """Out-of-bag mask (n, n_trees) of a forest fitted on the n rows being pruned on."""
    samples = getattr(model, "estimators_samples_", None)
    if samples is None or len(samples) != n_trees:
        raise InputError(
            f"out_of_bag=True needs a forest that records its bootstrap samples "
            f"(BudgetRF, scikit-learn random forests); {type(model).__name__} does not"
        )
    mask = np.ones((n, n_trees), dtype=bool)
    for t, rows in enumerate(samples):
        rows = np.asarray(rows)
        if rows.size and rows.max() >= n:
            raise InputError(
                f"out_of_bag=True: tree {t} was grown on row {int(rows.max())} but X "
                f"has {n} rows; pass the rows the forest was fitted on"
            )
        mask[rows, t] = False
    return mask


def _warn_between(table: Any, budget: float, describe: Any) -> None:
    """Warn when the budget falls between two prunings of the lambda path and the cheapest one
    above it is better than the one taken (``describe`` words a metric).

    The path is a staircase: no pruning lies between two consecutive points, so a budget in a
    gap gets the best pruning within it, which may spend far less than the budget;
    naming the points on either side lets the user move the budget to one.
    """
    cost = table["cost"].to_numpy()
    metric = table["metric"].to_numpy(dtype=float)
    k = int(np.flatnonzero(table["chosen"].to_numpy())[0])
    over = cost > budget * (1 + 1e-9)
    above, within = np.flatnonzero(over), np.flatnonzero(~over)
    if cost[k] >= 0.9 * budget or not above.shape[0]:
        return
    j = int(above[np.argmin(cost[above])])
    if metric[j] <= metric[k]:
        return
    i = int(within[np.argmax(cost[within])])
    taken = (
        "the one below was taken, as the best within the budget"
        if i == k
        else f"the best within the budget was taken: mean cost {cost[k]:.4g} ({describe(metric[k])})"
    )
    warnings.warn(
        f"budget={budget:.4g} falls between two prunings of the lambda path, mean cost "
        f"{cost[i]:.4g} ({describe(metric[i])} on the calibration rows) and mean cost "
        f"{cost[j]:.4g} ({describe(metric[j])}); {taken}; give budget={cost[j]:.4g} "
        "for the better one above",
        UserWarning,
        stacklevel=4,
    )
