"""The sentences and the markdown report of a :class:`~thrifty.comparison.Comparison`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

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
    """A cost: to the cent after ``unit`` (``"$1,234.50"``), else with four significant digits."""
    return f"{unit}{x:,.2f}" if unit else f"{x:,.4g}"


def cost_unit(meta: Mapping[str, Any] | None) -> str | None:
    """The unit :func:`money` writes a dataset's costs in: ``"$"`` when its ``meta`` prices
    them in dollars, else None (plain numbers)."""
    return "$" if "dollar" in str((meta or {}).get("cost_unit", "")).lower() else None


def shown(value: float, metric: str) -> str:
    """A metric value as a percentage (accuracy-like) or with four significant digits."""
    if pd.isna(value):
        return "n/a"
    return f"{value:.1%}" if metric in PROPORTIONS or metric.startswith("precision") else f"{value:.4g}"


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
    if "single_class" in cmp.table.columns:
        flat = int((cmp.table["single_class"].fillna(0) >= 0.5).sum())
        if flat:
            lines.append(
                f"{flat} model(s) predict a single class (flagged single_class; never "
                "recommended unless the plain model is no better)"
            )
    return lines


def answer(row: pd.Series, cmp: Comparison, unit: str | None = None) -> str:
    """One sentence: the model for a budget, its figures where selected and where confirmed."""
    metric = str(row.get("metric", "value"))
    extra = []
    for c, label in (("balanced_accuracy", "balanced"), ("auc", "AUC")):
        if c in row and pd.notna(row[c]):
            extra.append(f"{label} {shown(float(row[c]), c)}")
    text = (
        f"for {money(float(row['mean_cost']), unit)} per example (budget "
        f"{money(float(row['for_budget']), unit)}): {row['method']} ({row['name']}), "
        f"{metric} {shown(float(row['value']), metric)}"
        + (f" ({', '.join(extra)})" if extra else "")
        + f" selected on {cmp.selection}; "
    )
    if pd.notna(row.get("test_value")):
        text += (
            f"confirmed on {int(row['test_rows']):,} test rows: "
            f"{shown(float(row['test_value']), metric)} [{shown(float(row['test_low']), metric)}, "
            f"{shown(float(row['test_high']), metric)}] at "
            f"{money(float(row['test_mean_cost']), unit)} per example"
        )
    else:
        text += "not confirmed on the test rows (the time allowance ran out before its refit)"
    return text


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
        mean_trees="{:.1f}".format,
        mean_features="{:.2f}".format,
        fit_seconds="{:.2f}".format,
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
        for _, row in rec.iterrows():
            where = saved.get((row["method"], row["name"]))
            lines.append(f"- {answer(row, cmp, cost_unit)}" + (f"; saved as `{where}`" if where else ""))
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
