"""Scores first against the serving path: a compiled plan's plain predict (``evaluate(X).raw``,
which takes the scores-only entry, ``compiled/ir_vraw.py`` and ``ir_raw.py``) against the serving
path on the same plan (``serving.serve(X).raw``: the scores with every cost settled), paired in
one process, one thread, timed in turn in each repeat (this thread's CPU time: on a shared
machine another process's turn on the core counts against neither).

Models: ``benchmarks/shapes.py``'s four (adult, higgs255, rank300, synth136, their test rows)
and lleaves' NYC_taxi, airline and mtpl2 (rows drawn from each model's ``feature_infos``), at
10, 100 and 10,000 rows per call. Figures: ``scores_only_vs_serving_<model>_<rows>`` (the median
time of the scores first over the serving path's) and ``scores_only_worst`` (the largest);
results/scores_only.json and scores_only.png. Both give the same scores bit for bit (checked).

    python benchmarks/scores_only.py [--quick] [--data-home DIR] [--only mtpl2,adult,...]

``--quick``: shapes.py's quick models, 3 repeats.
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
from pathlib import Path

import numpy as np
from _figures import RESULTS, emit
from shapes import PEERS, SHAPES, build, draw_inputs

HERE = Path(__file__).resolve().parent
SIZES = (10, 100, 10_000)


def model(name: str, quick: bool, data_home: str):
    """The forest of ``name`` and a float64 matrix of at least 10,000 rows for it."""
    import lightgbm as lgb

    from thrifty import Forest

    if name in PEERS:
        text = gzip.open(Path(data_home) / "lleaves_models" / f"{name}.txt.gz", "rt").read()
        return Forest.from_model(lgb.Booster(model_str=text)), draw_inputs(text, max(SIZES))
    b = build(name, quick, data_home)
    M = b["M"]
    return b["forest"], np.ascontiguousarray(np.resize(M, (max(*SIZES, len(M)), M.shape[1])))


def paired(compiled, X: np.ndarray, repeats: int) -> dict[int, float]:
    """Per row count, the median time of the scores first over the serving path's."""
    out = {}
    for n in SIZES:
        M = np.ascontiguousarray(X[:n])
        first = lambda M=M: compiled.evaluate(M, n_threads=1).raw  # noqa: E731
        served = lambda M=M: compiled.serving.serve(M, 1).raw  # noqa: E731
        assert np.array_equal(first(), served()), f"{n} rows: the scores differ"
        calls = max(1, 20_000 // n)
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(repeats):
            for fn, t in zip((first, served), times):
                t0 = time.thread_time()
                for _ in range(calls):
                    fn()
                t.append((time.thread_time() - t0) / calls)
        out[n] = float(np.median(times[0]) / np.median(times[1]))
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home)
    ap.add_argument("--only", default=",".join(SHAPES + PEERS))
    args = ap.parse_args(argv)
    import thrifty

    repeats = 3 if args.quick else 9
    figures: dict = {"bench": "scores_only"}
    ratios: dict[str, dict[int, float]] = {}
    for name in args.only.split(","):
        forest, X = model(name, args.quick, args.data_home)
        compiled = thrifty.compile(forest)
        if compiled.raw_path is None:
            print(f"{name}: no scores-only entry (plain scalar blocks or exits)", flush=True)
            continue
        ratios[name] = paired(compiled, X, repeats)
        print(name, {n: round(r, 3) for n, r in ratios[name].items()}, flush=True)
        for n, r in ratios[name].items():
            figures[f"scores_only_vs_serving_{name}_{n}"] = round(r, 3)
    figures["scores_only_worst"] = max((r for v in ratios.values() for r in v.values()), default=None)
    _plot(ratios, args.quick)
    emit(figures, args.quick)
    return figures


def _plot(ratios: dict[str, dict[int, float]], quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.4))
    width = 0.8 / len(SIZES)
    for i, n in enumerate(SIZES):
        xs = np.arange(len(ratios)) + i * width
        ax.bar(xs, [ratios[m][n] for m in ratios], width, label=f"{n:,} rows")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(ratios)) + width * (len(SIZES) - 1) / 2, list(ratios))
    ax.set_ylabel("scores first / serving path")
    ax.set_title("A plain predict's time against the serving path's (one thread)", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / f"scores_only{'_quick' if quick else ''}.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
