"""Compiled speed across model shapes: thrifty compiled against LightGBM, lleaves and tl2cgen on
four LightGBM models and on lleaves' own three benchmark models (issue 29).

Models (fixed seeds): ``adult`` (500 trees of 32 leaves, depth 5, 14 features), ``higgs255``
(higgs_small, 500 x 255 leaves, 28 features), ``rank300`` (rank_small LambdaMART, 500 x 63
leaves, 300 features), ``synth136`` (a synthetic binary task, 1,000 x 31 leaves, 136 features);
and lleaves' NYC_taxi, airline and mtpl2 (``$THRIFTY_DATA/lleaves_models``), on inputs drawn from
each model's ``feature_infos`` (uniform in numeric ranges, a seen or unseen category code, 10%
NaN) at 1, 10, 100 and 10,000 rows per call. Every engine runs on one thread, in this one process,
on the same float64 matrix, timed in turn: batch figures are medians of 5 interleaved repeats (ns
per tree and row over the test rows), one-row figures the least of 3 means of 1,000 calls in
alternating blocks of 50, each mean over the blocks that follow another engine's
(``foreign_one_row_means``, ``steady_one_row``: thrifty's sides do not warm each other's
caches for it, as no rival has a sibling to do that for it). thrifty compiled is
``thrifty.compile`` with its own choice of blocks ("thrifty"), and forced onto vector and onto
scalar blocks (``THRIFTY_BLOCKS``; on lleaves' models onto branchy blocks too), with exact costs
accounted. Every engine's raw scores
are checked against LightGBM's (max abs diff).
On the ranker, a QWYC plan (``qwyc_ranking``, top 5) and a Cronus cascade (its closed-form
initialization, ``init_only``: the plan's shape is what native execution depends on) are compiled:
their ``native`` flags and times beside the Full plan's.

lleaves (needs llvmlite < 0.45) compiles in its own environment and is loaded here from its
object files; see ``benchmarks/_lleaves.py`` for the one-time setup. Without that environment
(or tl2cgen, or a C compiler) its figures are null and the line before the table says why.
Compiled objects are cached in ``~/.cache/thrifty-bench`` (``THRIFTY_BENCH_CACHE``).

Figures (the last stdout line, and results/shapes.json): for m in adult, higgs255, rank300,
synth136: ``m_batch_vs_lleaves`` and ``m_one_row_vs_lleaves`` (thrifty's time / lleaves'),
``m_fastest`` (thrifty is the fastest engine in batch and on one row); ``native_plans``;
``avx2_vs_avx512_per_row``; ``peer_worst_vs_lleaves`` (the largest thrifty / lleaves ratio over
lleaves' models and batch sizes); ``m_compile_seconds`` for every model (thrifty's own choice
compiled into an empty temporary cache, wall seconds until every entry is ready),
``m_usable_seconds`` (until ``thrifty.compile`` returned: its scores-only entries may follow
in the background) and ``m_lleaves_compile_seconds`` (as
timed when lleaves compiled it into its cache; null for objects cached before that was kept);
the raw times and exactness. Writes results/shapes.csv and
shapes.png. ``--quick``: 100-tree models (50 of 255 leaves), lleaves' models up to 1,000 rows.

    python benchmarks/shapes.py --prepare [--quick]   # compile lleaves and tl2cgen once, untimed
    python benchmarks/shapes.py [--quick] [--data-home DIR] [--only adult,NYC_taxi,...]
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _figures import emit, environment
from _lleaves import lleaves_compile_seconds, lleaves_predict, tl2cgen_predict
from _targets import avx2_vs_avx512_per_row
from runtime import one_row_means

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
OURS = ("thrifty", "thrifty_vector", "thrifty_scalar", "thrifty_branchy")
SHAPES = ("adult", "higgs255", "rank300", "synth136")
PEERS = ("NYC_taxi", "airline", "mtpl2")


def medians(fns: dict, repeats: int, seed: int = 0) -> dict:
    """Median seconds of each function, all timed in turn in every repeat (after a warm-up),
    in a fresh random order per repeat, the one of several draws in which the fewest calls
    follow a call of the same engine (``family``: thrifty's sides are one engine), counting
    the previous repeat's last call. Timed always in one order, thrifty's own choice ran 3 to
    8% slower than the very same object code forced onto vector blocks, timed right after it;
    reversed every other repeat, the first and last engines ran twice in a row, and the
    300-feature ranker's plan timed right after itself took half its time after another
    engine (a large forest's code and tables stay in the caches)."""
    rng = np.random.default_rng(seed)
    for fn in fns.values():
        fn()
    names = list(fns)
    times: dict = {name: [] for name in fns}
    last = None
    for _ in range(repeats):
        best, fewest = names, None
        for _ in range(64):
            order = [names[i] for i in rng.permutation(len(names))]
            seq = [last, *order] if last else order
            same = sum(family(a) == family(b) for a, b in zip(seq, seq[1:]))
            if fewest is None or same < fewest:
                best, fewest = order, same
        for name in best:
            t0 = time.perf_counter()
            fns[name]()
            times[name].append(time.perf_counter() - t0)
        last = best[-1]
    return {name: float(np.median(t)) for name, t in times.items()}


def _groups(qid: np.ndarray) -> np.ndarray:
    """Sizes of the runs of equal query ids (LightGBM's ``group``)."""
    starts = np.flatnonzero(np.r_[True, qid[1:] != qid[:-1]])
    return np.diff(np.r_[starts, len(qid)])


# The one-row estimator, stated with the figures (results/shapes.json).
ONE_ROW_ESTIMATOR = (
    "least of 3 means (rounds of 1,000 calls, 500 with --quick, in blocks of 50, engines in a "
    "fresh random order per block), each mean over the blocks that follow another engine's block "
    "(thrifty's own sides count as one engine); lleaves' models at 1 to 100 rows: one such mean, "
    "in blocks of a tenth of the calls (5 to 50)"
)


def family(name: str) -> str:
    """The engine a side belongs to: thrifty's compiled sides are one (same tables and code
    shape), every other engine its own."""
    return "thrifty" if name in OURS else name


def foreign_one_row_means(
    fns: dict, X: np.ndarray, calls: int, width: int = 1, block: int = 50, seed: int = 0, least: int = 5
) -> dict:
    """Mean seconds per call of each function (``width`` consecutive rows of ``X`` a call,
    ``calls`` rows sets in turn), over its blocks of ``block`` calls that follow a block of
    another engine (``family``); the functions take the blocks in a fresh random order each
    block, and rounds repeat until each has ``least`` such blocks.

    What ran just before a side decides much of its time: on Adult (loaded machine; per call
    position in a block of 50, the median over 60 blocks, averaged) thrifty's one-row call
    took 4.1 µs after a block of its own, 4.7 after lleaves', 5.8 after tl2cgen's and 8.1
    after LightGBM's; lleaves' 7.2 after its own, 9.1 after thrifty's, 9.7 and 10.9. The
    first call after another engine takes 20-60 µs on either, and the next 10-40 calls stay
    slow. A thrifty side right after another thrifty side finds the same tables warm. Counted
    alike, thrifty's three or four sides would warm each other where lleaves has no sibling:
    such blocks are left out for every engine."""
    span = len(X) - width + 1
    rows = [X[(i * width) % span : (i * width) % span + width].copy() for i in range(calls)]
    for fn in fns.values():
        fn(rows[0])
    names = list(fns)
    total, counted, blocks = dict.fromkeys(fns, 0.0), dict.fromkeys(fns, 0), dict.fromkeys(fns, 0)
    rng = np.random.default_rng(seed)
    before = None
    while min(blocks.values()) < least:
        for lo in range(0, calls, block):
            for k in rng.permutation(len(names)).tolist():
                name = names[k]
                fn = fns[name]
                t0 = time.perf_counter()
                for x in rows[lo : lo + block]:
                    fn(x)
                took = time.perf_counter() - t0
                if before != family(name):
                    total[name] += took
                    counted[name] += len(rows[lo : lo + block])
                    blocks[name] += 1
                before = family(name)
    return {name: total[name] / counted[name] for name in fns}


def steady_one_row(fns: dict, M: np.ndarray, calls: int, rounds: int = 3) -> dict:
    """Seconds per one-row call of each engine: the least of ``rounds`` means of ``calls``
    calls (``foreign_one_row_means``, each round its own order seed), every engine alike. A
    mean of 1,000 calls of a few µs is moved by a few slow calls (another process taking the
    core): in one quiet run the same compiled code measured 10.4 and 8.3 µs under two names,
    and 5.8-6.7 in three rounds after."""
    runs = [foreign_one_row_means(fns, M, calls, seed=r) for r in range(rounds)]
    return {k: min(r[k] for r in runs) for k in fns}


def build(name: str, quick: bool, data_home: str) -> dict:
    """A LightGBM model of the shape ``name`` (fixed seeds) and its float64 test matrix."""
    import lightgbm as lgb

    from thrifty import Forest
    from thrifty.datasets import load

    common = dict(learning_rate=0.1, verbose=-1, random_state=0, n_jobs=1)
    extra: dict = {}
    if name == "adult":
        d = load("adult", data_home=data_home)
        (X_tr, y_tr, _), (X_te, _, _) = d.subset("train"), d.subset("test")
        model = lgb.LGBMClassifier(n_estimators=100 if quick else 500, max_depth=5, num_leaves=32, **common)
        model.fit(X_tr, y_tr)
    elif name == "higgs255":
        d = load("higgs_small", data_home=data_home)
        (X_tr, y_tr, _), (X_te, _, _) = d.subset("train"), d.subset("test")
        model = lgb.LGBMClassifier(n_estimators=50 if quick else 500, num_leaves=255, **common)
        model.fit(X_tr, y_tr)
    elif name == "rank300":
        d = load("rank_small", data_home=data_home)
        (X_tr, y_tr, q_tr), (X_te, _, _) = d.subset("train"), d.subset("test")
        model = lgb.LGBMRanker(n_estimators=100 if quick else 500, num_leaves=63, **common)
        model.fit(X_tr, y_tr, group=_groups(np.asarray(q_tr)))
        extra = {"X_tr": X_tr, "y_tr": np.asarray(y_tr), "q_tr": np.asarray(q_tr)}
    else:
        rng = np.random.default_rng(136)
        X = rng.normal(size=(30_000, 136))
        # A nonlinear task on a third of the features (interactions, a threshold, a sine).
        f = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + (X[:, 3] > 0.5) + X[:, 4:45] @ rng.normal(size=41) / 6
        y = (f + rng.normal(scale=0.5, size=len(f)) > 0.5).astype(int)
        X_tr, y_tr, X_te = X[:20_000], y[:20_000], X[20_000:]
        model = lgb.LGBMClassifier(n_estimators=100 if quick else 1000, num_leaves=31, **common)
        model.fit(X_tr, y_tr)
    booster = model.booster_
    forest = Forest.from_model(booster)
    M = np.ascontiguousarray(forest._as_matrix(X_te), dtype=np.float64)
    return {"booster": booster, "forest": forest, "M": M, **extra}


def draw_inputs(model_text: str, n: int, seed: int = 0) -> np.ndarray:
    """Rows drawn from a LightGBM model's ``feature_infos``: uniform in ``[min:max]``, one of the
    listed category codes or an unseen one, normal where the feature is unused; 10% NaN."""
    infos = re.search(r"^feature_infos=(.*)$", model_text, re.M).group(1).split()
    rng = np.random.default_rng(seed)
    X = np.empty((n, len(infos)))
    for j, info in enumerate(infos):
        if info.startswith("["):
            lo, hi = (float(v) for v in info[1:-1].split(":"))
            X[:, j] = rng.uniform(lo, hi, n)
        elif info == "none":
            X[:, j] = rng.normal(size=n)
        else:
            codes = np.array([int(c) for c in info.split(":")])
            X[:, j] = rng.choice(np.append(codes, codes.max() + 1), n)
    X[rng.random(X.shape) < 0.1] = np.nan
    return X


def engines(
    booster, forest, model_text: str, reasons: dict, tag: str, seconds: dict, branchy: bool = False
) -> dict:
    """Each engine's raw-score predict on float64 rows (None where it cannot run here); with
    ``branchy``, thrifty forced onto branchy blocks too (lleaves' models only: on the four large
    models that kind, which their rule never picks, would add compile time at LLVM level 2).
    thrifty's compile seconds (its own choice, into an empty cache) and lleaves' (where its cache
    kept them) go to ``seconds`` under ``tag`` and ``{tag}_lleaves``."""
    import thrifty
    from thrifty.runtime.compiled.choice import BLOCKS_ENV

    fns: dict = {"lightgbm": lambda X: booster.predict(X, raw_score=True, num_threads=1)}
    fns["lleaves"], reasons[f"{tag}_lleaves"] = lleaves_predict(model_text, forest.n_outputs)
    fns["tl2cgen"], reasons[f"{tag}_tl2cgen"] = tl2cgen_predict(booster, model_text)
    for name, kind in zip(OURS, ("auto", "vector", "scalar", "branchy")[: 4 if branchy else 3]):
        with environment({BLOCKS_ENV: kind}):
            if kind == "auto":
                # thrifty's own choice compiles into an empty cache: its compile time is a figure.
                compiled, seconds[tag], seconds[f"{tag}_usable"] = compile_timed(forest)
            else:
                compiled = thrifty.compile(forest)
        fns[name] = lambda X, c=compiled: c.evaluate(X, n_threads=1).raw
    seconds[f"{tag}_lleaves"] = lleaves_compile_seconds(model_text)
    return {k: v for k, v in fns.items() if v is not None}


def compile_timed(forest) -> tuple:
    """``thrifty.compile(forest)`` into an empty temporary cache, the wall seconds until every
    entry is ready (the scores-only entries may be compiled after ``compile`` returns:
    ``objects.background_scores``) and until the plan is usable (``compile`` returned)."""
    import thrifty

    # thrifty's own rule for what compiles after ``compile`` returns (``_figures`` waits).
    with tempfile.TemporaryDirectory() as tmp:
        with environment({"THRIFTY_CACHE_DIR": tmp, "THRIFTY_BACKGROUND": "auto"}):
            t0 = time.perf_counter()
            compiled = thrifty.compile(forest)
            usable = time.perf_counter() - t0
            # Every entry in place before anything is timed (and before the cache goes).
            compiled.wait()
            return compiled, round(time.perf_counter() - t0, 1), round(usable, 1)


def exactness(fns: dict, M: np.ndarray) -> dict:
    """Max abs difference of each engine's raw scores from LightGBM's on ``M``."""
    ref = np.asarray(fns["lightgbm"](M)).reshape(-1)
    diff = {name: float(np.max(np.abs(np.asarray(fn(M)).reshape(-1) - ref))) for name, fn in fns.items()}
    # thrifty's compiled plans equal LightGBM's raw scores bit for bit: a speed of wrong
    # results is no figure.
    wrong = {e: d for e, d in diff.items() if e in OURS and d != 0.0}
    assert not wrong, f"thrifty compiled differs from LightGBM: {wrong}"
    return diff


def shape_part(name: str, args, repeats: int, calls: int, out: dict) -> None:
    """Batch and one-row times of every engine on one of the four models."""
    t0 = time.perf_counter()
    b = build(name, args.quick, args.data_home)
    forest, M, booster = b["forest"], b["M"], b["booster"]
    print(
        f"{name}: {forest.n_trees} trees, {forest.n_features} features, {len(M)} test rows "
        f"({time.perf_counter() - t0:.0f} s to train)",
        flush=True,
    )
    fns = engines(booster, forest, booster.model_to_string(), out["reasons"], name, out["compile_seconds"])
    out["max_abs_diff"][name] = exactness(fns, M)
    batch = medians({k: (lambda fn=fn: fn(M)) for k, fn in fns.items()}, repeats)
    one = steady_one_row(fns, M, calls)
    out["batch_ns_per_tree_row"][name] = {k: t / (forest.n_trees * len(M)) * 1e9 for k, t in batch.items()}
    out["one_row_us"][name] = {k: t * 1e6 for k, t in one.items()}
    if name == "rank300":
        plans_part(b, repeats, calls, out)
    if name == "adult":
        # AVX2 code beside AVX-512 code on the same rows (None where this CPU lacks either).
        out["avx2_vs_avx512_per_row"] = avx2_vs_avx512_per_row(forest, M, repeats=repeats)


def plans_part(b: dict, repeats: int, calls: int, out: dict) -> None:
    """QWYC (top 5 kept, alpha 0.05) and Cronus (closed-form initialization) plans on the
    ranker, compiled: native or not, batch and one-row times beside the Full plan's."""
    import thrifty
    from thrifty.cascade import cronus
    from thrifty.order import qwyc_ranking

    forest, M = b["forest"], b["M"]
    M_tr = np.ascontiguousarray(forest._as_matrix(b["X_tr"]), dtype=np.float64)
    plans = {
        "full": forest,
        "qwyc": qwyc_ranking(forest, M_tr, b["q_tr"], k=5, alpha=0.05),
        "cronus": cronus(forest, M_tr, (b["y_tr"] >= 3).astype(int), init_only=True),
    }
    compiled = {k: thrifty.compile(p) for k, p in plans.items()}
    for k, c in compiled.items():
        assert np.array_equal(c.evaluate(M).raw, thrifty.evaluate(plans[k], M).raw), k
    fns = {k: (lambda X, c=c: c.evaluate(X, n_threads=1)) for k, c in compiled.items()}
    batch = medians({k: (lambda fn=fn: fn(M)) for k, fn in fns.items()}, repeats)
    one = one_row_means(fns, M, calls=calls)
    out["rank300_plans"] = {
        k: {"native": bool(c.native), "batch_ms": batch[k] * 1e3, "one_row_us": one[k] * 1e6}
        for k, c in compiled.items()
    }


def peer_part(name: str, args, repeats: int, calls: int, out: dict) -> None:
    """µs per call of every engine on one of lleaves' models at each batch size."""
    import lightgbm as lgb

    from thrifty import Forest

    text = gzip.open(Path(args.data_home) / "lleaves_models" / f"{name}.txt.gz", "rt").read()
    booster = lgb.Booster(model_str=text)
    forest = Forest.from_model(booster)
    sizes = (1, 10, 100, 1000) if args.quick else (1, 10, 100, 10_000)
    X = draw_inputs(text, 10_000)
    print(f"{name}: {forest.n_trees} trees, {forest.n_features} features", flush=True)
    fns = engines(booster, forest, text, out["reasons"], name, out["compile_seconds"], branchy=True)
    out["max_abs_diff"][name] = exactness(fns, X)
    per = {}
    for k in sizes:
        if k >= 1000:
            Xk = X[:k].copy()
            t = medians({e: (lambda fn=fn, Xk=Xk: fn(Xk)) for e, fn in fns.items()}, repeats)
        else:
            n_calls = max(100, calls // max(1, k // 10))
            # At least 10 blocks a round, so that each side has blocks after another engine's.
            t = foreign_one_row_means(fns, X, n_calls, width=k, block=max(5, min(50, n_calls // 10)))
        per[str(k)] = {e: s * 1e6 for e, s in t.items()}
    out["peer_us_per_call"][name] = per


def prepare(only: list[str], args) -> None:
    """Compile each model's lleaves object and tl2cgen library into the cache (slow, untimed)."""
    import lightgbm as lgb

    for m in only:
        if m in SHAPES:
            booster = build(m, args.quick, args.data_home)["booster"]
            text = booster.model_to_string()
        else:
            text = gzip.open(Path(args.data_home) / "lleaves_models" / f"{m}.txt.gz", "rt").read()
            booster = lgb.Booster(model_str=text)
        t0 = time.perf_counter()
        tl2cgen_predict(booster, text)
        lleaves_predict(text, booster.num_model_per_iteration())
        print(f"{m}: lleaves and tl2cgen ready ({time.perf_counter() - t0:.0f} s)", flush=True)


def ratio(times: dict, a: str, b: str) -> float | None:
    return round(times[a] / times[b], 3) if a in times and b in times else None


def figures_of(out: dict) -> dict:
    """The issue's named figures from the raw times."""
    figs: dict = {"bench": "shapes", "one_row_estimator": ONE_ROW_ESTIMATOR}
    for m in SHAPES:
        batch, one = out["batch_ns_per_tree_row"].get(m), out["one_row_us"].get(m)
        if batch is None:
            continue
        figs[f"{m}_batch_vs_lleaves"] = ratio(batch, "thrifty", "lleaves")
        figs[f"{m}_one_row_vs_lleaves"] = ratio(one, "thrifty", "lleaves")
        rivals = [e for e in batch if e not in OURS]
        # Fastest among the engines measured; null when lleaves, the bar, could not run here.
        figs[f"{m}_fastest"] = (
            None
            if "lleaves" not in batch
            else all(batch["thrifty"] < batch[e] and one["thrifty"] < one[e] for e in rivals)
        )
    plans = out.get("rank300_plans")
    figs["native_plans"] = (
        None if plans is None else bool(plans["qwyc"]["native"] and plans["cronus"]["native"])
    )
    figs["avx2_vs_avx512_per_row"] = out.get("avx2_vs_avx512_per_row")
    worst = [
        t["thrifty"] / t["lleaves"]
        for per in out["peer_us_per_call"].values()
        for t in per.values()
        if "lleaves" in t
    ]
    figs["peer_worst_vs_lleaves"] = round(max(worst), 3) if worst else None
    # Wall seconds to compile each model into an empty cache (lleaves': null where unknown).
    # ``m_usable_seconds``: until ``thrifty.compile`` returned, the scores-only entries perhaps
    # still compiling in the background; ``m_compile_seconds``: until every entry was ready.
    for tag, s in out.get("compile_seconds", {}).items():
        usable = tag.removesuffix("_usable")
        figs[f"{usable}_usable_seconds" if usable != tag else f"{tag}_compile_seconds"] = s
    return figs


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100-tree models, lleaves' models to 1,000 rows")
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home, help="folder of the shared datasets")
    ap.add_argument("--only", default="", help="comma-separated models to run (default: all seven)")
    ap.add_argument(
        "--prepare",
        action="store_true",
        help="only compile lleaves' and tl2cgen's code into the cache; time nothing",
    )
    args = ap.parse_args(argv)
    only = [m for m in args.only.split(",") if m] or [*SHAPES, *PEERS]
    unknown = sorted(set(only) - {*SHAPES, *PEERS})
    if unknown:
        ap.error(f"--only: unknown models {unknown}; choose from {[*SHAPES, *PEERS]}")
    if args.prepare:
        prepare(only, args)
        return {}
    repeats, calls = 5, 500 if args.quick else 1000
    out: dict = {
        "reasons": {},
        "max_abs_diff": {},
        "batch_ns_per_tree_row": {},
        "one_row_us": {},
        "peer_us_per_call": {},
        "compile_seconds": {},
    }
    for m in only:
        (shape_part if m in SHAPES else peer_part)(m, args, repeats, calls, out)
    figures = {
        **figures_of(out),
        "load_average": round(os.getloadavg()[0], 2),
        **{k: v for k, v in out.items() if k != "reasons"},
        "reasons": {k: v for k, v in out["reasons"].items() if v},
    }
    _table(out)
    RESULTS.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if args.quick else ""
    _csv(out, RESULTS / f"shapes{suffix}.csv")
    _plot(out, RESULTS / f"shapes{suffix}.png")
    emit(_rounded(figures), bool(args.quick))
    return figures


def _rounded(x):
    if isinstance(x, float):
        return float(f"{x:.4g}")
    if isinstance(x, dict):
        return {k: _rounded(v) for k, v in x.items()}
    return x


def _table(out: dict) -> None:
    for m, batch in out["batch_ns_per_tree_row"].items():
        one = out["one_row_us"][m]
        cells = "  ".join(f"{e} {batch[e]:.2f} ns · {one[e]:.1f} µs" for e in batch)
        print(f"  {m:9s} {cells}")
    for m, per in out["peer_us_per_call"].items():
        for k, t in per.items():
            print(f"  {m:9s} {k:>6s} rows: " + "  ".join(f"{e} {v:.1f}" for e, v in t.items()) + " µs")


def _csv(out: dict, path: Path) -> None:
    with open(path, "w") as fh:
        fh.write("model,rows_per_call,engine,figure,value\n")
        for m, batch in out["batch_ns_per_tree_row"].items():
            for e, v in batch.items():
                fh.write(f"{m},all,{e},ns_per_tree_row,{v:.4f}\n")
            for e, v in out["one_row_us"][m].items():
                fh.write(f"{m},1,{e},us_per_call,{v:.3f}\n")
        for m, per in out["peer_us_per_call"].items():
            for k, t in per.items():
                for e, v in t.items():
                    fh.write(f"{m},{k},{e},us_per_call,{v:.3f}\n")


def _plot(out: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    models = list(out["batch_ns_per_tree_row"])
    names = sorted({e for m in models for e in out["batch_ns_per_tree_row"][m]}, key=lambda e: (e in OURS, e))
    width = 0.8 / max(1, len(names))
    for i, e in enumerate(names):
        vals = [out["batch_ns_per_tree_row"][m].get(e, np.nan) for m in models]
        left.bar(np.arange(len(models)) + i * width, vals, width, label=e)
    left.set_xticks(np.arange(len(models)) + 0.4 - width / 2, models)
    left.set_yscale("log")
    left.set_ylabel("ns per tree and row (batch, 1 thread)")
    left.set_title("Batch speed by model shape")
    if models:
        # Room above the bars (log scale) for the legend.
        left.set_ylim(top=left.get_ylim()[1] * 10)
        left.legend(fontsize=7, ncol=3, loc="upper center")
    for m, per in out["peer_us_per_call"].items():
        ks = [k for k, t in per.items() if "lleaves" in t]
        if ks:
            right.plot(
                [int(k) for k in ks], [per[k]["thrifty"] / per[k]["lleaves"] for k in ks], "o-", label=m
            )
    if right.get_lines():
        right.legend()
    right.axhline(1.0, color="gray", lw=0.8)
    right.set_xscale("log")
    right.set_xlabel("rows per call")
    right.set_ylabel("thrifty time / lleaves time")
    right.set_title("lleaves' own models (below 1: thrifty faster)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
