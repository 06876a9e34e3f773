"""The ``thrifty demo``: cost–accuracy trade-offs on the embedded heart-disease data."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lightgbm
import numpy as np
import pandas as pd

from thrifty import metrics
from thrifty.costs import CostModel
from thrifty.datasets import load_demo
from thrifty.forest import Forest
from thrifty.frontier import frontier, pareto_front
from thrifty.runtime.evaluate import Evaluation, evaluate

__all__ = ["PROVIDERS", "Candidates", "DemoContext", "DemoResult", "frontier_provider", "run_demo"]

# Accuracy a cheaper model may give up, relative to the baseline, to be the one the demo
# recommends: the sentence "for $X per patient you get Y accuracy" names the cheapest Pareto
# point within this margin.
TOLERANCE = 0.02


@dataclass
class DemoContext:
    """What every frontier provider gets: the data, its costs and the fitted baseline.

    Attributes
    ----------
    dataset : thrifty.datasets.Dataset
    X_train, X_test : DataFrame
    y_train, y_test : ndarray
    costs : CostModel
    baseline : lightgbm.LGBMClassifier
        The fitted baseline.
    forest : Forest
        The baseline imported into thrifty.
    quick : bool
        Fewer points per frontier.
    params : dict
        The baseline's LightGBM parameters (providers training their own models reuse them).
    """

    dataset: Any
    X_train: pd.DataFrame
    y_train: np.ndarray
    X_test: pd.DataFrame
    y_test: np.ndarray
    costs: CostModel
    baseline: Any
    forest: Forest
    quick: bool
    params: dict[str, Any]


@dataclass
class Candidates:
    """Models one method offers for the frontier, with the parameters that produced them.

    Attributes
    ----------
    method : str
        The series name in the frontier table and plot.
    models : dict of str to model
        Anything :func:`thrifty.evaluate` takes, keyed by a row name.
    params : dict of str to list
        One value per model (e.g. ``{"k": [1, 2, 3]}``), as columns of the table.
    """

    method: str
    models: dict[str, Any]
    params: dict[str, list[Any]] = field(default_factory=dict)


Provider = Callable[[DemoContext], Candidates]

#: The methods the demo sweeps, in order. A method module adds itself with
#: ``@frontier_provider``; its models are evaluated on the test split like every other.
PROVIDERS: list[Provider] = []


def frontier_provider(fn: Provider) -> Provider:
    """Register ``fn(context) -> Candidates`` as one series of the demo's frontier."""
    PROVIDERS.append(fn)
    return fn


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
    table : DataFrame
        Every model of every method (the baseline first), see :func:`thrifty.frontier.frontier`.
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
        return "\n".join([
            (f"thrifty demo: {ds.name} ({len(ds.y)} patients, {len(ds.feature_names)} features, "
             f"{self.baseline.cost.n_examples} in the test split)"),
            (f"baseline LightGBM ({BASELINE_PARAMS['n_estimators']} trees): accuracy "
             f"{self.accuracy:.1%}, cost per patient {_costs_line(s, unit)}"),
            (f"frontier: {len(self.table)} models from {self.table['method'].nunique()} methods, "
             f"{len(self.front)} on the Pareto front"),
            "Pareto front: " + ", ".join(f"{_money(c, unit)} -> {v:.1%}" for c, v in
                                         zip(self.front["mean_cost"], self.front["value"])),
            _sentence(self.pick, self.accuracy, s["mean"], unit),
            f"wrote {files} to {self.out}/ in {self.seconds:.1f} s",
        ])


