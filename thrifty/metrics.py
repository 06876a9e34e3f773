"""Prediction-quality metrics (classification, regression, ranking, agreement), the metrics
each task reports and their direction, cost statistics, and a cost-aware scorer for
scikit-learn's model selection (``make_budget_scorer``, defined in ``thrifty.budget_scorer``).
Confidence intervals are in ``thrifty.intervals`` (re-exported here)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from sklearn import metrics as _skm

from thrifty.budget_scorer import BudgetScorer, make_budget_scorer
from thrifty.exceptions import InputError
from thrifty.intervals import bootstrap_interval, bootstrap_sums, wilson_interval

__all__ = [
    "LOWER_IS_BETTER",
    "TASK_METRICS",
    "BudgetScorer",
    "accuracy",
    "auc",
    "balanced_accuracy",
    "bootstrap_interval",
    "bootstrap_sums",
    "cost_statistics",
    "disagreement",
    "higher_is_better",
    "log_loss",
    "macro_auc",
    "mae",
    "make_budget_scorer",
    "ndcg_at_k",
    "ndcg_per_query",
    "precision_at_k",
    "precision_per_query",
    "r2",
    "rmse",
    "score",
    "task_scores",
    "wilson_interval",
]


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
    return float(precision_per_query(y, score, qid, k, relevant_min).mean())


def precision_per_query(y: Any, score: Any, qid: Any, k: int = 5, relevant_min: float = 1) -> np.ndarray:
    """Each query's precision@k (see :func:`precision_at_k`, their mean), in the order of the
    sorted query ids: what a bootstrap over queries resamples."""
    k = _check_k(k)
    y_sorted, q_sorted, rank, n_queries = _ranked(y, score, qid)
    if n_queries == 0:
        raise InputError("precision_at_k needs at least one document")
    hits = (rank < k) & (y_sorted >= relevant_min)
    return np.bincount(q_sorted, weights=hits.astype(np.float64), minlength=n_queries) / k


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
    per_query = ndcg_per_query(y, score, qid, k, no_relevant)
    if not len(per_query):
        raise InputError("every query has only irrelevant documents; NDCG is undefined")
    return float(per_query.mean())


def ndcg_per_query(
    y: Any, score: Any, qid: Any, k: int = 10, no_relevant: Literal["one", "zero", "skip"] = "one"
) -> np.ndarray:
    """Each query's NDCG@k (see :func:`ndcg_at_k`, their mean), in the order of the sorted
    query ids; with ``no_relevant="skip"`` the queries without a relevant document are left out."""
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
    return ndcg


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


def rmse(y: Any, prediction: Any) -> float:
    """Root mean squared error, in the target's units: ``sqrt(mean((y - prediction)**2))``.

    Parameters
    ----------
    y : array-like of shape (n,)
    prediction : array-like of shape (n,), or Evaluation (its raw predictions)

    Returns
    -------
    float
    """
    y, p = _targets_and_predictions(y, prediction, "rmse")
    return float(np.sqrt(np.mean((y - p) ** 2)))


def mae(y: Any, prediction: Any) -> float:
    """Mean absolute error, in the target's units: ``mean(|y - prediction|)``.

    Parameters
    ----------
    y : array-like of shape (n,)
    prediction : array-like of shape (n,), or Evaluation (its raw predictions)

    Returns
    -------
    float
    """
    y, p = _targets_and_predictions(y, prediction, "mae")
    return float(np.mean(np.abs(y - p)))


def r2(y: Any, prediction: Any) -> float:
    """Coefficient of determination ``1 - sum((y - prediction)**2) / sum((y - mean(y))**2)``.

    1 is a perfect fit; 0 is what predicting the mean of ``y`` scores; below 0 is worse than
    that (a constant prediction other than the mean).

    Parameters
    ----------
    y : array-like of shape (n,)
    prediction : array-like of shape (n,), or Evaluation (its raw predictions)

    Returns
    -------
    float
        NaN when every ``y`` is the same (no spread to explain).
    """
    y, p = _targets_and_predictions(y, prediction, "r2")
    spread = float(np.sum((y - y.mean()) ** 2))
    return float(1.0 - np.sum((y - p) ** 2) / spread) if spread > 0 else float("nan")


def _targets_and_predictions(y: Any, prediction: Any, metric: str) -> tuple[np.ndarray, np.ndarray]:
    if _is_evaluation(prediction):
        prediction = prediction.raw
    y, p = np.asarray(y, dtype=np.float64), np.asarray(prediction, dtype=np.float64)
    if p.ndim == 2 and p.shape[1] == 1:
        p = p[:, 0]
    if p.ndim != 1:
        raise InputError(f"{metric} needs one prediction per row (shape (n,)), got shape {p.shape}")
    _check_lengths(y, p)
    if not len(y):
        raise InputError(f"{metric} needs at least one row")
    return y, p


#: The metrics reported per task, the primary one first (what ``score`` returns, and what
#: ``thrifty.compare`` chooses by).
TASK_METRICS = {
    "binary": ("accuracy", "balanced_accuracy", "auc"),
    "multiclass": ("accuracy", "balanced_accuracy", "auc"),
    "regression": ("rmse", "mae", "r2"),
    "ranking": ("ndcg@10", "precision@5"),
}
#: Metrics where lower is better (errors and losses); every other is higher-is-better.
LOWER_IS_BETTER = frozenset({"rmse", "mae", "mse", "log_loss"})


def higher_is_better(metric: str) -> bool:
    """Whether a larger value of ``metric`` is better (False for errors and losses: rmse, mae,
    mse, log_loss)."""
    return str(metric) not in LOWER_IS_BETTER


def task_scores(task: str, y: Any, evaluation: Any, qid: Any = None, classes: Any = None) -> dict[str, float]:
    """Every metric of :data:`TASK_METRICS` for ``task``, the primary one first.

    Parameters
    ----------
    task : {"binary", "multiclass", "ranking", "regression"}
    y : array-like of shape (n,)
    evaluation : Evaluation
        Its labels and probabilities (classification) or raw scores (regression, ranking).
    qid : array-like of shape (n,), optional
        Query ids (ranking only, required there).
    classes : array-like, optional
        The label of each probability column (classification; see :func:`macro_auc`).

    Returns
    -------
    dict of str to float
        ``accuracy``, ``balanced_accuracy``, ``auc`` (macro one-vs-rest) for classification;
        ``rmse``, ``mae`` (target units) and ``r2`` for regression; ``ndcg@10`` and
        ``precision@5`` (each per query, averaged over queries) for ranking.
    """
    name, value = score(task, y, evaluation, qid=qid)
    out = {name: value}
    if task in ("binary", "multiclass"):
        out["balanced_accuracy"] = balanced_accuracy(y, evaluation.labels)
        out["auc"] = macro_auc(y, evaluation.proba, classes)
    elif task == "regression":
        out["mae"], out["r2"] = mae(y, evaluation), r2(y, evaluation)
    else:
        out["precision@5"] = precision_at_k(y, evaluation, qid, k=5)
    return out


def score(task: str, y: Any, evaluation: Any, qid: Any = None) -> tuple[str, float]:
    """The primary quality metric of a task (:data:`TASK_METRICS`).

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
        ``("accuracy", ...)`` for binary and multiclass; ``("ndcg@10", ...)`` for ranking
        (:func:`ndcg_at_k`, per query and averaged over queries; :func:`precision_at_k` for
        the papers' precision@5); ``("rmse", ...)`` for regression, in the target's units,
        lower is better (see :func:`higher_is_better`).
    """
    if task not in TASK_METRICS:
        raise InputError(f"unknown task {task!r}; expected one of {list(TASK_METRICS)}")
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
        return "ndcg@10", ndcg_at_k(y, values, qid, k=10)
    if values.ndim != 1:
        raise InputError(f"regression predictions must have shape (n,), got {values.shape}")
    return "rmse", rmse(y, values)
