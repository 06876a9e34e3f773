"""Prediction-quality metrics (classification, ranking, agreement), cost statistics, and a
cost-aware scorer for scikit-learn's model selection."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import numpy as np
from sklearn import metrics as _skm

from thrifty.exceptions import InputError, InvalidParameterError

__all__ = [
    "BudgetScorer",
    "accuracy",
    "auc",
    "balanced_accuracy",
    "bootstrap_interval",
    "cost_statistics",
    "disagreement",
    "log_loss",
    "macro_auc",
    "make_budget_scorer",
    "ndcg_at_k",
    "precision_at_k",
    "score",
    "wilson_interval",
]

# The metric each task reports by default (``score``).
_TASK_METRIC = {
    "binary": "accuracy",
    "multiclass": "accuracy",
    "ranking": "precision@5",
    "regression": "neg_mse",
}


def _is_evaluation(obj: Any) -> bool:
    # Duck-typed so this module needs no import of the runtime (and no import cycle).
    return hasattr(obj, "raw") and hasattr(obj, "cost") and hasattr(obj, "labels")


def _decisions(pred: Any) -> np.ndarray:
    """Predicted labels from labels, an Evaluation, or a score/probability matrix (argmax)."""
    if _is_evaluation(pred):
        pred = pred.predictions
    pred = np.asarray(pred)
    if pred.ndim == 2:
        return pred.argmax(axis=1) if pred.shape[1] > 1 else pred[:, 0]
    if pred.ndim != 1:
        raise InputError(f"predictions must be 1- or 2-dimensional, got shape {pred.shape}")
    return pred


def _check_lengths(*arrays: np.ndarray) -> None:
    n = {len(a) for a in arrays}
    if len(n) > 1:
        raise InputError(f"inputs have different numbers of examples: {[len(a) for a in arrays]}")


def accuracy(y: Any, pred: Any) -> float:
    """Fraction of examples whose predicted label equals the true label.

    Parameters
    ----------
    y : array-like of shape (n,)
        True labels.
    pred : array-like of shape (n,) or Evaluation
        Predicted labels (an ``Evaluation`` gives its ``labels``).

    Returns
    -------
    float
    """
    y, pred = _true_and_predicted(y, pred, "accuracy")
    return float(_skm.accuracy_score(y, pred))


def _true_and_predicted(y: Any, pred: Any, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """True labels and predicted labels (an Evaluation gives its own) as arrays of one length."""
    if _is_evaluation(pred):
        pred = pred.predictions
    y, pred = np.asarray(y), np.asarray(pred)
    if pred.ndim != 1:
        raise InputError(
            f"{metric} needs predicted labels (shape (n,)); got a matrix - pass the "
            "Evaluation or its .labels, not its probabilities"
        )
    _check_lengths(y, pred)
    return y, pred


def _positive_scores(score: Any) -> np.ndarray:
    if _is_evaluation(score):
        score = score.proba if score.proba is not None else score.raw
    score = np.asarray(score, dtype=np.float64)
    if score.ndim == 2:
        if score.shape[1] == 1:
            return score[:, 0]
        if score.shape[1] == 2:
            return score[:, 1]
        raise InputError(f"auc is for binary tasks; got scores for {score.shape[1]} classes")
    return score


def auc(y: Any, score: Any) -> float:
    """Area under the ROC curve of a binary task.

    Parameters
    ----------
    y : array-like of shape (n,)
        True labels, two distinct values; the larger one (in sorted order) is positive.
    score : array-like of shape (n,) or (n, 2), or Evaluation
        Scores of the positive class, or a probability matrix (its column 1, the positive
        class in sorted class order, is used). Ties count one half.

    Returns
    -------
    float
    """
    y, s = np.asarray(y), _positive_scores(score)
    _check_lengths(y, s)
    if len(np.unique(y)) != 2:
        raise InputError(f"auc needs both classes in y; found {len(np.unique(y))} distinct label(s)")
    return float(_skm.roc_auc_score(y, s))


def balanced_accuracy(y: Any, pred: Any) -> float:
    """Mean over the true classes of the fraction of that class predicted correctly (recall).

    A constant predictor scores ``1 / n_classes`` whatever the class balance, which is what
    accuracy hides on imbalanced data.

    Parameters
    ----------
    y : array-like of shape (n,)
    pred : array-like of shape (n,) or Evaluation
        Predicted labels.

    Returns
    -------
    float
    """
    y, pred = _true_and_predicted(y, pred, "balanced_accuracy")
    classes = np.unique(y)
    return float(np.mean([np.mean(pred[y == c] == c) for c in classes]))


def macro_auc(y: Any, proba: Any, classes: Any = None) -> float:
    """Area under the ROC curve: binary, or the mean one-vs-rest AUC over classes.

    Parameters
    ----------
    y : array-like of shape (n,)
    proba : array-like of shape (n, n_classes) or Evaluation
        Class probabilities, columns in the order of ``classes``.
    classes : array-like, optional
        The label of each column (default: ``0 .. n_classes - 1``).

    Returns
    -------
    float
        NaN when a class of ``classes`` is absent from ``y`` (its one-vs-rest AUC is
        undefined) or ``y`` has one class.
    """
    if _is_evaluation(proba):
        proba = proba.proba
    y, p = np.asarray(y), np.asarray(proba, dtype=np.float64)
    _check_lengths(y, p)
    classes = np.arange(p.shape[1]) if classes is None else np.asarray(classes)
    present = [np.any(y == c) for c in classes]
    if not all(present) or len(classes) < 2:
        return float("nan")
    if len(classes) == 2:
        return float(_skm.roc_auc_score(y == classes[1], p[:, 1]))
    return float(np.mean([_skm.roc_auc_score(y == c, p[:, j]) for j, c in enumerate(classes)]))


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (Wilson 1927; Agresti and Coull 1998, eq. 2).

    Parameters
    ----------
    successes : float
        Examples counted (e.g. correct predictions).
    n : int
        Examples in all.
    confidence : float, default=0.95

    Returns
    -------
    (low, high) : tuple of float
        ``(nan, nan)`` when ``n`` is 0.
    """
    from scipy.stats import norm

    if n <= 0:
        return float("nan"), float("nan")
    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def bootstrap_interval(
    statistic: Any,
    n: int,
    *,
    groups: Any = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(rows)`` over resampled rows (or groups).

    Parameters
    ----------
    statistic : callable
        ``statistic(idx) -> float`` on the rows ``idx`` (an int array, repeats allowed).
    n : int
        Rows.
    groups : array-like of shape (n,), optional
        Resample whole groups (queries of a ranking task) instead of rows.
    n_resamples : int, default=1000
    confidence : float, default=0.95
    seed : int, default=0

    Returns
    -------
    (low, high) : tuple of float
        Resamples where the statistic is undefined (NaN, e.g. one class drawn) are left out.
    """
    if n <= 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    if groups is None:
        draws = (rng.integers(0, n, n) for _ in range(n_resamples))
    else:
        _, inverse = np.unique(np.asarray(groups), return_inverse=True)
        units = [np.flatnonzero(inverse == k) for k in range(inverse.max() + 1)]
        draws = (
            np.concatenate([units[k] for k in rng.integers(0, len(units), len(units))])
            for _ in range(n_resamples)
        )
    values = np.array([statistic(idx) for idx in draws], dtype=np.float64)
    values = values[~np.isnan(values)]
    if not len(values):
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)


def log_loss(y: Any, proba: Any, labels: Any = None) -> float:
    """Mean negative log-likelihood of the true labels (natural log).

    Parameters
    ----------
    y : array-like of shape (n,)
    proba : array-like of shape (n,) or (n, n_classes), or Evaluation
        Class probabilities, columns in sorted class order; a vector is the probability of the
        positive class of a binary task. Probabilities are clipped away from 0 and 1.
    labels : array-like, optional
        All class labels, when ``y`` does not contain every class.

    Returns
    -------
    float
    """
    if _is_evaluation(proba):
        if proba.proba is None:
            raise InputError("log_loss needs class probabilities; this Evaluation has none")
        proba = proba.proba
    y, p = np.asarray(y), np.asarray(proba, dtype=np.float64)
    _check_lengths(y, p)
    if p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    return float(_skm.log_loss(y, p, labels=labels))


def _ranked(y: Any, score: Any, qid: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Labels in ranked order, each row's query index and 0-based rank within its query.

    Documents are ordered by query, then by score descending, then by their original position
    (a stable sort), so tied scores keep the input order.
    """
    if _is_evaluation(score):
        score = score.raw
    y = np.asarray(y, dtype=np.float64)
    s = np.asarray(score, dtype=np.float64)
    q = np.asarray(qid)
    if s.ndim != 1:
        raise InputError(f"ranking scores must have shape (n,), got {s.shape}")
    _check_lengths(y, s, q)
    if np.isnan(s).any():
        raise InputError("ranking scores contain NaN")
    _, q_index = np.unique(q, return_inverse=True)
    q_index = q_index.ravel()
    order = np.lexsort((np.arange(len(s)), -s, q_index))
    y_sorted, q_sorted = y[order], q_index[order]
    n_queries = int(q_index.max()) + 1 if len(q_index) else 0
    starts = (
        np.flatnonzero(np.r_[True, q_sorted[1:] != q_sorted[:-1]])
        if len(q_sorted)
        else np.zeros(0, dtype=np.int64)
    )
    sizes = np.diff(np.r_[starts, len(q_sorted)])
    rank = np.arange(len(q_sorted)) - np.repeat(starts, sizes)
    return y_sorted, q_sorted, rank, n_queries


def precision_at_k(y: Any, score: Any, qid: Any, k: int = 5, relevant_min: float = 1) -> float:
    """Precision@k averaged over queries (the "Average Precision@5" of the CEGB paper).

    For each query, the fraction of its ``k`` highest-scored documents that are relevant
    (label ``>= relevant_min``); then the mean over queries.

    Parameters
    ----------
    y : array-like of shape (n,)
        Relevance labels (0-4 for Yahoo! LTR and rank_small).
    score : array-like of shape (n,), or Evaluation (its raw scores)
    qid : array-like of shape (n,)
        Query of each document (rows of a query need not be consecutive).
    k : int, default=5
    relevant_min : float, default=1
        Smallest relevant label. CEGB (Peter et al. 2017, Sec. 5) says only that label 0 means
        irrelevant, so the default counts every label >= 1 as relevant; Cronus (Chen et al.
        2012) binarizes Yahoo! labels at ``y >= 3`` - pass ``relevant_min=3`` for that reading.

    Returns
    -------
    float

    Notes
    -----
    The denominator is always ``k`` (the trec_eval convention): a query with fewer than ``k``
    documents cannot reach 1. Queries without relevant documents count 0. Ties in score are
    broken by the documents' input order (stable sort).
    """
    k = _check_k(k)
    y_sorted, q_sorted, rank, n_queries = _ranked(y, score, qid)
    if n_queries == 0:
        raise InputError("precision_at_k needs at least one document")
    hits = (rank < k) & (y_sorted >= relevant_min)
    per_query = np.bincount(q_sorted, weights=hits.astype(np.float64), minlength=n_queries) / k
    return float(per_query.mean())


def ndcg_at_k(
    y: Any, score: Any, qid: Any, k: int = 10, no_relevant: Literal["one", "zero", "skip"] = "one"
) -> float:
    """NDCG@k averaged over queries.

    ``DCG@k = sum_{i < k} (2**rel_i - 1) / log2(i + 2)`` over a query's documents ranked by
    score (``i`` is the 0-based rank), divided by the same sum over the documents ranked by
    label (the ideal DCG@k).

    Parameters
    ----------
    y : array-like of shape (n,)
        Graded relevance labels (0-4).
    score : array-like of shape (n,), or Evaluation (its raw scores)
    qid : array-like of shape (n,)
    k : int, default=10
    no_relevant : {"one", "zero", "skip"}, default="one"
        Score of a query whose documents all have label 0 (ideal DCG 0): 1 as LightGBM's
        ``ndcg`` metric does (so numbers match LightGBM's training logs), 0 as scikit-learn's
        ``ndcg_score`` does, or left out of the mean.

    Returns
    -------
    float

    Notes
    -----
    Ties in score are broken by the documents' input order (stable sort), unlike
    scikit-learn's ``ndcg_score`` which averages over tied orderings.
    """
    k = _check_k(k)
    if no_relevant not in ("one", "zero", "skip"):
        raise InputError(f"no_relevant must be 'one', 'zero' or 'skip', got {no_relevant!r}")
    y_sorted, q_sorted, rank, n_queries = _ranked(y, score, qid)
    if n_queries == 0:
        raise InputError("ndcg_at_k needs at least one document")
    discount = np.where(rank < k, 1.0 / np.log2(rank + 2.0), 0.0)
    dcg = np.bincount(q_sorted, weights=(2.0**y_sorted - 1.0) * discount, minlength=n_queries)
    # The ideal ranking: labels descending within each query (ranks are unchanged).
    ideal = np.lexsort((-y_sorted, q_sorted))
    idcg = np.bincount(q_sorted, weights=(2.0 ** y_sorted[ideal] - 1.0) * discount, minlength=n_queries)
    empty = idcg <= 0
    ndcg = np.divide(dcg, idcg, out=np.zeros(n_queries), where=~empty)
    if no_relevant == "one":
        ndcg[empty] = 1.0
    elif no_relevant == "skip":
        ndcg = ndcg[~empty]
        if not len(ndcg):
            raise InputError("every query has only irrelevant documents; NDCG is undefined")
    return float(ndcg.mean())


def _check_k(k: int) -> int:
    if int(k) != k or k < 1:
        raise InputError(f"k must be a positive integer, got {k!r}")
    return int(k)


def disagreement(pred: Any, reference_pred: Any) -> float:
    """Fraction of examples on which two models decide differently.

    Parameters
    ----------
    pred, reference_pred : array-like of shape (n,) or (n, n_classes), or Evaluation
        Decisions (labels), or score/probability matrices (compared by their argmax). An
        ``Evaluation`` gives its labels (raw scores for regressors/rankers, which are then
        compared exactly).

    Returns
    -------
    float
        0 when the two always agree (e.g. an early-stopping plan that is exact).
    """
    a, b = _decisions(pred), _decisions(reference_pred)
    _check_lengths(a, b)
    if len(a) == 0:
        return 0.0
    return float(np.mean(a != b))


def cost_statistics(report: Any) -> dict[str, float]:
    """Mean, median, 90th/99th percentiles and maximum of the per-example total cost.

    Parameters
    ----------
    report : thrifty.CostReport or Evaluation (its ``cost``)

    Returns
    -------
    dict
        ``report.summary()`` (mean, median, q90, q99, max, mean_feature, mean_evaluation,
        mean_trees, mean_nodes, fixed) plus ``n`` (the number of examples).
    """
    if _is_evaluation(report):
        report = report.cost
    if not hasattr(report, "summary"):
        raise TypeError(
            f"cost_statistics needs a thrifty CostReport or Evaluation, got {type(report).__name__}"
        )
    stats = dict(report.summary())
    stats["n"] = float(report.n_examples)
    return stats


def score(task: str, y: Any, evaluation: Any, qid: Any = None) -> tuple[str, float]:
    """The natural quality metric of a task, higher is better.

    Parameters
    ----------
    task : {"binary", "multiclass", "ranking", "regression"}
    y : array-like of shape (n,)
    evaluation : Evaluation or array-like
        An ``Evaluation``, or predicted labels (classification) / scores (ranking,
        regression).
    qid : array-like of shape (n,), optional
        Query ids (ranking only, required there).

    Returns
    -------
    (name, value) : tuple of str and float
        ``("accuracy", ...)`` for binary and multiclass, ``("precision@5", ...)`` for ranking
        (the papers' Yahoo! LTR metric; see :func:`precision_at_k`, and :func:`ndcg_at_k` for
        NDCG), ``("neg_mse", -mean squared error)`` for regression.
    """
    if task not in _TASK_METRIC:
        raise InputError(f"unknown task {task!r}; expected one of {list(_TASK_METRIC)}")
    if task in ("binary", "multiclass"):
        if _is_evaluation(evaluation):
            if evaluation.labels is None:
                raise InputError(f"a {task} score needs predicted labels; this Evaluation has none")
            evaluation = evaluation.labels
        return "accuracy", accuracy(y, evaluation)
    values = evaluation.raw if _is_evaluation(evaluation) else evaluation
    values = np.asarray(values, dtype=np.float64)
    if task == "ranking":
        if qid is None:
            raise InputError("a ranking score needs qid= (the query of each document)")
        return "precision@5", precision_at_k(y, values, qid, k=5)
    y = np.asarray(y, dtype=np.float64)
    if values.ndim != 1:
        raise InputError(f"regression predictions must have shape (n,), got {values.shape}")
    _check_lengths(y, values)
    return "neg_mse", -float(_skm.mean_squared_error(y, values))


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
        from thrifty._validation import costs_for_X, to_frame

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
        _check_lengths(total, w)
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
        maps column names to prices). Default:
        the cost model each estimator was fitted with (``costs_``; for a model that is not a
        thrifty estimator, every feature costs 1).
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
        If neither ``budget`` nor ``cost_weight`` is given, or either is negative or not
        finite.
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
    if budget is None and cost_weight is None:
        raise InvalidParameterError(
            "make_budget_scorer needs budget= (a mean-cost limit) or cost_weight= (a cost "
            "penalty), or both; without either, score with the metric itself"
        )
    for name, value in (("budget", budget), ("cost_weight", cost_weight)):
        if value is not None and not (
            isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        ):
            raise InvalidParameterError(f"{name} must be a finite number >= 0, got {value!r}")
    if isinstance(metric, str):
        _named_scorer(metric)
    elif not callable(metric):
        raise InvalidParameterError(
            f"metric must be a scikit-learn scorer name or a callable(y_true, y_pred), got "
            f"{type(metric).__name__}"
        )
    return BudgetScorer(
        metric,
        costs,
        None if budget is None else float(budget),
        None if cost_weight is None else float(cost_weight),
    )
