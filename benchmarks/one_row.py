"""One row per call on four model shapes: trees in vector lanes (``ir_lanes``) against rows in
the lanes of the plan's blocks (``run``, the path before), and LightGBM's own predict.

The four LightGBM models of issue 29 (fixed seeds, one thread): ``adult`` (500 trees of 32
leaves, depth 5, 14 features), ``higgs255`` (higgs_small, 500 trees of 255 leaves, 28
features), ``rank300`` (rank_small, LambdaMART, 500 trees of 63 leaves, 300 features) and
``synth136`` (a synthetic binary task, 1,000 trees of 31 leaves, 136 features, 5% NaN).
--quick trains 20 trees each (fewer than a block of lanes, so both thrifty sides then run
``run``: a smoke test). Each compiled Full plan (uniform costs) is served twice from the
same code: once as ``thrifty.compile`` serves it (``lane_rows`` 1: one row through the lanes)
and once with ``lane_rows`` 0 (one row through ``run``, as before the lanes). The three sides
run in turn in blocks of 50 calls, their order rotating by one each round (what runs before a
side evicts what it uses), over 1,000 test rows each taken once per side (a new row each call,
as a service sees them); each figure is the mean µs per call of the fastest third of the
blocks (a shared machine's bursts removed alike from all sides). Both thrifty sides are checked
equal, bit for bit, to the interpreter on those rows first.

Figures: ``<m>_one_row_us`` (lanes), ``<m>_one_row_run_us`` (before), ``<m>_one_row_lightgbm_us``,
``<m>_lanes_vs_run`` and ``<m>_one_row_vs_lightgbm``; ``one_row.csv`` and ``one_row.png``.

    python benchmarks/one_row.py [--quick] [--models adult,rank300] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from _figures import emit

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MODELS = ("adult", "higgs255", "rank300", "synth136")


def model(name: str, n_trees: int, home: str):
    """The LightGBM booster of ``name`` and its test matrix (float64, category codes)."""
    import lightgbm as lgb
    from sklearn.datasets import make_classification

    from thrifty.datasets import load

    common = {"learning_rate": 0.1, "verbose": -1, "random_state": 0, "n_jobs": 1, "n_estimators": n_trees}
    if name == "synth136":
        X, y = make_classification(n_samples=20_000, n_features=136, n_informative=40, random_state=0)
        X[np.random.default_rng(0).random(X.shape) < 0.05] = np.nan
        fitted = lgb.LGBMClassifier(num_leaves=31, **common).fit(X[:-2000], y[:-2000])
        return fitted, X[-2000:]
    data = load({"higgs255": "higgs_small", "rank300": "rank_small"}.get(name, name), data_home=home)
    X, y, _ = data.subset("train")
    X_te, _, _ = data.subset("test")
    if name == "adult":
        fitted = lgb.LGBMClassifier(max_depth=5, num_leaves=32, **common).fit(X, y)
    elif name == "higgs255":
        fitted = lgb.LGBMClassifier(num_leaves=255, **common).fit(X, y)
    else:
        fitted = lgb.LGBMRanker(num_leaves=63, **common).fit(X, y, group=data.query_sizes("train"))
    return fitted, X_te


def one_row_means(fns: dict, rows: list, block: int = 50) -> dict:
    """Mean seconds per one-row call of each function over the fastest third of its blocks of
    ``block`` calls; the functions take the blocks in turn, in an order that rotates by one each
    round, each row once per function."""
    for fn in fns.values():
        fn(rows[0])
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for b, lo in enumerate(range(0, len(rows), block)):
        # Each side follows each other side in turn (what ran before evicts what it used).
        for name in names[b % len(names) :] + names[: b % len(names)]:
            fn = fns[name]
            t0 = time.perf_counter()
            for x in rows[lo : lo + block]:
                fn(x)
            times[name].append((time.perf_counter() - t0) / len(rows[lo : lo + block]))
    return {name: float(np.mean(sorted(t)[: max(1, len(t) // 3)])) for name, t in times.items()}


def measure(name: str, n_trees: int, home: str, calls: int) -> dict:
    import thrifty
    from thrifty import CostModel, Forest, evaluate
    from thrifty.runtime.compiled.serving import serving_path
    from thrifty.runtime.evaluation import costs_for

    fitted, X_te = model(name, n_trees, home)
    forest = Forest.from_model(fitted)
    booster = fitted.booster_
    M = forest._as_matrix(X_te)
    costs = CostModel.uniform(forest.n_features)
    t0 = time.perf_counter()
    compiled = thrifty.compile(forest, costs)
    compile_s = time.perf_counter() - t0
    by_run = serving_path(compiled.plan, compiled.forest_code, costs_for(compiled.plan, costs))
    by_run.lane_rows = 0
    rows = [M[i % len(M) : i % len(M) + 1].copy() for i in range(calls)]
    want = evaluate(forest, M[:200], costs, n_threads=1)
    for i in range(200):
        for side in (compiled.evaluate(rows[i], n_threads=1), by_run.serve(rows[i])):
            assert np.array_equal(side.raw, want.raw[i : i + 1]), (name, i)
            assert np.array_equal(side.cost.total, want.cost.total[i : i + 1]), (name, i)
    means = one_row_means(
        {
            "lanes": lambda x: compiled.evaluate(x, n_threads=1),
            "run": lambda x: by_run.serve(x),
            "lightgbm": lambda x: booster.predict(x, raw_score=True, num_threads=1),
        },
        rows,
    )
    us = {k: round(v * 1e6, 2) for k, v in means.items()}
    print(
        f"{name}: {forest.n_trees} trees, {forest.n_features} features, compiled in {compile_s:.0f} s; "
        f"one row: lanes {us['lanes']} us, run {us['run']} us, LightGBM {us['lightgbm']} us",
        flush=True,
    )
    return {
        f"{name}_one_row_us": us["lanes"],
        f"{name}_one_row_run_us": us["run"],
        f"{name}_one_row_lightgbm_us": us["lightgbm"],
        f"{name}_lanes_vs_run": round(means["lanes"] / means["run"], 3),
        f"{name}_one_row_vs_lightgbm": round(means["lanes"] / means["lightgbm"], 3),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 trees a model (< 1 min)")
    ap.add_argument(
        "--models", default=",".join(MODELS), help="comma-separated subset of " + ", ".join(MODELS)
    )
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home, help="folder of the shared datasets")
    args = ap.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        ap.error(f"unknown models {unknown}; choose from {', '.join(MODELS)}")
    figures: dict = {"bench": "one_row"}
    for name in names:
        n_trees = 20 if args.quick else 1000 if name == "synth136" else 500
        figures.update(measure(name, n_trees, args.data_home, 400 if args.quick else 1000))
    figures["load_average"] = round(os.getloadavg()[0], 2)
    _table(figures, names)
    emit(figures, bool(args.quick))
    return figures


def _table(figures: dict, names: list[str]) -> None:
    """``one_row.csv`` and ``one_row.png``: µs per one-row call of each side, per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    RESULTS.mkdir(parents=True, exist_ok=True)
    sides = (
        ("one_row_us", "thrifty lanes"),
        ("one_row_run_us", "thrifty run (before)"),
        ("one_row_lightgbm_us", "LightGBM"),
    )
    lines = ["model," + ",".join(label for _, label in sides)]
    lines += [f"{m}," + ",".join(str(figures[f"{m}_{key}"]) for key, _ in sides) for m in names]
    (RESULTS / "one_row.csv").write_text("\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(sides)
    for j, (key, label) in enumerate(sides):
        ax.bar(np.arange(len(names)) + j * width, [figures[f"{m}_{key}"] for m in names], width, label=label)
    ax.set_xticks(np.arange(len(names)) + width, names)
    ax.set_ylabel("µs per one-row call (one thread)")
    ax.set_title("One row per call")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "one_row.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
