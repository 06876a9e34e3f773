"""One row per call on the four model shapes of issue 29, against lleaves, with the call split
into its parts: Python around the native call, the ctypes call itself, and native time.

The models are ``shapes.build``'s (fixed seeds, one thread): ``adult`` (500 trees of 32 leaves,
depth 5, 14 features), ``higgs255`` (higgs_small, 500 x 255 leaves, 28 features), ``rank300``
(rank_small LambdaMART, 500 x 63 leaves, 300 features) and ``synth136`` (1,000 x 31 leaves, 136
features); lleaves is loaded from the object files ``shapes.py --prepare`` compiled
(``_lleaves``; its side is left out, and says why, without them). Sides, each a one-row call on
a new test row each time, timed in turn in blocks of 25 calls, the sides' order drawn afresh
for each block (what runs before a side evicts what it uses: each side follows each other side
alike often):

- ``thrifty``: ``compiled.evaluate(x).raw``, as ``shapes.py`` times it (lanes for one row);
- ``run``: the same compiled code served with ``lane_rows`` 0 (one row through ``run``);
- ``gather``: on a forest whose one row takes its values by a permute (AVX-512, at most 16
  features: ``ir_serving.permute``), the same forest compiled with gathers instead
  (``ir_serving.PERMUTE`` off; its objects cached apart, under ``THRIFTY_BENCH_CACHE``/gather),
  called as ``thrifty``; left out elsewhere;
- ``bare``: the row copied into the serving path's buffer and its native ``serve`` called,
  nothing else (no checks, no result): ctypes and native time;
- ``ctypes``: a ctypes call of the same signature to a native function that returns at once
  (``labs`` from the C library): the price of calling native code from Python at all;
- ``lleaves``: lleaves' ``forest_root`` through ctypes into a fresh output array, as
  ``shapes.py`` times it; ``lightgbm``: LightGBM's own predict.

Each figure is the mean µs per call over the fastest fifth of a side's blocks that follow
another engine's block (``ESTIMATOR``): a shared machine's bursts removed alike from all sides,
and no thrifty side counted right after another (``thrifty``, ``run``, ``gather`` and ``bare``
read the same tables, which one leaves warm for the next, and lleaves has no such sibling;
``ctypes`` touches nothing and is passed over). Before, the fastest fifth was mostly blocks
right after another thrifty side: Adult's ``thrifty`` measured 4.4 µs here and 6.9 in
``shapes.py``, whose thrifty sides warmed each other less often, while lleaves' 9.8 was the
same in both. Both thrifty sides are checked equal, bit for
bit, to the interpreter first. Derived: ``<m>_python_us`` (``thrifty`` - ``bare``: argument
checks, the copy into the buffer, the result object), ``<m>_native_us`` (``bare`` -
``ctypes``) and ``<m>_native_ns_per_tree``; ratios ``<m>_one_row_vs_lleaves`` and
``<m>_native_vs_lleaves`` (native time over lleaves' whole call), ``<m>_lanes_vs_run``,
``<m>_permute_vs_gather`` (null without a ``gather`` side).
``one_row.csv`` and ``one_row.png``. ``--quick``: ``shapes.build``'s quick models (100 trees;
50 of 255 leaves), 250 calls; lleaves is left out unless its objects are cached.

    python benchmarks/one_row.py [--quick] [--models adult,rank300] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import os
import sys
import time
from pathlib import Path

import numpy as np
from _figures import emit
from _lleaves import CACHE, LleavesCode, lleaves_object
from shapes import build

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
MODELS = ("adult", "higgs255", "rank300", "synth136")
SIDES = ("thrifty", "run", "gather", "bare", "ctypes", "lleaves", "lightgbm")
# The engine each side belongs to (None: a side that touches nothing, passed over).
FAMILY = {"thrifty": "thrifty", "run": "thrifty", "gather": "thrifty", "bare": "thrifty", "ctypes": None}
ESTIMATOR = (
    "mean over the fastest fifth of each side's blocks of 25 calls that follow another engine's "
    "block (thrifty's sides count as one engine), 3 rounds, sides in a fresh random order per block"
)


def one_row_means(fns: dict, rows: list, block: int = 25, rounds: int = 3, seed: int = 0) -> dict:
    """Mean seconds per one-row call of each function over the fastest fifth of its blocks of
    ``block`` calls that follow a block of another engine (``FAMILY``); the functions take
    the blocks in turn, in an order drawn afresh for each block (seeded), each row once per
    function and round. A fixed or rotated order would have each side always follow the same
    other side, whose tables and code evict its own: the side after LightGBM's predict took
    6.2 µs a call where the same call after another side's took 4.2 (Adult, ``thrifty``
    against ``serve``); and a thrifty side after another thrifty side finds the tables warm
    (``shapes.foreign_one_row_means``)."""
    for fn in fns.values():
        fn(rows[0])
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    rng = np.random.default_rng(seed)
    before = None
    for _ in range(rounds):
        for lo in range(0, len(rows), block):
            part = rows[lo : lo + block]
            for k in rng.permutation(len(names)).tolist():
                name = names[k]
                fn = fns[name]
                t0 = time.perf_counter()
                for x in part:
                    fn(x)
                took = (time.perf_counter() - t0) / len(part)
                mine = FAMILY.get(name, name)
                if mine is None:  # every block counts; it reads nothing another side could warm
                    times[name].append(took)
                    continue
                if before != mine:
                    times[name].append(took)
                before = mine
    return {name: float(np.mean(sorted(t)[: max(1, len(t) // 5)])) for name, t in times.items()}


def _noop_call():
    """A ctypes call of ``serve``'s signature (one pointer) to native code that returns at once."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(ctypes.cast(libc.labs, ctypes.c_void_p).value)
    return lambda x: fn(0)


