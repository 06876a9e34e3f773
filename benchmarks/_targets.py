"""Per-row speed of the compiled code of each target this CPU runs (``thrifty.runtime.compiled.targets``).

Each target's code is compiled with ``THRIFTY_TARGET`` set to it, then every target's plan is
timed in turn in each repeat (one thread, the same float64 matrix, the evaluating thread's CPU
time), so a shared machine's drift hits all alike; the figure is each target's median
nanoseconds per row over the batch, and ``avx2_vs_avx512_per_row`` is AVX2's over AVX-512's
(issue 29's target: at most 1.5). Each target runs the code thrifty chooses for it, so the
blocks may differ in shape: on Adult, AVX-512 compares 32-bit ranks on sixteen rows per
register and AVX2 16-bit ranks on sixteen (``ir_ranks.RANKS16_AVX2_LEAVES``); ``THRIFTY_RANKS`` set
in the environment forces one width on both.

    python benchmarks/_targets.py [--quick] [--codes] [--ranks32] [--data-home DIR]

measures Adult's LightGBM model (500 trees of 32 leaves; 100 and fewer repeats with --quick),
every target's outputs checked equal to the interpreter's bit for bit (with --codes, each x86
target also with its categorical splits on the rows' doubles, ``THRIFTY_CATSHIFT=off``, as
``{target}_doubles``, timed in turn with the others; with --ranks32, AVX2 also with 32-bit
ranks, ``avx2_ranks32``, and ``avx2_ranks32_vs_avx512_per_row``), and writes
``results/targets.json`` and ``results/targets.png`` (ns per row per target; ``_quick``
files with --quick); the last stdout line is the figures as JSON.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from _figures import RESULTS, emit, environment

HERE = Path(__file__).resolve().parent


def compiled_for(target: str, forest):
    """``thrifty.compile(forest)`` with its code generated for ``target`` (a target's name;
    ``{name}_doubles``: x86 code with ``THRIFTY_CATSHIFT=off``; ``{name}_ranks32``: with
    ``THRIFTY_RANKS=32``)."""
    import thrifty
    from thrifty.runtime.compiled import targets
    from thrifty.runtime.compiled.ir_ranks import RANKS_ENV

    name, env = target, {}
    for suffix, var, value in (("_doubles", targets.CAT_SHIFT_ENV, "off"), ("_ranks32", RANKS_ENV, "32")):
        if name.endswith(suffix):
            name, env = name.removesuffix(suffix), {var: value}
    env = {targets.ENV: name} | env
    with environment(env):
        return thrifty.compile(forest)


def per_row_ns(
    forest, X: np.ndarray, names: tuple[str, ...] | None = None, repeats: int = 7
) -> dict[str, float]:
    """Median nanoseconds per row of one-thread batch evaluation of ``X`` for each target in
    ``names`` (default: every target this CPU runs), timed in turn in each repeat; each
    target's raw scores are checked equal to the interpreter's."""
    from thrifty import evaluate
    from thrifty.runtime.compiled import targets

    names = targets.runnable() if names is None else names
    M = np.ascontiguousarray(forest._as_matrix(X), dtype=np.float64)
    want = evaluate(forest, M, n_threads=1).raw
    plans = {name: compiled_for(name, forest) for name in names}
    for name, plan in plans.items():
        got = plan.evaluate(M, n_threads=1).raw
        assert np.array_equal(got, want), f"{name}: compiled scores differ from the interpreter's"
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(repeats):
        for name, plan in plans.items():
            # CPU time of this thread (the one evaluating, n_threads=1): on a shared machine
            # another process's turn on the core does not count against either target.
            t0 = time.thread_time()
            plan.evaluate(M, n_threads=1)
            times[name].append(time.thread_time() - t0)
    return {name: float(np.median(t)) / len(M) * 1e9 for name, t in times.items()}


def avx2_vs_avx512_per_row(forest, X: np.ndarray, repeats: int = 7) -> float | None:
    """AVX2 code's time per row over AVX-512 code's on ``X`` (one thread, paired), or None
    when this CPU does not run both."""
    from thrifty.runtime.compiled import targets

    if not {"avx512", "avx2"} <= set(targets.runnable()):
        return None
    ns = per_row_ns(forest, X, ("avx512", "avx2"), repeats)
    return ns["avx2"] / ns["avx512"]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="100 trees, 3 repeats")
    ap.add_argument("--codes", action="store_true", help="x86 targets also without coded categories")
    ap.add_argument(
        "--ranks32", action="store_true", help="AVX2 also with 32-bit ranks (its blocks before 16-bit ones)"
    )
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home)
    args = ap.parse_args(argv)

    import lightgbm as lgb

    from thrifty import Forest
    from thrifty.datasets import load
    from thrifty.runtime.compiled import targets

    data = load("adult", data_home=args.data_home)
    X_tr, y_tr, _ = data.subset("train")
    X_te, _, _ = data.subset("test")
    trees, repeats = (100, 3) if args.quick else (500, 9)
    gbm = lgb.LGBMClassifier(
        n_estimators=trees, max_depth=5, num_leaves=32, verbose=-1, random_state=0, n_jobs=1
    ).fit(X_tr, y_tr)
    forest = Forest.from_model(gbm)
    names = targets.runnable()
    if args.codes:
        names += tuple(f"{n}_doubles" for n in names if n in ("avx512", "avx2"))
    if args.ranks32 and "avx2" in names:
        names += ("avx2_ranks32",)
    ns = per_row_ns(forest, X_te, names, repeats=repeats)
    figures: dict = {"bench": "targets", "trees": trees, "rows": len(X_te), "host": targets.host_name()}
    figures |= {f"{name}_ns_per_row": round(v, 1) for name, v in ns.items()}
    both = "avx2" in ns and "avx512" in ns
    figures["avx2_vs_avx512_per_row"] = round(ns["avx2"] / ns["avx512"], 3) if both else None
    if "avx2_doubles" in ns and "avx512_doubles" in ns:
        figures["avx2_vs_avx512_per_row_doubles"] = round(ns["avx2_doubles"] / ns["avx512_doubles"], 3)
    if "avx2_ranks32" in ns and "avx512" in ns:
        figures["avx2_ranks32_vs_avx512_per_row"] = round(ns["avx2_ranks32"] / ns["avx512"], 3)
    figures["avx2_vs_generic_per_row"] = round(ns["avx2"] / ns["generic"], 3) if "avx2" in ns else None
    _plot(ns, trees, args.quick)
    emit(figures, args.quick)
    return figures


def _plot(ns: dict[str, float], trees: int, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.4))
    names = list(ns)
    labels = [f"{n} (scalar)" if n == "generic" else n for n in names]
    ax.bar(labels, [ns[n] for n in names], color="tab:blue")
    for i, n in enumerate(names):
        ax.text(i, ns[n], f"{ns[n]:.0f}", ha="center", va="bottom")
    ax.set_ylim(0, 1.15 * max(ns.values()))
    ax.set_ylabel("ns per row (one thread)")
    ax.set_title(f"Adult, LightGBM {trees} trees: compiled code per target", fontsize=10)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / f"targets{'_quick' if quick else ''}.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
