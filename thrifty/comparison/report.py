"""The sentences and the markdown report of a :class:`~thrifty.comparison.Comparison`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from thrifty.comparison.methods import REFERENCE
from thrifty.comparison.numbers import (
    IN_TARGET_UNITS,
    PROPORTIONS,
    cost_unit,
    decimals,
    display,
    money,
    shown,
)
from thrifty.comparison.scores import SECONDARY
from thrifty.comparison.selection import baseline_row, degenerate
from thrifty.comparison.user_model import user_model_lines, yours
from thrifty.frontier import metric_direction, pareto_front

if TYPE_CHECKING:
    from thrifty.comparison.result import Comparison

# money, shown and cost_unit are re-exported: the demo and the command line write with them.
__all__ = [
    "cost_unit",
    "headline",
    "left_off",
    "markdown_report",
    "markdown_table",
    "money",
    "plain_words",
    "preferred",
    "recommendations",
    "shown",
]

COLUMNS = [
    "method",
    "name",
    "mean_cost",
    "value",
    *SECONDARY,
    "single_class",
    "constant",
    "test_mean_cost",
    "test_value",
    "test_low",
    "test_high",
    *[f"test_{m}{end}" for m in SECONDARY for end in ("", "_low", "_high")],
    "mean_trees",
    "mean_features",
    "fit_seconds",
]


def plain_words(
    row: pd.Series,
    cmp: Comparison,
    unit: str | None = None,
    noun: str = "example",
    target_unit: str | None = None,
) -> str:
    """What a buyer reads of one model: its cost against the plain model, in percent and in
    the cost's unit, its metric's change, with its 95% interval, on the test rows.

    For example "10% cheaper than the plain model ($43.20 less per patient), 1.0 point less
    accurate (77.9% vs 78.9%; 95% interval 68.7% to 85.1%), confirmed on 91 test patients";
    for regression "..., RMSE $640 vs $612 (+4.6%; 95% interval $618 to $662), confirmed on
    10,788 test diamonds" (errors in ``target_unit``); for ranking "..., NDCG@10 0.712 vs
    0.725 (-1.3 points; 95% interval 0.690 to 0.731), confirmed on 120 test queries". The
    figures are the test rows' where both models were confirmed on them, else the validation
    rows' (and the sentence says so). The user's own model (``compare(model=...)``) is "your
    model".
    """
    return yours(_plain_words(row, cmp, unit, noun, target_unit), cmp.user_model)


def _plain_words(
    row: pd.Series, cmp: Comparison, unit: str | None, noun: str, target_unit: str | None
) -> str:
    metric = str(row.get("metric", "value"))
    noun = _noun(cmp, noun)
    base = baseline_row(cmp.table)
    plain = cmp.table.loc[base] if base is not None else None
    if plain is not None and (plain["method"], plain["name"]) == (row["method"], row["name"]):
        return _plain_model(row, cmp, unit, noun, metric, target_unit)
    tested = pd.notna(row.get("test_value")) and plain is not None and pd.notna(plain.get("test_value"))
    pre = "test_" if tested else ""
    cost = float(row[f"{pre}mean_cost"])
    value = float(row[f"{pre}value"])
    if plain is None:
        where = f"confirmed on {_rows(row, noun)}" if tested else f"on {_selection(cmp, noun)}"
        figure = shown(value, metric, target_unit)
        return f"{money(cost, unit)} per {noun}, {display(metric)} {figure} {where}"
    base_cost, base_value = float(plain[f"{pre}mean_cost"]), float(plain[f"{pre}value"])
    places = decimals(base_value)
    text = _cheaper(cost, base_cost, unit, noun) + ", " + _better(value, base_value, metric, target_unit)
    if tested:
        low, high = (shown(float(row[f"test_{e}"]), metric, target_unit, places) for e in ("low", "high"))
        text += f"; 95% interval {low} to {high}), confirmed on {_rows(row, noun)}"
    else:
        text += f") on {_selection(cmp, noun)} (not confirmed on the test rows: the time allowance ran out)"
    return text


def _plain_model(
    row: pd.Series, cmp: Comparison, unit: str | None, noun: str, metric: str, target_unit: str | None
) -> str:
    if pd.isna(row.get("test_value")):
        return (
            f"the plain model: {display(metric)} {shown(float(row['value']), metric, target_unit)} "
            f"on {_selection(cmp, noun)}"
        )
    figures = [_figure(row, metric, "value", "low", "high", target_unit)]
    # Regression and ranking: the task's other metrics with their intervals (accuracy's
    # companions, balanced accuracy and AUC, are in the report's tables).
    figures += [
        _figure(row, m, m, f"{m}_low", f"{m}_high", target_unit)
        for m in SECONDARY
        if pd.notna(row.get(f"test_{m}_low"))
    ]
    return (
        f"the plain model itself: {money(float(row['test_mean_cost']), unit)} per {noun}, "
        f"{', '.join(figures)}, confirmed on {_rows(row, noun)}"
    )


def _figure(row: pd.Series, metric: str, value: str, low: str, high: str, target_unit: str | None) -> str:
    """``"RMSE $612 (95% interval $590 to $634)"``, the interval written as its figure is."""
    v = float(row[f"test_{value}"])
    places = decimals(v)
    lo, hi = (shown(float(row[f"test_{c}"]), metric, target_unit, places) for c in (low, high))
    return f"{display(metric)} {shown(v, metric, target_unit, places)} (95% interval {lo} to {hi})"


def _noun(cmp: Comparison, noun: str) -> str:
    """A ranking's rows are documents (costs are per document; figures are per query)."""
    return "document" if noun == "example" and cmp.task == "ranking" else noun


