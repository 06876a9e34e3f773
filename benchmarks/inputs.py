"""What each input form costs a compiled plan's call: a float64 array, a pandas DataFrame (with
Adult's categorical columns) and a list of rows, at 1, 10, 1,000 and 100,000 rows.

The model is Adult's LightGBM classifier as ``shapes.build`` trains it (500 trees of 32 leaves,
depth 5; ``--quick``: 100 trees), compiled, called as ``compiled.evaluate(X, n_threads=1)``.
Each call takes the next of a pool of distinct inputs of its form (rows drawn from the test
set, made before timing: building a one-row frame costs pandas far more than the call). The
forms of a row count are timed in turn in blocks, their order drawn afresh for each block
(paired: a shared machine's bursts hit every form alike); each figure is the mean µs per call
over the fastest fifth of a form's blocks. Lists are left out past 1,000 rows. Every form's
scores are checked equal, bit for bit, to the array's first.

Figures: ``inputs_<form>_<n>_us`` (form: ``array``, ``frame``, ``list``) and
``inputs_<form>_over_array_<n>`` (ratio to the array's call); ``inputs.csv`` and ``inputs.png``.
To compare two versions (a batch must not get slower), run this script on each checkout.

    python benchmarks/inputs.py [--quick] [--rows 1,10,1000,100000] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
from _figures import RESULTS, emit

HERE = Path(__file__).resolve().parent
ROWS = (1, 10, 1000, 100_000)
FORMS = ("array", "frame", "list")


def inputs(X_te, forest, n: int, pool: int) -> dict:
    """``pool`` inputs of ``n`` rows of each form (the same rows in each form)."""
    rng = np.random.default_rng(n)
    out: dict = {form: [] for form in FORMS}
    for _ in range(pool):
        at = rng.integers(0, len(X_te), n)
        frame = X_te.iloc[at].reset_index(drop=True)
        M = forest._as_matrix(frame)
        out["array"].append(M)
        out["frame"].append(frame)
        if n <= 1000:
            out["list"].append(M.tolist())
    return {form: xs for form, xs in out.items() if xs}


def measure(compiled, forms: dict, calls: int) -> dict:
    """Mean µs per call of each form over the fastest fifth of its blocks (see above)."""
    pool = len(forms["array"])
    block = max(1, min(25, calls // 20))
    times: dict = {form: [] for form in forms}
    rng = np.random.default_rng(0)
    for _ in range(max(5, calls // block)):
        for form in rng.permutation(list(forms)).tolist():
            xs = forms[form]
            t0 = time.perf_counter()
            for i in range(block):
                compiled.evaluate(xs[i % pool], n_threads=1)
            times[form].append((time.perf_counter() - t0) / block)
    fastest = {form: sorted(ts)[: max(1, len(ts) // 5)] for form, ts in times.items()}
    return {form: float(np.mean(ts)) * 1e6 for form, ts in fastest.items()}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 trees, fewer calls (< 1 min)")
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home, help="folder of the shared datasets")
    ap.add_argument("--rows", default=",".join(map(str, ROWS)), help="comma-separated row counts")
    args = ap.parse_args(argv)
    wanted = [int(n) for n in args.rows.split(",") if n]
    import lightgbm as lgb

    import thrifty
    from thrifty import Forest, Full
    from thrifty.datasets import load

    d = load("adult", data_home=args.data_home)
    (X_tr, y_tr, _), (X_te, _, _) = d.subset("train"), d.subset("test")
    model = lgb.LGBMClassifier(
        n_estimators=100 if args.quick else 500,
        max_depth=5,
        num_leaves=32,
        learning_rate=0.1,
        verbose=-1,
        random_state=0,
        n_jobs=1,
    ).fit(X_tr, y_tr)
    forest = Forest.from_model(model.booster_)
    compiled = thrifty.compile(Full(forest))
    figures: dict = {"bench": "inputs", "model": f"adult, {forest.n_trees} trees"}
    for n in wanted:
        if args.quick and n > 1000 and args.rows == ",".join(map(str, ROWS)):
            continue  # --quick alone: up to 1,000 rows
        forms = inputs(X_te, forest, n, pool=50 if n <= 10 else 3)
        want = compiled.evaluate(forms["array"][0], n_threads=1).raw
        for form, xs in forms.items():
            got = compiled.evaluate(xs[0], n_threads=1).raw
            assert np.array_equal(got, want), f"{form} of {n} rows: other scores than the array's"
        calls = (400 if args.quick else 4000) if n <= 10 else (40 if n <= 1000 else 10)
        us = measure(compiled, forms, calls)
        for form, t in us.items():
            figures[f"inputs_{form}_{n}_us"] = round(t, 2)
            figures[f"inputs_{form}_over_array_{n}"] = round(t / us["array"], 3)
        print(f"{n} rows: " + ", ".join(f"{f} {t:.1f} us" for f, t in us.items()), flush=True)
    figures["load_average"] = round(os.getloadavg()[0], 2)
    _table(figures)
    emit(figures, bool(args.quick))
    return figures


def _table(figures: dict) -> None:
    """``inputs.csv`` and ``inputs.png``: µs per call of each form, per row count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [k for k in figures if k.startswith("inputs_array_") and k.endswith("_us")]
    rows = sorted({int(k.split("_")[2]) for k in timed})
    lines = ["rows," + ",".join(FORMS)]
    for n in rows:
        lines.append(f"{n}," + ",".join(str(figures.get(f"inputs_{f}_{n}_us", "")) for f in FORMS))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "inputs.csv").write_text("\n".join(lines) + "\n")
    fig, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(rows))
    for k, form in enumerate(FORMS):
        h = [figures.get(f"inputs_{form}_{n}_us", 0.0) / n for n in rows]
        ax.bar(x + (k - 1) * 0.27, h, 0.27, label=form)
    ax.set_xticks(x, [f"{n:,} rows" for n in rows])
    ax.set_yscale("log")
    ax.set_ylabel("µs per row (one thread)")
    ax.set_title(f"Input forms of a compiled call ({figures['model']})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / "inputs.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
