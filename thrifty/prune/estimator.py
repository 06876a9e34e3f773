"""``BudgetPrunedClassifier``: a scikit-learn meta-estimator pruning a fitted forest to a budget."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from thrifty._validation import check_width, class_labels, validate_frame
from thrifty.exceptions import InputError
from thrifty.forest.names import named_as
from thrifty.prune.budgetprune import (
    LEAF_VALUES,
    MODES,
    PrunePath,
    _check_number,
    as_forest,
    budget_prune_path,
    prepare,
    pruned_forest,
    solve,
)


class BudgetPrunedClassifier(ClassifierMixin, BaseEstimator):
    """A tree ensemble pruned to trade accuracy against feature cost, optimally (BudgetPrune).

    ``fit(X, y)`` solves (IP3) of Nan, Wang & Saligrama, "Optimally Pruning Decision Tree
    Ensembles With Feature Cost" (2016) on ``(X, y)``: with ``budget=`` it computes the whole
    lambda path and keeps the most accurate pruning on ``(X, y)`` whose mean cost per example
    on ``X`` is within the budget; with ``lam=`` it solves once at that trade-off. Leaves of the
    pruned forest predict the class distribution of the ``(X, y)`` examples reaching them. Use
    data the forest was not trained on (a validation split) when you can: training error
    rarely rises when pruning.

    Parameters
    ----------
    estimator : fitted tree classifier or Forest
        BudgetRF, scikit-learn trees / random forests / extra-trees, LightGBM (e.g. in random
        forest mode), XGBoost: anything ``Forest.from_model`` imports; or a thrifty Forest; or
        either wrapped in ``sklearn.frozen.FrozenEstimator``. An *unfitted* estimator is fitted
        on ``(X, y)`` first (a clone, kept as ``estimator_``).
    costs : CostModel or array-like of shape (n_features,), optional
        Feature prices (default 1 per feature).
    budget : float, optional
        Largest mean cost per example on the fit data.
    lam : float >= 0, optional
        The trade-off of (IP3) instead of a budget (one of the two is required).
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
        (as the authors' code does). Needs a forest that records its bootstrap samples
        (BudgetRF, scikit-learn random forests with ``bootstrap=True``).
    progress : bool, default=True
        Progress bar along the lambda path (only when stderr is a TTY).

    Attributes
    ----------
    estimator_ : object
    forest_ : Forest
        The pruned forest (``thrifty.evaluate(forest_, X, costs)`` measures its cost).
    path_ : PrunePath or None
        The lambda path (with ``budget=``).
    lam_ : float
        The trade-off of the chosen pruning (where its optimality interval starts).
    fit_cost_ : float
        Mean cost per example of the pruned forest on the fit data.
    classes_ : ndarray
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    """

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # a missing value follows each split's default direction
        return tags

    def __init__(
        self,
        estimator: Any,
        costs: Any = None,
        *,
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

    def fit(self, X: Any, y: Any) -> BudgetPrunedClassifier:
        """Prune the estimator's forest on ``(X, y)``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
        y : array-like of shape (n,)

        Returns
        -------
        self
        """

        if (self.lam is None) == (self.budget is None):
            raise InputError(
                "give exactly one of budget= (a mean cost per example) or lam= (the (IP3) trade-off)"
            )
        if self.mode not in MODES:
            raise InputError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.leaf_values not in LEAF_VALUES:
            raise InputError(f"leaf_values must be one of {LEAF_VALUES}, got {self.leaf_values!r}")
        for name in ("evaluation", "out_of_bag", "progress"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise InputError(f"{name} must be True or False, got {getattr(self, name)!r}")
        y = class_labels(y, type(self).__name__)[0]
        X, y = validate_frame(self, X, y)

        model = self.estimator.estimator if _is_frozen(self.estimator) else self.estimator
        try:
            forest = as_forest(model)
        except NotFittedError:
            model = clone(model).fit(X, y)
            forest = as_forest(model)
        forest = named_as(forest, X)
        check_width(X.shape[1], forest.n_features, "the estimator's model was fitted on")
        mask = _oob_mask(model, X.shape[0], forest.n_trees) if self.out_of_bag else None
        if self.budget is not None:
            budget = _check_number(self.budget, "budget")
            path = budget_prune_path(
                forest,
                X,
                y,
                self.costs,
                mode=self.mode,
                evaluation=bool(self.evaluation),
                leaf_values=self.leaf_values,
                count_mask=mask,
                progress=bool(self.progress),
            )
            k = path.best_within(budget)
            _warn_between(path, k, budget)
            self.forest_ = path.forest(k)
            self.path_: PrunePath | None = path
            self.lam_ = float(path.lambdas[k])
            self.fit_cost_ = float(path.cost[k])
        else:
            lam = _check_number(self.lam, "lam")
            problem, f, _, _ = prepare(
                forest,
                X,
                y,
                self.costs,
                mode=self.mode,
                evaluation=bool(self.evaluation),
                leaf_values=self.leaf_values,
                count_mask=mask,
            )
            chosen = solve(problem, lam)
            self.forest_ = pruned_forest(f, problem, chosen)
            self.path_ = None
            self.lam_ = lam
            self.fit_cost_ = problem.mean_cost(chosen)
        self.estimator_ = model
        self.classes_ = np.asarray(self.forest_.classes)
        return self

    # ------------------------------------------------------------------ prediction
    def _matrix(self, X: Any) -> Any:
        check_is_fitted(self, "forest_")
        return validate_frame(self, X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Mean of the pruned trees' leaf class distributions, shape (n, n_classes)."""
        X = self._matrix(X)
        return self.forest_.predict_proba(X)

    def predict(self, X: Any) -> np.ndarray:
        """Labels of the pruned forest."""
        X = self._matrix(X)
        return self.forest_.predict(X)

    def cost_report(self, X: Any, costs: Any = None) -> Any:
        """The per-example ``CostReport`` of predicting ``X`` (default: the fit's ``costs``)."""
        from thrifty.costs import CostModel
        from thrifty.runtime.evaluate import evaluate

        X = self._matrix(X)
        if costs is None and self.costs is not None:
            costs = self.costs if isinstance(self.costs, CostModel) else CostModel(self.costs)
        return evaluate(self.forest_, X, costs).cost


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


def _is_frozen(est: Any) -> bool:
    return type(est).__name__ == "FrozenEstimator" and hasattr(est, "estimator")


def _warn_between(path: Any, k: int, budget: float) -> None:
    """Warn when the budget falls between two points of the lambda path and the point above
    it is more accurate than the one taken.

    The path is a staircase: no pruning lies between two consecutive points, so a budget in a
    gap gets the most accurate pruning within it (point ``k``), which may spend far less than
    the budget; naming the points on either side lets the user move the budget to one.
    """
    over = path.cost > budget * (1 + 1e-12) + 1e-12
    above, within = np.flatnonzero(over), np.flatnonzero(~over)
    acc = path.accuracy()
    if path.cost[k] >= 0.9 * budget or not above.shape[0]:
        return
    j = int(above[np.argmin(path.cost[above])])
    if acc[j] <= acc[k]:
        return
    i = int(within[np.argmax(path.cost[within])])
    taken = (
        "the one below was taken, as the most accurate within the budget"
        if i == k
        else f"the most accurate within the budget was taken: mean cost {path.cost[k]:.4g} "
        f"(accuracy {acc[k]:.4f})"
    )
    warnings.warn(
        f"budget={budget:.4g} falls between two prunings of the lambda path, mean cost "
        f"{path.cost[i]:.4g} (accuracy {acc[i]:.4f} on the fit data) and mean cost "
        f"{path.cost[j]:.4g} (accuracy {acc[j]:.4f}); {taken}; give budget={path.cost[j]:.4g} "
        "for the more accurate one above",
        UserWarning,
        stacklevel=3,
    )