def run_demo(out: str | Path = "thrifty-demo", *, quick: bool = False,
             progress: bool = True) -> DemoResult:
    """Train a LightGBM baseline on the heart data, sweep cheaper models, write a report.

    Parameters
    ----------
    out : str or Path, default="thrifty-demo"
        Folder for ``frontier.csv``, ``frontier.png``, ``cost_histogram.png``, ``report.md``
        and ``baseline.json`` (created if missing).
    quick : bool, default=False
        Fewer points per frontier (for tests).
    progress : bool, default=True
        Show a progress bar over the steps (only when stderr is a terminal).

    Returns
    -------
    DemoResult
    """
    from tqdm.auto import tqdm

    start = time.perf_counter()
    out = Path(out)
    total = 3 + len(PROVIDERS)
    with tqdm(total=total, desc="thrifty demo", unit="step",
              disable=None if progress else True) as bar:
        bar.set_postfix_str("load data")
        dataset = load_demo()
        bar.update()
        bar.set_postfix_str("train baseline")
        ctx = _context(dataset, quick)
        baseline = evaluate(ctx.forest, ctx.X_test, ctx.costs)
        accuracy = float(metrics.accuracy(ctx.y_test, baseline.labels))
        tables = [frontier({"baseline": ctx.forest}, ctx.X_test, ctx.y_test, ctx.costs,
                           metric="accuracy", params={"method": "baseline"}, progress=False)]
        models: dict[tuple[str, str], Any] = {("baseline", "baseline"): ctx.forest}
        bar.update()
        for provider in PROVIDERS:
            bar.set_postfix_str(provider.__name__.replace("_", " "))
            cand = provider(ctx)
            tables.append(frontier(cand.models, ctx.X_test, ctx.y_test, ctx.costs,
                                   metric="accuracy", params={"method": cand.method, **cand.params},
                                   progress=progress))
            models.update({(cand.method, name): m for name, m in cand.models.items()})
            bar.update()
        bar.set_postfix_str("write outputs")
        table = pd.concat(tables, ignore_index=True)
        front = pareto_front(table)
        pick = _pick(front, accuracy)
        picked = evaluate(models[pick["method"], pick["name"]], ctx.X_test, ctx.costs)
        files = _write(out, ctx, baseline, accuracy, table, front, pick, picked)
        bar.update()
    return DemoResult(out=out, dataset=ctx.dataset, baseline=baseline, accuracy=accuracy,
                      table=table, front=front, pick=pick, files=files,
                      seconds=time.perf_counter() - start)


# ---------------------------------------------------------------------- the methods of today
@frontier_provider
def cheapest_features(ctx: DemoContext) -> Candidates:
    """LightGBM models restricted to the k cheapest features, k = 1..n_features - 1.

    All features is the baseline itself, already in the table.
    """
    names = list(ctx.costs.feature_names or ctx.dataset.feature_names)
    # A stable sort keeps the data's column order among equally priced features.
    order = np.argsort(ctx.costs.feature_costs, kind="stable")
    n = len(names)
    ks = [k for k in (1, 2, 3, 4, 6, 8, 10) if k < n] if ctx.quick else list(range(1, n))
    models, params = {}, {"k": [], "features": [], "price": []}
    for k in ks:
        keep = [names[i] for i in order[:k]]
        models[f"cheapest {k} feature{'s' if k > 1 else ''}"] = lightgbm.LGBMClassifier(**ctx.params).fit(
            _only(ctx.X_train, keep), ctx.y_train)
        params["k"].append(k)
        params["features"].append(", ".join(keep))
        params["price"].append(ctx.costs.acquisition_cost(keep))
    return Candidates("cheapest k features", models, params)


@frontier_provider
def first_trees(ctx: DemoContext) -> Candidates:
    """The baseline truncated to its first k trees."""
    T = ctx.forest.n_trees
    grid = [1, 2, 5, 10, 20, 50] if ctx.quick else [1, 2, 3, 4, 5, 7, 10, 15, 20, 30, 50, 75]
    ks = [k for k in grid if k < T]
    return Candidates("baseline, first k trees",
                      {f"first {k} tree{'s' if k > 1 else ''}": ctx.forest.subset(range(k))
                       for k in ks}, {"k": ks})