def _gather_side(forest, M: np.ndarray, want) -> dict:
    """``{"gather": call}``: one row of ``forest`` through the lanes with gathers, where its own
    compiled code takes the row's values by a permute (else no side), checked equal to the
    interpreter's ``want`` first."""
    import thrifty
    from thrifty.runtime.compiled import ir_serving

    compiled = thrifty.compile(forest)
    if compiled.forest_code is None or not ir_serving.permute(compiled.forest_code.layout):
        return {}
    before = (ir_serving.PERMUTE, os.environ.get("THRIFTY_CACHE_DIR"))
    # The cache key does not name the choice: the gathers' objects are kept apart.
    os.environ["THRIFTY_CACHE_DIR"] = str(CACHE / "gather")
    ir_serving.PERMUTE = False
    try:
        gather = thrifty.compile(forest)
    finally:
        ir_serving.PERMUTE = before[0]
        os.environ.pop("THRIFTY_CACHE_DIR")
        if before[1] is not None:
            os.environ["THRIFTY_CACHE_DIR"] = before[1]
    for i in range(min(200, len(M))):
        assert np.array_equal(gather.evaluate(M[i : i + 1]).raw, want.raw[i : i + 1]), i
    return {"gather": lambda x: gather.evaluate(x, n_threads=1).raw}


