"""Runtime speed: thrifty's interpreter and compiled plans against LightGBM, XGBoost, tl2cgen,
onnxruntime, CatBoost and scikit-learn.

On Adult: a LightGBM model of 500 trees of depth 5 (100 with --quick), an XGBoost model of 500
trees of depth 6 (100 with --quick) and a scikit-learn random forest (300 trees; 100 with
--quick). Every engine runs on one thread and reads the same float64 matrix (category codes).
Each ratio (ours / theirs) comes from the sides timed in turn in this one process (median of the
repeats; one-row figures: mean of 1,000 calls per side, in alternating blocks), so a shared
machine's drift hits both alike. thrifty's figures include exact cost accounting. The QWYC plan
is QWYC* (``ordering="optimize"``) fitted on 16,000 training rows, the alpha whose test
difference from the full model is nearest 0.5%. ``compile_seconds`` is a cold compile (empty
cache) of the LightGBM model's Full plan; ``cache_load_seconds`` is unpickling that compiled plan
in a fresh process (it loads the code from the disk cache), and ``first_call_seconds`` the first
one-row evaluate there. A batch of 10 million rows (1 million with
--quick) checks that working memory stays bounded. tl2cgen figures need the ``bench`` extra
(treelite, tl2cgen) and a C compiler; without them, and with --quick, they are null. Writes
benchmarks/results/runtime.csv and runtime.png; the last stdout line is one JSON object.
``--only single-row`` measures only the one-row figures (the same model, the QWYC plan of alpha
0.005) and writes them to runtime_single_row.json. onnxruntime (one thread) runs the LightGBM
model converted by onnxmltools (the ``bench`` extra has both); CatBoost's own predict (raw
scores, one thread) a CatBoost model of as many symmetric trees of depth 5 (32 leaves), against
thrifty compiled on it when thrifty imports CatBoost models (else its ratios are null, with the
reason): ``compiled_ratio_vs_onnxruntime_batch`` / ``_one_row`` and
``compiled_ratio_vs_catboost_batch`` / ``_one_row``.

    python benchmarks/runtime.py [--quick] [--only single-row] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _figures import emit
from _rivals import catboost_part, onnxruntime_part

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
    ap.add_argument("--only", choices=["single-row"], help="measure only this part")
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
    n_trees = 100 if args.quick else 500
    gbm = lgb.LGBMClassifier(
        n_estimators=n_trees,
        max_depth=5,
        num_leaves=32,
        learning_rate=0.1,
        verbose=-1,
        random_state=0,
        n_jobs=1,
    ).fit(X_tr, y_tr)
    forest = Forest.from_model(gbm)
    booster = gbm.booster_
    # Both sides get the same float matrix (category codes), so input conversion is alike.
    M = forest._as_matrix(X_te)
    ours = forest.predict_raw(M, n_threads=1)
    theirs = booster.predict(M, raw_score=True, num_threads=1)
    max_diff = float(np.max(np.abs(ours - theirs)))
    assert max_diff < 1e-9 * max(1.0, float(np.max(np.abs(theirs)))), max_diff

    t_lgb_1, t_our_1 = paired_times(
        lambda: booster.predict(M, raw_score=True, num_threads=1),
        lambda: forest.predict_raw(M, n_threads=1),
        repeats,
    )
    t_lgb_all, t_our_all = paired_times(
        lambda: booster.predict(M, raw_score=True, num_threads=n_cores),
        lambda: forest.predict_raw(M, n_threads=n_cores),
        repeats,
    )

    costs = CostModel.uniform(forest.n_features, feature_names=forest.feature_names, tree_cost=0.01)
    if args.only == "single-row":
        figures = {"bench": "runtime_single_row", **single_row_section(args, forest, booster, M, X_tr, costs)}
        emit(figures, bool(args.quick))
        return figures
    t_plain_1, t_eval_1 = paired_times(
        lambda: forest.predict_raw(M, n_threads=1), lambda: evaluate(forest, M, costs, n_threads=1), repeats
    )
    t_plain_all, t_eval_all = paired_times(
        lambda: forest.predict_raw(M), lambda: evaluate(forest, M, costs), repeats
    )

    def provider(features: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return M[np.ix_(rows, features)]

    lazy = evaluate(forest, provider, costs, n_rows=len(M))
    dense = evaluate(forest, M, costs)
    assert np.array_equal(lazy.raw, dense.raw) and np.array_equal(lazy.cost.total, dense.cost.total)
    t_dense_all, t_lazy_all = paired_times(
        lambda: evaluate(forest, M, costs), lambda: evaluate(forest, provider, costs, n_rows=len(M)), repeats
    )

    compiled_figures, compiled_rows = compiled_section(
        args, forest, booster, M, X_tr, y_tr, X_te, costs, repeats
    )

    n_rf = 100 if args.quick else 300
    rf = RandomForestClassifier(n_estimators=n_rf, min_samples_leaf=5, n_jobs=n_cores, random_state=0).fit(
        M_tr := forest._as_matrix(X_tr), y_tr
    )
    rf_forest = Forest.from_model(rf)
    assert np.allclose(rf_forest.predict_proba(M), rf.predict_proba(M), rtol=1e-9, atol=1e-12)
    rf.set_params(n_jobs=1)
    t_skl_1, t_rf_1 = paired_times(
        lambda: rf.predict_proba(M), lambda: rf_forest.predict_proba(M), max(3, repeats // 2)
    )
    del M_tr

    # Bounded memory: a big batch (10M rows; 1M with --quick) of a 50-tree model. Working memory
    # beyond the input and the per-example outputs must not grow with the number of rows.
    import tracemalloc

    small = Forest.from_model(
        lgb.LGBMClassifier(n_estimators=50, max_depth=5, num_leaves=32, verbose=-1, random_state=0).fit(
            X_tr, y_tr
        )
    )
    big_rows = 1_000_000 if args.quick else 10_000_000
    big = np.tile(M, (big_rows // len(M) + 1, 1))[:big_rows]
    tracemalloc.start()
    t0 = time.perf_counter()
    big_eval = evaluate(small, big, costs)
    big_seconds = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    outputs = sum(
        a.nbytes
        for a in (
            big_eval.raw,
            big_eval.proba,
            big_eval.labels,
            big_eval.exit,
            big_eval.cost.feature,
            big_eval.cost.evaluation,
            big_eval.cost.total,
            big_eval.cost.n_trees,
            big_eval.cost.n_nodes,
            big_eval.cost.acquired,
        )
    )
    del big, big_eval

    figures = {
        "bench": "runtime",
        **compiled_figures,
        "quick": bool(args.quick),
        "rows": int(len(M)),
        "lightgbm_trees": forest.n_trees,
        "rf_trees": rf_forest.n_trees,
        "rf_nodes": rf_forest.n_nodes,
        "cores": int(n_cores),
        # The machine's 1-minute load average at the end (a shared machine: say how busy it was).
        "load_average": round(os.getloadavg()[0], 2),
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
    rows = [
        ("lightgbm predict, 1 thread", t_lgb_1),
        ("thrifty predict_raw, 1 thread", t_our_1),
        ("thrifty evaluate (costs), 1 thread", t_eval_1),
        (f"lightgbm predict, {n_cores} threads", t_lgb_all),
        (f"thrifty predict_raw, {n_cores} threads", t_our_all),
        (f"thrifty evaluate (costs), {n_cores} threads", t_eval_all),
        (f"thrifty lazy evaluate, {n_cores} threads", t_lazy_all),
        ("sklearn RF predict_proba, 1 thread", t_skl_1),
        ("thrifty RF predict_proba, 1 thread", t_rf_1),
        *compiled_rows,
    ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / "runtime.csv", "w") as fh:
        fh.write("what,seconds\n")
        for name, t in rows:
            fh.write(f"{name},{t:.6f}\n")
            print(f"  {name:45s} {t * 1e3:9.2f} ms")
    _plot(rows, RESULTS / "runtime.png")
    emit(figures, bool(args.quick))
    return figures


def one_row_means(fns: dict, X: np.ndarray, calls: int = 1000, block: int = 50, width: int = 1) -> dict:
    """Mean seconds per one-row call of each function, over ``calls`` rows of ``X`` taken in
    turn; the functions alternate in blocks of ``block`` calls, in an order drawn afresh (seeded)
    for each block, so drift and cache effects hit all alike. With ``width`` > 1, each call
    takes that many consecutive rows."""
    span = len(X) - width + 1
    rows = [X[(i * width) % span : (i * width) % span + width].copy() for i in range(calls)]
    for fn in fns.values():
        fn(rows[0])
    total = dict.fromkeys(fns, 0.0)
    names = list(fns)
    rng = np.random.default_rng(0)
    for lo in range(0, calls, block):
        # A function timed right after another finds the caches as that one left them
        # (measured: enough to reorder two engines on one row). A rotated order keeps each
        # function behind the same other one every block (one-row Adult: 6.2 µs a call behind
        # LightGBM's predict, 4.2 behind another thrifty side): the order is drawn afresh.
        for k in rng.permutation(len(names)).tolist():
            name = names[k]
            fn = fns[name]
            t0 = time.perf_counter()
            for x in rows[lo : lo + block]:
                fn(x)
            total[name] += time.perf_counter() - t0
    return {name: t / calls for name, t in total.items()}


def single_row_section(args, forest, booster, M, X_tr, costs) -> dict:
    """One-row figures only: compiled Full and QWYC (alpha 0.005) plans against LightGBM."""
    import thrifty
    from thrifty import evaluate
    from thrifty.order import qwyc

    full = thrifty.compile(forest, costs)
    _, fit_rows = _qwyc_rows(forest, X_tr)
    qcomp = thrifty.compile(
        qwyc(forest, fit_rows, alpha=0.005, ordering="given" if args.quick else "optimize"), costs
    )
    return {
        **_single_row_figures(booster, full, qcomp, lambda x: evaluate(forest, x, costs, n_threads=1), M),
        "load_average": os.getloadavg()[0],
        "lightgbm_trees": forest.n_trees,
    }


def _single_row_figures(booster, full, qcomp, interpreter, M: np.ndarray) -> dict:
    """One-row figures: mean µs per call of LightGBM, the compiled Full and QWYC plans and the
    interpreter (one thread), and the compiled plans' ratios to LightGBM."""
    singles = one_row_means(
        {
            "lightgbm": lambda x: booster.predict(x, raw_score=True, num_threads=1),
            "compiled_full": lambda x: full.evaluate(x, n_threads=1),
            "compiled_qwyc": lambda x: qcomp.evaluate(x, n_threads=1),
            "interpreter_full": interpreter,
        },
        M,
    )
    return {
        "single_row_ratio_vs_lightgbm": round(singles["compiled_full"] / singles["lightgbm"], 3),
        "single_row_us": {k: round(v * 1e6, 1) for k, v in singles.items()},
        "qwyc_single_row_ratio_vs_lightgbm": round(singles["compiled_qwyc"] / singles["lightgbm"], 3),
    }


