"""Is ``thrifty compare`` honest? Optimism and coverage of its figures on the shared datasets.

For each classification dataset, ``thrifty.compare`` gets the dataset's training rows only
(it holds out 25% of them as its own test rows, and chooses on 5-fold cross-validation below
5,000 rows, on a validation split above). The dataset's own test split is never shown to it:
it is a fresh re-draw on which each recommended model is scored afterwards. Figures, over the
recommended models (``Comparison.recommend()``: the best model within 10%, 25%, 50% and 100%
of the plain model's cost, each counted once):

* ``optimism`` (per dataset, and ``mean_optimism`` over datasets): the reported (selected)
  accuracy minus the accuracy on the fresh rows, in points. Target: at most 1 point.
* ``confirmed_optimism``: the same for the confirmed test figure (it is not chosen on, so it
  should be unbiased).
* ``coverage``: the share of recommended models whose fresh accuracy lies within the 95%
  interval of their confirmed test figure (the fresh figure is itself a finite sample, so
  this estimates the coverage of the true accuracy loosely).

``--speed``: how long the user's first runs take, with no time limit, and whether they give the
same answer: ``demo_seconds`` (wall seconds of ``thrifty demo`` in a fresh process, the first
of three runs; ``demo_runs`` has all three, the third beside two CPU-burning processes, with
the CPU-seconds each used, its worker process included; target: each under 20 s; a first
run before them, which compiles numba's kernels if their on-disk cache is cold, is recorded
apart as ``first_run_seconds``),
``demo_reproducible`` (the four runs wrote the same recommended model and the same table but
for its timings) and ``small_compare_seconds_no_limit`` (``thrifty.compare`` of 768 rows of
adult, pima's size, with its costs, every method and setting, default workers). These keys
are merged into ``results/compare.json``, keeping its other keys (and the full run keeps
these).

Full run: heart, sonar, thyroid, miniboone_tiny, higgs_small, adult and letter (the last two
with 6,000 training rows drawn at random, so that every method gets its turn in the time
allowance), compare's ``quick`` settings, ``--time-limit`` seconds each (default 120).
``--quick``: heart and sonar, the methods that fit in seconds (``QUICK_METHODS``), 20 s each.
Writes ``benchmarks/results/compare[_quick].csv`` (one row per recommended model) and
``compare_<dataset>.png``; the last stdout line is one JSON object.

    python benchmarks/compare.py [--quick] [--data-home DIR] [--time-limit SECONDS] [--datasets A,B]
    python benchmarks/compare.py --speed [--data-home DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from _figures import emit

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
FULL = ("heart", "sonar", "thyroid", "miniboone_tiny", "higgs_small", "adult", "letter")
QUICK = ("heart", "sonar")
QUICK_METHODS = ("lightgbm", "cheapest", "qwyc", "fan", "margin", "budgetprune")
#: Training rows drawn from the largest datasets (the rest of their training rows are unused).
MAX_ROWS = 6000
#: Rows of the small comparison: pima's size, drawn from adult's training rows.
SMALL_ROWS = 768
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
#: A CPU-bound process that stops by itself, should the benchmark die first.
BURN = "import time\nend = time.time() + 600\nwhile time.time() < end:\n    pass\n"


def run_one(name: str, data_home: str | None, time_limit: float, quick_run: bool) -> pd.DataFrame:
    """Recommended models of one dataset with their selected, confirmed and fresh figures."""
    from matplotlib.figure import Figure

    from thrifty import datasets, evaluate
    from thrifty.comparison import compare

    ds = datasets.load(name, data_home=data_home)
    X, y, _ = ds.subset("train")
    if "valid" in ds.splits:
        Xv, yv, _ = ds.subset("valid")
        X, y = pd.concat([X, Xv], ignore_index=True), np.concatenate([y, yv])
    if len(y) > MAX_ROWS:
        keep = np.sort(np.random.default_rng(0).choice(len(y), MAX_ROWS, replace=False))
        X, y = X.iloc[keep].reset_index(drop=True), y[keep]
    X_fresh, y_fresh, _ = ds.subset("test")
    start = time.perf_counter()
    cmp = compare(
        X,
        y,
        ds.costs,
        quick=True,
        time_limit=time_limit,
        n_jobs=1,
        methods=QUICK_METHODS if quick_run else "all",
        progress=sys.stderr.isatty(),
    )
    seconds = time.perf_counter() - start
    stem = f"compare_quick_{name}" if quick_run else f"compare_{name}"
    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = cmp.plot(fig.add_subplot())
    ax.set_title(f"{name}: chosen on {cmp.selection}, confirmed on {cmp.n_test} test rows")
    fig.savefig(RESULTS / f"{stem}.png", dpi=110)
    rec = cmp.recommend().drop_duplicates(["method", "name"])
    rows = []
    for _, r in rec.iterrows():
        key = (r["method"], r["name"])
        if key not in cmp.models:
            continue
        fresh = float(np.mean(evaluate(cmp.models[key], X_fresh, ds.costs).labels == y_fresh))
        rows.append(
            {
                "dataset": name,
                "method": r["method"],
                "name": r["name"],
                "selection": cmp.selection,
                "selected": r["value"],
                "confirmed": r["test_value"],
                "low": r["test_low"],
                "high": r["test_high"],
                "test_rows": r["test_rows"],
                "fresh": fresh,
                "fresh_rows": len(y_fresh),
                "mean_cost": r["mean_cost"],
                "test_mean_cost": r["test_mean_cost"],
                "models": len(cmp.table),
                "methods": cmp.table["method"].nunique(),
                "seconds": round(seconds, 1),
                "stopped_early": cmp.stopped_early,
            }
        )
    return pd.DataFrame(rows)


def demo_run(out: Path, burners: int) -> tuple[float, float, float]:
    """Wall seconds of ``thrifty demo`` in a fresh process, beside ``burners`` CPU-bound ones,
    the machine's load average (1 minute) as it ended, and the CPU-seconds the demo and its
    worker used (less noisy than wall time on a shared machine)."""
    burning = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(burners)]
    try:
        start, cpu = time.perf_counter(), children_cpu()
        subprocess.run(
            [sys.executable, "-m", "thrifty", "demo", "--out", str(out)], check=True, capture_output=True
        )
        # Read before the burners are reaped: their CPU is not the demo's.
        return time.perf_counter() - start, os.getloadavg()[0], children_cpu() - cpu
    finally:
        for p in burning:
            p.kill()
            p.wait()


def children_cpu() -> float:
    """User and system CPU-seconds of this process's reaped children (with theirs)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def same_answer(a: Path, b: Path) -> bool:
    """The two demo folders hold the same recommended model and table (but for timings)."""
    tables = [pd.read_csv(d / "frontier.csv").drop(columns="fit_seconds") for d in (a, b)]
    models = [(d / "recommended.json").read_text() for d in (a, b)]
    return tables[0].equals(tables[1]) and models[0] == models[1]


