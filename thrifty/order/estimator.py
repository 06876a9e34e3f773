"""``QWYCClassifier``: a scikit-learn meta-estimator making a fitted binary forest quit early."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted

from thrifty._validation import check_width, class_labels
from thrifty.exceptions import InputError
from thrifty.forest.names import named_as
from thrifty.order.orderings import LABELLED_ORDERINGS
from thrifty.order.qwyc import _check_options, qwyc


class QWYCClassifier(ClassifierMixin, BaseEstimator):
    """Evaluate a binary tree ensemble tree by tree, stopping once the decision is safe (QWYC).

    ``fit`` chooses an order of the trees and, after each tree, two thresholds on the partial
    raw score: above ``eps_pos`` the example is declared positive, below ``eps_neg`` negative,
    and no further tree is evaluated. On the examples ``fit`` sees, at most ``floor(alpha n)``
    of them get a label different from the full ensemble's (problem (2) of Wang, Gupta et al.,
    "Quit When You Can"); on other data, measure it with ``disagreement``.

    Parameters
    ----------
    estimator : fitted binary tree model or Forest
        A LightGBM, XGBoost or scikit-learn tree classifier (anything ``Forest.from_model``
        imports), a thrifty ``Forest``, or either wrapped in ``sklearn.frozen.FrozenEstimator``
        (which keeps it fitted through ``sklearn.base.clone``). An *unfitted* scikit-learn
        style estimator is accepted when ``fit`` gets labels: a clone of it is fitted on
        ``(X, y)`` first and kept as ``estimator_``.
    alpha : float in [0, 1), default=0.005
        Largest fraction of the fit examples whose label may differ from the full model's.
    mode : {"both", "negative"}, default="both"
        ``"negative"``: only early-negative exits (filter-and-score: positives always get the
        full model's score).
    ordering : {"optimize", "given", "random", "individual_mse", "greedy_mse"}, default="optimize"
        ``"optimize"`` is QWYC's joint order and thresholds (Algorithm 1); the others fix the
        order first (see ``thrifty.order.fixed_order``). The MSE orderings need ``y``.
    costs : CostModel or array-like of shape (n_trees,), optional
        Per-tree evaluation cost QWYC minimises (default: 1 per tree).
    random_state : int, Generator or None
        Seed of ``ordering="random"``.
    progress : bool, default=True
        Progress bar over QWYC's positions (shown only when stderr is a TTY).
    feature_costs : bool, default=False
        With a ``CostModel`` in ``costs``, also count the features each tree would newly
        acquire, so QWYC minimises the mean per-example cost the runtime reports.

    Attributes
    ----------
    estimator_ : object
        The fitted model (``estimator`` itself unless a clone was fitted).
    forest_ : Forest
        The imported forest.
    plan_ : Sequential
        Order and thresholds; ``thrifty.evaluate(plan_, X, costs)`` runs it.
    result_ : QWYCResult
        Order, thresholds, exits per position and cost on the fit data.
    classes_ : ndarray of shape (2,)
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Only when ``X`` has column names.
    mean_models_ : float
        Mean number of trees evaluated per fit example.
    """

    def __init__(
        self,
        estimator: Any,
        *,
        alpha: float = 0.005,
        mode: str = "both",
        ordering: str = "optimize",
        costs: Any = None,
        random_state: Any = None,
        progress: bool = True,
        feature_costs: bool = False,
    ) -> None:
        self.estimator = estimator
        self.alpha = alpha
        self.mode = mode
        self.ordering = ordering
        self.costs = costs
        self.random_state = random_state
        self.progress = progress
        self.feature_costs = feature_costs

    def fit(self, X: Any, y: Any = None) -> QWYCClassifier:
        """Choose the order and exits on ``X`` (``y`` only for MSE orderings or an unfitted model).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n, n_features)
        y : array-like of shape (n,), optional

        Returns
        -------
        self
        """
        from thrifty.forest import Forest

        if self.ordering in LABELLED_ORDERINGS and y is None:
            raise InputError(
                f"ordering={self.ordering!r} needs labels: call fit(X, y); the orderings "
                "'optimize', 'given' and 'random' need none"
            )
        if y is not None:
            y = class_labels(y, type(self).__name__)[0]
        _check_options(self.alpha, self.mode, self.ordering, y)
        if not isinstance(self.progress, (bool, np.bool_)):
            raise InputError(f"progress must be True or False, got {self.progress!r}")
        if not hasattr(X, "shape"):
            X = np.asarray(X)
        if X.ndim != 2:
            raise InputError(f"X must be 2-d (n_examples, n_features), got shape {X.shape}")

        model = (
            getattr(self.estimator, "estimator", self.estimator)
            if _is_frozen(self.estimator)
            else self.estimator
        )
        try:
            forest = Forest.from_model(model)
        except NotFittedError:
            if y is None:
                raise InputError(
                    f"estimator {type(model).__name__} is not fitted: pass a fitted model, "
                    "or labels (fit(X, y)) to fit a clone of it first"
                ) from None
            model = clone(model).fit(X, y)
            forest = Forest.from_model(model)
        forest = named_as(forest, X)
        if forest.task not in ("binary", "multiclass"):
            raise InputError(f"QWYCClassifier needs a classifier; the estimator's task is {forest.task!r}")
        check_width(X.shape[1], forest.n_features, "the estimator's model was fitted on")

        plan, res = qwyc(
            forest,
            X,
            y,
            alpha=self.alpha,
            costs=self.costs,
            mode=self.mode,
            ordering=self.ordering,
            random_state=self.random_state,
            return_result=True,
            progress=bool(self.progress),
            feature_costs=bool(self.feature_costs),
        )
        self.estimator_ = model
        self.forest_ = forest
        self.plan_ = plan
        self.result_ = res
        self.classes_ = np.asarray(forest.classes) if forest.classes is not None else np.array([0, 1])
        self.n_features_in_ = int(X.shape[1])
        if hasattr(X, "columns"):
            self.feature_names_in_ = np.asarray([str(c) for c in X.columns], dtype=object)
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        # exits at position r have evaluated r + 1 trees; the rest evaluate every tree
        n = X.shape[0]
        exits = res.n_exit
        stayed = n - int(exits.sum())
        self.mean_models_ = float((np.arange(1, len(exits) + 1) @ exits + stayed * len(exits)) / n)
        return self

    # ------------------------------------------------------------------ prediction
    def _evaluate(self, X: Any, costs: Any = None) -> Any:
        from thrifty.runtime.evaluate import evaluate

        check_is_fitted(self, "plan_")
        return evaluate(self.plan_, X, costs)

    def predict(self, X: Any) -> np.ndarray:
        """Labels decided by the early exits (the full model's where no exit fired)."""
        return self._evaluate(X).labels

    def predict_proba(self, X: Any) -> np.ndarray:
        """Probabilities from the partial score at exit, shape (n, 2).

        The link of the partial score: an early exit's label comes from the threshold it
        crossed, so ``predict`` and ``argmax(predict_proba)`` can differ for exited examples.
        """
        return self._evaluate(X).proba

    def decision_function(self, X: Any) -> np.ndarray:
        """The raw partial score at exit (the full raw score when no exit fired), shape (n,).

        Its sign need not match ``predict`` for examples that exited: they exit positive above
        ``plan_.eps_pos[r]`` and negative below ``plan_.eps_neg[r]``, which need not be 0.
        """
        raw = self._evaluate(X).raw
        return raw.reshape(raw.shape[0]) if raw.ndim == 2 else raw

    def cost_report(self, X: Any, costs: Any = None) -> Any:
        """The per-example ``CostReport`` of predicting ``X``.

        ``costs`` is a ``CostModel``; by default ``self.costs`` when that is a CostModel, else
        every feature costs 1 and evaluation is free (``.n_trees`` counts trees either way).
        """
        from thrifty.costs import CostModel

        if costs is None and isinstance(self.costs, CostModel):
            costs = self.costs
        return self._evaluate(X, costs).cost

    def disagreement(self, X: Any) -> float:
        """Fraction of the examples of ``X`` whose predicted label differs from the full model's."""
        labels = self.predict(X)
        if len(labels) == 0:
            return 0.0
        return float(np.mean(labels != self.forest_.predict(X)))


def _is_frozen(est: Any) -> bool:
    return type(est).__name__ == "FrozenEstimator" and hasattr(est, "estimator")
