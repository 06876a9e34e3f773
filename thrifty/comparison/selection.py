"""Choosing on validation rows, confirming once on test rows.

:func:`select` turns the fold results of the sweep into one row per candidate (a method and a
setting) scored by its mean over the folds, and :func:`validation_units` keeps each one's
per-row (per-query) scores; :func:`eligible_front` keeps the Pareto front of the candidates a
user may be offered (no :func:`degenerate` ones); :func:`choose` picks the model offered within
a budget (the best on validation, unless an exact plan is within the validation noise of it);
:func:`prior_weights` and :func:`reweigh` give validation rows held out by time the class shares
of every row given; :func:`confirm` scores a chosen model once on the test rows, with a 95%
interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from thrifty.comparison.label_shift import prior_weights
from thrifty.comparison.methods import REFERENCE_SUFFIX
from thrifty.comparison.numbers import decimals
from thrifty.comparison.scores import CONFIDENCE, SECONDARY, intervals, paired_lead
from thrifty.comparison.sweep import TaskResult, measure
from thrifty.costs import CostModel
from thrifty.frontier import COLUMNS, metric_direction, pareto_front

__all__ = [
    "CONFIDENCE",
    "baseline_row",
    "best_row",
    "choose",
    "confirm",
    "degenerate",
    "eligible_front",
    "exact_rows",
    "majority_share",
    "prior_weights",
    "reweigh",
    "select",
    "validation_units",
    "weighting_note",
]

#: Columns averaged over the folds.
AVERAGED = [*COLUMNS[1:7], "value", *SECONDARY]
#: Shares of folds on which a model gave every row one answer (see ``scores.quality_columns``).
SHARES = ("single_class", "constant")
#: Settings at which a post-hoc plan of a classifier takes the plain model's decision on every
#: calibration row: QWYC's ``alpha=0`` and the margin exit's ``max_disagreement=0`` (both fit
#: their exits so that no calibration row's label changes).
EXACT_SETTINGS = {"alpha": 0.0, "max_disagreement": 0.0}


def baseline_row(table: pd.DataFrame) -> Any:
    """The index of the plain model's row (the reference with all its trees) in ``table``,
    or None when it did not run."""
    if not len(table) or "k" not in table.columns:
        return None
    # The reference is named after the user's model's library ("CatBoost, first k trees").
    ref = table[table["method"].astype(str).str.endswith(REFERENCE_SUFFIX)]
    return ref["k"].astype(float).idxmax() if len(ref) else None


def select(results: Sequence[TaskResult], methods: dict[str, Any]) -> pd.DataFrame:
    """One row per candidate seen on every fold its method ran, scored by the mean over folds.

    A candidate a method offered on some folds only (its time ran out, or a budget it could
    not meet there) has no comparable score and is left out. ``single_class`` (``constant``)
    is the share of folds on which it gave every row the same label (the same score).

    Parameters
    ----------
    results : sequence of TaskResult
        The selection tasks (one per method and fold).
    methods : dict of key to Method

    Returns
    -------
    DataFrame
        ``method``, ``family``, ``name``, ``parameters``, the averaged columns (costs, the
        primary metric's ``value`` and the task's other metrics by name), ``metric``,
        ``single_class`` or ``constant``, ``folds``, ``fit_seconds`` (mean per fold),
        ``exact`` (:func:`exact_rows`), then one column per parameter.
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
            for c in SHARES:
                if c in first:
                    row[c] = float(np.mean([p[c] for p in per_fold]))
            row["folds"] = len(per_fold)
            row["fit_seconds"] = float(np.mean([p["fit_seconds"] for p in per_fold]))
            row.update({k: v for k, v in first["params"].items() if k not in row})
            rows.append(row)
    table = pd.DataFrame(rows)
    if len(table):
        table.insert(table.columns.get_loc("fit_seconds") + 1, "exact", exact_rows(table))
    return table


def exact_rows(table: pd.DataFrame) -> pd.Series:
    """Which candidates are exact: the plain model (the reference with all its trees) and, for
    classification, the post-hoc plans fitted to take its decision on every calibration row
    (:data:`EXACT_SETTINGS`: QWYC at ``alpha=0``, the margin exit at ``max_disagreement=0``).

    Their figures are the plain model's up to the rare row no calibration row resembled, so
    a lead over them on the validation rows that those rows cannot tell from noise is more
    likely luck than a better model (see :func:`choose`).
    """
    exact = pd.Series(False, index=table.index)
    base = baseline_row(table)
    if base is not None:
        exact[base] = True
    if "family" not in table.columns or "metric" not in table.columns:
        return exact
    plans = (table["family"] == "post-hoc") & (table["metric"] == "accuracy")
    for column, value in EXACT_SETTINGS.items():
        if column in table.columns:
            exact |= plans & (pd.to_numeric(table[column], errors="coerce") == value)
    return exact


