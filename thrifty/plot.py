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
    higher_is_better: bool = True,
    cost_unit: str | None = None,
    value_label: str | None = None,
    annotate: str | None = None,
    front: pd.DataFrame | None = None,
) -> Axes:
    """Plot cost against quality, one series per method, with the Pareto front highlighted.

    Each method's points are joined in order of cost (ties by value), drawn faded; the front
    is drawn boldly over them.

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
    higher_is_better : bool, default=True
        Orientation of ``value`` for the front (False for a loss).
    cost_unit : str, optional
        Unit of cost shown in the x-axis label (e.g. ``"$"``).
    value_label : str, optional
        y-axis label (default: the tables' ``metric`` column when it holds one name).
    annotate : str, optional
        A column whose value labels each point of the front (e.g. ``"name"``).
    front : DataFrame, optional
        The front to draw (default: the Pareto front of all the series' points), e.g. one
        that leaves out single-class models.

    Returns
    -------
    matplotlib Axes
        Series are in ``ax.lines``, in order, the front (if drawn) last.
    """
    import matplotlib

    series = _series(tables)
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 4.5))
    # Past ten series the default colour cycle repeats: take tab20's colours and vary markers.
    many = len(series) > 10
    colours = [matplotlib.colormaps["tab20"](i % 20) for i in range(len(series))] if many else None
    for i, (label, table) in enumerate(series.items()):
        _check_columns(table, (cost, value))
        # Joined in order of cost, ties by value, so a line never doubles back.
        t = table.sort_values([cost, value], kind="stable")
        # A lone point (a baseline) gets a large marker so the lines do not hide it.
        single = len(t) == 1
        style: dict[str, Any] = {"color": colours[i]} if colours is not None else {}
        ax.plot(
            t[cost].to_numpy(float),
            t[value].to_numpy(float),
            marker="*" if single else "os^vD<>"[i % 7 if many else 0],
            markersize=10 if single else 4,
            linewidth=1.0,
            alpha=0.4,
            label=label,
            zorder=2,
            **style,
        )
    if pareto and series:
        if front is None:
            front = pareto_front(
                pd.concat(list(series.values()), ignore_index=True),
                cost=cost,
                value=value,
                higher_is_better=higher_is_better,
            )
        front = front.sort_values([cost, value], kind="stable")
        ax.step(
            front[cost].to_numpy(float),
            front[value].to_numpy(float),
            where="post",
            color="black",
            linewidth=2.5,
            marker="o",
            markersize=7,
            markerfacecolor="gold",
            label="Pareto front",
            zorder=5,
        )
        if annotate is not None:
            for _, row in front.iterrows():
                ax.annotate(
                    str(row[annotate]),
                    (float(row[cost]), float(row[value])),
                    textcoords="offset points",
                    xytext=(4, -10),
                    fontsize=7,
                )
    unit = f" ({cost_unit})" if cost_unit else ""
    ax.set_xlabel(f"{cost.replace('_', ' ')} per example{unit}")
    ax.set_ylabel(value_label or _metric_name(series.values()) or value)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7 if many else 8, ncol=2 if len(series) > 12 else 1)
    return ax


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