def _qwyc_rows(forest, X_tr) -> tuple[np.ndarray, np.ndarray]:
    """The training matrix and the 16,000 of its rows QWYC is fitted on."""
    M_tr = forest._as_matrix(X_tr)
    rng = np.random.default_rng(0)
    return M_tr, M_tr[rng.choice(len(M_tr), size=min(16_000, len(M_tr)), replace=False)]


def compiled_section(args, forest, booster, M, X_tr, y_tr, X_te, costs, repeats) -> tuple[dict, list]:
    """thrifty.compile against LightGBM, tl2cgen and XGBoost; QWYC compiled; compile and load times."""
    import thrifty
    from thrifty import evaluate
    from thrifty.order import qwyc

    one = 1
    cache = tempfile.mkdtemp(prefix="thrifty-cache-")
    os.environ["THRIFTY_CACHE_DIR"] = cache  # a cold cache: compile_seconds is a real compile
    t0 = time.perf_counter()
    full = thrifty.compile(forest, costs)
    compile_seconds = time.perf_counter() - t0
    assert full.native
    ref = evaluate(forest, M, costs, n_threads=one)
    got = full.evaluate(M, n_threads=one)
    assert np.array_equal(ref.raw, got.raw) and np.array_equal(ref.cost.total, got.cost.total)
    assert np.array_equal(got.raw, booster.predict(M, raw_score=True, num_threads=one))
    load_seconds, first_call = _fresh_process_load(full, M[:1], cache)
    compile_1000 = None if args.quick else _compile_seconds_1000(X_tr, y_tr)

    t_lgb, t_comp, t_interp = _paired3(
        lambda: booster.predict(M, raw_score=True, num_threads=one),
        lambda: full.evaluate(M, n_threads=one),
        lambda: evaluate(forest, M, costs, n_threads=one),
        repeats,
    )
    # tl2cgen's C compile takes minutes on a shared machine: full runs only.
    t_tl2 = None if args.quick else _tl2cgen_time(booster, M, full, repeats)

    # QWYC*: the alpha nearest 0.5% test difference.
    M_tr, fit_rows = _qwyc_rows(forest, X_tr)
    full_labels = ref.labels
    best = None
    for alpha in (0.005,) if args.quick else (0.002, 0.005, 0.01):
        plan = qwyc(forest, fit_rows, alpha=alpha, ordering="optimize" if not args.quick else "given")
        ev = evaluate(plan, M, costs)
        diff = float(np.mean(ev.labels != full_labels))
        if best is None or abs(diff - 0.005) < abs(best[1] - 0.005):
            best = (plan, diff, float(ev.cost.n_trees.mean()))
    qplan, qdiff, qtrees = best
    qcomp = thrifty.compile(qplan, costs)
    qref = evaluate(qplan, M, costs)
    assert np.array_equal(qcomp.evaluate(M).raw, qref.raw)
    t_full_b, t_q_b, _ = _paired3(
        lambda: full.evaluate(M, n_threads=one), lambda: qcomp.evaluate(M, n_threads=one), None, repeats
    )

    xgb_figs, xgb_rows = _xgboost_part(args, M_tr, y_tr, M, costs, repeats)
    ort_figs, ort_rows = onnxruntime_part(booster, forest, full, M, repeats, _paired3, one_row_means)
    cb_figs, cb_rows = catboost_part(M_tr, y_tr, M, costs, forest.n_trees, repeats, _paired3, one_row_means)
    figures = {
        "compiled_ratio_vs_lightgbm": round(t_comp / t_lgb, 3),
        "interpreter_ratio_vs_lightgbm": round(t_interp / t_lgb, 3),
        "compiled_ratio_vs_tl2cgen": None if t_tl2 is None else round(t_comp / t_tl2, 3),
        "tl2cgen_ratio_vs_lightgbm": None if t_tl2 is None else round(t_tl2 / t_lgb, 3),
        "compiled_ns_per_tree_row": round(t_comp / (forest.n_trees * len(M)) * 1e9, 2),
        **_single_row_figures(booster, full, qcomp, lambda x: evaluate(forest, x, costs, n_threads=one), M),
        "qwyc_test_difference": round(qdiff, 4),
        "qwyc_mean_trees": round(qtrees, 2),
        "qwyc_compiled_speedup": round(t_full_b / t_q_b, 2),
        "qwyc_compiled_speedup_efficiency": round((t_full_b / t_q_b) / (forest.n_trees / qtrees), 3),
        "compile_seconds": round(compile_seconds, 2),
        "compile_trees": forest.n_trees,
        "compile_seconds_1000_trees": compile_1000,
        "compiled_blocks": _compiled_blocks(),
        "cache_load_seconds": round(load_seconds, 3),
        "first_call_seconds": round(first_call, 3),
        **xgb_figs,
        **ort_figs,
        **cb_figs,
    }
    rows = [
        ("lightgbm predict, 1 thread (compiled section)", t_lgb),
        ("thrifty compiled evaluate (costs), 1 thread", t_comp),
        ("thrifty interpreter evaluate (costs), 1 thread", t_interp),
        ("thrifty compiled QWYC evaluate, 1 thread", t_q_b),
        *xgb_rows,
        *ort_rows,
        *cb_rows,
    ]
    if t_tl2 is not None:
        rows.append(("tl2cgen quantize=1 predict, 1 thread", t_tl2))
    return figures, rows


