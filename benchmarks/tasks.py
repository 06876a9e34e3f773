"""Every task, every method: ``thrifty.compare``'s frontiers on regression, ranking, multiclass
and binary data at 327k rows, and how thrifty's best method fares against the two baselines.

Four shared datasets, one per task (issue 24):

* ``diamonds`` (regression, 43,152 training rows, grades priced like an appraiser's work,
  calipers as a group, depth derived from them);
* ``rank_small`` (ranking, 201 training queries, its 300 feature costs drawn from
  ``yahoo_costs`` with seed 0, as in ``benchmarks/cegb.py``);
* ``letter`` (multiclass, 26 classes, 16,000 training rows, 1 per feature);
* ``flights`` (binary, 273,355 training flights and 53,991 test ones: costs are table lookups,
  a group per table, ``dep_delay`` known only after departure). Its test months (Nov-Dec)
  follow its training months, so compare holds out its latest flights for validation and
  calibration (``split=Dataset.split``, by month, day and scheduled departure), as the test
  rows are held out.

Per dataset, ``thrifty.compare`` gets the dataset's training (and validation) rows and, as
``X_test``, its own test split - what ``thrifty compare <dataset>`` does - with every method that
applies, within the dataset's allowance (:data:`ALLOWANCE`: 300, 240, 300 and 240 s, the four in
about 21 minutes; ``--time-limit`` sets one for all). It chooses on its validation rows (5-fold
cross-validation below 5,000 rows: rank_small) and confirms on the test rows the front and, with
``confirm_methods=True``, each method's own validation front, so that every method's choice at
every budget (its best validation figure within it, or an exact plan within the validation
noise of that, as compare chooses: ``selection.choose``) has a test figure. Under the allowance the
two baselines (first k trees, cheapest k features) run in full before any other method is
refined, and every method's settings run coarse to fine. On flights the run is timed, with the
peak resident memory of the process and its worker processes sampled every 0.2 s.

Figures (``results/tasks.json``; the last stdout line):

* ``methods_per_task`` and ``min_methods_per_task``: methods with at least one model;
* ``<task>_budgets_above_baselines_frac``: over the budgets (compare's budgets and the plain
  model's cost), the share where thrifty's best method (compare's choice within the budget
  among every non-baseline method's choices) beats both baselines' own choices within it
  on the test rows (a baseline with no model within the budget is beaten by any model);
  ``..._where_differ``: the same over the budgets where its test figure is not the better
  baseline's (a tie: the same model, e.g. the plain model at its own cost). A budget where
  neither thrifty nor a baseline has a model (letter's smallest) is no comparison: it takes
  no part in either share and is counted as ``budgets_no_comparison``;
* ``budgets_significantly``: per dataset, how many budgets thrifty's best method is
  significantly above the better baseline, indistinguishable from it, or significantly
  below it: the paired difference of the two on the same test rows (queries for ranking),
  with a 95% percentile bootstrap interval; per budget in ``details`` as ``difference vs
  <baseline>`` (estimate, low, high; positive favours thrifty, in the user's units) and
  ``verdict``. The strict figure above counts a difference of one test row; this one says
  which differences the test rows can tell apart;
* ``cost_at_full_metric`` and ``cost_fraction_at_full_metric``: per dataset, the lowest
  test cost on the confirmed front (or the plain model's own, when no model of the front
  does better) whose test metric is within :data:`TOLERANCE` of the
  plain model's (regression: 1% of its RMSE; ranking: 0.5 point; classification: 0.5 point
  of accuracy), and that cost over the plain model's;
* ``flights_compare_seconds``, ``flights_compare_within_allowance`` (the run ended within 5%
  past its allowance: compare keeps the allowance's last 5% for confirming the chosen models
  on the test rows, :data:`GRACE`), ``flights_compare_peak_gb``;
* per dataset (``details``): ``fit_seconds``, each method's candidates and their fit seconds
  (where the time went), ``timings`` (compare's final fit, selection, refit and confirmation
  seconds: confirming every method's own front costs more than a user's run, which confirms
  the front alone), ``task_seconds`` (each method's fit task's wall seconds on each fold of
  the selection: where the allowance went), ``cut``, and per budget each side's test figure
  and interval.

Writes ``results/tasks[_quick].csv`` (each method's validation frontier, its test figures,
``confirmed``, and both in the user's units: ``user_metric``, ``value_user``,
``test_value_user``), ``results/tasks[_quick]_choices.csv`` (every method's choice at every
budget with its test figures), ``results/tasks_<dataset>.png`` (compare's plot) and
``results/tasks_choices_<dataset>.png`` (every method's choice per budget on the test rows,
the baselines drawn thick).

--quick: 2,000 training rows and 1,000 test rows drawn from each dataset (whole queries for
rank_small), one validation split, the methods that fit in seconds, 30 s allowance per run.

    python benchmarks/tasks.py [--quick] [--data-home DIR] [--time-limit SECONDS] [--datasets A,B]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil
from _figures import emit
from _tasks_verdicts import (
    BASELINES,
    TOLERANCE,
    above_baselines,
    cost_at_full,
    method_choices,
    user_metric,
)

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
#: Dataset of each task, in the order they run: flights first, so that its peak memory is not
#: raised by what the other datasets left in this process.
DATASETS = {"flights": "binary", "diamonds": "regression", "rank_small": "ranking", "letter": "multiclass"}
QUICK_METHODS = ("lightgbm", "cheapest", "qwyc", "margin", "cegb")
#: Seconds of each dataset's compare run in the full mode: 18 minutes of allowances, about 21
#: with loading the data and confirming every method's front on the test rows (a quiet run of
#: the four within 25 minutes). Flights keeps the 300 s its figures are stated for.
ALLOWANCE = {"flights": 300.0, "diamonds": 240.0, "rank_small": 300.0, "letter": 240.0}
QUICK_ROWS, QUICK_TEST_ROWS = 2000, 1000
#: Seed of rank_small's costs drawn from yahoo_costs (benchmarks/cegb.py and cronus.py use it too).
YAHOO_SEED = 0
PEAK_LIMIT_GB = 4.0
#: "Within the allowance": compare keeps the last 5% of its allowance for confirming the chosen
#: models on the test rows (``schedule.CONFIRM_SHARE``) and gives up a fit still running then;
#: confirming every method's own front too (``confirm_methods=True``, more than a user's run) may
#: take a little more (letter's 51 models took 12.5 s, 5.2% of 240). Before, fits were given up
#: 5% past the allowance and 10% was allowed here.
GRACE = 0.05
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


class PeakMemory:
    """The peak resident memory of this process and all its children (compare's worker
    processes), sampled every ``every`` seconds in a thread while the block runs. Resident
    sizes are summed, so pages the processes share count once per process: an upper bound."""

    def __init__(self, every: float = 0.2) -> None:
        self.every, self.peak = every, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for p in [me, *me.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:  # a worker that ended between the listing and the read
                    pass
            self.peak = max(self.peak, total)
            self._stop.wait(self.every)

    def __enter__(self) -> PeakMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def gb(self) -> float:
        return self.peak / 2**30


def load(name: str, data_home: str | None, quick: bool) -> dict[str, Any]:
    """compare's inputs for a dataset: training (+ validation) rows, its test split, costs."""
    from thrifty import CostModel, datasets

    ds = datasets.load(name, data_home=data_home)
    X, y, qid = ds.subset("train")
    # A dataset whose test rows are later than its training rows (flights) is held out by time.
    inputs: dict[str, Any] = {"X": X, "y": y, "qid": qid, "split": ds.split}
    if "valid" in ds.splits:
        inputs["X_val"], inputs["y_val"], inputs["qid_val"] = ds.subset("valid")
    inputs["X_test"], inputs["y_test"], inputs["qid_test"] = ds.subset("test")
    costs = ds.costs
    if name == "rank_small":
        names = ds.feature_names
        drawn = datasets.yahoo_costs(len(names), seed=YAHOO_SEED, data_home=data_home)
        costs = CostModel(drawn, feature_names=names)
    if quick:
        for part, n in (("", QUICK_ROWS), ("_val", QUICK_ROWS // 4), ("_test", QUICK_TEST_ROWS)):
            if f"X{part}" in inputs:
                keep = _draw(inputs[f"y{part}"], inputs[f"qid{part}"], n)
                X = inputs[f"X{part}"]
                inputs[f"X{part}"] = X.iloc[keep].reset_index(drop=True)
                for k in ("y", "qid"):
                    v = inputs[f"{k}{part}"]
                    inputs[f"{k}{part}"] = None if v is None else v[keep]
    return {"costs": costs, **{k: v for k, v in inputs.items() if v is not None}}


def _draw(y: np.ndarray, qid: np.ndarray | None, n: int) -> np.ndarray:
    """About ``n`` rows drawn at random, in their order (whole queries when there are queries)."""
    rng = np.random.default_rng(0)
    if qid is None:
        return np.sort(rng.choice(len(y), min(n, len(y)), replace=False))
    queries = np.unique(qid)
    per = len(y) / len(queries)
    chosen = rng.choice(queries, min(len(queries), max(2, int(n / per))), replace=False)
    return np.flatnonzero(np.isin(qid, chosen))


def run_task(
    name: str, task: str, args: argparse.Namespace
) -> tuple[dict[str, Any], pd.DataFrame, pd.DataFrame]:
    """One comparison of a dataset (every method, each method's own front confirmed on the test
    rows): its figures, each method's frontier and every method's choice per budget."""
    from matplotlib.figure import Figure

    from thrifty.comparison import METHODS, compare

    data = load(name, args.data_home, args.quick)
    methods: Any = [k for k in QUICK_METHODS if task in METHODS[k].tasks] if args.quick else "all"
    common = {"task": task, "quick": args.quick, "time_limit": args.limit, "progress": True}
    if args.quick:
        common["cv"] = 0  # one validation split: a smoke run
    print(f"{name} ({task}): {len(data['y']):,} rows, {len(data['y_test']):,} test rows", flush=True)
    with PeakMemory() as memory:
        start = time.perf_counter()
        main = compare(**data, methods=methods, confirm_methods=True, **common)
        seconds = time.perf_counter() - start
    print(f"{name}: every method in {seconds:.0f} s, peak {memory.gb:.2f} GB with its workers", flush=True)

    prefix = "quick_" if args.quick else ""
    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = main.plot(fig.add_subplot())
    ax.set_title(f"{name} ({task}): chosen on {main.selection}, confirmed on {main.n_test:,} test rows")
    fig.savefig(RESULTS / f"tasks_{prefix}{name}.png", dpi=110)
    choices = method_choices(main)
    plot_choices(name, task, main, choices, RESULTS / f"tasks_{prefix}choices_{name}.png")

    figures = {
        "methods": int(main.table["method"].nunique()) if len(main.table) else 0,
        "seconds": round(seconds, 1),
        "peak_gb": round(memory.gb, 2),
        "within_allowance": bool(seconds <= args.limit * (1 + GRACE)),
        "cut": [list(c) for c in main.cut],
        "fit_seconds": fit_seconds(main),
        # compare's own split of its seconds: the final fit, selection, refit, confirmation
        # (every method's own front here, more than a user's run confirms).
        "timings": dict(main.timings),
        # Per method, its task's wall seconds on each fold of the selection: where the
        # allowance went (under load, the fits share the cores with other work).
        "task_seconds": dict(main.task_seconds),
        **above_baselines(main, choices, data),
        **cost_at_full(main),
    }
    return figures, frontiers(name, task, main), choices.assign(dataset=name, task=task)


def fit_seconds(main: Any) -> dict[str, dict[str, float]]:
    """Where the time went: per method, its candidates' fit seconds (summed over the folds'
    means) and their number; the plain model's own fit is not a candidate's."""
    table = main.table
    if not len(table):
        return {}
    return {
        m: {"candidates": int(len(rows)), "fit_seconds": round(float(rows["fit_seconds"].sum()), 1)}
        for m, rows in table.groupby("method", sort=False)
    }


def frontiers(name: str, task: str, main: Any) -> pd.DataFrame:
    """Each method's frontier on the validation rows, with its test figures (``confirmed``:
    compare confirmed each method's own front, ``confirm_methods=True``) and whether it is on
    the front of every method together."""
    from thrifty.frontier import pareto_front

    keep = ["method", "name", "mean_cost", "value", "test_mean_cost", "test_value", "test_low", "test_high"]
    parts = []
    for _, rows in main.table.groupby("method", sort=False):
        front = pareto_front(rows)
        parts.append(front.assign(on_compare_front=front.index.isin(main.front.index)))
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, ignore_index=True).reindex(columns=[*keep, "metric", "on_compare_front"])
    out["confirmed"] = out["test_value"].notna()
    # The same figures in the user's units (RMSE in dollars rather than compare's neg_mse).
    out["user_metric"] = [user_metric(m)[0] for m in out["metric"]]
    for col in ("value", "test_value"):
        out[f"{col}_user"] = [
            np.nan if pd.isna(v) else user_metric(m)[1](v) for m, v in zip(out["metric"], out[col])
        ]
    columns = ["dataset", "task", "on_compare_front", "confirmed", "metric", *keep, "user_metric"]
    return out.assign(dataset=name, task=task)[[*columns, "value_user", "test_value_user"]]


def plot_choices(name: str, task: str, main: Any, choices: pd.DataFrame, path: Path) -> None:
    """Each method's choice at each budget, on the test rows (user units): thrifty's methods
    thin, the two baselines thick, so a budget where a baseline is on top is plain to see."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter

    from thrifty.comparison import METHODS
    from thrifty.metrics import higher_is_better

    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = fig.add_subplot()
    baselines = {METHODS[k].name for k in BASELINES}
    for method, rows in choices.groupby("method", sort=False):
        rows = rows.sort_values("budget")
        base = method in baselines
        ax.plot(
            rows["budget"],
            rows["test_value_user"],
            drawstyle="steps-post",  # a choice holds from its budget to the next
            marker="o",
            ms=3 if not base else 5,
            lw=3 if base else 1,
            color="black" if method == METHODS["lightgbm"].name else None,
            ls="--" if method == METHODS["cheapest"].name else "-",
            label=method,
            zorder=3 if base else 2,
        )
    unit = rows["user_metric"].iloc[0] if len(choices) else "metric"
    ax.set_xscale("log")
    ticks = sorted(choices["budget"].unique())
    ax.set_xticks(ticks, [f"{t:.4g}" for t in ticks])  # the budgets, as numbers (never 6x10^0)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("budget (mean cost per example, chosen on validation cost)")
    up = higher_is_better(choices["metric"].iloc[0]) if len(choices) else True
    ax.set_ylabel(f"test {unit} of each method's choice ({'higher' if up else 'lower'} is better)")
    ax.set_title(f"{name} ({task}): every method's choice per budget, confirmed on {main.n_test:,} test rows")
    ax.legend(fontsize=7, ncol=2)
    fig.savefig(path, dpi=110)


def allowance(name: str, args: argparse.Namespace) -> float:
    """Seconds of ``name``'s compare run: ``--time-limit``, else 30 when quick, else
    :data:`ALLOWANCE`'s."""
    if args.time_limit is not None:
        return float(args.time_limit)
    return 30.0 if args.quick else ALLOWANCE[name]


def machine() -> dict[str, Any]:
    return {
        "cores": CORES,
        "cpu": platform.processor() or platform.machine(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA"))
    parser.add_argument(
        "--time-limit",
        type=float,
        default=None,
        help="seconds per compare run (default: ALLOWANCE's, 18 minutes for the four; quick 30)",
    )
    parser.add_argument("--datasets", help="comma-separated subset of " + ", ".join(DATASETS))
    args = parser.parse_args()
    names = list(DATASETS)
    if args.datasets:
        names = [n.strip() for n in args.datasets.split(",") if n.strip()]
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        parser.error(f"unknown dataset(s) {unknown}; choose among {', '.join(DATASETS)}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    per: dict[str, dict[str, Any]] = {}
    tables, chosen = [], []
    began = time.perf_counter()
    for i, name in enumerate(names, 1):
        print(f"[{i}/{len(names)}] {name}", file=sys.stderr, flush=True)
        args.limit = allowance(name, args)
        per[name], table, choices = run_task(name, DATASETS[name], args)
        per[name]["time_limit"] = args.limit
        tables.append(table)
        chosen.append(choices)
        f = per[name]
        print(
            f"{name}: {f['methods']} methods; thrifty above both baselines at "
            f"{f['budgets_above_baselines_frac']} of budgets "
            f"({f['budgets_above_baselines_frac_where_differ']} where they differ; paired on the "
            f"test rows: {f['budgets_significantly']}; no comparison at {f['budgets_no_comparison']}); "
            f"the plain model's {f.get('metric')} "
            f"reached at cost {f['cost_at_full_metric']} "
            f"({f.get('cost_fraction_at_full_metric')} of its cost)",
            flush=True,
        )
    suffix = "_quick" if args.quick else ""
    pd.concat(tables, ignore_index=True).to_csv(RESULTS / f"tasks{suffix}.csv", index=False)
    pd.concat(chosen, ignore_index=True).to_csv(RESULTS / f"tasks{suffix}_choices.csv", index=False)
    figures: dict[str, Any] = {
        "bench": "tasks",
        "time_limit": {n: f["time_limit"] for n, f in per.items()},
        "total_seconds": round(time.perf_counter() - began, 1),
        "methods_per_task": {n: f["methods"] for n, f in per.items()},
        "min_methods_per_task": min(f["methods"] for f in per.values()),
    }
    for name, task in DATASETS.items():
        if name in per and task in ("regression", "ranking"):
            figures[f"{task}_budgets_above_baselines_frac"] = per[name]["budgets_above_baselines_frac"]
            figures[f"{task}_budgets_above_baselines_frac_where_differ"] = per[name][
                "budgets_above_baselines_frac_where_differ"
            ]
    keys = ("budgets_above_baselines_frac", "budgets_above_baselines_frac_where_differ")
    for key in (
        *keys,
        "budgets_significantly",
        "budgets_no_comparison",
        "cost_at_full_metric",
        "cost_fraction_at_full_metric",
    ):
        figures[key] = {n: f.get(key) for n, f in per.items()}
    figures["full_metric_tolerance"] = {
        n: f"{f['metric']} within {TOLERANCE.get(f['metric'], '0.5 point')}"
        for n, f in per.items()
        if "metric" in f
    }
    if "flights" in per:
        f = per["flights"]
        figures.update(
            flights_compare_seconds=f["seconds"],
            flights_compare_within_allowance=f["within_allowance"],
            flights_compare_peak_gb=f["peak_gb"],
            flights_compare_peak_under_4gb=f["peak_gb"] < PEAK_LIMIT_GB,
            flights_compare_cut=f["cut"],
            flights_compare_timings=f["timings"],
        )
    figures["details"] = per
    figures["machine"] = machine()
    emit(figures, args.quick)


if __name__ == "__main__":
    main()
