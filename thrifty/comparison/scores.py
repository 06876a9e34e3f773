"""What :func:`thrifty.compare` measures of a model's predictions, per task: the columns of its
table (the primary metric as ``metric`` and ``value``, the others by name) and their 95%
intervals on the test rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from thrifty import metrics
from thrifty.intervals import bootstrap_sums, wilson_interval

__all__ = [
    "CONFIDENCE",
    "SECONDARY",
    "constant_scores",
    "intervals",
    "paired_lead",
    "quality_columns",
    "unit_scores",
]

CONFIDENCE = 0.95
#: The metrics beside each task's primary one, a column each (see ``thrifty.metrics.TASK_METRICS``).
SECONDARY = list(dict.fromkeys(m for names in metrics.TASK_METRICS.values() for m in names[1:]))


def quality_columns(
    task: str, y: np.ndarray, ev: Any, qid: np.ndarray | None = None, classes: Any = None
) -> dict[str, Any]:
    """The quality columns of one model on the rows ``y`` (its predictions ``ev``).

    Returns
    -------
    dict
        ``metric`` (the task's primary metric's name) and ``value``; the task's other metrics
        by name (``balanced_accuracy``, ``auc``; ``mae``, ``r2``; ``precision@5``);
        ``single_class`` (classification: every row got one label) or ``constant``
        (regression: every row got one prediction; ranking: every query's documents got one
        score each, so the ranking is the input order); and ``units``, the primary metric per
        unit (:func:`unit_scores`), for paired comparisons of two models on the same rows.
    """
    scores = metrics.task_scores(task, y, ev, qid=qid, classes=classes)
    name = next(iter(scores))
    out: dict[str, Any] = {"metric": name, "value": float(scores.pop(name)), **scores}
    out["units"] = unit_scores(task, y, ev, qid)
    if task in ("binary", "multiclass"):
        out["single_class"] = bool(len(np.unique(np.asarray(ev.labels))) == 1)
    else:
        out["constant"] = constant_scores(ev.raw, qid if task == "ranking" else None)
    return out


def unit_scores(task: str, y: np.ndarray, ev: Any, qid: np.ndarray | None = None) -> np.ndarray:
    """The primary metric per unit, so that two models scored on the same rows can be compared
    pair by pair (:func:`paired_lead`): whether each row's label is right (classification,
    booleans: 1 byte a row), each row's squared error (regression: the RMSE is the root of
    their mean), each query's NDCG@10 (ranking: queries, not rows, are the units)."""
    if task in ("binary", "multiclass"):
        return np.asarray(ev.labels) == np.asarray(y)
    if task == "regression":
        target = np.asarray(y, dtype=np.float64)
        return (target - np.asarray(ev.raw, dtype=np.float64).reshape(len(target))) ** 2
    return np.asarray(metrics.ndcg_per_query(y, ev.raw, qid, k=10), dtype=np.float64)