def _compile_seconds_1000(X_tr, y_tr) -> float:
    """Seconds of a cold compile of a 1,000-tree LightGBM model of 32 leaves (issue 14's
    compile target), on all cores."""
    import lightgbm as lgb

    import thrifty
    from thrifty import Forest

    model = lgb.LGBMClassifier(
        n_estimators=1000, max_depth=5, num_leaves=32, verbose=-1, random_state=1, n_jobs=1
    ).fit(X_tr, y_tr)
    forest = Forest.from_model(model)
    before = os.environ["THRIFTY_CACHE_DIR"]
    os.environ["THRIFTY_CACHE_DIR"] = tempfile.mkdtemp(prefix="thrifty-cache-")
    t0 = time.perf_counter()
    thrifty.compile(forest)
    seconds = time.perf_counter() - t0
    os.environ["THRIFTY_CACHE_DIR"] = before
    return round(seconds, 2)


def _compiled_blocks() -> str:
    """The kinds of blocks this run's target compiles to (``targets.current``)."""
    from thrifty.runtime.compiled import targets

    isa = {"avx512": "AVX-512", "avx2": "AVX2", "neon": "NEON", "sve": "SVE"}
    target = targets.current()
    return f"vector ({isa[target.name]}) and scalar" if target.lanes else "scalar"


