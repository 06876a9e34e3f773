"""The ``thrifty demo``: cost–accuracy trade-offs on the embedded heart-disease data."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thrifty import metrics
from thrifty.datasets import load_demo
from thrifty.runtime.evaluate import Evaluation, evaluate

__all__ = ["DemoResult", "run_demo"]

# Accuracy a cheaper model may give up, relative to the baseline, to be the one the demo
# recommends: the sentence "for $X per patient you get Y accuracy" names the cheapest Pareto
# point within this margin.
TOLERANCE = 0.02

#: Seconds the demo allows ``thrifty.compare``: no new model starts after this (the whole demo
#: stays under two minutes on two cores).
TIME_LIMIT = 75.0


@dataclass
class DemoResult:
    """What the demo computed and wrote.

    Attributes
    ----------
    out : Path
        The output folder.
    dataset : thrifty.datasets.Dataset
    baseline : Evaluation
        The baseline evaluated on the test split.
    accuracy : float
        The baseline's test accuracy.
    comparison : thrifty.Comparison
        Every method's models, evaluated on the test split.
    table : DataFrame
        ``comparison.table``: every model of every method (see :func:`thrifty.compare`).
    front : DataFrame
        Its Pareto front.
    pick : pandas.Series
        The cheapest Pareto point within ``TOLERANCE`` of the baseline's accuracy.
    files : list of Path
    seconds : float
    """

    out: Path
    dataset: Any
    baseline: Evaluation
    accuracy: float
    comparison: Any
    table: pd.DataFrame
    front: pd.DataFrame
    pick: pd.Series
    files: list[Path]
    seconds: float

    def summary(self) -> str:
        """A few lines for the terminal."""
        ds, s = self.dataset, self.baseline.cost.summary()
        unit = _unit(ds)
        files = ", ".join(f.name for f in self.files)
        stopped = " (the time allowance stopped it early)" if self.comparison.stopped_early else ""
        return "\n".join([
            (f"thrifty demo: {ds.name} ({len(ds.y)} patients, {len(ds.feature_names)} features, "
             f"{self.baseline.cost.n_examples} in the test split)"),
            (f"baseline LightGBM ({BASELINE_PARAMS['n_estimators']} trees): accuracy "
             f"{self.accuracy:.1%}, cost per patient {_costs_line(s, unit)}"),
            (f"frontier: {len(self.table)} models from {self.table['method'].nunique()} methods, "
             f"{len(self.front)} on the Pareto front{stopped}"),
            "Pareto front: " + ", ".join(f"{_money(c, unit)} -> {v:.1%}" for c, v in
                                         zip(self.front["mean_cost"], self.front["value"])),
            _sentence(self.pick, self.accuracy, s["mean"], unit),
            f"wrote {files} to {self.out}/ in {self.seconds:.1f} s",
        ])


def run_demo(out: str | Path = "thrifty-demo", *, quick: bool = False, progress: bool = True,
             time_limit: float | None = TIME_LIMIT) -> DemoResult:
    """:func:`thrifty.compare` on the embedded heart data with its real dollar costs; a report.

    The baseline is a LightGBM model trained on the training split (less the rows ``compare``
    holds out to calibrate budgets and exits); every method's models are evaluated on the test
    split, and the report names the cheapest model within ``TOLERANCE`` of the baseline's
    accuracy.

    Parameters
    ----------
    out : str or Path, default="thrifty-demo"
        Folder for ``frontier.csv``, ``frontier.png``, ``cost_histogram.png``, ``report.md``,
        ``baseline.json`` and ``recommended.json`` (created if missing).
    quick : bool, default=False
        Fewer budgets and points per method (for tests).
    progress : bool, default=True
        Show a progress bar (only when stderr is a terminal).
    time_limit : float or None, default=TIME_LIMIT
        Seconds after which no further model is started.

    Returns
    -------
    DemoResult
    """
    from thrifty.comparison import compare

    start = time.perf_counter()
    out = Path(out)
    dataset = load_demo()
    X_train, y_train, _ = dataset.subset("train")
    X_test, y_test, _ = dataset.subset("test")
    cmp = compare(X_train, y_train, dataset.costs, X_test=X_test, y_test=y_test,
                  lightgbm_params=BASELINE_PARAMS, time_limit=time_limit, quick=quick,
                  progress=progress)
    baseline = evaluate(cmp.baseline, X_test, dataset.costs)
    accuracy = float(metrics.accuracy(y_test, baseline.labels))
    pick = _pick(cmp.front, accuracy)
    picked_model = cmp.model(pick["method"], pick["name"])
    picked = evaluate(picked_model, X_test, dataset.costs)
    files = _write(out, dataset, cmp, baseline, accuracy, pick, picked_model, picked)
    return DemoResult(out=out, dataset=dataset, baseline=baseline, accuracy=accuracy,
                      comparison=cmp, table=cmp.table, front=cmp.front, pick=pick, files=files,
                      seconds=time.perf_counter() - start)


# ---------------------------------------------------------------------- internals
# Chosen by 5-fold cross-validation on the training split: LightGBM's default
# min_data_per_group=100 all but forbids categorical splits on 212 patients. One thread: on
# 212 rows OpenMP synchronisation costs far more than it saves (10-50x slower on a busy
# 2-core machine).
BASELINE_PARAMS = {"n_estimators": 100, "num_leaves": 8, "learning_rate": 0.05,
                   "min_child_samples": 20, "min_data_per_group": 10, "cat_smooth": 1.0,
                   "random_state": 0, "deterministic": True, "force_row_wise": True,
                   "n_jobs": 1, "verbose": -1}


def _pick(front: pd.DataFrame, accuracy: float) -> pd.Series:
    good = front[front["value"] >= accuracy - TOLERANCE]
    return (good if len(good) else front.iloc[::-1]).iloc[0]


def _unit(ds: Any) -> str:
    unit = str((ds.meta or {}).get("cost_unit", ""))
    return "$" if "dollar" in unit.lower() else ""


def _money(x: float, unit: str) -> str:
    return f"{unit}{x:,.2f}" if unit else f"{x:,.4g}"


def _costs_line(s: dict[str, float], unit: str) -> str:
    return (f"mean {_money(s['mean'], unit)}, median {_money(s['median'], unit)}, "
            f"90% {_money(s['q90'], unit)}, max {_money(s['max'], unit)}")


def _sentence(pick: pd.Series, accuracy: float, baseline_cost: float, unit: str) -> str:
    cost = float(pick["mean_cost"])
    text = (f"for {_money(cost, unit)} per patient you get {pick['value']:.1%} accuracy "
            f"with {pick['method']} ({pick['name']}), against {accuracy:.1%} for "
            f"{_money(baseline_cost, unit)} with the full baseline")
    saving = 1.0 - cost / baseline_cost if baseline_cost > 0 else 0.0
    if cost > 0 and baseline_cost / cost >= 2:
        text += f" ({baseline_cost / cost:,.0f}x cheaper)"
    elif saving >= 0.01:
        text += f" ({saving:.0%} cheaper)"
    return text


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _write(out: Path, ds: Any, cmp: Any, baseline: Evaluation, accuracy: float, pick: pd.Series,
           picked_model: Any, picked: Evaluation) -> list[Path]:
    from matplotlib.figure import Figure

    from thrifty.io import save
    from thrifty.plot import plot_cost_histogram, plot_frontier

    out.mkdir(parents=True, exist_ok=True)
    unit = _unit(ds)
    cmp.table.to_csv(out / "frontier.csv", index=False)
    # Figures are built without pyplot: no display backend, no global figure registry.
    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = plot_frontier(cmp.table, ax=fig.add_subplot(), cost_unit=unit or None,
                       value_label="test accuracy")
    # Prices span orders of magnitude ($1 questions to $100 tests); symlog also admits zero.
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel(f"mean cost per patient{f' ({unit})' if unit else ''}")
    ax.set_title(f"{ds.name}: accuracy against mean cost per patient")
    fig.savefig(out / "frontier.png", dpi=120)
    fig = Figure(figsize=(10, 4), layout="constrained")
    left, right = fig.subplots(1, 2, sharex=True, sharey=True)
    # Shared bins from zero make the two panels' costs directly comparable.
    bins = np.linspace(0.0, max(baseline.cost.max, picked.cost.max, 1.0), 41)
    for ax, ev, title in ((left, baseline, "baseline"), (right, picked, f"{pick['method']}, {pick['name']}")):
        plot_cost_histogram(ev, ax=ax, cost_unit=unit or None, bins=bins)
        ax.set_xlabel(f"cost per patient{f' ({unit})' if unit else ''}")
        ax.set_title(title)
    fig.savefig(out / "cost_histogram.png", dpi=120)
    save(cmp.baseline, out / "baseline.json")
    save(picked_model, out / "recommended.json")
    (out / "report.md").write_text(_report(ds, cmp, baseline, accuracy, pick, unit))
    return [out / f for f in ("frontier.csv", "frontier.png", "cost_histogram.png", "report.md",
                              "baseline.json", "recommended.json")]


def _report(ds: Any, cmp: Any, baseline: Evaluation, accuracy: float, pick: pd.Series, unit: str) -> str:
    s = baseline.cost.summary()
    meta = ds.meta or {}
    rate = baseline.cost.acquisition_rate()
    n_test = baseline.cost.n_examples
    costs = pd.DataFrame({
        "feature": ds.feature_names,
        "cost": [_money(c, unit) for c in ds.costs.feature_costs],
        "kind": ["categorical" if _is_categorical(ds.X[f]) else "numeric" for f in ds.feature_names],
        "patients acquiring it (baseline)": [f"{r:.0%}" for r in rate],
    })
    columns = ["method", "name", "mean_cost", "median_cost", "q90_cost", "max_cost",
               "mean_trees", "mean_features", "value", "fit_seconds"]
    money = {c: (lambda x: _money(x, unit)) for c in ("mean_cost", "median_cost", "q90_cost", "max_cost")}
    fmt = {**money, "mean_trees": "{:.1f}".format, "mean_features": "{:.1f}".format,
           "value": "{:.1%}".format, "fit_seconds": "{:.2f}".format}
    methods = cmp.table.groupby("method", sort=False)
    lines = [
        f"# thrifty demo: {ds.name}",
        "",
        f"**{_capitalize(_sentence(pick, accuracy, s['mean'], unit))}.**",
        "",
        "## Data",
        "",
        f"- {meta.get('source', ds.name)}; licence: {meta.get('license', 'unknown')}",
        (f"- task: {ds.task}; {len(ds.y)} patients, {len(ds.feature_names)} features; "
         f"{len(ds.y) - n_test} for training (of which {cmp.n_calibration} "
         f"held out to calibrate budgets and exits), {n_test} for testing"),
        (f"- costs: {meta.get('cost_unit', 'per feature')}; a patient pays for a test the first "
         "time an evaluated tree asks for it"),
        "",
        "## Feature costs",
        "",
        _markdown(costs),
        "",
        "## Baseline",
        "",
        (f"LightGBM, {cmp.baseline.n_trees} trees of at most {BASELINE_PARAMS['num_leaves']} "
         "leaves, evaluated by thrifty's runtime on the test split:"),
        "",
        f"- accuracy: {accuracy:.1%}",
        f"- cost per patient: {_costs_line(s, unit)}",
        "",
        "## Methods",
        "",
        (f"`thrifty.compare` ran {methods.ngroups} methods in {cmp.seconds:.0f} s"
         + (" (the time allowance stopped it before the end)" if cmp.stopped_early else "") + ": "
         + "; ".join(f"{name} ({len(g)} models)" for name, g in methods) + "."),
        "",
        "## Pareto points",
        "",
        ("No other model is cheaper on average and at least as accurate; value is test accuracy "
         f"(one of the {n_test} test patients moves it by {1 / max(n_test, 1):.1%}):"),
        "",
        _markdown(cmp.front[columns], fmt),
        "",
        "## Every model",
        "",
        _markdown(cmp.table[columns], fmt),
        "",
        ("Files: `frontier.csv` (the table), `frontier.png`, `cost_histogram.png` (cost per "
         "patient of the baseline and of the recommended model), `baseline.json` and "
         "`recommended.json` (for `thrifty info` / `thrifty evaluate`)."),
        "",
    ]
    return "\n".join(lines)


def _is_categorical(column: pd.Series) -> bool:
    return isinstance(column.dtype, pd.CategoricalDtype)


def _markdown(df: pd.DataFrame, fmt: dict[str, Callable[[Any], str]] | None = None) -> str:
    """A GitHub-flavoured markdown table (pandas' own needs the optional ``tabulate``)."""
    fmt = fmt or {}
    header = "| " + " | ".join(str(c) for c in df.columns) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(fmt[c](v) if c in fmt else str(v) for c, v in row.items()) + " |"
            for _, row in df.iterrows()]
    return "\n".join([header, rule, *rows])
