"""The verdicts of ``benchmarks/tasks.py``: each method's choice per budget, thrifty's best
against the two baselines on the test rows (paired, with a bootstrap interval), and the cost at
which the plain model's figure is reached; compare's metrics read in the user's units."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

BASELINES = ("lightgbm", "cheapest")
CHOICE_COLUMNS = [
    "method",
    "name",
    "mean_cost",
    "value",
    "test_mean_cost",
    "test_value",
    "test_low",
    "test_high",
    "metric",
    "exact",
]

# compare's metric, read in the user's units: (name shown, value -> user units, reached(model,
# full) in user units). The one place to change when compare's metrics change: compare scores
# regression by RMSE (lower is better) and ranking by NDCG@10; the older names are kept to
# read results written before.
Metric = tuple[str, Callable[[float], float], Callable[[float, float], bool]]


def _within_points(model: float, full: float) -> bool:
    return model >= full - 0.005


def _within_1pct(model: float, full: float) -> bool:
    return model <= 1.01 * full


METRICS: dict[str, Metric] = {
    "neg_mse": ("RMSE", lambda v: math.sqrt(max(0.0, -v)), _within_1pct),
    "neg_rmse": ("RMSE", abs, _within_1pct),
    "rmse": ("RMSE", abs, _within_1pct),
    "ndcg@10": ("NDCG@10", float, _within_points),
    "precision@5": ("precision@5", float, _within_points),
    "accuracy": ("accuracy", float, _within_points),
}
TOLERANCE = {"RMSE": "1% of the plain model's", "NDCG@10": "0.5 point", "precision@5": "0.5 point"}


def user_metric(metric: str) -> Metric:
    """How to read compare's ``metric`` column in the user's units."""
    if metric not in METRICS:
        raise SystemExit(f"tasks.py does not know compare's metric {metric!r}; add it to METRICS")
    return METRICS[metric]


def _budgets(cmp: Any) -> list[float]:
    """The budgets the figures are read at: compare's own and the plain model's cost, its
    validation cost (the cost every choice is made by).

    Not ``cmp.full_cost``, the final fit's calibration cost: on rank_small that was 4,416,
    below the plain model's validation cost of 4,450, so no choice at the last budget could be
    the plain model at its own cost (issue 24 asks for the budgets where the front and the
    baselines differ, and the plain model's cost is where the reference reaches its best)."""
    from thrifty.comparison.selection import baseline_row

    row = baseline_row(cmp.table)
    own = cmp.full_cost if row is None else float(cmp.table.loc[row, "mean_cost"])
    return sorted({*cmp.budgets, own})


def method_choices(main: Any) -> pd.DataFrame:
    """Each method's choice at each budget (its confirmed model compare would offer within the
    budget, by validation cost: ``selection.choose``) with its test figures: one row per budget and
    method that has a model within it."""
    confirmed = main.table[main.table["test_value"].notna()] if "test_value" in main.table else main.table[:0]
    rows, units = [], main.validation_scores()
    for b in _budgets(main):
        for _, own in confirmed.groupby("method", sort=False):
            row = _choice(own, b, units)
            if row is not None:
                rows.append({"budget": round(b, 4), **row[CHOICE_COLUMNS].to_dict()})
    out = pd.DataFrame(rows, columns=["budget", *CHOICE_COLUMNS])
    out["user_metric"] = [user_metric(m)[0] for m in out["metric"]]
    for col in ("value", "test_value", "test_low", "test_high"):
        out[f"{col}_user"] = [user_metric(m)[1](v) for m, v in zip(out["metric"], out[col])]
    return out


def above_baselines(main: Any, choices: pd.DataFrame, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """At each budget, does thrifty's best method (compare's choice, ``selection.choose``,
    within the budget among every non-baseline method's choices) beat both baselines' choices on the
    test rows? A budget where it ties the better baseline on the test rows (the same model,
    e.g. the plain model at its own cost) is counted apart: the target is "above both at
    every budget where they differ".

    With ``data`` (the test rows), each budget also gets the paired difference of the two on
    the test rows (:func:`paired_difference`: thrifty's figure minus the better baseline's,
    signed so that positive favours thrifty, in the user's units, with its 95% interval) and a
    ``verdict``: ``"above"`` or ``"below"`` when the interval excludes 0, else
    ``"indistinguishable"`` (the test rows cannot tell them apart). A budget where neither
    thrifty nor a baseline has a model is ``"no comparison"``: counted apart (:func:`tally`),
    neither beaten nor not."""
    from thrifty.comparison import METHODS
    from thrifty.comparison.selection import choose

    baseline_names = [METHODS[k].name for k in BASELINES]
    units = main.validation_scores()
    evaluated: dict[Any, Any] = {}  # each model's test evaluation, once across the budgets
    rows = []
    for b in _budgets(main):
        here = choices[choices["budget"] == round(b, 4)]
        ours = here[~here["method"].isin(baseline_names)]
        best = None if not len(ours) else ours.loc[choose(ours, units)[0]]
        theirs = {n: here[here["method"] == n] for n in baseline_names}
        theirs_value = [_signed(t.iloc[0], "test_value") for t in theirs.values() if len(t)]
        # Signed so that larger is better (compare's RMSE is an error: lower is better).
        value = -np.inf if best is None else _signed(best, "test_value")
        top = max(theirs_value, default=-np.inf)
        row: dict[str, Any] = {
            "budget": round(b, 4),
            "thrifty": None if best is None else best["method"],
            "thrifty_setting": None if best is None else best["name"],
            "beats": bool(best is not None and value > top),
            "ties": bool(best is not None and np.isclose(value, top, rtol=0, atol=1e-12)),
        }
        better = max(
            ((n, t.iloc[0]) for n, t in theirs.items() if len(t)),
            key=lambda nt: _signed(nt[1], "test_value"),
            default=None,
        )
        if best is None and better is None:
            row["verdict"] = "no comparison"  # no model within the budget on either side
        elif data is not None and best is None:
            row["verdict"] = "below"  # no thrifty model within the budget, a baseline's is
        elif data is not None and best is not None and better is not None:
            diff = paired_difference(main, data, best, better[1], evaluated)
            if diff is not None:
                row["difference vs " + better[0]] = [round(v, 4) for v in diff]
                row["verdict"] = "above" if diff[1] > 0 else "below" if diff[2] < 0 else "indistinguishable"
        for label, r in [("thrifty", best), *((n, t.iloc[0] if len(t) else None) for n, t in theirs.items())]:
            if r is not None:
                row[f"{label} test"] = [
                    round(float(r[c]), 4) for c in ("test_value_user", "test_low_user", "test_high_user")
                ]
        rows.append(row)
    return {**tally(rows), "budgets_above_baselines": rows}


def tally(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures of :func:`above_baselines`' rows (one per budget: ``beats``, ``ties`` and
    possibly ``verdict``): the share of budgets where thrifty's best beats both baselines, the
    same where its test figure differs from the better baseline's, and the count of each
    paired verdict. A budget where no side has a model (``"no comparison"``) takes no part in
    either share: it is counted apart, as ``budgets_no_comparison``."""
    compared = [r for r in rows if r.get("verdict") != "no comparison"]
    differ = [r for r in compared if not r["ties"]]
    verdicts = [r["verdict"] for r in rows if "verdict" in r]
    return {
        "budgets_above_baselines_frac": (
            round(float(np.mean([r["beats"] for r in compared])), 3) if compared else None
        ),
        "budgets_above_baselines_frac_where_differ": (
            round(float(np.mean([r["beats"] for r in differ])), 3) if differ else None
        ),
        # Paired on the test rows: budgets where thrifty's best is significantly above the
        # better baseline, indistinguishable from it, significantly below it.
        "budgets_significantly": {v: verdicts.count(v) for v in ("above", "indistinguishable", "below")},
        "budgets_no_comparison": len(rows) - len(compared),
    }


def paired_difference(
    main: Any, data: dict[str, Any], ours: pd.Series, theirs: pd.Series, evaluated: dict[Any, Any]
) -> tuple[float, ...] | None:
    """Thrifty's test figure minus the baseline's, paired on the same test rows (queries for
    ranking), in the user's units and signed so that positive favours thrifty: the estimate and
    a 95% percentile bootstrap interval (1,000 resamples of the rows, or of the queries, each
    resample scoring both models on the same units). None when a model is not kept.
    ``evaluated``: each model's evaluation on the test rows, kept across calls (a model is the
    choice at several budgets; key ``None`` holds the test rows as matrices, as compare keeps)."""
    from thrifty.comparison.sweep import measure
    from thrifty.intervals import bootstrap_sums
    from thrifty.metrics import ndcg_per_query

    keys = [(r["method"], r["name"]) for r in (ours, theirs)]
    if any(k not in main.models for k in keys):
        return None
    X, y, qid = data["X_test"], np.asarray(data["y_test"]), data.get("qid_test")
    matrices = evaluated.setdefault(None, {})
    for k in keys:
        if k not in evaluated:
            evaluated[k] = measure(main.models[k], X, y, qid, main.costs, main.task, matrices=matrices)[1]
    evs = [evaluated[k] for k in keys]
    if main.task in ("binary", "multiclass"):
        columns = {f"m{i}": (np.asarray(ev.labels) == y).astype(np.float64) for i, ev in enumerate(evs)}

        def stat(s: Any, n: int) -> Any:
            return (s["m0"] - s["m1"]) / n
    elif main.task == "regression":
        target = y.astype(np.float64)
        columns = {
            f"m{i}": (target - np.asarray(ev.raw, dtype=np.float64).reshape(len(y))) ** 2
            for i, ev in enumerate(evs)
        }

        def stat(s: Any, n: int) -> Any:  # the baseline's RMSE minus thrifty's: lower error is better
            return np.sqrt(s["m1"] / n) - np.sqrt(s["m0"] / n)
    else:
        columns = {f"m{i}": ndcg_per_query(y, ev.raw, qid, k=10) for i, ev in enumerate(evs)}

        def stat(s: Any, n: int) -> Any:
            return (s["m0"] - s["m1"]) / n

    n = len(columns["m0"])
    point = float(stat({k: v.sum() for k, v in columns.items()}, n))
    low, high = bootstrap_sums(columns, {"d": stat})["d"]
    return point, low, high


def _choice(front: pd.DataFrame, budget: float, units: dict[Any, np.ndarray]) -> pd.Series | None:
    """The row compare would offer within ``budget`` (validation cost): the best validation
    figure, or an exact plan within its validation noise (``selection.choose``)."""
    from thrifty.comparison.selection import choose

    within = front[front["mean_cost"] <= budget + 1e-12]
    if not len(within):
        return None
    return within.loc[choose(within, units)[0]]


def _signed(row: pd.Series, column: str) -> float:
    """``row[column]`` signed so that larger is better (minus an error such as RMSE)."""
    from thrifty.metrics import higher_is_better

    return float(row[column]) if higher_is_better(row["metric"]) else -float(row[column])


def cost_at_full(main: Any) -> dict[str, Any]:
    """The lowest test cost on the confirmed front (or the plain model's own) within the
    tolerance of the plain model's test figure."""
    from thrifty.comparison.selection import baseline_row

    row = baseline_row(main.table)
    if row is None or not len(main.front) or "test_value" not in main.front:
        return {"cost_at_full_metric": None}
    full = main.table.loc[row]
    metric, to_user, reached = user_metric(full["metric"])
    full_value = to_user(full["test_value"])
    # The plain model reaches its own figure at its own cost, whether or not it is on the front.
    front = pd.concat([main.front, main.table.loc[[row]]])
    front = front[front["test_value"].notna()]
    ok = [reached(to_user(v), full_value) for v in front["test_value"]]
    cost = float(front.loc[ok, "test_mean_cost"].min()) if any(ok) else None
    fraction = None if cost is None else cost / float(full["test_mean_cost"])
    return {
        "metric": metric,
        "full_metric": round(full_value, 4),
        "full_cost": round(float(full["test_mean_cost"]), 4),
        "cost_at_full_metric": None if cost is None else round(cost, 4),
        "cost_fraction_at_full_metric": None if fraction is None else round(fraction, 4),
    }