def validation_units(
    results: Sequence[TaskResult], methods: dict[str, Any], table: pd.DataFrame
) -> dict[Any, np.ndarray]:
    """Each candidate's validation scores per unit (``scores.unit_scores``: whether each row
    was right, its squared error, each query's NDCG@10), the folds one after the other, by the
    index of its row in ``table`` (:func:`select`'s). Every candidate's units are then the same
    rows in the same order, so two candidates can be compared pair by pair
    (:func:`thrifty.comparison.scores.paired_lead`)."""
    where = {(r["method"], r["name"]): i for i, r in table.iterrows()} if len(table) else {}
    found: dict[Any, list[tuple[int, np.ndarray]]] = {}
    for r in results:
        if not r.started:
            continue
        for row in r.rows:
            i = where.get((methods[r.method].name, row["name"]))
            if i is not None and row.get("units") is not None:
                found.setdefault(i, []).append((r.fold, np.asarray(row["units"])))
    folds = table["folds"].to_dict() if len(table) else {}
    return {
        i: np.concatenate([u for _, u in sorted(parts, key=lambda p: p[0])])
        for i, parts in found.items()
        if len(parts) == folds.get(i)
    }


def majority_share(y: np.ndarray, task: str) -> float | None:
    """The share of the most frequent class in ``y`` (the accuracy of always answering it),
    or None for regression and ranking."""
    if task not in ("binary", "multiclass") or not len(y):
        return None
    return float(np.unique(np.asarray(y), return_counts=True)[1].max() / len(y))


def reweigh(
    table: pd.DataFrame, units: Mapping[Any, np.ndarray], weights: np.ndarray
) -> tuple[pd.DataFrame, dict[Any, np.ndarray]]:
    """``table`` and ``units`` (:func:`select`, :func:`validation_units`; accuracy, one
    validation split) with each row's correctness weighted (:func:`prior_weights`).

    A unit becomes ``weight * right``, so that the mean of a candidate's units is its weighted
    accuracy (the weights average 1) and :func:`~thrifty.comparison.scores.paired_lead` still
    pairs two candidates row by row. ``value`` becomes the weighted accuracy and the plain one
    is kept as ``unweighted_value``; a candidate without units keeps its plain figure.
    """
    w = np.asarray(weights, dtype=np.float64)
    out = {i: np.asarray(u, dtype=np.float64) * w for i, u in units.items() if len(u) == len(w)}
    table = table.copy()
    if len(table):
        table.insert(table.columns.get_loc("value") + 1, "unweighted_value", table["value"])
        for i, u in out.items():
            if i in table.index:
                table.at[i, "value"] = float(u.mean())
    return table, {**units, **out}


def weighting_note(y_val: np.ndarray, y: np.ndarray) -> str:
    """How the selection's accuracy was weighted (:func:`prior_weights`), appended to
    ``Comparison.selection``: ``", accuracy weighted to the class shares of all 273,355 rows
    (class 0: 84.9% of the validation rows, 76.5% of all)"``."""
    labels, counts = np.unique(y, return_counts=True)
    top = labels[np.argmax(counts)]
    top = top.item() if hasattr(top, "item") else top
    return (
        f", accuracy weighted to the class shares of all {len(y):,} rows "
        f"(class {top!r}: {np.mean(y_val == top):.1%} of the validation rows, "
        f"{np.max(counts) / len(y):.1%} of all)"
    )


def degenerate(table: pd.DataFrame, majority: float | None = None) -> pd.Series:
    """Why each candidate is no real model (an empty string where it is one).

    Classification: a candidate is degenerate when it gives every row one label on at least
    half its validation folds, gives every row the same score (its AUC is exactly 0.5),
    scores below always answering the majority class on the validation rows (``majority``,
    for accuracy), or gives every test row one label (``test_single_class``, once confirmed).
    Regression: when it predicts one value for every row on at least half its validation
    folds (or on the test rows, ``test_constant``), or explains none of the target's spread
    on the validation rows (R² <= 0: predicting the mean does as well). Ranking: when it
    gives every document of a query the same score on at least half its validation folds
    (or on the test rows): the ranking is then the order the documents came in. Such a model
    costs little because it looks at nothing: on a front it would be the cheapest point.
    """
    reasons = pd.Series("", index=table.index, dtype=object)
    if not len(table):
        return reasons

    def flag(mask: Any, why: Any) -> None:
        hit = np.asarray(mask, bool) & (reasons == "").to_numpy()
        reasons[hit] = why[hit] if isinstance(why, pd.Series) else why

    ranking = "metric" in table.columns and bool(table["metric"].astype(str).str.startswith("ndcg").any())
    same = "gives every document of a query the same score" if ranking else "predicts one value for every row"
    if "single_class" in table.columns:
        share = table["single_class"].astype(float).fillna(0.0)
        flag(
            share >= 0.5,
            "predicts a single class on " + share.map("{:.0%}".format) + " of its validation folds",
        )
    if "constant" in table.columns:
        share = table["constant"].astype(float).fillna(0.0)
        flag(share >= 0.5, same + " on " + share.map("{:.0%}".format) + " of its validation folds")
    if "auc" in table.columns:
        flag((table["auc"].astype(float) - 0.5).abs() < 1e-12, "gives every row the same score (AUC 0.5)")
    if "r2" in table.columns:
        r2 = table["r2"].astype(float)
        flag(
            r2 <= 0,
            r2.map(lambda v: f"no better than predicting the mean on validation (R² {v:,.3f} <= 0)"),
        )
    if majority is not None and "metric" in table.columns:
        value = table["value"].astype(float)
        below = (table["metric"] == "accuracy") & (value < majority - 1e-12)
        flag(below, value.map(lambda v: f"below the majority class on validation ({v:.1%} < {majority:.1%})"))
    if "test_single_class" in table.columns:
        flag(
            table["test_single_class"].fillna(False).astype(bool), "predicts a single class on the test rows"
        )
    if "test_constant" in table.columns:
        flag(table["test_constant"].fillna(False).astype(bool), same + " on the test rows")
    return reasons