def _paired3(fa, fb, fc, repeats: int) -> tuple[float, float, float | None]:
    """Median times of two or three functions timed in turn in each repeat."""
    fns = [f for f in (fa, fb, fc) if f is not None]
    for f in fns:
        f()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for k, f in enumerate(fns):
            t0 = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t0)
    med = [float(np.median(t)) for t in times]
    return med[0], med[1], (med[2] if len(med) > 2 else None)


def _fresh_process_load(compiled, x1: np.ndarray, cache: str) -> tuple[float, float]:
    """Seconds to unpickle ``compiled`` in a new process that has imported thrifty's runtime
    (the code comes from the disk cache), and of its first one-row evaluate there."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.pkl"
        path.write_bytes(pickle.dumps((compiled, x1)))
        code = (
            # The runtime's modules are imported first: the figure is loading the plan's code.
            "import pickle, time, sys, json, thrifty.runtime.compiled\n"
            "t0 = time.perf_counter()\n"
            f"plan, x = pickle.loads(open({str(path)!r}, 'rb').read())\n"
            "t1 = time.perf_counter()\n"
            "plan.evaluate(x, n_threads=1)\n"
            "t2 = time.perf_counter()\n"
            "assert plan.native and plan.forest_code.code.from_cache\n"
            "print(json.dumps([t1 - t0, t2 - t1]))\n"
        )
        env = {**os.environ, "THRIFTY_CACHE_DIR": cache, "PYTHONPATH": str(HERE.parent)}
        out = (
            subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            .stdout.strip()
            .splitlines()[-1]
        )
    import json

    load, first = json.loads(out)
    return float(load), float(first)


def _tl2cgen_time(booster, M: np.ndarray, compiled, repeats: int) -> float | None:
    """Median seconds of tl2cgen's (quantize=1) one-thread batch predict, or None without it."""
    try:
        import tl2cgen
        import treelite
    except ImportError:
        print("  tl2cgen/treelite not installed (pip install 'thrifty[bench]'): skipped")
        return None
    with tempfile.TemporaryDirectory() as tmp:
        lib = str(Path(tmp) / "model.so")
        model = treelite.frontend.from_lightgbm(booster)
        tl2cgen.export_lib(model, toolchain="gcc", libpath=lib, params={"quantize": 1, "parallel_comp": 8})
        predictor = tl2cgen.Predictor(lib, nthread=1)
        dm = tl2cgen.DMatrix(M, dtype="float64")
        out = np.asarray(predictor.predict(dm, pred_margin=True)).reshape(-1)
        expected = booster.predict(M, raw_score=True)
        assert np.allclose(out, expected, rtol=1e-6, atol=1e-6), np.max(np.abs(out - expected))
        t_tl2, _, _ = _paired3(
            lambda: predictor.predict(dm, pred_margin=True),
            lambda: compiled.evaluate(M, n_threads=1),
            None,
            repeats,
        )
    return t_tl2


