"""What :func:`thrifty.compare` returns: the :class:`Comparison` of every method's candidates,
chosen on validation rows and confirmed on test rows, with its report, plot and files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thrifty.comparison.numbers import IN_TARGET_UNITS, display, money, shown
from thrifty.comparison.report import _queries, headline, markdown_report, recommendations
from thrifty.comparison.selection import baseline_row, choose
from thrifty.costs import CostModel
from thrifty.frontier import metric_direction
from thrifty.io import save
from thrifty.plot import plot_frontier

__all__ = ["Comparison"]

#: Budgets (fractions of the plain LightGBM model's mean cost on the calibration rows) the
#: report recommends a model for.
RECOMMEND_FRACTIONS = (0.1, 0.25, 0.5, 1.0)


@dataclass
class Comparison:
    """What :func:`thrifty.compare` measured: chosen on validation rows, confirmed on test rows.

    Attributes
    ----------
    table : DataFrame
        One row per candidate (a method and a setting): ``method``, ``family``, ``name``,
        ``parameters``; the cost columns of :func:`thrifty.frontier.frontier` (mean, median,
        90% quantile and max cost per example, mean trees and features); ``metric``, the
        task's primary metric (``thrifty.metrics.TASK_METRICS``): ``accuracy``, ``rmse`` in
        the target's units (lower is better) or ``ndcg@10`` (per query, averaged over
        queries), and ``value``, its figure; the task's other metrics by name:
        ``balanced_accuracy`` and ``auc`` (classification), ``mae`` (target units) and ``r2``
        (regression), ``precision@5`` (ranking); ``single_class`` (classification) or
        ``constant`` (regression, ranking): the share of folds where it gave every row one
        label, one prediction, or every query's documents one score. All are measured on the
        validation rows (the mean over the folds under cross-validation); then ``folds``,
        ``fit_seconds``; for the models on the front and the plain model, the same figures
        on the test rows (``test_value``, ``test_low``, ``test_high`` - its 95% interval -,
        ``test_mean_cost``, ``test_mae`` with ``test_mae_low`` and ``test_mae_high``...,
        ``test_rows``, and ``test_queries`` for ranking); then one column per parameter any
        method reported.
    front : DataFrame
        The rows no other row dominates on the validation figures (cheaper on average and at
        least as good: a higher ``value``, or a lower one for RMSE), by cost, degenerate
        models left out unless the plain model is no better; with their test figures.
    models : dict of (method, name) to model
        The models of the front and the plain model, fitted on every row but the test rows.
    task : str
    full_cost : float
        Mean cost of the plain LightGBM model on the calibration rows (budgets are fractions
        of it).
    budgets : list of float
    skipped : list of (method, name, reason)
        Every method or setting missing from the table, and why: a budget a method cannot
        meet, or the time allowance's cut (``cut``, included here).
    cut : list of (method, setting, what)
        What the time allowance (``time_limit``) left out: methods not run (``setting`` ""),
        settings fitted on some folds only, settings not fitted, chosen models not refitted.
        Empty without an allowance: the planned work then runs in full.
    stopped_early : bool
        The time allowance cut some method's candidates short (``cut`` is not empty).
    seconds : float
    timings : dict of str to float
        Where the seconds went: ``"final fit"`` (the plain model of every row but the test
        rows, before the selection), ``"selection"``, ``"refit"`` (cross-validation) and
        ``"confirmation"`` (scoring the chosen models on the test rows).
    task_seconds : dict of str to list of float
        Where the selection's seconds went: per method, its fit task's wall-clock seconds on
        each fold (``plan.task_seconds_of``; 0 where the allowance left it unstarted).
    costs : CostModel
    baseline : Forest
        The plain model the post-hoc methods start from: compare's LightGBM fit, or the
        user's own model (``compare(model=...)``).
    n_calibration : int
        Rows held out of the final fit to calibrate budgets and exits.
    selection : str
        Where the choice was made, e.g. ``"5-fold cross-validation of 212 rows"``.
    n_test : int
    class_counts : dict
        ``{"selection": {label: rows}, "test": {label: rows}}`` (classification).
    baseline_value : float or None
        The plain model's validation figure.
    user_model : str or None
        What the report calls the user's own model when it is the plain model
        (``compare(model=...)``), e.g. "your LightGBM model (200 trees, from model.txt)".
    warnings : list of str
        Features whose test values the training rows never have (values outside their range,
        new categories), one line each (``thrifty.comparison.inputs.out_of_range``).
    validation_units : dict of int to array
        Each candidate's validation scores per row (per query for ranking), the folds one
        after the other, by the index of its row in ``table``
        (:func:`~thrifty.comparison.selection.validation_units`): whether each row was right,
        its squared error, each query's NDCG@10. :meth:`recommend` compares candidates pair by
        pair on them. Under a time split of a classification, each row's weight when it was
        right, 0 when not (:func:`~thrifty.comparison.selection.reweigh`).
    """

    table: pd.DataFrame
    front: pd.DataFrame
    models: dict[tuple[str, str], Any]
    task: str
    full_cost: float
    budgets: list[float]
    skipped: list[tuple[str, str, str]] = field(default_factory=list)
    cut: list[tuple[str, str, str]] = field(default_factory=list)
    stopped_early: bool = False
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    task_seconds: dict[str, list[float]] = field(default_factory=dict)
    costs: CostModel | None = None
    baseline: Any = None
    n_calibration: int = 0
    selection: str = ""
    n_test: int = 0
    class_counts: dict[str, dict[Any, int]] = field(default_factory=dict)
    baseline_value: float | None = None
    user_model: str | None = None
    warnings: list[str] = field(default_factory=list)
    validation_units: dict[Any, np.ndarray] = field(default_factory=dict, repr=False)

    def validation_scores(self) -> dict[tuple[str, str], np.ndarray]:
        """:attr:`validation_units` by ``(method, name)``, the keys of :attr:`models`."""
        return {
            (self.table.at[i, "method"], self.table.at[i, "name"]): u
            for i, u in self.validation_units.items()
            if i in self.table.index
        }

    def recommend(self, budgets: Sequence[float] | None = None) -> pd.DataFrame:
        """The model on the front to offer within each budget, chosen on the validation rows
        (:func:`~thrifty.comparison.selection.choose`): the best validation figure, unless an
        exact plan (the plain model, or a plan fitted to keep its decisions) is within the
        validation noise of it - the best's lead over it, paired on the same validation rows,
        has a 95% interval containing 0 - and then the exact plan.

        Parameters
        ----------
        budgets : sequence of float, optional
            Mean costs per example. Default: 10%, 25%, 50% and 100% of the plain LightGBM
            model's mean cost.

        Returns
        -------
        DataFrame
            ``for_budget``, then the chosen front row (validation and test figures) whose
            validation mean cost is within it (no row when nothing is); where an exact plan
            was preferred, ``preferred_to`` (the best on validation) and ``validation_lead``
            with ``validation_lead_low`` and ``validation_lead_high`` (its lead and the 95%
            interval of it).
        """
        if budgets is None:
            budgets = [f * self.full_cost for f in RECOMMEND_FRACTIONS]
        units = self.validation_scores()
        rows = []
        for b in budgets:
            within = self.front[self.front["mean_cost"] <= b + 1e-12]
            if len(within):
                chosen, note = choose(within, units)
                # The table's own "budget" column (what a method was asked for) stays as it is.
                rows.append({"for_budget": float(b), **within.loc[chosen].to_dict(), **note})
        return pd.DataFrame(rows)

    def model(self, method: str, name: str) -> Any:
        """The model of a row of the front (or of the plain model)."""
        return self.models[method, name]

    def plot(self, ax: Any = None, *, cost_unit: str | None = None, target_unit: str | None = None) -> Any:
        """Every method's candidates joined by cost, the front drawn boldly (see ``thrifty.plot``);
        the value axis names the metric, its unit (``target_unit`` for a regression's RMSE) and
        its direction."""
        metric = str(self.table["metric"].iloc[0]) if len(self.table) else "value"
        up = metric_direction(self.table)
        label = None
        if len(self.table):
            unit = f" ({target_unit})" if target_unit and metric in IN_TARGET_UNITS else ""
            better = (
                "" if self.task in ("binary", "multiclass") else f", {'higher' if up else 'lower'} is better"
            )
            label = f"{display(metric)}{unit}{better} ({self.selection})"
        ax = plot_frontier(
            self.table,
            ax=ax,
            cost_unit=cost_unit,
            value_label=label,
            front=self.front,
            baseline=baseline_row(self.table),
            higher_is_better=up,
        )
        done = self.front[self.front["test_value"].notna()] if "test_value" in self.front else self.front[:0]
        if len(done):
            queries = f" ({_queries(self):,} queries)" if _queries(self) else ""
            # The front's models as confirmed on the test rows, at their test cost.
            value = done["test_value"].to_numpy(float)
            ax.errorbar(
                done["test_mean_cost"].to_numpy(float),
                value,
                yerr=[value - done["test_low"].to_numpy(float), done["test_high"].to_numpy(float) - value],
                fmt="D",
                color="tab:red",
                markersize=4,
                elinewidth=0.8,
                capsize=2,
                alpha=0.8,
                zorder=6,
                label=f"front confirmed on {self.n_test:,} test rows{queries} (95% interval)",
            )
            ax.legend(fontsize=7, ncol=2 if self.table["method"].nunique() > 12 else 1)
        costs = self.table["mean_cost"].to_numpy(float) if len(self.table) else np.zeros(0)
        if len(costs) and costs.max() > 20 * max(costs[costs > 0].min(initial=np.inf), 1e-12):
            ax.set_xscale("symlog", linthresh=float(costs[costs > 0].min(initial=1.0)))
        if self.task in ("regression", "ranking"):
            # The report's own formats on the axes: never 1e4 or an offset above the axis.
            from matplotlib.ticker import FuncFormatter

            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: _tick(shown(v, metric, target_unit))))
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _tick(money(v, None))))
        return ax

    def write(
        self,
        out: str | Path,
        *,
        cost_unit: str | None = None,
        title: str = "thrifty compare",
        target_unit: str | None = None,
        noun: str = "example",
    ) -> list[Path]:
        """Write ``table.csv``, ``front.csv``, ``frontier.png``, ``report.md`` and the
        recommended models as JSON (``models/``) to the folder ``out``.

        Parameters
        ----------
        out : str or Path
        cost_unit : str, optional
            Unit of the costs (``"$"``: ``$1,234.50``).
        title : str, default="thrifty compare"
        target_unit : str, optional
            Unit of a regression's target, for its RMSE and MAE (``"$"``: ``$612``).
        noun : str, default="example"
            What a row is, in the sentences (``"diamond"``: "confirmed on 10,788 test
            diamonds"; a ranking's rows are documents and its figures per query).
        """
        from matplotlib.figure import Figure  # matplotlib (0.3 s) loads only when a figure is drawn

        out = Path(out)
        (out / "models").mkdir(parents=True, exist_ok=True)
        self.table.to_csv(out / "table.csv", index=False)
        self.front.to_csv(out / "front.csv", index=False)
        fig = Figure(figsize=(9, 5.5), layout="constrained")
        ax = self.plot(fig.add_subplot(), cost_unit=cost_unit, target_unit=target_unit)
        ax.set_title(title)
        fig.savefig(out / "frontier.png", dpi=120)
        files = [out / "table.csv", out / "front.csv", out / "frontier.png"]
        rec = self.recommend()
        saved: dict[tuple[str, str], str] = {}
        for _, row in rec.iterrows():
            key = (row["method"], row["name"])
            if key not in saved and key in self.models:
                path = out / "models" / f"{_slug(key[0])}__{_slug(key[1])}.json"
                save(self.models[key], path)
                saved[key] = str(path.relative_to(out))
                files.append(path)
        (out / "report.md").write_text(
            markdown_report(
                self, rec, saved, cost_unit=cost_unit, title=title, target_unit=target_unit, noun=noun
            )
        )
        files.append(out / "report.md")
        return files

    def summary(
        self, cost_unit: str | None = None, *, target_unit: str | None = None, noun: str = "example"
    ) -> str:
        """A few lines for the terminal (units and noun as in :meth:`write`)."""
        lines = headline(self)
        lines += recommendations(self, self.recommend(), cost_unit, noun=noun, target_unit=target_unit)
        return "\n".join(lines)


def _tick(text: str) -> str:
    """An axis tick without the zeros that end its decimals (``0.0000400`` -> ``0.00004``)."""
    number = text.rstrip(" " + "".join(c for c in text if c.isalpha()))
    if "." not in number:
        return text
    return text.replace(number, number.rstrip("0").rstrip("."), 1)


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-." else "_" for c in text).strip("_")