def speed(data_home: str | None) -> dict:
    """The demo three times (the third beside two CPU-bound processes) and a small comparison,
    no time limit. Other work on the machine is not stopped: the load averages say how busy it
    was."""
    from thrifty import datasets
    from thrifty.comparison import compare

    with tempfile.TemporaryDirectory() as tmp:
        # A first run fills numba's on-disk cache of compiled kernels, cold after an install or
        # a change to a kernel's module (each process would compile them): recorded apart.
        first, _, first_cpu = demo_run(Path(tmp) / "first", burners=0)
        runs, loads, cpus = zip(*(demo_run(Path(tmp) / str(i), burners=2 if i == 2 else 0) for i in range(3)))
        reproducible = all(same_answer(Path(tmp) / "0", Path(tmp) / str(i)) for i in ("first", 1, 2))
    ds = datasets.load("adult", data_home=data_home)
    X, y, _ = ds.subset("train")
    keep = np.sort(np.random.default_rng(0).choice(len(y), SMALL_ROWS, replace=False))
    start = time.perf_counter()
    cmp = compare(X.iloc[keep].reset_index(drop=True), y[keep], ds.costs, progress=sys.stderr.isatty())
    small, small_load = time.perf_counter() - start, os.getloadavg()[0]
    print(
        f"demo: {', '.join(f'{s:.1f} s' for s in runs)} (the last beside 2 CPU-bound processes; "
        f"{', '.join(f'{c:.1f}' for c in cpus)} CPU-seconds; a first run before them {first:.1f} s, "
        f"{first_cpu:.1f} CPU-seconds); "
        f"the same answer: {reproducible}; compare of {SMALL_ROWS} rows of adult, no time limit: "
        f"{small:.1f} s ({len(cmp.table)} models of {cmp.table['method'].nunique()} methods); "
        f"load averages {', '.join(f'{v:.1f}' for v in (*loads, small_load))} on {CORES} cores"
    )
    return {
        "demo_seconds": round(runs[0], 1),
        "demo_runs": {
            "seconds": [round(s, 1) for s in runs],
            "cpu_seconds": [round(c, 1) for c in cpus],
            "cpu_bound_beside": [0, 0, 2],
            "first_run_seconds": round(first, 1),
            "first_run_cpu_seconds": round(first_cpu, 1),
            "load_average_1min": [round(v, 1) for v in loads],
        },
        "demo_reproducible": reproducible,
        "small_compare_seconds_no_limit": round(small, 1),
        "small_compare_rows": SMALL_ROWS,
        "small_compare_load_average_1min": round(small_load, 1),
        "cores": CORES,
    }