def _plural(noun: str) -> str:
    return noun[:-1] + "ies" if noun.endswith("y") and noun[-2:-1] not in "aeiou" else noun + "s"


def _rows(row: pd.Series, noun: str) -> str:
    """``"91 test patients"``; ``"150 test rows"`` for the generic noun "example"; ``"50 test
    queries"`` for ranking (its figures are over queries)."""
    if pd.notna(row.get("test_queries")):
        return f"{int(row['test_queries']):,} test queries"
    return f"{int(row['test_rows']):,} test {_plural('row' if noun == 'example' else noun)}"


def _cheaper(cost: float, base: float, unit: str | None, noun: str) -> str:
    """``"10% cheaper than the plain model ($43.20 less per patient)"``."""
    if base <= 0 or abs(cost - base) < 0.005 * base:
        return f"as costly as the plain model ({money(cost, unit)} per {noun})"
    word, more = ("cheaper", "less") if cost < base else ("dearer", "more")
    return (
        f"{abs(1 - cost / base):.0%} {word} than the plain model "
        f"({money(abs(base - cost), unit)} {more} per {noun})"
    )


def _better(value: float, base: float, metric: str, target_unit: str | None = None) -> str:
    """``"1.0 point less accurate (77.9% vs 78.9%"``, ``"RMSE $640 vs $612 (+4.6%"``,
    ``"NDCG@10 0.712 vs 0.725 (-1.3 points"`` (the caller closes the bracket)."""
    name = display(metric)
    if metric in IN_TARGET_UNITS:
        places = decimals(base)
        both = f"{shown(value, metric, target_unit, places)} vs {shown(base, metric, target_unit, places)}"
        change = f"{(value - base) / abs(base):+.1%}" if base else "n/a"
        return f"{name} {both} ({change}"
    both = f"({shown(value, metric)} vs {shown(base, metric)}"
    if metric not in PROPORTIONS:
        # NDCG, precision@k, R²: plain decimals, their change in points (hundredths).
        return f"{name} {shown(value, metric)} vs {shown(base, metric)} ({_points(value, base)}"
    points = 100 * (value - base)
    if abs(points) < 0.05:
        return f"as {'accurate' if metric == 'accuracy' else f'good on {metric}'} {both}"
    size = f"{abs(points):.1f} point{'' if f'{abs(points):.1f}' == '1.0' else 's'}"
    if metric == "accuracy":
        return f"{size} {'more' if points > 0 else 'less'} accurate {both}"
    return f"{size} {'higher' if points > 0 else 'lower'} {metric} {both}"


