"""The ``thrifty demo``: cost–accuracy trade-offs on the embedded heart-disease data."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thrifty import metrics
from thrifty.comparison import compare
from thrifty.comparison.report import cost_unit, money, plain_words
from thrifty.comparison.report import markdown_table as _markdown
from thrifty.comparison.selection import baseline_row
from thrifty.datasets import load_demo
from thrifty.io import save
from thrifty.plot import plot_cost_histogram
from thrifty.runtime.evaluate import Evaluation, evaluate

__all__ = ["DemoResult", "run_demo"]

# Accuracy a cheaper model may give up, relative to the baseline, to be the one the demo
# recommends: the sentence "for $X per patient you get Y accuracy" names the cheapest Pareto
# point within this margin of the baseline, both figures selected on cross-validation.
TOLERANCE = 0.02

#: Folds of the selection: 3, or 2 with ``quick=True`` (for tests). Three folds score every
#: training patient once, as five do, with three fifths of the fits: with the 50-tree baseline
#: below the demo's whole plan needs about 12 CPU-seconds, so that it ends within 20 s even
#: when it gets one core of two (five folds on 100 trees needed about 25: 26 s beside two
#: CPU-bound processes).
FOLDS, QUICK_FOLDS = 3, 2


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
        The baseline's test accuracy (confirmed).
    comparison : thrifty.Comparison
        Every method's models, chosen on cross-validation of the training split and
        confirmed on the test split.
    table : DataFrame
        ``comparison.table``: every model of every method (see :func:`thrifty.compare`).
    front : DataFrame
        Its Pareto front (validation figures, with the test figures of each point).
    pick : pandas.Series
        The cheapest Pareto point within ``TOLERANCE`` of the baseline's validation accuracy.
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
        ds, s, cmp = self.dataset, self.baseline.cost.summary(), self.comparison
        unit = cost_unit(ds.meta)
        files = ", ".join(f.name for f in self.files)
        stopped = " (the time allowance cut some methods short)" if cmp.stopped_early else ""
        counts = "; ".join(
            f"{part} " + ", ".join(f"{k}: {v}" for k, v in c.items()) for part, c in cmp.class_counts.items()
        )
        return "\n".join(
            [
                (
                    f"thrifty demo: {ds.name} ({len(ds.y)} patients, {len(ds.feature_names)} features): "
                    f"models chosen on {cmp.selection.replace('rows', 'patients')}, confirmed once on "
                    f"the {cmp.n_test} test patients; class counts: {counts}"
                ),
                (
                    f"baseline LightGBM ({BASELINE_PARAMS['n_estimators']} trees): accuracy "
                    f"{_selected(cmp)} selected, {_confirmed(cmp, _baseline_row(cmp))} test "
                    f"patients; cost per patient {_costs_line(s, unit)}"
                ),
                (
                    f"frontier: {len(self.table)} models from {self.table['method'].nunique()} methods, "
                    f"{len(self.front)} on the Pareto front{stopped}"
                ),
                "Pareto front (selected accuracy): "
                + ", ".join(
                    f"{money(c, unit)} -> {v:.1%}"
                    for c, v in zip(self.front["mean_cost"], self.front["value"])
                ),
                _sentence(self.pick, cmp, s["mean"], unit),
                f"wrote {files} to {self.out}/ in {self.seconds:.1f} s",
            ]
        )


def run_demo(
    out: str | Path = "thrifty-demo",
    *,
    quick: bool = False,
    progress: bool = True,
    time_limit: float | None = None,
    n_jobs: int | None = None,
) -> DemoResult:
    """:func:`thrifty.compare` on the embedded heart data with its real dollar costs; a report.

    Every method's settings are chosen by 3-fold cross-validation on the training split
    (budgets and exits calibrated inside each fold); the chosen models are refitted on the
    training split and scored once on the test split. The headline names the cheapest Pareto
    point within ``TOLERANCE`` of the baseline's cross-validated accuracy, with both figures.

    The work is planned, not timed: every method runs ``thrifty.compare``'s smaller grid of
    settings (``quick=True``: three budgets, fewer points per method), in full, so that the
    demo takes seconds and gives the same answer on any machine, loaded or idle.

    Parameters
    ----------
    out : str or Path, default="thrifty-demo"
        Folder for ``frontier.csv``, ``frontier.png``, ``cost_histogram.png``, ``report.md``,
        ``baseline.json`` and ``recommended.json`` (created if missing).
    quick : bool, default=False
        Choose by 2-fold cross-validation instead of 3 (for tests).
    progress : bool, default=True
        Show progress (a bar in a terminal, else a line per method).
    time_limit : float or None, default=None
        Seconds shared by the methods, an explicit cut (see :func:`thrifty.compare`); None
        runs the planned work in full.
    n_jobs : int, optional
        Worker processes (default: every core); the answer is the same whatever the number.

    Returns
    -------
    DemoResult
    """
    start = time.perf_counter()
    out = Path(out)
    dataset = load_demo()
    X_train, y_train, _ = dataset.subset("train")
    X_test, y_test, _ = dataset.subset("test")
    cmp = compare(
        X_train,
        y_train,
        dataset.costs,
        X_test=X_test,
        y_test=y_test,
        lightgbm_params=BASELINE_PARAMS,
        time_limit=time_limit,
        quick=True,
        cv=QUICK_FOLDS if quick else FOLDS,
        n_jobs=n_jobs,
        progress=progress,
    )
    baseline = evaluate(cmp.baseline, X_test, dataset.costs)
    accuracy = float(metrics.accuracy(y_test, baseline.labels))
    pick = _pick(cmp.front, cmp.baseline_value)
    picked_model = cmp.model(pick["method"], pick["name"])
    picked = evaluate(picked_model, X_test, dataset.costs)
    files = _write(out, dataset, cmp, baseline, accuracy, pick, picked_model, picked)
    return DemoResult(
        out=out,
        dataset=dataset,
        baseline=baseline,
        accuracy=accuracy,
        comparison=cmp,
        table=cmp.table,
        front=cmp.front,
        pick=pick,
        files=files,
        seconds=time.perf_counter() - start,
    )


# ---------------------------------------------------------------------- internals
# Chosen by 5-fold cross-validation on the training split: LightGBM's default
# min_data_per_group=100 all but forbids categorical splits on 212 patients. 50 trees at rate
# 0.1 score as 100 at 0.05 do (78.5% and 79.0% over five repeats of 5-fold cross-validation,
# one patient of 212) with half the trees for every method built on them to order, cascade or
# gate. One thread: on 212 rows OpenMP synchronisation costs far more than it saves (10-50x
# slower on a busy 2-core machine).
BASELINE_PARAMS = {
    "n_estimators": 50,
    "num_leaves": 8,
    "learning_rate": 0.1,
    "min_child_samples": 20,
    "min_data_per_group": 10,
    "cat_smooth": 1.0,
    "random_state": 0,
    "deterministic": True,
    "force_row_wise": True,
    "n_jobs": 1,
    "verbose": -1,
}


def _pick(front: pd.DataFrame, accuracy: float | None) -> pd.Series:
    # Only a model confirmed on the test patients can headline (a refit the time allowance
    # cut off has no test figure).
    front = front[front["test_value"].notna()]
    good = front if accuracy is None else front[front["value"] >= accuracy - TOLERANCE]
    return (good if len(good) else front.iloc[::-1]).iloc[0]


def _baseline_row(cmp: Any) -> pd.Series:
    """The plain model's row of the table (all its trees)."""
    return cmp.table.loc[baseline_row(cmp.table)]


