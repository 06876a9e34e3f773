"""Scale-out on Dask: scoring, CEGB training, fitting in-memory methods on a sample, and compare.

Figures (all measured in one run on this machine):

* ``dask_overhead``: wall time of scoring generated Adult-like rows (14 features, a plain
  LightGBM model of 100 trees) on a local cluster of 2 single-threaded worker processes, over
  the wall time of single-process ``thrifty.evaluate`` with 2 threads on the same rows (both
  generate each partition's rows and reduce the costs to a summary; target <= 1.3).
  ``rows_per_second`` of both; ``worker_peak_mib``: the peak resident memory of each worker at
  two row counts (it must not grow with rows), and the cluster's mean cost equals the
  single-process one.
* CEGB fitted on 2 workers (``lightgbm.dask``) against one machine on the same rows: fit-time
  ratio, test accuracy, mean cost and features used of both, and of the 2-worker model with the
  lazy penalties doubled (LightGBM counts them over each worker's own rows).
* ``sample_*``: QWYC fitted on samples of growing size and scored on held-out rows on the
  cluster (accuracy with a 95% Wilson interval, mean cost).
* ``compare_speedup``: ``thrifty.compare`` on heart (quick settings) sequentially over the
  same with its fits as tasks on 2 workers (target >= 1.6); both outputs must be equal.

Full run: 20 million rows (memory measured at 5 and 20 million), CEGB on 40,000 rows x 20
features with 60 trees (the issue's setting), QWYC samples scored on 2 million held-out rows,
compare on heart with every method (quick settings); ``--quick``: 200,000 rows (memory at
100,000 and 200,000), CEGB on 10,000 rows with 20 trees, 100,000 held-out rows, compare with two
methods and 2 folds. ``--only scoring,cegb,...`` runs some parts. Writes
``benchmarks/results/scale[_quick].json``; the last stdout line is one JSON object.

    python benchmarks/scale.py [--quick] [--data-home DIR] [--only PARTS]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np
import pandas as pd
from _figures import emit

from thrifty.metrics import wilson_interval

N_FEATURES = 14
PARTITION_ROWS = 250_000
# Adult's features: which are category codes (and how many categories), the rest numeric.
CATEGORIES = {1: 8, 3: 16, 5: 7, 6: 14, 7: 6, 8: 5, 9: 2, 13: 41}
COSTS = [1, 2, 1, 4, 1, 2, 4, 2, 1, 1, 8, 8, 2, 1]


def adult_like(seed: int, n: int) -> tuple[pd.DataFrame, np.ndarray]:
    """``n`` generated rows shaped like Adult (6 numeric features, 8 category codes) and labels."""
    rng = np.random.default_rng(seed)
    cols = {}
    for j in range(N_FEATURES):
        if j in CATEGORIES:
            cols[f"x{j}"] = rng.integers(0, CATEGORIES[j], n).astype(np.float64)
        else:
            cols[f"x{j}"] = rng.gamma(2.0, 1.0 + j, n)
    X = pd.DataFrame(cols)
    score = (
        0.08 * X.x0
        + 0.6 * (X.x3 > 10)
        + 0.5 * (X.x5 == 2)
        + 0.3 * X.x12 / 13
        + 0.9 * (X.x10 > 60)
        - 0.4 * (X.x9 == 0)
        + rng.logistic(size=n)
        - 2.4
    )
    return X, (score > 0).astype(int).to_numpy()


def rows_of(seed: int, n: int) -> pd.DataFrame:
    return adult_like(seed, n)[0]


def peak_mib() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def local_cluster(n: int = 2):
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=n,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        memory_limit="4GiB",
    )
    return cluster, Client(cluster)


def scoring(model, n_rows: int, costs) -> dict:
    """Single-process and cluster scoring of the same ``n_rows`` generated rows."""
    import dask.dataframe as dd

    import thrifty
    import thrifty.dask as tdask

    starts = range(0, n_rows, PARTITION_ROWS)
    parts = [(seed, min(PARTITION_ROWS, n_rows - lo)) for seed, lo in enumerate(starts)]
    start, total = time.perf_counter(), 0.0
    for seed, n in parts:
        total += thrifty.evaluate(model, rows_of(seed, n), costs, n_threads=2).cost.total.sum()
    single = time.perf_counter() - start
    cluster, client = local_cluster()
    with cluster, client:
        meta = rows_of(0, 0)
        # Warm the workers (imports, the kernels' cache) before timing, as a long-lived cluster is.
        tdask.cost_summary(tdask.evaluate(model, dd.from_map(rows_of, [0], [1000], meta=meta), costs))
        frame = dd.from_map(rows_of, [p[0] for p in parts], [p[1] for p in parts], meta=meta)
        start = time.perf_counter()
        summary = tdask.cost_summary(tdask.evaluate(model, frame, costs), quantiles=(0.5, 0.9))
        wall = time.perf_counter() - start
        peaks = sorted(client.run(peak_mib).values())
    assert summary.n == n_rows and math.isclose(summary.mean, total / n_rows, rel_tol=1e-9)
    return {
        "rows": n_rows,
        "single_seconds": round(single, 2),
        "cluster_seconds": round(wall, 2),
        "dask_overhead": round(wall / single, 3),
        "single_rows_per_second": round(n_rows / single),
        "cluster_rows_per_second": round(n_rows / wall),
        "worker_peak_mib": [round(p) for p in peaks],
        "mean_cost": round(summary.mean, 4),
        "quantiles_exact": summary.quantiles_exact,
    }


def cegb(n_rows: int, n_estimators: int) -> dict:
    """CEGB at one trade-off: on one machine, on 2 workers, and on 2 workers with the lazy
    penalties doubled (the count each worker makes is over about half of the rows)."""
    import dask.dataframe as dd

    import thrifty
    from thrifty.costs import CostModel
    from thrifty.train import cegb as cegb_module
    from thrifty.train.cegb import CEGBClassifier

    w = np.random.default_rng(42).normal(size=20) * (np.random.default_rng(7).random(20) < 0.6)

    def data(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
        r = np.random.default_rng(seed)
        X = pd.DataFrame(r.normal(size=(n, 20)), columns=[f"f{i}" for i in range(20)])
        y = (X.to_numpy() @ w + 0.5 * X.f0 * X.f1 + r.normal(size=n) > 0).astype(int)
        return X, y

    X, y = data(n_rows, 0)
    X_test, y_test = data(50_000, 1)
    costs = CostModel(list(np.linspace(1, 20, 20)))
    params = dict(
        costs=costs, tradeoff=0.002, n_estimators=n_estimators, num_leaves=31, random_state=0, progress=False
    )
    out = {"rows": n_rows}

    def record(name: str, est, seconds: float) -> None:
        ev = thrifty.evaluate(est.forest_, X_test, costs)
        used = sorted({int(f) for f in est.forest_.feature if f >= 0})
        accuracy = float(np.mean(ev.labels == y_test))
        out[name] = {
            "fit_seconds": round(seconds, 2),
            "accuracy": round(accuracy, 4),
            "mean_cost": round(ev.cost.mean, 3),
            "features_used": len(used),
        }

    start = time.perf_counter()
    record("one_machine", CEGBClassifier(n_jobs=2, **params).fit(X, y), time.perf_counter() - start)
    dX = dd.from_pandas(X, npartitions=8).persist()
    dy = dd.from_pandas(pd.Series(y), npartitions=8).persist()
    start = time.perf_counter()
    record("two_workers", CEGBClassifier(n_jobs=1, **params).fit(dX, dy), time.perf_counter() - start)
    translate = cegb_module.cegb_params

    def doubled(*args, **kwargs):
        out = translate(*args, **kwargs)
        out["cegb_penalty_feature_lazy"] = [2 * v for v in out["cegb_penalty_feature_lazy"]]
        return out

    cegb_module.cegb_params = doubled
    try:
        start = time.perf_counter()
        est = CEGBClassifier(n_jobs=1, **params).fit(dX, dy)
        record("two_workers_lazy_doubled", est, time.perf_counter() - start)
    finally:
        cegb_module.cegb_params = translate
    out["fit_time_ratio"] = round(out["two_workers"]["fit_seconds"] / out["one_machine"]["fit_seconds"], 3)
    return out


def sample_sizes(sizes: list[int], n_test: int) -> dict:
    """QWYC fitted on samples of growing size, scored on held-out rows on the cluster."""
    import dask.dataframe as dd
    import lightgbm

    import thrifty.dask as tdask
    from thrifty.costs import CostModel
    from thrifty.order import QWYCClassifier

    X, y = adult_like(10_000, 60_000)
    costs = CostModel(COSTS, feature_names=list(X.columns))
    model = lightgbm.LGBMClassifier(n_estimators=100, num_leaves=31, verbose=-1, n_jobs=2).fit(X, y)
    test_seeds = list(range(20_000, 20_000 + max(1, n_test // PARTITION_ROWS)))
    per = min(PARTITION_ROWS, n_test)
    labels = np.concatenate([adult_like(s, per)[1] for s in test_seeds])
    out = {}
    frame = dd.from_map(rows_of, test_seeds, [per] * len(test_seeds), meta=rows_of(0, 0))
    for size in sizes:
        Xs, _ = adult_like(30_000 + size, size)
        qwyc = QWYCClassifier(model, alpha=0.01, progress=False).fit(Xs)
        scored = tdask.evaluate(qwyc, frame, costs)
        pred = scored["prediction"].compute().to_numpy()
        summary = tdask.cost_summary(scored, quantiles=())
        correct = float(np.sum(pred == labels))
        acc = correct / len(labels)
        lo, hi = wilson_interval(correct, len(labels))
        out[str(size)] = {
            "accuracy": round(acc, 4),
            "accuracy_95": [round(lo, 4), round(hi, 4)],
            "mean_cost": round(summary.mean, 3),
            "test_rows": len(labels),
        }
    return out


def compare_heart(client, data_home: str | None, quick: bool) -> dict:
    """compare on heart: sequential, then its fits on 2 workers; the two outputs are equal."""
    from thrifty import datasets
    from thrifty.comparison import compare

    ds = datasets.load("heart", data_home=data_home)
    X, y, _ = ds.subset("train")
    X_test, y_test, _ = ds.subset("test")
    kw = dict(quick=True, n_jobs=1, progress=False, X_test=X_test, y_test=y_test)
    if quick:  # two cheap methods and 2 folds: the same mechanism in seconds
        kw.update(methods=["lightgbm", "qwyc"], cv=2)
    start = time.perf_counter()
    alone = compare(X, y, ds.costs, **kw)
    sequential = time.perf_counter() - start
    client.run(lambda: __import__("thrifty.comparison"))  # imports, as a warm cluster has them
    start = time.perf_counter()
    parallel = compare(X, y, ds.costs, executor=client, **kw)
    wall = time.perf_counter() - start
    drop = ["fit_seconds"]
    pd.testing.assert_frame_equal(alone.table.drop(columns=drop), parallel.table.drop(columns=drop))
    return {
        "sequential_seconds": round(sequential, 2),
        "two_workers_seconds": round(wall, 2),
        "compare_speedup": round(sequential / wall, 3),
        "models": len(alone.table),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA"))
    parser.add_argument(
        "--only", default="scoring,cegb,sample,compare", help="comma-separated parts to run (default: all)"
    )
    args = parser.parse_args()
    parts = set(args.only.split(","))
    import lightgbm

    from thrifty.costs import CostModel

    X, y = adult_like(999, 50_000)
    model = lightgbm.LGBMClassifier(n_estimators=100, num_leaves=31, verbose=-1, n_jobs=2).fit(X, y)
    costs = CostModel(COSTS, feature_names=list(X.columns))
    small, big = (100_000, 200_000) if args.quick else (5_000_000, 20_000_000)
    figures: dict = {"bench": "scale"}
    if "scoring" in parts:
        runs = [scoring(model, n, costs) for n in (small, big)]
        print(runs, file=sys.stderr)
        figures["scoring"] = runs
        figures["dask_overhead"] = runs[-1]["dask_overhead"]
        figures["rows_per_second_cluster"] = runs[-1]["cluster_rows_per_second"]
        figures["rows_per_second_single"] = runs[-1]["single_rows_per_second"]
        figures["worker_peak_mib"] = {r["rows"]: r["worker_peak_mib"] for r in runs}
    # One cluster (the default client) for the other parts: starting one costs seconds of imports.
    cluster, client = local_cluster()
    with cluster, client:
        if "cegb" in parts:
            figures["cegb"] = cegb(10_000 if args.quick else 40_000, 20 if args.quick else 60)
            print(figures["cegb"], file=sys.stderr)
        if "sample" in parts:
            sizes = [500, 5_000] if args.quick else [500, 2_000, 10_000, 50_000]
            figures["sample"] = sample_sizes(sizes, 100_000 if args.quick else 2_000_000)
            print(figures["sample"], file=sys.stderr)
        if "compare" in parts and args.data_home:
            figures["compare"] = compare_heart(client, args.data_home, args.quick)
            figures["compare_speedup"] = figures["compare"]["compare_speedup"]
        elif "compare" in parts:
            figures["compare"] = "skipped: set THRIFTY_DATA or --data-home for heart"
    if parts != {"scoring", "cegb", "sample", "compare"}:
        figures["bench"] = "scale_" + "_".join(sorted(parts))
    emit(figures, args.quick)


if __name__ == "__main__":
    main()