def _points(value: float, base: float) -> str:
    """``"-1.3 points"``: the change in hundredths of the metric."""
    points = 100 * (value - base)
    if abs(points) < 0.05:
        return "the same"
    return f"{points:+.1f} point{'' if f'{abs(points):.1f}' == '1.0' else 's'}"


def recommendations(
    cmp: Comparison,
    rec: pd.DataFrame,
    unit: str | None = None,
    saved: Mapping[tuple[str, str], str] | None = None,
    noun: str = "example",
    target_unit: str | None = None,
) -> list[str]:
    """One line per distinct recommended model (a model best for several budgets once, with
    them all): its name, the budgets, :func:`plain_words`, where it was chosen, and when an
    exact plan was preferred to the best on validation (:func:`~thrifty.comparison.selection.choose`),
    to which model and by how little it trailed (:func:`preferred`)."""
    lines = []
    for (method, name), rows in rec.groupby(["method", "name"], sort=False):
        row = rows.iloc[0]
        budgets = ", ".join(money(float(b), unit) for b in rows["for_budget"])
        metric = str(row.get("metric", "value"))
        where = (saved or {}).get((method, name))
        lines.append(
            f"{method} ({name}), best within budget{'s' if len(rows) > 1 else ''} {budgets}: "
            f"{plain_words(row, cmp, unit, noun, target_unit)}; selected on "
            f"{_selection(cmp, _noun(cmp, noun))} ({display(metric)} "
            f"{shown(float(row['value']), metric, target_unit)} at "
            f"{money(float(row['mean_cost']), unit)} per {_noun(cmp, noun)})"
            + "".join(f"; {preferred(r, metric, target_unit)}" for _, r in _preferred(rows).iterrows())
            + (f"; saved as `{where}`" if where else "")
        )
    return lines


def _preferred(rows: pd.DataFrame) -> pd.DataFrame:
    """The recommendation rows where an exact plan was preferred, one per model passed over."""
    if "preferred_to" not in rows.columns:
        return rows[:0]
    return rows[rows["preferred_to"].notna()].drop_duplicates("preferred_to")


def preferred(row: pd.Series, metric: str, target_unit: str | None = None) -> str:
    """Why an exact plan was chosen over the best on validation: ``"preferred to Fan et al.
    (gamma=3), whose lead of 0.20 points on the validation rows (95% interval -0.10 to +0.60,
    paired on the same rows) is within their noise, and an exact plan's figure is the plain
    model's"``."""
    lead, low, high = (float(row[f"validation_lead{e}"]) for e in ("", "_low", "_high"))
    if metric in IN_TARGET_UNITS:
        places = decimals(max(abs(lead), abs(low), abs(high)))
        size = f"{display(metric)} {shown(lead, metric, target_unit, places)} lower"
        both = [shown(v, metric, target_unit, places) for v in (low, high)]
    else:
        # Two decimals: a lead within the noise is often below a tenth of a point.
        size = f"{100 * lead:.2f} point{'' if f'{100 * abs(lead):.2f}' == '1.00' else 's'}"
        both = [f"{100 * v:+.2f}" for v in (low, high)]
    return (
        f"preferred to {row['preferred_to']}, whose lead of {size} on the validation rows (95% "
        f"interval {both[0]} to {both[1]}, paired on the same rows) is within their noise, and an "
        "exact plan's figure is the plain model's"
    )


def _selection(cmp: Comparison, noun: str) -> str:
    """``"5-fold cross-validation of 212 patients"`` (rows, for the generic noun)."""
    return cmp.selection if noun == "example" else cmp.selection.replace("rows", _plural(noun))