def best_row(table: pd.DataFrame) -> Any:
    """The index of the row of the best ``value`` (the lowest for an error such as RMSE)."""
    value = table["value"].astype(float)
    return value.idxmax() if metric_direction(table) else value.idxmin()


def eligible_front(
    table: pd.DataFrame,
    baseline_value: float | None,
    majority: float | None = None,
    units: Mapping[Any, np.ndarray] | None = None,
) -> pd.DataFrame:
    """The Pareto front of the candidates a user may be offered.

    A :func:`degenerate` candidate is left out unless the plain model (``baseline_value``) is
    no better than it: a constant answer is then honestly the best buy. So is a candidate
    scored on fewer folds than the most any had (the time allowance cut its method short): its
    figure is noisier, and choosing the best of noisy figures favours luck.

    Settings of one method with the same validation cost and figure (the same model, returned
    for several budgets) appear once on the front, as the one of the smallest budget (else the
    first of them): methods fit their settings coarse to fine, not in order of budget.

    With ``units`` (:func:`validation_units`, by the index of ``table``), an exact candidate
    (:func:`exact_rows`) stays on the front unless a candidate at most as costly is better
    beyond the noise (the 95% interval of its lead, paired on the same validation rows,
    excludes 0): it is what :func:`choose` prefers when those rows cannot tell it from the best.

    Applied again to the front once confirmed (``test_single_class`` or ``test_constant``
    known), it drops the models that give every test row one answer, and keeps the rest of
    the front as it is.
    """
    if not len(table):
        return table
    up = metric_direction(table)
    value = table["value"].to_numpy(float) * (1 if up else -1)
    allowed = baseline_value is not None and value >= baseline_value * (1 if up else -1)
    ok = (degenerate(table, majority) == "").to_numpy() | allowed
    if "folds" in table.columns:
        ok &= table["folds"].to_numpy() == table["folds"].max()
    front = pareto_front(table[ok], higher_is_better=up)
    if units is not None and "exact" in table.columns and ok.any():
        front = table.loc[sorted({*front.index, *_exact_within_noise(table[ok], front, units)})]
        front = front.sort_values("mean_cost", kind="stable")
    if "method" not in front.columns:
        return front
    # Settings of one method with the same figures are one model (GreedyMiser's one 2-feature
    # model at every budget): its smallest budget stands for them, not a copy per budget.
    same = ["method", "mean_cost", "value"]
    order = front.sort_values([*same, "budget"], kind="stable") if "budget" in front.columns else front
    return front[front.index.isin(order[~order.duplicated(same, keep="first")].index)]


def _exact_within_noise(table: pd.DataFrame, front: pd.DataFrame, units: Mapping[Any, np.ndarray]) -> list:
    """The exact candidates of ``table`` off ``front`` that no front row at most as costly
    beats on the validation units beyond the noise (cheapest first; one an exact row already
    kept matches at no more cost is left out)."""
    up = metric_direction(table)
    sign = 1.0 if up else -1.0
    metric = str(table["metric"].iloc[0]) if "metric" in table.columns else "value"
    exact = table[table["exact"].fillna(False).astype(bool)].sort_values("mean_cost", kind="stable")
    kept = [i for i in exact.index if i in front.index]
    for i in exact.index:
        if i in front.index or i not in units:
            continue
        cost, value = float(table.at[i, "mean_cost"]), sign * float(table.at[i, "value"])
        if any(
            float(table.at[j, "mean_cost"]) <= cost + 1e-12 and sign * float(table.at[j, "value"]) >= value
            for j in kept
        ):
            continue
        rivals = front[front["mean_cost"] <= cost + 1e-12]
        rivals = rivals[sign * rivals["value"].astype(float) > value]
        if all(j in units and paired_lead(metric, units[j], units[i])[1] <= 0 for j in rivals.index):
            kept.append(i)
    return [i for i in kept if i not in front.index]