def paired_lead(
    metric: str, ours: np.ndarray, theirs: np.ndarray, *, confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """How much better one model is than another on the same units (:func:`unit_scores`),
    with a percentile bootstrap interval that resamples the units, each resample scoring both
    models on the same units (1,000 resamples, seed 0).

    Returns
    -------
    (lead, low, high)
        Signed so that a positive lead favours ``ours``: the difference of the accuracies
        (NDCG@10s) or, for ``"rmse"``, ``theirs``'s RMSE minus ``ours``'s.
    """
    a, b = np.asarray(ours, dtype=np.float64), np.asarray(theirs, dtype=np.float64)
    if a.shape != b.shape or not len(a):
        raise ValueError(f"paired_lead needs two score vectors of one length, got {a.shape} and {b.shape}")
    if metric == "rmse":

        def lead(sums: Mapping[str, np.ndarray], n: int) -> np.ndarray:
            return np.sqrt(sums["b"] / n) - np.sqrt(sums["a"] / n)
    else:

        def lead(sums: Mapping[str, np.ndarray], n: int) -> np.ndarray:
            return (sums["a"] - sums["b"]) / n

    point = float(lead({"a": a.sum(), "b": b.sum()}, len(a)))
    if np.array_equal(a, b):  # the same answers on every unit: no resample differs
        return point, point, point
    low, high = bootstrap_sums({"a": a, "b": b}, {"d": lead}, confidence=confidence)["d"]
    return point, float(low), float(high)


def constant_scores(scores: Any, qid: Any = None) -> bool:
    """Whether every row has the same score (within each query, when ``qid`` is given)."""
    s = np.asarray(scores, dtype=np.float64)
    if not len(s):
        return False
    s = s.reshape(len(s), -1)
    if qid is None:
        return bool(np.all(s == s[0]))
    order = np.argsort(np.asarray(qid), kind="stable")
    q, s = np.asarray(qid)[order], s[order]
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    ranked = np.diff(np.r_[starts, len(q)]) > 1  # a query of one document has nothing to rank
    tied = np.all(np.maximum.reduceat(s, starts) == np.minimum.reduceat(s, starts), axis=1)
    return bool(ranked.any() and np.all(tied[ranked]))


def intervals(task: str, y: np.ndarray, ev: Any, qid: np.ndarray | None = None) -> dict[str, Any]:
    """95% intervals of a model's test figures.

    Accuracy: Wilson's interval (a proportion of rows). Regression: a percentile bootstrap
    over rows (1,000 resamples) of the RMSE, the MAE and the R² together. Ranking: NDCG@10
    and precision@5 are computed per query, and the bootstrap resamples queries (never rows:
    a query's documents are ranked together).

    Returns
    -------
    dict
        ``test_low``, ``test_high`` (the primary metric), ``test_<metric>_low`` and
        ``test_<metric>_high`` for ``mae``, ``r2`` or ``precision@5``, and ``test_queries``
        (ranking: the units resampled).
    """
    if task in ("binary", "multiclass"):
        low, high = wilson_interval(float(np.sum(ev.labels == y)), len(y), CONFIDENCE)
        return {"test_low": low, "test_high": high}
    if task == "regression":
        target = np.asarray(y, dtype=np.float64)
        error = target - np.asarray(ev.raw, dtype=np.float64).reshape(len(target))
        # Centred: the spread sum(y²) - (sum y)² / n below loses no digits to a large mean.
        centred = target - target.mean()
        columns = {"se": error**2, "ae": np.abs(error), "y": centred, "y2": centred**2}
        stats = {"value": _rmse, "mae": _mae, "r2": _r2}
    else:
        columns = {
            "ndcg": metrics.ndcg_per_query(y, ev.raw, qid, k=10),
            "precision": metrics.precision_per_query(y, ev.raw, qid, k=5),
        }
        stats = {"value": _mean("ndcg"), "precision@5": _mean("precision")}
    found = bootstrap_sums(columns, stats, confidence=CONFIDENCE)
    out: dict[str, Any] = {"test_low": found["value"][0], "test_high": found["value"][1]}
    for name, (low, high) in found.items():
        if name != "value":
            out[f"test_{name}_low"], out[f"test_{name}_high"] = low, high
    if task == "ranking":
        out["test_queries"] = len(columns["ndcg"])
    return out


def _rmse(sums: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    return np.sqrt(sums["se"] / n)


def _mae(sums: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    return sums["ae"] / n


def _r2(sums: Mapping[str, np.ndarray], n: int) -> np.ndarray:
    # The resample's spread of the targets around their own mean: sum(y²) - (sum y)² / n.
    spread = sums["y2"] - sums["y"] ** 2 / n
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(spread > 1e-12 * sums["y2"], 1.0 - sums["se"] / spread, np.nan)


def _mean(column: str) -> Any:
    def statistic(sums: Mapping[str, np.ndarray], n: int) -> np.ndarray:
        return sums[column] / n

    return statistic