def left_off(cmp: Comparison) -> pd.DataFrame:
    """The degenerate models (see :func:`~thrifty.comparison.selection.degenerate`) the front
    would otherwise hold, with the ``reason`` each is left off."""
    table = cmp.table
    if not len(table):
        return table.assign(reason=pd.Series(dtype=object))
    reasons = degenerate(table, _majority(cmp))
    full = table["folds"] == table["folds"].max() if "folds" in table.columns else True
    candidates = pareto_front(table[full], higher_is_better=metric_direction(table))
    out = candidates[(reasons[candidates.index] != "") & ~candidates.index.isin(cmp.front.index)]
    return out.assign(reason=reasons[out.index])


def _majority(cmp: Comparison) -> float | None:
    counts = cmp.class_counts.get("selection") if cmp.class_counts else None
    return max(counts.values()) / sum(counts.values()) if counts else None


#: What a degenerate model of each task does, in the headline.
_DEGENERATE = {
    "regression": "one value for every row, or no better than predicting the mean",
    "ranking": "the same score for every document of a query",
}


def headline(cmp: Comparison) -> list[str]:
    """What ran and where its figures come from, in a few lines."""
    stopped = " (the time allowance cut some methods short)" if cmp.stopped_early else ""
    queries = _queries(cmp)
    lines = [
        f"{len(cmp.table)} models from {cmp.table['method'].nunique()} methods in "
        f"{cmp.seconds:.1f} s{stopped}; {len(cmp.front)} on the Pareto front, chosen on "
        f"{cmp.selection} and confirmed once on {cmp.n_test:,} test rows"
        + (f" ({queries:,} queries)" if queries else "")
    ]
    if cmp.class_counts:
        lines.append(
            "class counts: "
            + "; ".join(
                f"{part} rows " + ", ".join(f"{k}: {v:,}" for k, v in counts.items())
                for part, counts in cmp.class_counts.items()
            )
        )
    if cmp.user_model:
        base = baseline_row(cmp.table)
        series = REFERENCE if base is None else str(cmp.table.loc[base, "method"])
        lines += user_model_lines(cmp.user_model, series)
    lines += [f"warning: {w}" for w in cmp.warnings]
    off = left_off(cmp)
    if len(off):
        what = _DEGENERATE.get(cmp.task, "a single class, constant scores or below the majority class")
        lines.append(
            f"{len(off)} degenerate model(s) left off the front ({what}; listed apart with the reason)"
        )
    return lines


def _queries(cmp: Comparison) -> int | None:
    """The test queries of a ranking comparison (None when unknown)."""
    if "test_queries" not in cmp.table.columns:
        return None
    known = cmp.table["test_queries"].dropna()
    return int(known.iloc[0]) if len(known) else None


