"""The sentences and the markdown report of a :class:`~thrifty.comparison.Comparison`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from thrifty.comparison.selection import baseline_row, degenerate
from thrifty.frontier import pareto_front

if TYPE_CHECKING:
    from thrifty.comparison.result import Comparison

COLUMNS = [
    "method",
    "name",
    "mean_cost",
    "value",
    "balanced_accuracy",
    "auc",
    "single_class",
    "test_mean_cost",
    "test_value",
    "test_low",
    "test_high",
    "test_balanced_accuracy",
    "test_auc",
    "mean_trees",
    "mean_features",
    "fit_seconds",
]
PROPORTIONS = ("accuracy", "balanced_accuracy", "auc")


def money(x: float, unit: str | None) -> str:
    """A cost in the report's one format: thousands separated, to the cent, after ``unit``
    (``"$1,234.50"``; ``"1,234.50"`` without one); below 0.01 without a unit, two significant
    digits (``"0.0012"``), so that small prices (seconds, say) do not all read 0.00."""
    if unit:
        return f"{'-' if x < 0 else ''}{unit}{abs(x):,.2f}"
    return f"{x:,.2f}" if x == 0 or abs(x) >= 0.01 else f"{x:.2g}"


def cost_unit(meta: Mapping[str, Any] | None) -> str | None:
    """The unit :func:`money` writes a dataset's costs in: ``"$"`` when its ``meta`` prices
    them in dollars, else None (plain numbers)."""
    return "$" if "dollar" in str((meta or {}).get("cost_unit", "")).lower() else None


def shown(value: float, metric: str) -> str:
    """A metric value as a percentage (accuracy-like) or with four significant digits."""
    if pd.isna(value):
        return "n/a"
    return f"{value:.1%}" if _proportion(metric) else f"{value:,.4g}"


def plain_words(row: pd.Series, cmp: Comparison, unit: str | None = None, noun: str = "example") -> str:
    """What a buyer reads of one model: its cost against the plain model, in percent and in
    the cost's unit, its metric's change in points, with its 95% interval, on the test rows.

    For example "10% cheaper than the plain model ($43.20 less per patient), 1.0 point less
    accurate (77.9% vs 78.9%; 95% interval 68.7% to 85.1%), confirmed on 91 test patients". The figures
    are the test rows' where both models were confirmed on them, else the validation rows'
    (and the sentence says so).
    """
    metric = str(row.get("metric", "value"))
    base = baseline_row(cmp.table)
    plain = cmp.table.loc[base] if base is not None else None
    if plain is not None and (plain["method"], plain["name"]) == (row["method"], row["name"]):
        return _plain_model(row, cmp, unit, noun, metric)
    tested = pd.notna(row.get("test_value")) and plain is not None and pd.notna(plain.get("test_value"))
    pre = "test_" if tested else ""
    cost = float(row[f"{pre}mean_cost"])
    value = float(row[f"{pre}value"])
    if plain is None:
        where = f"confirmed on {_rows(row, noun)}" if tested else f"on {_selection(cmp, noun)}"
        return f"{money(cost, unit)} per {noun}, {metric} {shown(value, metric)} {where}"
    base_cost, base_value = float(plain[f"{pre}mean_cost"]), float(plain[f"{pre}value"])
    text = _cheaper(cost, base_cost, unit, noun) + ", " + _better(value, base_value, metric)
    if tested:
        text += (
            f"; 95% interval {shown(float(row['test_low']), metric)} to "
            f"{shown(float(row['test_high']), metric)}), confirmed on {_rows(row, noun)}"
        )
    else:
        text += f") on {_selection(cmp, noun)} (not confirmed on the test rows: the time allowance ran out)"
    return text


def _plain_model(row: pd.Series, cmp: Comparison, unit: str | None, noun: str, metric: str) -> str:
    if pd.isna(row.get("test_value")):
        return f"the plain model: {metric} {shown(float(row['value']), metric)} on {_selection(cmp, noun)}"
    return (
        f"the plain model itself: {money(float(row['test_mean_cost']), unit)} per {noun}, "
        f"{metric} {shown(float(row['test_value']), metric)} (95% interval "
        f"{shown(float(row['test_low']), metric)} to {shown(float(row['test_high']), metric)}), "
        f"confirmed on {_rows(row, noun)}"
    )


def _rows(row: pd.Series, noun: str) -> str:
    """``"91 test patients"``; ``"150 test rows"`` for the generic noun "example"."""
    return f"{int(row['test_rows']):,} test {'row' if noun == 'example' else noun}s"


def _cheaper(cost: float, base: float, unit: str | None, noun: str) -> str:
    """``"10% cheaper than the plain model ($43.20 less per patient)"``."""
    if base <= 0 or abs(cost - base) < 0.005 * base:
        return f"as costly as the plain model ({money(cost, unit)} per {noun})"
    word, more = ("cheaper", "less") if cost < base else ("dearer", "more")
    return (
        f"{abs(1 - cost / base):.0%} {word} than the plain model "
        f"({money(abs(base - cost), unit)} {more} per {noun})"
    )


def _better(value: float, base: float, metric: str) -> str:
    """``"1.0 point less accurate (77.9% vs 78.9%"`` (the caller closes the bracket)."""
    both = f"({shown(value, metric)} vs {shown(base, metric)}"
    if not _proportion(metric):
        word = "higher" if value > base else "lower"
        return f"{metric} {word} {both}" if value != base else f"{metric} as good {both}"
    points = 100 * (value - base)
    if abs(points) < 0.05:
        return f"as {'accurate' if metric == 'accuracy' else f'good on {metric}'} {both}"
    size = f"{abs(points):.1f} point{'' if f'{abs(points):.1f}' == '1.0' else 's'}"
    if metric == "accuracy":
        return f"{size} {'more' if points > 0 else 'less'} accurate {both}"
    return f"{size} {'higher' if points > 0 else 'lower'} {metric} {both}"


def _proportion(metric: str) -> bool:
    return metric in PROPORTIONS or metric.startswith("precision")


def recommendations(
    cmp: Comparison,
    rec: pd.DataFrame,
    unit: str | None = None,
    saved: Mapping[tuple[str, str], str] | None = None,
    noun: str = "example",
) -> list[str]:
    """One line per distinct recommended model (a model best for several budgets once, with
    them all): its name, the budgets, :func:`plain_words`, where it was chosen."""
    lines = []
    for (method, name), rows in rec.groupby(["method", "name"], sort=False):
        row = rows.iloc[0]
        budgets = ", ".join(money(float(b), unit) for b in rows["for_budget"])
        metric = str(row.get("metric", "value"))
        where = (saved or {}).get((method, name))
        lines.append(
            f"{method} ({name}), best within budget{'s' if len(rows) > 1 else ''} {budgets}: "
            f"{plain_words(row, cmp, unit, noun)}; selected on {_selection(cmp, noun)} "
            f"({metric} {shown(float(row['value']), metric)} at {money(float(row['mean_cost']), unit)} "
            f"per {noun})" + (f"; saved as `{where}`" if where else "")
        )
    return lines


def _selection(cmp: Comparison, noun: str) -> str:
    """``"5-fold cross-validation of 212 patients"`` (rows, for the generic noun)."""
    return cmp.selection if noun == "example" else cmp.selection.replace("rows", f"{noun}s")


def left_off(cmp: Comparison) -> pd.DataFrame:
    """The degenerate models (see :func:`~thrifty.comparison.selection.degenerate`) the front
    would otherwise hold, with the ``reason`` each is left off."""
    table = cmp.table
    if not len(table):
        return table.assign(reason=pd.Series(dtype=object))
    reasons = degenerate(table, _majority(cmp))
    full = table["folds"] == table["folds"].max() if "folds" in table.columns else True
    candidates = pareto_front(table[full])
    out = candidates[(reasons[candidates.index] != "") & ~candidates.index.isin(cmp.front.index)]
    return out.assign(reason=reasons[out.index])


def _majority(cmp: Comparison) -> float | None:
    counts = cmp.class_counts.get("selection") if cmp.class_counts else None
    return max(counts.values()) / sum(counts.values()) if counts else None


def headline(cmp: Comparison) -> list[str]:
    """What ran and where its figures come from, in a few lines."""
    stopped = " (the time allowance cut some methods short)" if cmp.stopped_early else ""
    lines = [
        f"{len(cmp.table)} models from {cmp.table['method'].nunique()} methods in "
        f"{cmp.seconds:.1f} s{stopped}; {len(cmp.front)} on the Pareto front, chosen on "
        f"{cmp.selection} and confirmed once on {cmp.n_test:,} test rows"
    ]
    if cmp.class_counts:
        lines.append(
            "class counts: "
            + "; ".join(
                f"{part} rows " + ", ".join(f"{k}: {v:,}" for k, v in counts.items())
                for part, counts in cmp.class_counts.items()
            )
        )
    off = left_off(cmp)
    if len(off):
        lines.append(
            f"{len(off)} degenerate model(s) left off the front (a single class, constant "
            "scores or below the majority class; listed apart with the reason)"
        )
    return lines


def markdown_report(
    cmp: Comparison,
    rec: pd.DataFrame,
    saved: dict[tuple[str, str], str],
    *,
    cost_unit: str | None = None,
    title: str = "thrifty compare",
) -> str:
    metric = cmp.table["metric"].iloc[0] if len(cmp.table) else "value"
    costs = ("mean_cost", "median_cost", "q90_cost", "test_mean_cost")
    fmt: dict[str, Any] = {c: (lambda x: money(float(x), cost_unit)) for c in costs}
    fmt.update(
        mean_trees="{:,.1f}".format,
        mean_features="{:,.2f}".format,
        fit_seconds="{:,.2f}".format,
        single_class="{:.0%}".format,
    )
    for c in ("value", "test_value", "test_low", "test_high"):
        fmt[c] = lambda x: shown(float(x), metric)
    for c in ("balanced_accuracy", "auc"):
        fmt[c] = fmt[f"test_{c}"] = lambda x: shown(float(x), "auc")
    lines = [
        f"# {title}",
        "",
        *[f"{line}." for line in headline(cmp)],
        "",
        f"Task: {cmp.task}; metric: {metric} (higher is better). Columns without `test_` are "
        f"measured on the validation rows ({cmp.selection}; under cross-validation, the mean "
        "over the folds of each setting refitted per fold): the front and the recommendations "
        "are chosen on them. Columns with `test_` are the chosen models, fitted on every row "
        f"but the {cmp.n_test:,} test rows, scored once on those; `test_low`/`test_high` is a "
        "95% interval (Wilson's for accuracy, a bootstrap over rows or queries otherwise). "
        "Every cost is the mean per example measured by thrifty's runtime.",
        "",
        f"The plain LightGBM model costs {money(cmp.full_cost, cost_unit)} per example on the "
        "calibration rows; budgets: " + ", ".join(money(b, cost_unit) for b in cmp.budgets) + ".",
        "",
        "## Recommendations",
        "",
    ]
    if len(rec):
        lines += [f"- {line}" for line in recommendations(cmp, rec, cost_unit, saved)]
    else:
        lines.append("- no model fits the budgets")
    lines += [
        "",
        "## Pareto front",
        "",
        "No other model is cheaper on average and at least as good (validation figures):",
        "",
        markdown_table(_columns(cmp.front), fmt),
        "",
    ]
    off = left_off(cmp)
    if len(off):
        lines += [
            "## Left off the front",
            "",
            "Cheap because they look at (almost) nothing, these would otherwise be on the front:",
            "",
            markdown_table(_columns(off, ["reason"]), fmt),
            "",
        ]
    lines += [
        "## Every model",
        "",
        markdown_table(_columns(cmp.table, ["parameters"]), fmt),
        "",
    ]
    if cmp.skipped:
        lines += ["## Skipped", ""] + [f"- {m} {n}: {why}" for m, n, why in cmp.skipped] + [""]
    lines += ["![frontier](frontier.png)", ""]
    return "\n".join(lines)


def _columns(df: pd.DataFrame, extra: list[str] | None = None) -> pd.DataFrame:
    return df[[c for c in COLUMNS + (extra or []) if c in df.columns]]


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