def _selected(cmp: Any) -> str:
    return f"{cmp.baseline_value:.1%}" if cmp.baseline_value is not None else "n/a"


def _confirmed(cmp: Any, row: pd.Series) -> str:
    """A test figure with its interval and size, or why there is none."""
    if pd.isna(row.get("test_value")):
        return "not confirmed (the time allowance ran out before its refit)"
    return (
        f"{row['test_value']:.1%} [{row['test_low']:.1%}, {row['test_high']:.1%}] on {int(row['test_rows'])}"
    )


def _costs_line(s: dict[str, float], unit: str | None) -> str:
    return (
        f"mean {money(s['mean'], unit)}, median {money(s['median'], unit)}, "
        f"90% {money(s['q90'], unit)}, max {money(s['max'], unit)}"
    )


def _sentence(pick: pd.Series, cmp: Any, baseline_cost: float, unit: str | None) -> str:
    """The headline: the pick and the baseline, each selected on cross-validation and
    confirmed on the test patients (the saving on the test patients' costs)."""
    where = cmp.selection.replace("rows", "patients")
    base = _baseline_row(cmp)
    text = (
        f"for {money(float(pick['mean_cost']), unit)} per patient you get "
        f"{pick['value']:.1%} accuracy with {pick['method']} ({pick['name']}), selected on "
        f"{where}; confirmed: {_confirmed(cmp, pick)} test patients at "
        f"{money(float(pick.get('test_mean_cost', np.nan)), unit)} per patient. The full "
        f"baseline: {_selected(cmp)} selected, {_confirmed(cmp, base)} test patients at "
        f"{money(baseline_cost, unit)}"
    )
    text += "; " + plain_words(pick, cmp, unit, noun="patient")
    return text


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _write(
    out: Path,
    ds: Any,
    cmp: Any,
    baseline: Evaluation,
    accuracy: float,
    pick: pd.Series,
    picked_model: Any,
    picked: Evaluation,
) -> list[Path]:
    from matplotlib.figure import Figure  # matplotlib (0.3 s) loads only when a figure is drawn

    out.mkdir(parents=True, exist_ok=True)
    unit = cost_unit(ds.meta)
    cmp.table.to_csv(out / "frontier.csv", index=False)
    # Figures are built without pyplot: no display backend, no global figure registry.
    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = cmp.plot(fig.add_subplot(), cost_unit=unit)
    # Prices span orders of magnitude ($1 questions to $100 tests); symlog also admits zero.
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_ylabel(f"accuracy ({cmp.selection.replace('rows', 'patients')})")
    ax.set_xlabel(f"mean cost per patient{f' ({unit})' if unit else ''}")
    ax.set_title(f"{ds.name}: accuracy against mean cost per patient")
    fig.savefig(out / "frontier.png", dpi=120)
    fig = Figure(figsize=(10, 4), layout="constrained")
    left, right = fig.subplots(1, 2, sharex=True, sharey=True)
    # Shared bins from zero make the two panels' costs directly comparable.
    bins = np.linspace(0.0, max(baseline.cost.max, picked.cost.max, 1.0), 41).tolist()
    for ax, ev, title in ((left, baseline, "baseline"), (right, picked, f"{pick['method']}, {pick['name']}")):
        plot_cost_histogram(ev, ax=ax, cost_unit=unit, bins=bins)
        ax.set_xlabel(f"cost per patient{f' ({unit})' if unit else ''}")
        ax.set_title(title)
    fig.savefig(out / "cost_histogram.png", dpi=120)
    save(cmp.baseline, out / "baseline.json")
    save(picked_model, out / "recommended.json")
    (out / "report.md").write_text(_report(ds, cmp, baseline, accuracy, pick, unit))
    return [
        out / f
        for f in (
            "frontier.csv",
            "frontier.png",
            "cost_histogram.png",
            "report.md",
            "baseline.json",
            "recommended.json",
        )
    ]