def markdown_report(
    cmp: Comparison,
    rec: pd.DataFrame,
    saved: dict[tuple[str, str], str],
    *,
    cost_unit: str | None = None,
    title: str = "thrifty compare",
    target_unit: str | None = None,
    noun: str = "example",
) -> str:
    """The report a buyer reads (``report.md``): the headline, one sentence per recommended
    model, the front, the models left off it and every model, each figure in its one format
    (:mod:`thrifty.comparison.numbers`: costs in ``cost_unit``, regression errors in
    ``target_unit``), no figure in scientific notation."""
    metric = str(cmp.table["metric"].iloc[0]) if len(cmp.table) else "value"
    fmt = _formats(metric, cost_unit, target_unit)
    direction = "higher" if metric_direction(cmp.table) else "lower"
    units = f", in the target's units ({target_unit})" if target_unit and metric in IN_TARGET_UNITS else ""
    others = [display(m) for m in SECONDARY if m in cmp.table.columns]
    lines = [
        f"# {title}",
        "",
        *[f"{line}." for line in headline(cmp)],
        "",
        f"Task: {cmp.task}; metric: {display(metric)} ({direction} is better{units})"
        + (f"; also {', '.join(others)}" if others else "")
        + ". Columns without `test_` are "
        f"measured on the validation rows ({cmp.selection}; under cross-validation, the mean "
        "over the folds of each setting refitted per fold): the front and the recommendations "
        "are chosen on them. Columns with `test_` are the chosen models, fitted on every row "
        f"but the {cmp.n_test:,} test rows, scored once on those; `_low`/`_high` is a "
        "95% interval (Wilson's for accuracy, a bootstrap over rows otherwise, over queries "
        "for ranking, whose metrics are computed per query and averaged over queries). "
        "Every cost is the mean per example measured by thrifty's runtime.",
        "",
        f"{'Your model' if cmp.user_model else 'The plain LightGBM model'} costs "
        f"{money(cmp.full_cost, cost_unit)} per example on the "
        "calibration rows; budgets: " + ", ".join(money(b, cost_unit) for b in cmp.budgets) + ".",
        "",
        "## Recommendations",
        "",
    ]
    if len(rec):
        lines += [f"- {line}" for line in recommendations(cmp, rec, cost_unit, saved, noun, target_unit)]
    else:
        lines.append("- no model fits the budgets")
    lines += [
        "",
        "## Pareto front",
        "",
        "No other model is cheaper on average and at least as good (validation figures):",
        "",
        markdown_table(_columns(cmp.front, metric), fmt),
        "",
    ]
    off = left_off(cmp)
    if len(off):
        lines += [
            "## Left off the front",
            "",
            "Cheap because they look at (almost) nothing, these would otherwise be on the front:",
            "",
            markdown_table(_columns(off, metric, ["reason"]), fmt),
            "",
        ]
    lines += [
        "## Every model",
        "",
        markdown_table(_columns(cmp.table, metric, ["parameters"]), fmt),
        "",
    ]
    if cmp.skipped:
        lines += ["## Skipped", ""] + [f"- {m} {n}: {why}" for m, n, why in cmp.skipped] + [""]
    lines += ["![frontier](frontier.png)", ""]
    return "\n".join(lines)


def _formats(metric: str, cost_unit: str | None, target_unit: str | None) -> dict[str, Any]:
    """How each column of the report's tables is written, by its name in the table."""
    costs = ("mean_cost", "median_cost", "q90_cost", "test_mean_cost")
    fmt: dict[str, Any] = {c: (lambda x: money(float(x), cost_unit)) for c in costs}
    fmt.update(
        mean_trees="{:,.1f}".format,
        mean_features="{:,.2f}".format,
        fit_seconds="{:,.2f}".format,
        single_class="{:.0%}".format,
        constant="{:.0%}".format,
        test_rows="{:,.0f}".format,
        test_queries="{:,.0f}".format,
    )
    for m in (metric, *SECONDARY):
        for c in (m, f"test_{m}", f"test_{m}_low", f"test_{m}_high"):
            fmt[c] = lambda x, m=m: shown(float(x), m, target_unit)
    return fmt


def _columns(df: pd.DataFrame, metric: str, extra: list[str] | None = None) -> pd.DataFrame:
    """The report's columns of ``df``, the primary metric's named for it (``value`` ->
    ``rmse``, ``test_low`` -> ``test_rmse_low``)."""
    named = {"value": metric, "test_value": f"test_{metric}", "test_low": f"test_{metric}_low"}
    named["test_high"] = f"test_{metric}_high"
    return df[[c for c in COLUMNS + (extra or []) if c in df.columns]].rename(columns=named)


def markdown_table(df: pd.DataFrame, fmt: dict[str, Any] | None = None) -> str:
    """A GitHub-flavoured markdown table (pandas' own needs the optional ``tabulate``);
    ``fmt`` formats columns by name, missing values are left blank."""
    fmt = fmt or {}
    header = "| " + " | ".join(str(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = [
        "| "
        + " | ".join(
            fmt[c](v) if c in fmt and pd.notna(v) else ("" if pd.isna(v) else str(v)) for c, v in row.items()
        )
        + " |"
        for _, row in df.iterrows()
    ]
    return "\n".join([header, rule, *body])
