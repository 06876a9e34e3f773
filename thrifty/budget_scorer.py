"""``make_budget_scorer``: scikit-learn scorers that know what a prediction costs.

Public as :func:`thrifty.metrics.make_budget_scorer`; see docs/model_selection.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Real
from typing import Any

import numpy as np
from sklearn import metrics as _skm

from thrifty._param_validation import Interval, validate_params
from thrifty._validation import costs_for_X, to_frame
from thrifty.exceptions import InputError, InvalidParameterError

__all__ = ["BudgetScorer", "make_budget_scorer"]


class BudgetScorer:
    """A scikit-learn scorer: a quality metric under a mean-cost budget, or penalised by cost.

    Made by :func:`make_budget_scorer`; use it as ``scoring=`` of ``GridSearchCV``,
    ``cross_val_score`` and the like. Calling it scores a fitted estimator on the rows
    ``X``:

    - ``metric`` of the estimator on ``(X, y)`` (higher is better);
    - minus ``cost_weight * mean_cost`` when ``cost_weight`` is given;
    - ``-inf`` when ``budget`` is given and ``mean_cost > budget`` (with a relative
      tolerance of 1e-9, as thrifty's own budget searches use).

    ``mean_cost`` is the exact mean cost per example of predicting ``X`` (weighted by
    ``sample_weight`` when given), measured by thrifty's runtime: ``estimator.cost_report(X,
    costs)`` for a thrifty estimator (the evaluation of its fitted plan under ``costs``, or
    its own ``costs_`` when ``costs`` is None), ``thrifty.evaluate(estimator, X, costs)``
    for a fitted LightGBM, XGBoost or scikit-learn tree model. The last step of a
    scikit-learn ``Pipeline`` is priced on ``X`` transformed by the steps before it.

    Why ``-inf`` and not NaN or a finite penalty: scikit-learn's searches average the fold
    scores, so one fold over budget makes the candidate's mean ``-inf``, and they rank
    ``-inf`` below every finite score; ``best_params_`` is then the best candidate that
    met the budget on *every* fold. A NaN would read as a failed fit (``error_score``), and
    any finite penalty could be outweighed by a metric on an unbounded scale (a log loss)
    or by the other folds' scores. When no candidate meets the budget, ``best_score_`` is
    ``-inf``, which says so (scikit-learn also warns that some test scores are
    non-finite).
    """

    def __init__(
        self,
        metric: str | Callable[[Any, Any], float],
        costs: Any = None,
        budget: float | None = None,
        cost_weight: float | None = None,
    ) -> None:
        self.metric = metric
        self.costs = costs
        self.budget = budget
        self.cost_weight = cost_weight

    def __repr__(self) -> str:
        name = self.metric if isinstance(self.metric, str) else getattr(self.metric, "__name__", "metric")
        return f"make_budget_scorer({name!r}, budget={self.budget!r}, cost_weight={self.cost_weight!r})"

    def __call__(self, estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
        """The score of the fitted ``estimator`` on ``(X, y)``; higher is better."""
        cost = self.mean_cost(estimator, X, sample_weight=sample_weight)
        if self.budget is not None and cost > self.budget * (1.0 + 1e-9):
            return -math.inf
        value = self.metric_value(estimator, X, y, sample_weight)
        if self.cost_weight is not None:
            value -= self.cost_weight * cost
        return value

    def metric_value(self, estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
        """The metric alone (no budget, no cost penalty)."""
        kwargs = {} if sample_weight is None else {"sample_weight": sample_weight}
        if isinstance(self.metric, str):
            return float(_named_scorer(self.metric)(estimator, X, y, **kwargs))
        return float(self.metric(y, estimator.predict(X), **kwargs))

    def mean_cost(self, estimator: Any, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Exact mean cost per example of predicting ``X`` (weighted by ``sample_weight``).

        A scorer itself (``y`` is not used): ``scoring={"score": scorer, "mean_cost":
        scorer.mean_cost}`` records each candidate's cost in ``cv_results_`` (lower is
        cheaper; give ``refit="score"``).
        """
        from sklearn.pipeline import Pipeline

        if isinstance(estimator, Pipeline):
            if len(estimator) > 1:
                X = estimator[:-1].transform(X)
            estimator = estimator[-1]
        X = to_frame(X)
        costs = self.costs
        if costs is not None and not hasattr(costs, "for_features"):  # prices, not a CostModel yet
            names = [str(c) for c in X.columns] if hasattr(X, "columns") else None
            costs = costs_for_X(costs, names, int(np.shape(X)[1]))
        if hasattr(estimator, "cost_report"):
            report = estimator.cost_report(X, costs)
        else:
            from thrifty.runtime.evaluate import evaluate

            report = evaluate(estimator, X, costs).cost
        total = np.asarray(report.total, dtype=np.float64)
        if sample_weight is None:
            return float(total.mean()) if len(total) else 0.0
        w = np.asarray(sample_weight, dtype=np.float64)
        if w.shape != total.shape:
            raise InputError(f"sample_weight has shape {w.shape}; X has {len(total)} rows")
        return float(np.average(total, weights=w))


