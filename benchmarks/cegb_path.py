"""CEGB's budgets along one trade-off path against a search per budget, as ``thrifty.compare``
fits them on one fold (issue 24: the CEGB family reached one budget of seven in the allowance).

Per dataset of ``benchmarks/tasks.py`` (flights, diamonds, rank_small, letter), the rows
``compare`` fits on one fold: the training split, 20% of it held out as the calibration split
(``thrifty.comparison.fitting_context``), the plain LightGBM model of compare's defaults, and
compare's budgets (``BUDGET_FRACTIONS`` of the plain model's mean cost on the calibration rows)
in compare's order (coarse to fine, ``spread``). Two ways to reach them:

* ``path``: compare's CEGB method (``_cegb_models``): one ``warm_start`` estimator per fold,
  each budget's search started from every model the earlier budgets trained, and at each budget
  the path's model of best calibration metric within it;
* ``cold``: a ``CEGBClassifier/Regressor/Ranker(budget=b)`` per budget, each searching alone
  (compare before), keeping the dearest model within the budget.

Figures (``results/cegb_path.json``; the last stdout line), per dataset: ``fits`` (models
trained per budget, both ways, in compare's order), ``seconds`` (per budget), ``total_seconds``
and ``total_fits`` both ways, ``fits_ratio`` (path over cold), and per budget the calibration
cost and metric of each way's model (``cost``, ``metric``: the path's is never worse on the
calibration rows, where it is chosen). ``cegb_path_fits_ratio``: the largest ``fits_ratio``.
Plot: ``results/cegb_path.png``, fits per budget both ways, a panel per dataset.

--quick: 2,000 training rows per dataset (whole queries for rank_small), the quick budgets.

    python benchmarks/cegb_path.py [--quick] [--data-home DIR] [--datasets A,B]
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import numpy as np
from _figures import RESULTS, emit

from thrifty import metrics
from thrifty.comparison.compare import BUDGET_FRACTIONS, DEFAULT_LIGHTGBM, QUICK_BUDGET_FRACTIONS
from thrifty.comparison.methods import _capacity, _cegb_models
from thrifty.comparison.registry import spread
from thrifty.comparison.settings import Settings
from thrifty.comparison.sweep import fitting_context
from thrifty.datasets import load
from thrifty.runtime.evaluate import evaluate
from thrifty.train import CEGBClassifier, CEGBRanker, CEGBRegressor

DATASETS = {"flights": "binary", "diamonds": "regression", "rank_small": "ranking", "letter": "multiclass"}
QUICK_ROWS = 2000


def rows(name: str, quick: bool, data_home: str | None) -> tuple:
    """The training split (a prefix of whole queries, or a random sample, when quick)."""
    ds = load(name, data_home)
    X, y, qid = ds.subset("train")
    if quick and len(y) > QUICK_ROWS:
        if qid is not None:
            keep = np.flatnonzero(np.isin(qid, np.unique(qid)[: max(1, QUICK_ROWS // 15)]))
        else:
            keep = np.sort(np.random.default_rng(0).choice(len(y), QUICK_ROWS, replace=False))
        X, y, qid = X.iloc[keep], y[keep], None if qid is None else qid[keep]
    return ds, X, y, qid


def run(name: str, task: str, quick: bool, data_home: str | None) -> dict:
    ds, X, y, qid = rows(name, quick, data_home)
    params = {**DEFAULT_LIGHTGBM, "n_estimators": 50 if quick else DEFAULT_LIGHTGBM["n_estimators"]}
    base = Settings(task=task, costs=ds.costs, lightgbm_params=params, n_jobs=1)
    full = fitting_context(base, X, y, qid).full_cost
    fractions = QUICK_BUDGET_FRACTIONS if quick else BUDGET_FRACTIONS
    ctx = fitting_context(replace(base, budgets=tuple(round(f * full, 4) for f in fractions)), X, y, qid)
    budgets = ctx.budgets

    def quality(forest) -> float:
        ev = evaluate(forest, ctx.X_val, ctx.costs)
        return round(float(metrics.score(task, ctx.y_val, ev, qid=ctx.qid_val)[1]), 5)

    out: dict = {"budgets": list(spread(budgets)), "fits": {}, "seconds": {}, "cost": {}, "metric": {}}
    way: dict = {"path": [], "cold": []}
    begun = time.perf_counter()
    for cand in _cegb_models(ctx):
        way["path"].append((cand.params.get("n_fits", 0), cand.fit_seconds, cand.model))
    cls = {"ranking": CEGBRanker, "regression": CEGBRegressor}.get(task, CEGBClassifier)
    kw = {"qid": ctx.qid_train} if task == "ranking" else {}
    for b in out["budgets"]:
        start = time.perf_counter()
        est = cls(costs=ctx.costs, budget=b, **_capacity(ctx))
        try:
            est.fit(ctx.X_train, ctx.y_train, calibration=(ctx.X_val, ctx.y_val), **kw)
            way["cold"].append((est.n_fits_, time.perf_counter() - start, est.forest_))
        except ValueError:  # below the cheapest model
            way["cold"].append((0, time.perf_counter() - start, None))
    for key, found in way.items():
        out["fits"][key] = [int(n) for n, _, _ in found]
        out["seconds"][key] = [round(s, 2) for _, s, _ in found]
        out["cost"][key] = [
            None if f is None else round(evaluate(f, ctx.X_val, ctx.costs).cost.mean, 4) for *_, f in found
        ]
        out["metric"][key] = [None if f is None else quality(f) for *_, f in found]
        out[f"total_fits_{key}"] = int(sum(out["fits"][key]))
        out[f"total_seconds_{key}"] = round(sum(out["seconds"][key]), 1)
    out["fits_ratio"] = round(out["total_fits_path"] / max(1, out["total_fits_cold"]), 3)
    out["wall_seconds"] = round(time.perf_counter() - begun, 1)
    return out


def plot(results: dict, quick: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4 * len(results), 3.2), squeeze=False)
    for ax, (name, r) in zip(axes[0], results.items(), strict=True):
        x = np.arange(len(r["budgets"]))
        ax.bar(x - 0.2, r["fits"]["cold"], 0.4, label="a search per budget")
        ax.bar(x + 0.2, r["fits"]["path"], 0.4, label="one path")
        ax.set_xticks(x, [f"{b:.3g}" for b in r["budgets"]], rotation=45, fontsize=7)
        ax.set_title(name)
        ax.set_xlabel("budget (compare's order)")
    axes[0][0].set_ylabel("models trained")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(RESULTS / f"cegb_path{'_quick' if quick else ''}.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA"))
    parser.add_argument("--datasets", help="comma-separated subset of " + ", ".join(DATASETS))
    args = parser.parse_args()
    names = args.datasets.split(",") if args.datasets else list(DATASETS)
    results = {}
    for name in names:
        results[name] = run(name, DATASETS[name], args.quick, args.data_home)
        print(name, results[name]["fits"], flush=True)
    plot(results, args.quick)
    emit(
        {
            "bench": "cegb_path",
            "cegb_path_fits_ratio": max(r["fits_ratio"] for r in results.values()),
            "details": results,
        },
        args.quick,
    )


if __name__ == "__main__":
    main()
