"""Runtime speed: thrifty's dense and lazy evaluation against LightGBM's and scikit-learn's predict.

On Adult: a LightGBM model of 500 trees of depth 5 and a scikit-learn random forest (300 trees;
100 with --quick). Each ratio (ours / theirs) comes from the two sides timed alternately in this
one process (median of the repeats), so a shared machine's drift hits both alike. A batch of
10 million rows (1 million with --quick) checks that working memory stays bounded. Writes
benchmarks/results/runtime.csv and runtime.png; the last stdout line is one JSON object.

    python benchmarks/runtime.py [--quick] [--data-home DIR]
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


def paired_times(fn_a, fn_b, repeats: int) -> tuple[float, float]:
    """Median times of ``fn_a`` and ``fn_b`` measured alternately, so that a shared machine's
    drift hits both sides of a ratio alike."""
    fn_a(), fn_b()  # warm-up: compilation, caches
    ta, tb = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn_a()
        t1 = time.perf_counter()
        fn_b()
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return float(np.median(ta)), float(np.median(tb))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and a smaller forest (< 1 min)")
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home, help="folder of the shared datasets")
    args = ap.parse_args(argv)

    import lightgbm as lgb
    import numba
    from sklearn.ensemble import RandomForestClassifier

    import thrifty
    from thrifty import CostModel, Forest, evaluate
    from thrifty.datasets import load

    data = load("adult", data_home=args.data_home)
    X_tr, y_tr, _ = data.subset("train")
    X_te, _, _ = data.subset("test")
    repeats = 5 if args.quick else 9
    n_cores = numba.config.NUMBA_NUM_THREADS

    print(f"adult: {len(X_tr)} train / {len(X_te)} test rows; {n_cores} cores; thrifty {thrifty.__version__}")
    gbm = lgb.LGBMClassifier(n_estimators=500, max_depth=5, num_leaves=32, learning_rate=0.1,
                             verbose=-1, random_state=0).fit(X_tr, y_tr)
    forest = Forest.from_model(gbm)
    booster = gbm.booster_
    # Both sides get the same float matrix (category codes), so input conversion is alike.
    M = forest._as_matrix(X_te)
    ours = forest.predict_raw(M, n_threads=1)
    theirs = booster.predict(M, raw_score=True, num_threads=1)
    max_diff = float(np.max(np.abs(ours - theirs)))
    assert max_diff < 1e-9 * max(1.0, float(np.max(np.abs(theirs)))), max_diff

    t_lgb_1, t_our_1 = paired_times(lambda: booster.predict(M, raw_score=True, num_threads=1),
                                    lambda: forest.predict_raw(M, n_threads=1), repeats)
    t_lgb_all, t_our_all = paired_times(
        lambda: booster.predict(M, raw_score=True, num_threads=n_cores),
        lambda: forest.predict_raw(M, n_threads=n_cores), repeats)

    costs = CostModel.uniform(forest.n_features, feature_names=forest.feature_names, tree_cost=0.01)
    t_plain_1, t_eval_1 = paired_times(lambda: forest.predict_raw(M, n_threads=1),
                                       lambda: evaluate(forest, M, costs, n_threads=1), repeats)
    t_plain_all, t_eval_all = paired_times(lambda: forest.predict_raw(M),
                                           lambda: evaluate(forest, M, costs), repeats)

    def provider(features: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return M[np.ix_(rows, features)]

    lazy = evaluate(forest, provider, costs, n_rows=len(M))
    dense = evaluate(forest, M, costs)
    assert np.array_equal(lazy.raw, dense.raw) and np.array_equal(lazy.cost.total, dense.cost.total)
    t_dense_all, t_lazy_all = paired_times(lambda: evaluate(forest, M, costs),
                                           lambda: evaluate(forest, provider, costs, n_rows=len(M)),
                                           repeats)

    n_rf = 100 if args.quick else 300
    rf = RandomForestClassifier(n_estimators=n_rf, min_samples_leaf=5, n_jobs=n_cores,
                                random_state=0).fit(M_tr := forest._as_matrix(X_tr), y_tr)
    rf_forest = Forest.from_model(rf)
    assert np.allclose(rf_forest.predict_proba(M), rf.predict_proba(M), rtol=1e-9, atol=1e-12)
    rf.set_params(n_jobs=1)
    t_skl_1, t_rf_1 = paired_times(lambda: rf.predict_proba(M), lambda: rf_forest.predict_proba(M),
                                   max(3, repeats // 2))
    del M_tr

    # Bounded memory: a big batch (10M rows; 1M with --quick) of a 50-tree model. Working memory
    # beyond the input and the per-example outputs must not grow with the number of rows.
    import tracemalloc

    small = Forest.from_model(lgb.LGBMClassifier(n_estimators=50, max_depth=5, num_leaves=32,
                                                 verbose=-1, random_state=0).fit(X_tr, y_tr))
    big_rows = 1_000_000 if args.quick else 10_000_000
    big = np.tile(M, (big_rows // len(M) + 1, 1))[:big_rows]
    tracemalloc.start()
    t0 = time.perf_counter()
    big_eval = evaluate(small, big, costs)
    big_seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    outputs = sum(a.nbytes for a in (big_eval.raw, big_eval.proba, big_eval.labels, big_eval.exit,
                                     big_eval.cost.feature, big_eval.cost.evaluation,
                                     big_eval.cost.total, big_eval.cost.n_trees,
                                     big_eval.cost.n_nodes, big_eval.cost.acquired))
    del big, big_eval

    figures = {
        "bench": "runtime",
        "quick": bool(args.quick),
        "rows": int(len(M)),
        "lightgbm_trees": forest.n_trees,
        "rf_trees": rf_forest.n_trees,
        "rf_nodes": rf_forest.n_nodes,
        "cores": int(n_cores),
        "ratio_vs_lightgbm": round(t_our_1 / t_lgb_1, 3),
        "ratio_vs_lightgbm_all_cores": round(t_our_all / t_lgb_all, 3),
        "ratio_vs_sklearn": round(t_rf_1 / t_skl_1, 3),
        "cost_accounting_overhead": round(t_eval_1 / t_plain_1, 3),
        "cost_accounting_overhead_all_cores": round(t_eval_all / t_plain_all, 3),
        "lazy_overhead": round(t_lazy_all / t_dense_all, 3),
        "max_abs_diff_vs_lightgbm": max_diff,
        "big_batch_rows": big_rows,
        "big_batch_seconds": round(big_seconds, 2),
        "big_batch_output_mb": round(outputs / 2**20, 1),
        "big_batch_working_mb": round((peak - outputs) / 2**20, 1),
    }
    rows = [("lightgbm predict, 1 thread", t_lgb_1), ("thrifty predict_raw, 1 thread", t_our_1),
            ("thrifty evaluate (costs), 1 thread", t_eval_1),
            (f"lightgbm predict, {n_cores} threads", t_lgb_all),
            (f"thrifty predict_raw, {n_cores} threads", t_our_all),
            (f"thrifty evaluate (costs), {n_cores} threads", t_eval_all),
            (f"thrifty lazy evaluate, {n_cores} threads", t_lazy_all),
            ("sklearn RF predict_proba, 1 thread", t_skl_1), ("thrifty RF predict_proba, 1 thread", t_rf_1)]
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "runtime.csv", "w") as fh:
        fh.write("what,seconds\n")
        for name, t in rows:
            fh.write(f"{name},{t:.6f}\n")
            print(f"  {name:45s} {t * 1e3:9.2f} ms")
    _plot(rows, RESULTS / "runtime.png")
    emit(figures, bool(args.quick))
    return figures


def _plot(rows: list[tuple[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    names = [r[0] for r in rows][::-1]
    ax.barh(names, [r[1] * 1e3 for r in rows][::-1],
            color=["tab:orange" if n.startswith("thrifty") else "tab:gray" for n in names])
    ax.set_xlabel("milliseconds (median)")
    ax.set_title("Prediction time on Adult (test split)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