def _report(
    ds: Any, cmp: Any, baseline: Evaluation, accuracy: float, pick: pd.Series, unit: str | None
) -> str:
    s = baseline.cost.summary()
    meta = ds.meta or {}
    rate = baseline.cost.acquisition_rate()
    n_test = baseline.cost.n_examples
    costs = pd.DataFrame(
        {
            "feature": ds.feature_names,
            "cost": [money(c, unit) for c in ds.costs.feature_costs],
            "kind": ["categorical" if _is_categorical(ds.X[f]) else "numeric" for f in ds.feature_names],
            "patients acquiring it (baseline)": [f"{r:.0%}" for r in rate],
        }
    )
    columns = [
        "method",
        "name",
        "mean_cost",
        "q90_cost",
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
    cost_fmt = {c: (lambda x: money(x, unit)) for c in ("mean_cost", "q90_cost", "test_mean_cost")}
    share = {
        c: "{:.1%}".format
        for c in (
            "value",
            "balanced_accuracy",
            "auc",
            "single_class",
            "test_value",
            "test_low",
            "test_high",
            "test_balanced_accuracy",
            "test_auc",
        )
    }
    fmt = {
        **cost_fmt,
        **share,
        "mean_trees": "{:.1f}".format,
        "mean_features": "{:.1f}".format,
        "fit_seconds": "{:.2f}".format,
    }
    columns = [c for c in columns if c in cmp.table.columns]
    counts = "; ".join(
        f"{part} " + ", ".join(f"{k}: {v}" for k, v in c.items()) for part, c in cmp.class_counts.items()
    )
    methods = cmp.table.groupby("method", sort=False)
    lines = [
        f"# thrifty demo: {ds.name}",
        "",
        f"**{_capitalize(_sentence(pick, cmp, s['mean'], unit))}.**",
        "",
        "## Data",
        "",
        f"- {meta.get('source', ds.name)}; licence: {meta.get('license', 'unknown')}",
        (
            f"- task: {ds.task}; {len(ds.y)} patients, {len(ds.feature_names)} features; "
            f"{len(ds.y) - n_test} to choose on by {cmp.selection.split(' of ')[0]} "
            f"(in each fold, and in the final refit on all of them, a fifth held out to calibrate "
            f"budgets and exits), {n_test} test patients to confirm the chosen models once; class "
            f"counts: {counts}"
        ),
        (
            f"- costs: {meta.get('cost_unit', 'per feature')}; a patient pays for a test the first "
            "time an evaluated tree asks for it"
        ),
        "",
        "## Feature costs",
        "",
        _markdown(costs),
        "",
        "## Baseline",
        "",
        (
            f"LightGBM, {cmp.baseline.n_trees} trees of at most {BASELINE_PARAMS['num_leaves']} "
            "leaves, evaluated by thrifty's runtime on the test split:"
        ),
        "",
        (
            f"- accuracy: {_selected(cmp)} selected ({cmp.selection}); "
            f"{_confirmed(cmp, _baseline_row(cmp))} test patients (95% Wilson interval)"
        ),
        f"- cost per patient: {_costs_line(s, unit)}",
        "",
        "## Methods",
        "",
        (
            f"`thrifty.compare` ran {methods.ngroups} methods in {cmp.seconds:.0f} s"
            + (" (the time allowance stopped it before the end)" if cmp.stopped_early else "")
            + ": "
            + "; ".join(f"{name} ({len(g)} models)" for name, g in methods)
            + "."
        ),
        "",
        # What a method could not offer, and why (a method that does not apply to these data).
        *[f"- not offered: {m} {n}: {why}".replace("  ", " ") for m, n, why in cmp.skipped],
        *([""] if cmp.skipped else []),
        "## Pareto points",
        "",
        (
            "No other model is cheaper on average and at least as accurate on the validation "
            f"folds (`value`, `mean_cost`: means over the folds of {cmp.selection}). The `test_` "
            f"columns score each chosen model once on the {n_test} test patients (`test_low`, "
            "`test_high`: 95% Wilson interval; one patient moves accuracy by "
            f"{1 / max(n_test, 1):.1%}). Models that predict a single class are flagged "
            "(`single_class`: share of folds) and never picked unless the baseline is no better:"
        ),
        "",
        _markdown(cmp.front[columns], fmt),
        "",
        "## Every model",
        "",
        _markdown(cmp.table[columns], fmt),
        "",
        (
            "Files: `frontier.csv` (the table), `frontier.png`, `cost_histogram.png` (cost per "
            "patient of the baseline and of the recommended model), `baseline.json` and "
            "`recommended.json` (for `thrifty info` / `thrifty evaluate`)."
        ),
        "",
    ]
    return "\n".join(lines)


def _is_categorical(column: pd.Series) -> bool:
    return isinstance(column.dtype, pd.CategoricalDtype)
