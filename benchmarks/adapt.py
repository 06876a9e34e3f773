"""ADAPT-GBRT, ADAPT-LIN and the L1 baseline approximating an expensive model (Nan & Saligrama 2017).

For each dataset, two expensive models f0 (a 500-tree random forest and a LightGBM model) and,
for each, the three methods swept over ``p_full`` and ``gamma``; every system is measured by
thrifty's runtime (``thrifty.evaluate``: exact per-example feature cost, the gate's features
free for the model it picks) on validation and test data. A method's frontier is its Pareto
front on the validation data, drawn with the test accuracy and test mean cost of those
systems (the paper picks systems on validation data too). CEGB (``thrifty.train.cegb``) and
BudgetPrune (``thrifty.prune``; its path on a 100-tree random forest of depth <= 10 fitted on at
most 3,000 training rows, since the 500-tree forest needs gigabytes on letter) are added when
importable.

Datasets and splits:

* letter: binary as in the authors' code (A-M vs N-Z), 12,000 / 4,000 / 4,000 train /
  validation / test (the first 16,000 rows, then the predefined test rows), uniform costs;
* miniboone_tiny: its own 2,000 / 1,000 / 2,000 splits, uniform costs;
* higgs_small: the last quarter of the 7,000 training rows as validation, 500 test rows;
* heart and thyroid (3 classes) with their real dollar costs (thyroid's FTI requires TT4 and
  T4U): a quarter of the training rows as validation, the predefined test rows. heart's
  categorical columns are given as category codes.

To keep the full run within minutes on a busy 2-core machine: ADAPT-GBRT grows 100 rounds of
depth-4 trees at learning rate 0.1 per outer iteration, at most 6 outer iterations, on a 4 x 4
grid of (p_full, gamma); ADAPT-LIN 4 x 3, L1 4 x 4. ``--quick`` (under a minute): heart and
miniboone_tiny, the random forest f0 only (200 trees), 3 x 3 grids, 30 rounds of depth 3 at
rate 0.2, 4 outer iterations.

Figures (last stdout line, JSON): ``letter_cost_reduction_within_1pt`` = 1 - (lowest test mean
cost of an ADAPT-GBRT frontier system, random-forest f0, whose test accuracy is within 1 point
of f0's) / f0's test mean cost (paper: 0.31; null in --quick); ``datasets_gbrt_beats_lin_and_l1``
= datasets (per f0: "name/f0") where ADAPT-GBRT's frontier is at least as high as ADAPT-LIN's and
L1's (mean over a cost grid from 0 to f0's cost of the best test accuracy reachable at each cost);
``fit_seconds_letter`` = seconds of one ADAPT-GBRT fit on letter (and its ratio to the 500-tree
random forest's fit in the same run). Writes benchmarks/results/adapt_points.csv and
adapt_frontier_<dataset>.png (``--quick``: adapt_points_quick.csv, adapt_frontier_quick_<dataset>.png).

    python benchmarks/adapt.py [--quick] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import numpy as np
from _figures import emit

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
METHODS = {"gbrt": "ADAPT-GBRT", "lin": "ADAPT-LIN", "l1": "L1"}


def load(name: str, data_home: str | None, seed: int = 0) -> dict:
    import pandas as pd

    from thrifty.datasets import load as load_dataset

    ds = load_dataset(name, data_home=data_home)
    X = ds.X.copy()
    for c in ds.categorical:
        X[c] = X[c].cat.codes.astype(np.float64).where(X[c].cat.codes >= 0, np.nan)
    X = X.to_numpy(dtype=np.float64)
    y = np.asarray(ds.y)
    if name == "letter":
        y = (pd.Series(y).astype(str) >= "N").to_numpy().astype(np.int64)
        tr = ds.splits["train"]
        parts = {"train": tr[:12_000], "valid": tr[12_000:16_000], "test": ds.splits["test"]}
    elif "valid" in ds.splits:
        parts = {k: ds.splits[k] for k in ("train", "valid", "test")}
    else:
        tr = np.random.default_rng(seed).permutation(ds.splits["train"])
        cut = int(round(0.75 * len(tr)))
        parts = {"train": np.sort(tr[:cut]), "valid": np.sort(tr[cut:]), "test": ds.splits["test"]}
    out = {k: (X[v], y[v]) for k, v in parts.items()}
    out["costs"] = ds.costs
    return out


def hpc_models(quick: bool) -> dict:
    import lightgbm
    from sklearn.ensemble import RandomForestClassifier

    models = {"RF": RandomForestClassifier(n_estimators=200 if quick else 500, random_state=0, n_jobs=1)}
    if not quick:
        models["LightGBM"] = lightgbm.LGBMClassifier(
            n_estimators=300, learning_rate=0.05, num_leaves=31, random_state=0, n_jobs=1, verbose=-1
        )
    return models


def accuracy(est, ev, X, y) -> float:
    return float(np.mean(ev.labels == y))


def sweep_method(method: str, hpc, data: dict, grids: dict, settings: dict) -> list[dict]:
    """Every (p_full, gamma) of the grids; each system measured on validation and test data."""
    from thrifty import evaluate
    from thrifty.train.adapt import ADAPTClassifier

    (X, y), (Xv, yv), (Xt, yt) = data["train"], data["valid"], data["test"]
    rows = []
    for p_full in grids["p_full"]:
        # the L1 baseline has nothing to warm-start from (its steps depend on gamma only)
        est = ADAPTClassifier(
            hpc, costs=data["costs"], method=method, warm_start=method != "l1", progress=False, **settings
        )
        for gamma in grids[method]:  # large to small: each fit warm-starts from the sparser one
            t0 = time.perf_counter()
            est.set_params(p_full=p_full, gamma=gamma).fit(X, y)
            secs = time.perf_counter() - t0
            evv, evt = evaluate(est.plan_, Xv, est.costs_), evaluate(est.plan_, Xt, est.costs_)
            rows.append(
                {
                    "method": METHODS[method],
                    "p_full": p_full,
                    "gamma": gamma,
                    "valid_accuracy": accuracy(est, evv, Xv, yv),
                    "valid_cost": evv.cost.mean,
                    "test_accuracy": accuracy(est, evt, Xt, yt),
                    "test_cost": evt.cost.mean,
                    "test_to_hpc": float(np.mean(evt.exit == 1)),
                    "fit_seconds": secs,
                }
            )
    return rows


def others(data: dict, rf, quick: bool) -> list[dict]:
    """CEGB and BudgetPrune points when those modules exist (never required)."""
    from thrifty import evaluate

    (X, y), (Xv, yv), (Xt, yt) = data["train"], data["valid"], data["test"]
    costs = data["costs"]
    rows = []

    def add(method: str, model, param: float) -> None:
        evv, evt = evaluate(model, Xv, costs), evaluate(model, Xt, costs)
        rows.append(
            {
                "method": method,
                "p_full": np.nan,
                "gamma": param,
                "valid_accuracy": float(np.mean(evv.labels == yv)),
                "valid_cost": evv.cost.mean,
                "test_accuracy": float(np.mean(evt.labels == yt)),
                "test_cost": evt.cost.mean,
                "test_to_hpc": np.nan,
                "fit_seconds": np.nan,
            }
        )

    try:
        from thrifty.train.cegb import CEGBClassifier

        if len(np.unique(y)) == 2:
            for tradeoff in (0.01, 0.1) if quick else (1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3):
                add(
                    "CEGB",
                    CEGBClassifier(
                        costs=costs, tradeoff=tradeoff, n_jobs=1, random_state=0, progress=False
                    ).fit(X, y),
                    tradeoff,
                )
    except Exception as exc:  # an unfinished module must not stop the benchmark
        print(f"  CEGB skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
    try:
        from sklearn.ensemble import RandomForestClassifier

        from thrifty.prune.budgetprune import budget_prune_path

        # BudgetPrune's cut over every (example, feature, tree) of a 500-tree forest needs
        # gigabytes on letter: it prunes a 100-tree forest of depth <= 10 instead, fitted on
        # at most 3,000 training rows.
        m = min(len(y), 3000)
        small = RandomForestClassifier(
            n_estimators=40 if quick else 100, max_depth=10, random_state=0, n_jobs=1
        ).fit(X[:m], y[:m])
        path = budget_prune_path(small, X[:m], y[:m], costs, progress=False)
        for k in np.unique(np.linspace(0, len(path) - 1, 6 if quick else 12).round().astype(int)):
            add("BudgetPrune", path.forest(int(k)), float(path.lambdas[k]))
    except Exception as exc:
        print(f"  BudgetPrune skipped: {type(exc).__name__}: {exc}", file=sys.stderr)
    return rows


def valid_front(df):
    """Systems on the validation Pareto front (no other is cheaper and at least as accurate)."""
    df = df.sort_values(["valid_cost", "valid_accuracy"], ascending=[True, False])
    keep, best = [], -np.inf
    for i, r in df.iterrows():
        if r["valid_accuracy"] > best:
            keep.append(i)
            best = r["valid_accuracy"]
    return df.loc[keep].sort_values("test_cost")


def frontier_height(front, max_cost: float, n: int = 200) -> float:
    """Mean over costs in [0, max_cost] of the best test accuracy reachable at that cost."""
    grid = np.linspace(0.0, max_cost, n)
    cost, acc = front["test_cost"].to_numpy(), front["test_accuracy"].to_numpy()
    best = [acc[cost <= c].max(initial=0.0) for c in grid]
    return float(np.mean(best))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA"))
    args = ap.parse_args()
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from thrifty import evaluate

    quick = args.quick
    names = (
        ["heart", "miniboone_tiny"]
        if quick
        else ["letter", "miniboone_tiny", "higgs_small", "heart", "thyroid"]
    )
    grids = {
        "p_full": (0.1, 0.3, 0.5) if quick else (0.2, 0.35, 0.5, 0.65),
        "gbrt": (1e-2, 1e-3, 1e-4) if quick else (1e-2, 1e-3, 3e-4, 1e-4),
        "lin": (0.1, 0.01, 1e-3) if quick else (0.1, 0.03, 0.01),
        "l1": (0.1, 0.01, 1e-3) if quick else (0.1, 0.03, 0.01, 3e-3),
    }
    settings = (
        {"n_estimators": 30, "learning_rate": 0.2, "max_depth": 3, "n_iter": 4}
        if quick
        else {"n_estimators": 100, "learning_rate": 0.1, "max_depth": 4, "n_iter": 6}
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    rows, figures, heights = [], {}, {}
    t_start, cpu_start = time.perf_counter(), time.process_time()
    for name in names:
        data = load(name, args.data_home)
        (X, y), (Xt, yt) = data["train"], data["test"]
        print(f"{name}: train {len(y)}, valid {len(data['valid'][1])}, test {len(yt)}", file=sys.stderr)
        rf_fitted = None
        for f0_name, f0 in hpc_models(quick).items():
            t0 = time.perf_counter()
            hpc = f0.fit(X, y)
            f0_secs = time.perf_counter() - t0
            if f0_name == "RF":
                rf_fitted = copy.deepcopy(hpc)
            ev = evaluate(hpc, Xt, data["costs"])
            f0_acc, f0_cost = float(np.mean(ev.labels == yt)), ev.cost.mean
            base = {"dataset": name, "f0": f0_name}
            rows.append(
                {
                    **base,
                    "method": f"f0 ({f0_name})",
                    "test_accuracy": f0_acc,
                    "test_cost": f0_cost,
                    "fit_seconds": f0_secs,
                }
            )
            for method in METHODS:
                t0 = time.perf_counter()
                pts = sweep_method(method, hpc, data, grids, settings)
                print(
                    f"  {f0_name} {METHODS[method]}: {len(pts)} fits in {time.perf_counter() - t0:.1f}s",
                    file=sys.stderr,
                )
                rows += [{**base, **p} for p in pts]
            if name == "letter" and f0_name == "RF":
                from thrifty.train.adapt import ADAPTClassifier

                t0 = time.perf_counter()
                ADAPTClassifier(
                    hpc, costs=data["costs"], p_full=0.2, gamma=1e-3, progress=False, **settings
                ).fit(X, y)
                figures["fit_seconds_letter"] = round(time.perf_counter() - t0, 2)
                figures["fit_seconds_letter_vs_rf500_fit"] = round(figures["fit_seconds_letter"] / f0_secs, 2)
        rows += [{"dataset": name, "f0": "RF", **p} for p in others(data, rf_fitted, quick)]
        print(f"  elapsed {time.perf_counter() - t_start:.0f}s", file=sys.stderr)

    df = pd.DataFrame(rows)
    tag = "_quick" if quick else ""  # a quick run never overwrites the full run's files
    df.to_csv(RESULTS / f"adapt_points{tag}.csv", index=False)
    beats = []
    for name in names:
        d = df[df.dataset == name]
        fig, axes = plt.subplots(1, d.f0.nunique(), figsize=(6 * d.f0.nunique(), 4.5), squeeze=False)
        for ax, (f0_name, g) in zip(axes[0], d.groupby("f0", sort=False)):
            f0_row = g[g.method == f"f0 ({f0_name})"].iloc[0]
            fronts = {}
            for method in list(METHODS.values()) + ["CEGB", "BudgetPrune"]:
                pts = g[g.method == method]
                if len(pts):
                    fronts[method] = valid_front(pts)
                    ax.plot(
                        fronts[method].test_cost,
                        fronts[method].test_accuracy,
                        "o-",
                        ms=3,
                        label=method,
                        drawstyle="steps-post",
                    )
            ax.axhline(f0_row.test_accuracy, color="k", ls=":", lw=1)
            ax.plot([f0_row.test_cost], [f0_row.test_accuracy], "k*", ms=10, label=f"f0 ({f0_name})")
            ax.set(
                title=f"{name}, f0 = {f0_name}",
                xlabel="mean feature cost per test example",
                ylabel="test accuracy",
            )
            ax.legend(fontsize=8, loc="lower right")
            h = {m: frontier_height(fronts[m], f0_row.test_cost) for m in METHODS.values()}
            heights[f"{name}/{f0_name}"] = {m: round(v, 4) for m, v in h.items()}
            if h["ADAPT-GBRT"] >= h["ADAPT-LIN"] and h["ADAPT-GBRT"] >= h["L1"]:
                beats.append(f"{name}/{f0_name}")
            if name == "letter" and f0_name == "RF":
                fr = fronts["ADAPT-GBRT"]
                ok = fr[fr.test_accuracy >= f0_row.test_accuracy - 0.01]
                figures["letter_f0_accuracy"] = round(float(f0_row.test_accuracy), 4)
                figures["letter_f0_cost"] = round(float(f0_row.test_cost), 3)
                figures["letter_cost_reduction_within_1pt"] = (
                    round(1.0 - float(ok.test_cost.min()) / float(f0_row.test_cost), 4) if len(ok) else 0.0
                )
        fig.tight_layout()
        fig.savefig(RESULTS / f"adapt_frontier{tag}_{name}.png", dpi=110)
        plt.close(fig)
    out = {
        "bench": "adapt",
        "quick": quick,
        "letter_cost_reduction_within_1pt": figures.get("letter_cost_reduction_within_1pt"),
        "datasets_gbrt_beats_lin_and_l1": beats,
        "n_dataset_f0_pairs": len(heights),
        "fit_seconds_letter": figures.get("fit_seconds_letter"),
        **{
            k: v
            for k, v in figures.items()
            if k not in ("letter_cost_reduction_within_1pt", "fit_seconds_letter")
        },
        "frontier_heights": heights,
        "total_seconds": round(time.perf_counter() - t_start, 1),
        "cpu_seconds": round(time.process_time() - cpu_start, 1),
    }
    emit(out, quick)


if __name__ == "__main__":
    main()