@frontier_provider
def qwyc_exits(ctx: DemoContext) -> Candidates:
    """The baseline with QWYC's tree order and early exits, fitted on the training split
    (no labels needed); alpha bounds its disagreement with the baseline there."""
    from thrifty.order import qwyc

    alphas = [0.0, 0.02, 0.05] if ctx.quick else [0.0, 0.01, 0.02, 0.05, 0.1]
    return Candidates("QWYC early exits",
                      {f"QWYC alpha={a:g}": qwyc(ctx.forest, ctx.X_train, alpha=a) for a in alphas},
                      {"alpha": alphas})


# ---------------------------------------------------------------------- internals
# Chosen by 5-fold cross-validation on the training split: LightGBM's default
# min_data_per_group=100 all but forbids categorical splits on 212 patients. One thread: on
# 212 rows OpenMP synchronisation costs far more than it saves (10-50x slower on a busy
# 2-core machine).
BASELINE_PARAMS = {"n_estimators": 100, "num_leaves": 8, "learning_rate": 0.05,
                   "min_child_samples": 20, "min_data_per_group": 10, "cat_smooth": 1.0,
                   "random_state": 0, "deterministic": True, "force_row_wise": True,
                   "n_jobs": 1, "verbose": -1}


def _context(ds: Any, quick: bool) -> DemoContext:
    X_train, y_train, _ = ds.subset("train")
    X_test, y_test, _ = ds.subset("test")
    baseline = lightgbm.LGBMClassifier(**BASELINE_PARAMS).fit(X_train, y_train)
    return DemoContext(dataset=ds, X_train=X_train, y_train=np.asarray(y_train), X_test=X_test,
                       y_test=np.asarray(y_test), costs=ds.costs, baseline=baseline,
                       forest=Forest.from_model(baseline), quick=quick,
                       params=dict(BASELINE_PARAMS))


def _only(X: pd.DataFrame, keep: list[str]) -> pd.DataFrame:
    """``X`` with every column but ``keep`` blanked out.

    A constant (all-missing) column never wins a split, so the model uses only ``keep`` yet
    still reads the full table: every candidate then takes the same test matrix and cost model.
    """
    blank = pd.Series(False, index=X.index)
    return X.assign(**{c: X[c].where(blank) for c in X.columns if c not in keep})


def _pick(front: pd.DataFrame, accuracy: float) -> pd.Series:
    good = front[front["value"] >= accuracy - TOLERANCE]
    return (good if len(good) else front).iloc[0]


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
            f"({pick['name']}), against {accuracy:.1%} for {_money(baseline_cost, unit)} "
            "with the full baseline")
    saving = 1.0 - cost / baseline_cost if baseline_cost > 0 else 0.0
    if cost > 0 and baseline_cost / cost >= 2:
        text += f" ({baseline_cost / cost:,.0f}x cheaper)"
    elif saving >= 0.01:
        text += f" ({saving:.0%} cheaper)"
    return text


def _capitalize(text: str) -> str:
    return text[:1].upper() + text[1:]


