"""The markdown report of a :class:`~thrifty.comparison.Comparison`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from thrifty.comparison.compare import Comparison

COLUMNS = ["method", "name", "mean_cost", "median_cost", "q90_cost", "mean_trees", "mean_features",
           "value", "fit_seconds"]


def money(x: float, unit: str | None) -> str:
    return f"{unit}{x:,.2f}" if unit else f"{x:,.4g}"


def answer(row: pd.Series, unit: str | None = None) -> str:
    """One sentence: "for X per example you get Y <metric> with <method> (<name>)"."""
    value = float(row["value"])
    shown = f"{value:.1%}" if row.get("metric") in ("accuracy", "auc") or str(row.get("metric", "")
                                                                               ).startswith("precision") \
        else f"{value:.4g}"
    return (f"for {money(float(row['mean_cost']), unit)} per example (budget "
            f"{money(float(row['for_budget']), unit)}) you get {shown} {row.get('metric', 'value')} "
            f"with {row['method']} ({row['name']})")


def markdown_report(cmp: Comparison, rec: pd.DataFrame, saved: dict[tuple[str, str], str], *,
                    cost_unit: str | None = None, title: str = "thrifty compare") -> str:
    metric = cmp.table["metric"].iloc[0] if len(cmp.table) else "value"
    fmt = {c: (lambda x: money(float(x), cost_unit)) for c in ("mean_cost", "median_cost", "q90_cost")}
    fmt.update(mean_trees="{:.1f}".format, mean_features="{:.2f}".format, value="{:.4f}".format,
               fit_seconds="{:.2f}".format)
    lines = [f"# {title}", "",
             f"Task: {cmp.task}; metric: test {metric} (higher is better); every cost is the mean "
             "per test example measured by thrifty's runtime.",
             f"The plain LightGBM model costs {money(cmp.full_cost, cost_unit)} per example on the "
             "calibration split; budgets: " + ", ".join(money(b, cost_unit) for b in cmp.budgets) + ".",
             f"{len(cmp.table)} models from {cmp.table['method'].nunique()} methods in "
             f"{cmp.seconds:.1f} s" + (" (stopped early at the time limit)." if cmp.stopped_early else "."),
             "", "## Recommendations", ""]
    if len(rec):
        for _, row in rec.iterrows():
            where = saved.get((row["method"], row["name"]))
            lines.append(f"- {answer(row, cost_unit)}" + (f"; saved as `{where}`" if where else ""))
    else:
        lines.append("- no model fits the budgets")
    lines += ["", "## Pareto front", "", "No other model is cheaper on average and at least as good:",
              "", _markdown(cmp.front[[c for c in COLUMNS if c in cmp.front.columns]], fmt), "",
              "## Every model", "", _markdown(cmp.table[[c for c in COLUMNS + ["parameters"]
                                                         if c in cmp.table.columns]], fmt), ""]
    if cmp.skipped:
        lines += ["## Skipped", ""] + [f"- {m} {n}: {why}" for m, n, why in cmp.skipped] + [""]
    lines += ["![frontier](frontier.png)", ""]
    return "\n".join(lines)


def _markdown(df: pd.DataFrame, fmt: dict[str, Any]) -> str:
    header = "| " + " | ".join(str(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(fmt[c](v) if c in fmt and pd.notna(v) else str(v)
                              for c, v in row.items()) + " |" for _, row in df.iterrows()]
    return "\n".join([header, rule, *body])
