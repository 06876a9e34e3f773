"""One frontier for all methods: ``thrifty.compare`` on the shared datasets.

For each dataset, every method that applies runs over budgets chosen from the plain LightGBM
model's cost (training-time methods), or starts from the plain LightGBM model / a plain random
forest (post-hoc methods), plus the compositions; every model is evaluated on the dataset's test
split by thrifty's runtime. Figures:

* ``best_front_vs_lightgbm`` (per dataset): the mean gap (area divided by the range's width)
  between the overall Pareto front's step function and that of plain LightGBM truncated after k
  trees, over their common cost range (``thrifty.frontier.frontier_gap``), in units of the
  metric (accuracy; precision@5 for rank_small). Positive: the front lies above plain LightGBM.
  The overall front contains plain LightGBM's own points, so this is never negative; it is
  positive where other methods add something.
* ``other_methods_front_vs_lightgbm``: the same gap for the front of every method but plain
  LightGBM (negative where LightGBM alone is better).
* ``composition_on_front`` (per dataset): Pareto points that come from compositions.

Full run: heart and thyroid with every budget and point, adult, letter, higgs_small and rank_small
with compare's ``quick`` settings (3 budgets, fewer points per method: their searches over
thousands of rows would not fit a time allowance otherwise), each with a time allowance
(``--time-limit`` seconds, default 300) after which no new model starts (the cheapest method
families run first); ``--quick``: heart and thyroid with quick settings and 20 s each. Writes
``benchmarks/results/compare_<dataset>.csv`` and ``.png``; the last stdout line is one JSON object.

    python benchmarks/compare.py [--quick] [--data-home DIR] [--time-limit SECONDS]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from _figures import emit

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
FULL = ("heart", "thyroid", "adult", "letter", "higgs_small", "rank_small")
LARGE = ("adult", "letter", "higgs_small", "rank_small")
QUICK = ("heart", "thyroid")


def run_one(name: str, data_home: str | None, quick: bool, time_limit: float, quick_run: bool) -> dict:
    from matplotlib.figure import Figure

    from thrifty import datasets
    from thrifty.comparison import compare
    from thrifty.frontier import frontier_gap

    ds = datasets.load(name, data_home=data_home)
    X, y, qid = ds.subset("train")
    splits = {}
    if "valid" in ds.splits:
        splits["X_val"], splits["y_val"], splits["qid_val"] = ds.subset("valid")
    splits["X_test"], splits["y_test"], splits["qid_test"] = ds.subset("test")
    start = time.perf_counter()
    cmp = compare(X, y, ds.costs, qid=qid, quick=quick, time_limit=time_limit, n_jobs=1,
                  progress=sys.stderr.isatty(), **splits)
    seconds = time.perf_counter() - start
    table = cmp.table.assign(dataset=name)
    # --quick writes beside the full run's files, never over them.
    stem = f"compare_quick_{name}" if quick_run else f"compare_{name}"
    table.to_csv(RESULTS / f"{stem}.csv", index=False)
    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = cmp.plot(fig.add_subplot())
    ax.set_title(f"{name}: every method, test {table['metric'].iloc[0]} against mean cost per example")
    fig.savefig(RESULTS / f"{stem}.png", dpi=110)
    lgb = table[table["method"] == "LightGBM, first k trees"]
    on_front = int((cmp.front["family"] == "composition").sum())
    others = table[table["method"] != "LightGBM, first k trees"]
    return {"gap": frontier_gap(table, lgb), "gap_others": frontier_gap(others, lgb),
            "composition_on_front": on_front,
            "front_methods": sorted(set(cmp.front["method"])), "models": len(table),
            "stopped_early": cmp.stopped_early, "seconds": round(seconds, 1), "skipped": len(cmp.skipped)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA"))
    parser.add_argument("--time-limit", type=float, default=None)
    args = parser.parse_args()
    RESULTS.mkdir(parents=True, exist_ok=True)
    names = QUICK if args.quick else FULL
    limit = args.time_limit if args.time_limit is not None else (20.0 if args.quick else 300.0)
    out: dict = {"bench": "compare", "quick": args.quick, "time_limit": limit}
    gaps, others, comps = {}, {}, {}
    for name in names:
        r = run_one(name, args.data_home, args.quick or name in LARGE, limit, args.quick)
        gaps[name], comps[name] = round(r["gap"], 4), r["composition_on_front"]
        others[name] = round(r["gap_others"], 4)
        print(f"{name}: {r['models']} models in {r['seconds']} s"
              f"{' (time limit reached)' if r['stopped_early'] else ''}; front from {r['front_methods']}; "
              f"mean gap above plain LightGBM {r['gap']:+.4f}; {r['skipped']} candidates skipped")
    # The overall front contains plain LightGBM's points, so its gap is >= 0 by construction;
    # it is strictly above where other methods add something. The front of the other methods
    # alone can also fall below.
    out["best_front_vs_lightgbm"] = gaps
    out["other_methods_front_vs_lightgbm"] = others
    out["composition_on_front"] = comps
    out["front_above_lightgbm_everywhere"] = all(g > 0 for g in gaps.values())
    emit(out, args.quick)


if __name__ == "__main__":
    main()