def _write(out: Path, ctx: DemoContext, baseline: Evaluation, accuracy: float,
           table: pd.DataFrame, front: pd.DataFrame, pick: pd.Series,
           picked: Evaluation) -> list[Path]:
    from matplotlib.figure import Figure

    from thrifty.io import save
    from thrifty.plot import plot_cost_histogram, plot_frontier

    out.mkdir(parents=True, exist_ok=True)
    unit = _unit(ctx.dataset)
    table.to_csv(out / "frontier.csv", index=False)
    # Figures are built without pyplot: no display backend, no global figure registry.
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = plot_frontier(table, ax=fig.add_subplot(), cost_unit=unit or None,
                       value_label="test accuracy")
    # Prices span orders of magnitude ($1 questions to $100 tests); symlog also admits zero.
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel(f"mean cost per patient{f' ({unit})' if unit else ''}")
    ax.set_title(f"{ctx.dataset.name}: accuracy against mean cost per patient")
    fig.savefig(out / "frontier.png", dpi=120)
    fig = Figure(figsize=(10, 4), layout="constrained")
    left, right = fig.subplots(1, 2, sharex=True, sharey=True)
    # Shared bins from zero make the two panels' costs directly comparable.
    bins = np.linspace(0.0, max(baseline.cost.max, picked.cost.max, 1.0), 41)
    for ax, ev, title in ((left, baseline, "baseline"), (right, picked, str(pick["name"]))):
        plot_cost_histogram(ev, ax=ax, cost_unit=unit or None, bins=bins)
        ax.set_xlabel(f"cost per patient{f' ({unit})' if unit else ''}")
        ax.set_title(title)
    fig.savefig(out / "cost_histogram.png", dpi=120)
    save(ctx.forest, out / "baseline.json")
    (out / "report.md").write_text(_report(ctx, baseline, accuracy, table, front, pick, unit))
    return [out / f for f in ("frontier.csv", "frontier.png", "cost_histogram.png", "report.md",
                              "baseline.json")]


def _report(ctx: DemoContext, baseline: Evaluation, accuracy: float, table: pd.DataFrame,
            front: pd.DataFrame, pick: pd.Series, unit: str) -> str:
    ds, s = ctx.dataset, baseline.cost.summary()
    meta = ds.meta or {}
    rate = baseline.cost.acquisition_rate()
    costs = pd.DataFrame({
        "feature": ds.feature_names,
        "cost": [_money(c, unit) for c in ctx.costs.feature_costs],
        "kind": ["categorical" if _is_categorical(ds.X[f]) else "numeric" for f in ds.feature_names],
        "patients acquiring it (baseline)": [f"{r:.0%}" for r in rate],
    })
    columns = ["method", "name", "mean_cost", "median_cost", "q90_cost", "max_cost",
               "mean_trees", "mean_features", "value"]
    money = {c: (lambda x: _money(x, unit)) for c in ("mean_cost", "median_cost", "q90_cost", "max_cost")}
    fmt = {**money, "mean_trees": "{:.1f}".format, "mean_features": "{:.1f}".format,
           "value": "{:.1%}".format}
    lines = [
        f"# thrifty demo: {ds.name}",
        "",
        "## Data",
        "",
        f"- {meta.get('source', ds.name)}; licence: {meta.get('license', 'unknown')}",
        (f"- task: {ds.task}; {len(ds.y)} patients, {len(ds.feature_names)} features; "
         f"{len(ctx.y_train)} for training, {len(ctx.y_test)} for testing"),
        (f"- costs: {meta.get('cost_unit', 'per feature')}; a patient pays for a test the first "
         "time an evaluated tree asks for it"),
        "",
        "## Feature costs",
        "",
        _markdown(costs),
        "",
        "## Baseline",
        "",
        (f"LightGBM, {ctx.forest.n_trees} trees of at most {BASELINE_PARAMS['num_leaves']} "
         "leaves, evaluated by thrifty's runtime on the test split:"),
        "",
        f"- accuracy: {accuracy:.1%}",
        f"- cost per patient: {_costs_line(s, unit)}",
        "",
        "## Frontier",
        "",
        ("Every row is a real model evaluated on the test split; value is test accuracy (one of "
         f"the {len(ctx.y_test)} test patients moves it by {1 / len(ctx.y_test):.1%})."),
        "",
        _markdown(table[columns], fmt),
        "",
        "## Pareto points",
        "",
        "No other model is cheaper on average and at least as accurate:",
        "",
        _markdown(front[columns], fmt),
        "",
        f"**{_capitalize(_sentence(pick, accuracy, s['mean'], unit))}.**",
        "",
        ("Files: `frontier.csv` (the table), `frontier.png`, `cost_histogram.png` (cost per "
         "patient of the baseline and of the model above), `baseline.json` (the baseline, for "
         "`thrifty info` / `thrifty evaluate`)."),
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