def measure(name: str, quick: bool, home: str, calls: int, reasons: dict) -> dict:
    import thrifty
    from thrifty import evaluate
    from thrifty.runtime.compiled.serving import serving_path
    from thrifty.runtime.evaluation import costs_for

    b = build(name, quick, home)
    forest, M, booster = b["forest"], b["M"], b["booster"]
    t0 = time.perf_counter()
    compiled = thrifty.compile(forest)
    compile_s = time.perf_counter() - t0
    path = compiled.serving
    by_run = serving_path(compiled.plan, compiled.forest_code, costs_for(compiled.plan, compiled.costs))
    by_run.lane_rows = 0
    rows = [M[i % len(M) : i % len(M) + 1].copy() for i in range(calls)]
    want = evaluate(forest, M[:200], n_threads=1)
    for i in range(min(200, len(M))):
        for side in (compiled.evaluate(rows[i], n_threads=1), by_run.serve(rows[i])):
            assert np.array_equal(side.raw, want.raw[i : i + 1]), (name, i)
            assert np.array_equal(side.cost.total, want.cost.total[i : i + 1]), (name, i)
    path.serve(rows[0])
    # The context ``evaluate`` passes (the scores-only lanes where the plan has them).
    buf, _, _, ctx, _ = path._local.calls[1]
    entry = path.entry

    def bare(x: np.ndarray) -> None:
        buf[...] = x
        entry(ctx)

    fns = {
        "thrifty": lambda x: compiled.evaluate(x, n_threads=1).raw,
        "run": lambda x: by_run.serve(x).raw,
        **_gather_side(forest, M, want),
        "bare": bare,
        "ctypes": _noop_call(),
    }
    obj, why = lleaves_object(booster.model_to_string(), compile_missing=not quick)
    reasons[name] = why
    if obj is not None:
        fns["lleaves"] = LleavesCode(obj, forest.n_outputs).predict
    else:
        print(f"  lleaves: {why}; left out", flush=True)
    fns["lightgbm"] = lambda x: booster.predict(x, raw_score=True, num_threads=1)
    us = {k: v * 1e6 for k, v in one_row_means(fns, rows).items()}
    native = us["bare"] - us["ctypes"]
    lle = us.get("lleaves")
    out = {f"{name}_{side}_us": round(us[side], 3) for side in fns}
    out.update(
        {
            f"{name}_python_us": round(us["thrifty"] - us["bare"], 3),
            f"{name}_native_us": round(native, 3),
            f"{name}_native_ns_per_tree": round(native * 1e3 / forest.n_trees, 2),
            f"{name}_lanes_vs_run": round(us["thrifty"] / us["run"], 3),
            f"{name}_permute_vs_gather": round(us["thrifty"] / us["gather"], 3) if "gather" in us else None,
            f"{name}_one_row_vs_lleaves": round(us["thrifty"] / lle, 3) if lle else None,
            f"{name}_native_vs_lleaves": round(native / lle, 3) if lle else None,
        }
    )
    print(
        f"{name}: {forest.n_trees} trees, {forest.n_features} features, compiled in {compile_s:.0f} s; "
        + ", ".join(f"{k} {v:.2f}" for k, v in us.items())
        + f" us; python {out[f'{name}_python_us']}, native {out[f'{name}_native_us']} us",
        flush=True,
    )
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shapes.py's quick models, 250 calls (< 1 min)")
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
    figures: dict = {"bench": "one_row", "one_row_estimator": ESTIMATOR}
    reasons: dict = {}
    for name in names:
        figures.update(measure(name, args.quick, args.data_home, 250 if args.quick else 1000, reasons))
    figures["lleaves_missing"] = {m: why for m, why in reasons.items() if why}
    figures["load_average"] = round(os.getloadavg()[0], 2)
    _table(figures, names)
    emit(figures, bool(args.quick))
    return figures


def _table(figures: dict, names: list[str]) -> None:
    """``one_row.csv`` and ``one_row.png``: µs per one-row call of each side, per model, and
    thrifty's call split into Python, ctypes and native time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    RESULTS.mkdir(parents=True, exist_ok=True)
    lines = ["model," + ",".join(SIDES) + ",python,native"]
    for m in names:
        cells = [figures.get(f"{m}_{s}_us") for s in (*SIDES, "python", "native")]
        lines.append(f"{m}," + ",".join("" if v is None else str(v) for v in cells))
    (RESULTS / "one_row.csv").write_text("\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(8, 4))
    x = np.arange(len(names))
    # thrifty's call as a stack (native, ctypes, Python) beside lleaves' whole call.
    parts = (("native_us", "thrifty native"), ("ctypes_us", "ctypes call"), ("python_us", "thrifty Python"))
    bottom = np.zeros(len(names))
    for key, label in parts:
        h = np.array([max(0.0, figures[f"{m}_{key}"]) for m in names])
        ax.bar(x - 0.2, h, 0.4, bottom=bottom, label=label)
        bottom += h
    lle = [figures.get(f"{m}_lleaves_us") or 0.0 for m in names]
    ax.bar(x + 0.2, lle, 0.4, label="lleaves (whole call)", color="0.6")
    ax.set_xticks(x, names)
    ax.set_ylabel("µs per one-row call (one thread)")
    ax.set_title("One row per call: thrifty's call split, against lleaves")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "one_row.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