def choose(
    rows: pd.DataFrame, units: Mapping[tuple[str, str], np.ndarray] | None = None
) -> tuple[Any, dict[str, Any]]:
    """The candidate to offer among ``rows`` (those within a budget): the best validation
    figure, unless an exact candidate is within the validation noise of it.

    The rule is the one-standard-error idea of Breiman et al. (1984, sec. 3.4.3): the best of
    many validation figures is biased upwards (the winner is partly the luckiest), so among
    the candidates the validation rows cannot tell apart the one to trust more is kept. Here
    that is an exact candidate (:func:`exact_rows`: the plain model, or a plan fitted to keep
    its decisions), whose figure is the plain model's: when the best candidate's lead over it,
    paired on the same validation rows (queries), has a 95% bootstrap interval that contains
    0, the exact one is chosen (of several, the best on validation, then the cheaper). A
    candidate better beyond the noise is still chosen.

    Parameters
    ----------
    rows : DataFrame
        Candidates (``method``, ``name``, ``mean_cost``, ``value``, ``metric``, ``exact``).
    units : mapping of (method, name) to array, optional
        Each candidate's validation scores per unit
        (:meth:`~thrifty.comparison.Comparison.validation_scores`); without them, or without
        ``exact``, the best validation figure is chosen.

    Returns
    -------
    (index, note)
        The chosen row's index, and when an exact candidate was preferred, ``preferred_to``
        (the best candidate's ``"method (name)"``) and ``validation_lead``,
        ``validation_lead_low``, ``validation_lead_high``: its lead over the chosen one and
        the lead's 95% interval, in the metric's units.
    """
    best = best_row(rows)
    if units is None or "exact" not in rows.columns or bool(rows.at[best, "exact"]):
        return best, {}
    ours = units.get((rows.at[best, "method"], rows.at[best, "name"]))
    exact = rows[rows["exact"].fillna(False).astype(bool)]
    if ours is None or not len(exact):
        return best, {}
    up = metric_direction(rows)
    order = exact.assign(_v=exact["value"].astype(float) * (-1 if up else 1)).sort_values(
        ["_v", "mean_cost"], kind="stable"
    )
    metric = str(rows.at[best, "metric"])
    for i in order.index:
        theirs = units.get((rows.at[i, "method"], rows.at[i, "name"]))
        if theirs is None or len(theirs) != len(ours):
            continue
        lead, low, high = paired_lead(metric, ours, theirs)
        if low <= 0:
            return i, {
                "preferred_to": f"{rows.at[best, 'method']} ({rows.at[best, 'name']})",
                "validation_lead": lead,
                "validation_lead_low": low,
                "validation_lead_high": high,
            }
    return best, {}


def confirm(
    model: Any,
    X: Any,
    y: np.ndarray,
    qid: np.ndarray | None,
    costs: CostModel,
    task: str,
    *,
    matrices: dict[Any, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Score ``model`` once on the test rows, with 95% intervals (see
    :func:`thrifty.comparison.scores.intervals`: Wilson's for accuracy, a bootstrap over rows
    for regression, over queries for ranking). ``matrices``: as for ``measure``, kept across the
    models confirmed on the same test rows (the frame is converted once per reading of it).

    Returns
    -------
    dict
        ``test_<column>`` for each column of :func:`~thrifty.comparison.sweep.measure`,
        ``test_low``, ``test_high``, ``test_rows``, and for regression and ranking the
        intervals of the other metrics (``test_mae_low``...) and ``test_queries`` (ranking).
    """
    columns, ev = measure(model, X, y, qid, costs, task, matrices=matrices)
    out = {f"test_{k}": v for k, v in columns.items() if k not in ("metric", "units")}
    out.update(intervals(task, y, ev, qid), test_rows=len(y))
    return out


def describe(params: dict[str, Any]) -> str:
    """``"tolerance=13420, every=1"``: floats to four significant digits, never as 1.342e+04."""
    return ", ".join(f"{k}={_setting(v)}" if isinstance(v, float) else f"{k}={v}" for k, v in params.items())


def _setting(x: float) -> str:
    if not np.isfinite(x) or x == 0:
        return f"{x:g}"
    text = f"{x:.{decimals(x, 4)}f}"
    # Trailing zeros of a short decimal say nothing: 0.0500 -> 0.05 (as :g wrote it).
    return text.rstrip("0").rstrip(".") if "." in text else text
