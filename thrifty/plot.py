"""Plots of cost–accuracy frontiers, per-example costs and feature acquisition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from thrifty.costs import CostModel, CostReport
from thrifty.frontier import pareto_front

# matplotlib (0.3 s, and pyplot picks a GUI backend) is imported by the functions that draw, so that
# importing thrifty's estimators and `thrifty --help` never load it.
if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_cost_histogram", "plot_feature_acquisition", "plot_frontier", "plot_trees_histogram"]


def plot_frontier(
    tables: pd.DataFrame | Mapping[str, pd.DataFrame],
    *,
    ax: Axes | None = None,
    cost: str = "mean_cost",
    value: str = "value",
    pareto: bool = True,
    higher_is_better: bool | None = None,
    cost_unit: str | None = None,
    value_label: str | None = None,
    annotate: str | None = None,
    front: pd.DataFrame | None = None,
    baseline: Any = None,
    baseline_label: str = "plain model",
) -> Axes:
    """Plot cost against quality, one series per method, with the Pareto front highlighted.

    Each method has its own colour and its own marker (no two methods share both, and
    neighbours in the legend differ in both); its points are joined in order of cost (ties
    by value), drawn faded. The front is a black step line over them, each of its points in
    its method's marker and colour, drawn large. The plain model, when given, is a large
    white star, labelled.

    Parameters
    ----------
    tables : DataFrame or mapping of str to DataFrame
        Frontier tables (see :func:`thrifty.frontier.frontier`). A mapping gives one series per
        key; a single table gives one series per value of its ``method`` column if it has
        one, else a single series.
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure from ``matplotlib.pyplot``).
    cost, value : str
        Columns for the x axis and the y axis.
    pareto : bool, default=True
        Draw the front of non-dominated points over all series.
    higher_is_better : bool, optional
        Orientation of ``value`` for the front (False for an error or a loss). Default: from
        the tables' ``metric`` column (lower is better for ``rmse``, ``mae``, ``log_loss``).
    cost_unit : str, optional
        Unit of cost shown in the x-axis label (e.g. ``"$"``).
    value_label : str, optional
        y-axis label (default: the tables' ``metric`` column when it holds one name).
    annotate : str, optional
        A column whose value labels each point of the front (e.g. ``"name"``).
    front : DataFrame, optional
        The front to draw (default: the Pareto front of all the series' points), e.g. one
        that leaves out single-class models.
    baseline : index label of ``tables``, or Series or mapping with ``cost`` and ``value``, optional
        The plain model (e.g. :func:`thrifty.comparison.selection.baseline_row` of a
        comparison's table), marked and labelled.
    baseline_label : str, default="plain model"

    Returns
    -------
    matplotlib Axes
        Series are in ``ax.lines``, in order, then the front's line (if drawn).
    """
    series = _series(tables)
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 4.5))
    styles = {label: _style(i) for i, label in enumerate(series)}
    for label, table in series.items():
        _check_columns(table, (cost, value))
        # Joined in order of cost, ties by value, so a line never doubles back.
        t = table.sort_values([cost, value], kind="stable")
        ax.plot(
            t[cost].to_numpy(float),
            t[value].to_numpy(float),
            # A lone point (a method with one model) gets a larger marker so lines do not hide it.
            markersize=7 if len(t) == 1 else 4,
            linewidth=1.0,
            alpha=0.45,
            label=label,
            zorder=2,
            **styles[label],
        )
    if pareto and series:
        if front is None:
            front = pareto_front(
                pd.concat([t.assign(_series=k) for k, t in series.items()], ignore_index=True),
                cost=cost,
                value=value,
                higher_is_better=higher_is_better,
            )
        _draw_front(ax, front.sort_values([cost, value], kind="stable"), styles, cost, value, annotate)
    if baseline is not None:
        _draw_baseline(ax, tables, baseline, baseline_label, cost, value, cost_unit)
    unit = f" ({cost_unit})" if cost_unit else ""
    ax.set_xlabel(f"{cost.replace('_', ' ')} per example{unit}")
    ax.set_ylabel(value_label or _metric_name(series.values()) or value)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7 if len(series) > 10 else 8, ncol=2 if len(series) > 12 else 1)
    return ax


#: Colours of the series: tab10's, told apart at a glance (tab20 pairs a dark and a light shade
#: of each, which readers confuse), but red, which marks the test rows' figures in a comparison.
COLOURS = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)
#: Markers of the series: eleven, prime to the nine colours, so that two series share both a
#: colour and a marker only 99 series apart.
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", "p", ">", "h")


def _style(i: int) -> dict[str, Any]:
    return {"color": COLOURS[i % len(COLOURS)], "marker": MARKERS[i % len(MARKERS)]}


def _draw_front(
    ax: Axes,
    front: pd.DataFrame,
    styles: dict[str, dict[str, Any]],
    cost: str,
    value: str,
    annotate: str | None,
) -> None:
    """The front: a black step line, each point in its method's colour and marker."""
    ax.step(
        front[cost].to_numpy(float),
        front[value].to_numpy(float),
        where="post",
        color="black",
        linewidth=1.8,
        label="Pareto front",
        zorder=4,
    )
    key = "method" if "method" in front.columns else "_series" if "_series" in front.columns else None
    for _, row in front.iterrows():
        style = styles.get(str(row[key]), {}) if key else {}
        # Points as scatter collections: ax.lines keeps one line per series, then the front.
        ax.scatter(
            [float(row[cost])],
            [float(row[value])],
            s=100,
            c=style.get("color", "gold"),
            marker=style.get("marker", "o"),
            edgecolors="black",
            linewidths=1.2,
            zorder=5,
        )
        if annotate is not None:
            ax.annotate(
                str(row[annotate]),
                (float(row[cost]), float(row[value])),
                textcoords="offset points",
                xytext=(4, -10),
                fontsize=7,
            )


def _draw_baseline(
    ax: Axes, tables: Any, baseline: Any, label: str, cost: str, value: str, cost_unit: str | None
) -> None:
    """The plain model: a large white star, labelled with its figures."""
    row = baseline if isinstance(baseline, Mapping | pd.Series) else tables.loc[baseline]
    x, y = float(row[cost]), float(row[value])
    ax.scatter(
        [x], [y], s=320, c="white", marker="*", edgecolors="black", linewidths=1.2, label=label, zorder=6
    )
    ax.annotate(
        f"{label}\n{cost_unit or ''}{x:,.2f}",
        (x, y),
        textcoords="offset points",
        xytext=(0, 12),
        ha="center",
        fontsize=8,
        fontweight="bold",
    )


def plot_cost_histogram(
    report: Any, *, ax: Axes | None = None, bins: int | Sequence[float] = 30, cost_unit: str | None = None
) -> Axes:
    """Histogram of the total cost paid by each example, with its mean and median marked.

    Parameters
    ----------
    report : CostReport or Evaluation
    ax : matplotlib Axes, optional
    bins : int or sequence of float, default=30
    cost_unit : str, optional
        Unit shown in the x-axis label.

    Returns
    -------
    matplotlib Axes
    """
    report = _report(report)
    ax = _axes(ax)
    ax.hist(report.total, bins=bins, color="tab:blue", alpha=0.8)
    if report.n_examples:
        ax.axvline(report.mean, color="black", linestyle="--", label=f"mean {report.mean:.4g}")
        median = report.quantiles((0.5,))[0.5]
        ax.axvline(median, color="tab:orange", linestyle=":", label=f"median {median:.4g}")
        ax.legend(fontsize=8)
    unit = f" ({cost_unit})" if cost_unit else ""
    ax.set_xlabel(f"total cost per example{unit}")
    ax.set_ylabel("examples")
    return ax


def plot_trees_histogram(report: Any, *, ax: Axes | None = None) -> Axes:
    """Histogram of the number of trees evaluated per example (one bin per count).

    Parameters
    ----------
    report : CostReport or Evaluation
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib Axes
    """
    report = _report(report)
    ax = _axes(ax)
    top = int(report.n_trees.max()) if report.n_examples else 0
    # Integer-centred bins so a plan that always evaluates T trees shows one bar at T.
    ax.hist(report.n_trees, bins=np.arange(-0.5, top + 1.5).tolist(), color="tab:green", alpha=0.8)
    ax.set_xlabel("trees evaluated per example")
    ax.set_ylabel("examples")
    return ax


def plot_feature_acquisition(
    report: Any, *, ax: Axes | None = None, costs: CostModel | None = None, sort: bool = True
) -> Axes:
    """Bar chart of the fraction of examples that acquired each feature.

    Parameters
    ----------
    report : CostReport or Evaluation
    ax : matplotlib Axes, optional
    costs : CostModel, optional
        When given, each feature's label shows its price.
    sort : bool, default=True
        Most acquired features first.

    Returns
    -------
    matplotlib Axes
    """
    report = _report(report)
    ax = _axes(ax)
    rate = report.acquisition_rate()
    names = report.feature_names or [f"f{i}" for i in range(len(rate))]
    labels = list(names)
    if costs is not None:
        labels = [f"{n} ({c:g})" for n, c in zip(names, costs.feature_costs)]
    order = np.argsort(-rate, kind="stable") if sort else np.arange(len(rate))
    # Reversed so the first feature is drawn at the top of the horizontal bar chart.
    positions = np.arange(len(order))[::-1]
    ax.barh(positions, rate[order], color="tab:purple", alpha=0.8)
    ax.set_yticks(positions, [labels[i] for i in order], fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("fraction of examples that acquired the feature")
    return ax


def _series(tables: Any) -> dict[str, pd.DataFrame]:
    if isinstance(tables, Mapping):
        return {str(k): v for k, v in tables.items()}
    if hasattr(tables, "columns"):
        if "method" in tables.columns:
            return {str(k): g for k, g in tables.groupby("method", sort=False)}
        return {"model": tables}
    raise TypeError(
        f"plot_frontier needs a DataFrame or a mapping name -> DataFrame, got {type(tables).__name__}"
    )


def _check_columns(table: pd.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise KeyError(
            f"the frontier table has no column(s) {missing}; its columns are {list(table.columns)}"
        )


def _metric_name(tables: Any) -> str | None:
    names = {str(n) for t in tables if "metric" in t.columns for n in t["metric"].dropna().unique()}
    return names.pop() if len(names) == 1 else None


def _report(report: Any) -> CostReport:
    # An Evaluation carries its CostReport; accepting both saves callers an attribute access.
    report = getattr(report, "cost", report)
    if not isinstance(report, CostReport):
        raise TypeError(f"expected a CostReport or an Evaluation, got {type(report).__name__}")
    return report


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(6, 4))[1]