def recorded(quick: bool) -> dict:
    """The figures ``results/compare[_quick].json`` holds now (none if it does not exist)."""
    path = RESULTS / ("compare_quick.json" if quick else "compare.json")
    return json.loads(path.read_text()) if path.exists() else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--speed", action="store_true", help="time the demo and a small comparison")
    parser.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA"))
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--datasets", help="comma-separated subset of the datasets to run")
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    if args.speed:
        emit({**recorded(False), **speed(args.data_home), "bench": "compare"}, False)
        return
    names = QUICK if args.quick else FULL
    if args.datasets:
        names = tuple(n.strip() for n in args.datasets.split(",") if n.strip())
    limit = args.time_limit if args.time_limit is not None else (20.0 if args.quick else 120.0)
    tables = []
    for name in names:
        t = run_one(name, args.data_home, limit, args.quick)
        tables.append(t)
        for _, r in t.iterrows():
            print(
                f"{name}: {r['method']} ({r['name']}): selected {r['selected']:.1%} on "
                f"{r['selection']}; confirmed {r['confirmed']:.1%} [{r['low']:.1%}, {r['high']:.1%}] "
                f"on {int(r['test_rows'])} test rows; fresh {r['fresh']:.1%} on {r['fresh_rows']} rows"
            )
        if len(t):
            reached = " (time allowance reached)" if t["stopped_early"].iloc[0] else ""
            print(
                f"{name}: {t['methods'].iloc[0]} methods, {t['models'].iloc[0]} models in "
                f"{t['seconds'].iloc[0]} s{reached}"
            )
    table = pd.concat(tables, ignore_index=True)
    table.to_csv(RESULTS / ("compare_quick.csv" if args.quick else "compare.csv"), index=False)
    points = 100 * (table["selected"] - table["fresh"])
    confirmed = 100 * (table["confirmed"] - table["fresh"])
    covered = (table["low"] <= table["fresh"]) & (table["fresh"] <= table["high"])
    per = table.assign(points=points, confirmed_points=confirmed).groupby("dataset", sort=False)
    emit(
        {
            **recorded(args.quick),
            "bench": "compare",
            "time_limit": limit,
            "optimism": {d: round(float(g["points"].mean()), 2) for d, g in per},
            "confirmed_optimism": {d: round(float(g["confirmed_points"].mean()), 2) for d, g in per},
            "mean_optimism": round(float(per["points"].mean().mean()), 2),
            "mean_confirmed_optimism": round(float(per["confirmed_points"].mean().mean()), 2),
            "coverage": round(float(covered.mean()), 3),
            "recommended_models": len(table),
            "optimism_within_1_point": bool(per["points"].mean().mean() <= 1.0),
        },
        args.quick,
    )


if __name__ == "__main__":
    main()