def _named_scorer(name: str) -> Any:
    try:
        return _skm.get_scorer(name)
    except ValueError:
        raise InputError(
            f"unknown metric {name!r}; give a scikit-learn scorer name (see "
            "sklearn.metrics.get_scorer_names(), e.g. 'accuracy', 'roc_auc', 'neg_log_loss') "
            "or a callable(y_true, y_pred)"
        ) from None


_SCORER_CONSTRAINTS: dict[str, list[Any]] = {
    "metric": [str, callable],
    "costs": ["cost-model", None],
    "budget": [None, Interval(Real, 0, None, closed="left")],
    "cost_weight": [None, Interval(Real, 0, math.inf, closed="left")],
}


def make_budget_scorer(
    metric: str | Callable[[Any, Any], float],
    costs: Any = None,
    budget: float | None = None,
    cost_weight: float | None = None,
) -> BudgetScorer:
    """A scikit-learn scorer choosing models by quality under a mean-cost budget, or by
    quality penalised by cost.

    ``GridSearchCV`` scored by the metric alone always prefers the model that buys the most
    features and trees; with this scorer it prefers the best model whose exact mean cost per
    example, measured on each validation fold, stays within ``budget`` (and/or the best
    ``metric - cost_weight * mean_cost``).

    Parameters
    ----------
    metric : str or callable
        A scikit-learn scorer name (``"accuracy"``, ``"roc_auc"``, ``"neg_log_loss"``, ...,
        see ``sklearn.metrics.get_scorer_names()``), scored with the estimator's own
        ``predict``/``predict_proba``/``decision_function``; or a callable
        ``metric(y_true, y_pred)`` (``sample_weight=`` passed when given) applied to
        ``estimator.predict(X)``. Higher must be better (negate a loss).
    costs : CostModel, array-like of shape (n_features,) or dict, optional
        The prices to measure with (an array gives one price per column of ``X``, a dict
        maps column names to prices). Default: the cost model each estimator was fitted
        with (``costs_``; for a model that is not a thrifty estimator, every feature costs 1).
    budget : float, optional
        The largest mean cost per example allowed; a fold over it scores ``-inf`` (see
        :class:`BudgetScorer` for why).
    cost_weight : float, optional
        Metric units given up per unit of mean cost: the score is
        ``metric - cost_weight * mean_cost``.

    Returns
    -------
    BudgetScorer
        A callable ``scorer(estimator, X, y, sample_weight=None) -> float``.

    Raises
    ------
    InvalidParameterError
        If neither ``budget`` nor ``cost_weight`` is given, or a parameter has the wrong type
        or range (a negative budget, an infinite cost_weight).
    InputError
        If ``metric`` is an unknown name.

    Examples
    --------
    >>> from sklearn.model_selection import GridSearchCV
    >>> from thrifty import CEGBClassifier
    >>> from thrifty.metrics import make_budget_scorer
    >>> search = GridSearchCV(
    ...     CEGBClassifier(n_estimators=20),
    ...     {"tradeoff": [0.0, 0.1, 1.0]},
    ...     scoring=make_budget_scorer("accuracy", budget=3.0),
    ... )  # doctest: +SKIP
    """
    validate_params(
        _SCORER_CONSTRAINTS,
        {"metric": metric, "costs": costs, "budget": budget, "cost_weight": cost_weight},
        "make_budget_scorer",
    )
    if budget is None and cost_weight is None:
        raise InvalidParameterError(
            "make_budget_scorer needs budget= (a mean-cost limit) or cost_weight= (a cost "
            "penalty), or both; without either, score with the metric itself"
        )
    if isinstance(metric, str):
        _named_scorer(metric)
    return BudgetScorer(
        metric,
        costs,
        None if budget is None else float(budget),
        None if cost_weight is None else float(cost_weight),
    )