def _xgboost_part(args, M_tr, y_tr, M, costs, repeats) -> tuple[dict, list]:
    """XGBoost, 500 trees of depth 6 (100 with --quick): compiled evaluate against its predict."""
    import xgboost as xgb

    import thrifty
    from thrifty import Forest

    n = 100 if args.quick else 500
    model = xgb.XGBClassifier(
        n_estimators=n, max_depth=6, learning_rate=0.1, n_jobs=1, tree_method="hist", random_state=0
    ).fit(M_tr, y_tr)
    forest = Forest.from_model(model)
    compiled = thrifty.compile(forest, costs)
    booster = model.get_booster()
    booster.set_param({"nthread": 1})
    theirs = booster.inplace_predict(M, predict_type="margin")
    assert np.array_equal(compiled.evaluate(M).raw, theirs.astype(np.float64))
    t_xgb, t_comp, _ = _paired3(
        lambda: booster.inplace_predict(M, predict_type="margin"),
        lambda: compiled.evaluate(M, n_threads=1),
        None,
        repeats,
    )
    return (
        {"xgboost_trees": n, "xgboost_compiled_ratio_vs_xgboost": round(t_comp / t_xgb, 3)},
        [
            ("xgboost inplace_predict, 1 thread", t_xgb),
            ("thrifty compiled XGBoost evaluate, 1 thread", t_comp),
        ],
    )


def _plot(rows: list[tuple[str, float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    names = [r[0] for r in rows][::-1]
    ax.barh(
        names,
        [r[1] * 1e3 for r in rows][::-1],
        color=["tab:orange" if n.startswith("thrifty") else "tab:gray" for n in names],
    )
    ax.set_xlabel("milliseconds (median)")
    ax.set_title("Prediction time on Adult (test split)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
