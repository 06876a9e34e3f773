"""Choosing on validation rows, confirming once on test rows.

:func:`select` turns the fold results of the sweep into one row per candidate (a method and a
setting) scored by its mean over the folds; :func:`eligible_front` keeps the Pareto front of
the candidates a user may be offered (no :func:`degenerate` ones); :func:`confirm` scores a
chosen model once on the test rows, with a 95% interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from thrifty import metrics
from thrifty.comparison.methods import REFERENCE
from thrifty.comparison.sweep import TaskResult, measure
from thrifty.costs import CostModel
from thrifty.frontier import COLUMNS, pareto_front

__all__ = [
    "CONFIDENCE",
    "baseline_row",
    "confirm",
    "degenerate",
    "eligible_front",
    "majority_share",
    "select",
]

CONFIDENCE = 0.95
#: Columns averaged over the folds.
AVERAGED = [*COLUMNS[1:7], "value", "balanced_accuracy", "auc"]


def baseline_row(table: pd.DataFrame) -> Any:
    """The index of the plain model's row (the reference with all its trees) in ``table``,
    or None when it did not run."""
    if not len(table) or "k" not in table.columns:
        return None
    ref = table[table["method"] == REFERENCE]
    return ref["k"].astype(float).idxmax() if len(ref) else None


def select(results: Sequence[TaskResult], methods: dict[str, Any]) -> pd.DataFrame:
    """One row per candidate seen on every fold its method ran, scored by the mean over folds.

    A candidate a method offered on some folds only (its time ran out, or a budget it could
    not meet there) has no comparable score and is left out. ``single_class`` is the share of
    folds on which it gave every row the same label.

    Parameters
    ----------
    results : sequence of TaskResult
        The selection tasks (one per method and fold).
    methods : dict of key to Method

    Returns
    -------
    DataFrame
        ``method``, ``family``, ``name``, ``parameters``, the averaged columns, ``metric``,
        ``single_class``, ``folds``, ``fit_seconds`` (mean per fold), then one column per
        parameter.
    """
    by_method: dict[str, list[TaskResult]] = {}
    for r in results:
        if r.started:
            by_method.setdefault(r.method, []).append(r)
    rows = []
    for key, done in by_method.items():
        m = methods[key]
        names = [row["name"] for row in done[0].rows]
        for name in names:
            found = [next((row for row in r.rows if row["name"] == name), None) for r in done]
            per_fold = [row for row in found if row is not None]
            if len(per_fold) < len(found):
                continue
            first = per_fold[0]
            row = {
                "method": m.name,
                "family": m.family,
                "name": name,
                "parameters": describe(first["params"]),
                "metric": first["metric"],
            }
            for c in AVERAGED:
                if c in first:
                    row[c] = float(np.mean([p[c] for p in per_fold]))
            if "single_class" in first:
                row["single_class"] = float(np.mean([p["single_class"] for p in per_fold]))
            row["folds"] = len(per_fold)
            row["fit_seconds"] = float(np.mean([p["fit_seconds"] for p in per_fold]))
            row.update({k: v for k, v in first["params"].items() if k not in row})
            rows.append(row)
    return pd.DataFrame(rows)


def majority_share(y: np.ndarray, task: str) -> float | None:
    """The share of the most frequent class in ``y`` (the accuracy of always answering it),
    or None for regression and ranking."""
    if task not in ("binary", "multiclass") or not len(y):
        return None
    return float(np.unique(np.asarray(y), return_counts=True)[1].max() / len(y))


def degenerate(table: pd.DataFrame, majority: float | None = None) -> pd.Series:
    """Why each candidate is no real model (an empty string where it is one).

    A candidate is degenerate when it gives every row one label on at least half its
    validation folds, gives every row the same score (its AUC is exactly 0.5), scores below
    always answering the majority class on the validation rows (``majority``, for accuracy),
    or gives every test row one label (``test_single_class``, once confirmed). Such a model
    costs little because it looks at nothing: on a front it would be the cheapest point.
    """
    reasons = pd.Series("", index=table.index, dtype=object)
    if not len(table):
        return reasons

    def flag(mask: Any, why: Any) -> None:
        hit = np.asarray(mask, bool) & (reasons == "").to_numpy()
        reasons[hit] = why[hit] if isinstance(why, pd.Series) else why

    if "single_class" in table.columns:
        share = table["single_class"].astype(float).fillna(0.0)
        flag(
            share >= 0.5,
            "predicts a single class on " + share.map("{:.0%}".format) + " of its validation folds",
        )
    if "auc" in table.columns:
        flag((table["auc"].astype(float) - 0.5).abs() < 1e-12, "gives every row the same score (AUC 0.5)")
    if majority is not None and "metric" in table.columns:
        value = table["value"].astype(float)
        below = (table["metric"] == "accuracy") & (value < majority - 1e-12)
        flag(below, value.map(lambda v: f"below the majority class on validation ({v:.1%} < {majority:.1%})"))
    if "test_single_class" in table.columns:
        flag(
            table["test_single_class"].fillna(False).astype(bool), "predicts a single class on the test rows"
        )
    return reasons


def eligible_front(
    table: pd.DataFrame, baseline_value: float | None, majority: float | None = None
) -> pd.DataFrame:
    """The Pareto front of the candidates a user may be offered.

    A :func:`degenerate` candidate is left out unless the plain model (``baseline_value``) is
    no better than it: a constant answer is then honestly the best buy. So is a candidate
    scored on fewer folds than the most any had (the time allowance cut its method short): its
    figure is noisier, and choosing the best of noisy figures favours luck.

    Applied again to the front once confirmed (``test_single_class`` known), it drops the
    models that give every test row one label, and keeps the rest of the front as it is.
    """
    if not len(table):
        return table
    allowed = baseline_value is not None and table["value"].to_numpy(float) >= baseline_value
    ok = (degenerate(table, majority) == "").to_numpy() | allowed
    if "folds" in table.columns:
        ok &= table["folds"].to_numpy() == table["folds"].max()
    return pareto_front(table[ok])


def confirm(
    model: Any, X: Any, y: np.ndarray, qid: np.ndarray | None, costs: CostModel, task: str
) -> dict[str, Any]:
    """Score ``model`` once on the test rows, with a 95% interval for its metric.

    The interval is Wilson's for accuracy (a proportion of rows) and a percentile bootstrap
    over rows (over queries for ranking; 1,000 resamples) for every other metric.

    Returns
    -------
    dict
        ``test_<column>`` for each column of :func:`~thrifty.comparison.sweep.measure`, and
        ``test_low``, ``test_high``.
    """
    columns, ev = measure(model, X, y, qid, costs, task)
    n = len(y)
    if columns["metric"] == "accuracy":
        low, high = metrics.wilson_interval(float(np.sum(ev.labels == y)), n, CONFIDENCE)
    else:

        def statistic(idx: np.ndarray) -> float:
            sub = _rows(ev, idx)
            return metrics.score(task, y[idx], sub, qid=None if qid is None else qid[idx])[1]

        low, high = metrics.bootstrap_interval(statistic, n, groups=qid, confidence=CONFIDENCE)
    out = {f"test_{k}": v for k, v in columns.items() if k != "metric"}
    out.update(test_low=low, test_high=high, test_rows=n)
    return out


def _rows(ev: Any, idx: np.ndarray) -> Any:
    """The predictions of ``ev`` on rows ``idx`` (what :func:`thrifty.metrics.score` reads)."""
    labels = None if ev.labels is None else ev.labels[idx]
    return SimpleNamespace(
        raw=ev.raw[idx],
        labels=labels,
        predictions=labels if labels is not None else ev.raw[idx],
        cost=None,
        proba=None,
    )


def describe(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())
