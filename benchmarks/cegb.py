"""CEGB against GreedyMiser and truncated LightGBM: cost-accuracy curves (Peter et al. 2017, Fig. 2).

Datasets (what is available offline, see ../shared/data/README.md):

* ``rank_small`` (stand-in for Yahoo! LTR): LightGBM lambdarank, precision@5 against mean cost
  per document; its 300 feature costs drawn from ``yahoo_costs`` with seed 0. Two settings as
  in the paper: (i) feature cost plus evaluation cost (a depth-4 tree costs as much as a
  feature of cost 1: ``split_cost = 1/4`` per split visited, for every method), (ii) feature
  cost only. GreedyMiser is a regressor on the relevance labels there (it has no ranker).
* uniform costs (1 per feature): ``miniboone_tiny``, ``higgs_small``, ``adult`` (accuracy);
* real costs in dollars: ``thyroid`` (3 classes; FTI requires TT4 and T4U) and ``heart``
  (categorical columns; stratified k-fold cross-validation, curves averaged over folds).

Methods, each a curve of test metric against the test mean cost per example measured by
``thrifty.evaluate``:

* ``CEGB``: best-first deep trees (num_leaves 64, no depth limit);
* ``CEGB-16``: CEGB restricted to 16 leaves and depth 4;
* ``GreedyMiser``: unit hessian, depth-4 trees of 16 leaves, coupled feature costs;
* ``LightGBM``: plain LightGBM (31 leaves) truncated after k trees.

All four use learning rate 0.1 and ``min_child_samples = max(20, 1% of the training rows)``.

Every cost-aware model is fitted with ``budget=`` (the trade-off searched on the training
rows); the budgets are fractions (log-spaced from 2% to 100%) of plain LightGBM's mean
training cost, and each fitted model also contributes its first 25% and 50% of trees (the
paper's curves follow the boosting iterations). A curve is the Pareto envelope of its points.

Figures (last stdout line, JSON): ``datasets_cegb_dominates_greedymiser`` (datasets where the
area between CEGB's and GreedyMiser's curves over their common log-cost range is positive;
rank_small counts when CEGB dominates in both settings), ``cost_fraction_at_full_accuracy``
per dataset (CEGB's lowest test mean cost within 0.5 points of plain LightGBM's full-model test
metric, divided by that model's mean cost; null when never reached), ``fit_time_ratio`` (one
CEGB fit / one plain LightGBM fit, same rows and size: 100 trees of 64 leaves on higgs_small,
one thread, median of 3 paired repeats, at the median trade-off of higgs_small's CEGB models
that keep all their trees; the fit is LightGBM's own training with the translated penalties, and
``fit_time_ratio_estimator`` times ``CEGBClassifier.fit`` instead, which also imports the
booster into a thrifty Forest and measures its cost),
``budget_search_fits`` (median over every budget search).

Sizes: full: 100 trees, 5 budgets, adult trained on a random 10,000 of its rows, heart 5-fold;
--quick: 20 trees, 2 budgets, no adult and no rank_small setting (ii), higgs trained on 2,000
rows, thyroid/rank on 1,500, heart 2-fold. LightGBM uses one thread. Writes
benchmarks/results/cegb_curves.csv and cegb_<dataset>.png.

``--fit-time`` runs only :func:`fit_time_breakdown` (about 20 s): the fit-time ratio of each part
of the translated penalties, to results/cegb_fit_time.json.

    python benchmarks/cegb.py [--quick | --fit-time] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from _figures import emit

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SEED = 0
TOL = 0.005  # "within 0.5 points" of plain LightGBM's metric
PREFIXES = (0.1, 0.2, 0.35, 0.5, 0.75, 1.0)
METHODS = ("CEGB", "CEGB-16", "GreedyMiser", "LightGBM")
QUICK_SKIP = ("rank_small_feat", "adult")


def _config(quick: bool) -> dict:
    return {
        "cegb_leaves": 64,
        "min_child_frac": 0.01,
        "n_estimators": 20 if quick else 100,
        "n_budgets": 2 if quick else 5,
        "folds": 2 if quick else 5,
        "max_rows": {
            "adult": 2000 if quick else 10_000,
            "higgs_small": 2000 if quick else None,
            "thyroid": 1500 if quick else None,
            "rank_small": 1500 if quick else None,
            "miniboone_tiny": None,
            "heart": None,
        },
    }


def _settings(home: Path) -> list[dict]:
    from thrifty.costs import CostModel
    from thrifty.datasets import yahoo_costs

    yc = yahoo_costs(300, seed=SEED, data_home=home)
    names = [f"f{i}" for i in range(300)]
    return [
        {
            "key": "rank_small_eval",
            "data": "rank_small",
            "costs": CostModel(yc, feature_names=names, split_cost=0.25),
        },
        {"key": "rank_small_feat", "data": "rank_small", "costs": CostModel(yc, feature_names=names)},
        {"key": "miniboone_tiny", "data": "miniboone_tiny", "costs": None},
        {"key": "higgs_small", "data": "higgs_small", "costs": None},
        {"key": "adult", "data": "adult", "costs": None},
        {"key": "thyroid", "data": "thyroid", "costs": "real"},
        {"key": "heart", "data": "heart", "costs": "real", "cv": True},
    ]


def _folds(ds, setting: dict, cfg: dict) -> list[tuple]:
    """(X_train, y_train, qid_train, X_test, y_test, qid_test) per fold."""
    from sklearn.model_selection import StratifiedKFold

    rng = np.random.default_rng(SEED)
    if setting.get("cv"):
        X, y = ds.X, ds.y
        skf = StratifiedKFold(cfg["folds"], shuffle=True, random_state=SEED)
        return [(X.iloc[tr], y[tr], None, X.iloc[te], y[te], None) for tr, te in skf.split(X, y)]
    Xtr, ytr, qtr = ds.subset("train")
    Xte, yte, qte = ds.subset("test")
    cap = cfg["max_rows"][setting["data"]]
    if cap is not None and len(ytr) > cap:
        if qtr is None:
            keep = np.sort(rng.choice(len(ytr), cap, replace=False))
        else:  # whole queries
            queries = np.unique(qtr)
            rng.shuffle(queries)
            sizes = np.array([np.sum(qtr == q) for q in queries])
            chosen = queries[: int(np.searchsorted(np.cumsum(sizes), cap)) + 1]
            keep = np.flatnonzero(np.isin(qtr, chosen))
        Xtr, ytr = Xtr.iloc[keep], ytr[keep]
        qtr = None if qtr is None else qtr[keep]
    return [(Xtr, ytr, qtr, Xte, yte, qte)]


def _metric(task: str, y, ev, qid) -> float:
    from thrifty import metrics

    if task == "ranking":
        return float(metrics.precision_at_k(y, ev.raw, qid, k=5))
    return float(np.mean(ev.labels == y))


def _run_fold(
    fold: tuple, task: str, costs, budgets: np.ndarray, cfg: dict, fits: list, times: dict
) -> list[dict]:
    import lightgbm

    from thrifty.forest import Forest
    from thrifty.runtime.evaluate import evaluate
    from thrifty.train.cegb import BudgetError, CEGBClassifier, CEGBRanker
    from thrifty.train.greedymiser import GreedyMiserClassifier, GreedyMiserRegressor

    Xtr, ytr, qtr, Xte, yte, qte = fold
    n_est = cfg["n_estimators"]
    mcs = max(20, int(cfg["min_child_frac"] * len(ytr)))
    common = {
        "n_estimators": n_est,
        "n_jobs": 1,
        "progress": False,
        "random_state": SEED,
        "min_child_samples": mcs,
    }
    ranking = task == "ranking"
    cegb_cls = CEGBRanker if ranking else CEGBClassifier
    gm_cls = GreedyMiserRegressor if ranking else GreedyMiserClassifier
    makers = {
        "CEGB": lambda b: cegb_cls(costs=costs, budget=b, num_leaves=cfg["cegb_leaves"], **common),
        "CEGB-16": lambda b: cegb_cls(costs=costs, budget=b, num_leaves=16, max_depth=4, **common),
        "GreedyMiser": lambda b: gm_cls(costs=costs, budget=b, **common),
    }
    rows = []

    def add(method, budget, frac, forest, n_fits=None):
        ev = evaluate(forest, Xte, costs)
        rows.append(
            {
                "method": method,
                "budget": budget,
                "fraction": frac,
                "mean_cost": ev.cost.mean,
                "value": _metric(task, yte, ev, qte),
                "n_trees": forest.n_trees,
                "n_fits": n_fits,
            }
        )

    # plain LightGBM, truncated after k trees
    lgbm_cls = lightgbm.LGBMRanker if ranking else lightgbm.LGBMClassifier
    plain = lgbm_cls(
        n_estimators=n_est, num_leaves=31, n_jobs=1, verbose=-1, random_state=SEED, min_child_samples=mcs
    )
    plain.fit(Xtr, ytr, **({"group": _groups(qtr)} if ranking else {}))
    forest = Forest.from_model(plain)
    per_iter = max(1, forest.n_outputs) if not ranking else 1
    for k in sorted({max(1, int(round(n_est * f))) for f in np.geomspace(0.02, 1.0, 10)}):
        add("LightGBM", np.nan, k / n_est, forest.subset(range(k * per_iter)))
    for method, make in makers.items():
        for b in budgets:
            est = make(float(b))
            t0 = time.perf_counter()
            try:
                est.fit(Xtr, ytr, **({"qid": qtr} if ranking and method != "GreedyMiser" else {}))
            except BudgetError:
                continue
            full_size = est.n_estimators_ == n_est and not est.truncated_
            times.setdefault(method, []).append((time.perf_counter() - t0, est.tradeoff_, full_size))
            fits.append(est.n_fits_)
            f = est.forest_
            n_iter = max(1, f.n_trees // f.n_outputs)
            for frac in PREFIXES:
                k = max(1, int(round(n_iter * frac)))
                add(method, float(b), frac, f.subset(range(k * f.n_outputs)), est.n_fits_)
    return rows


def _groups(qid) -> np.ndarray:
    from thrifty.train.cegb import group_sizes

    return group_sizes(qid)


def _train_cost(ds, fold, task, costs) -> float:
    """Mean training cost of plain LightGBM: the scale of the budgets."""
    import lightgbm

    from thrifty.runtime.evaluate import evaluate

    Xtr, ytr, qtr = fold[:3]
    cls = lightgbm.LGBMRanker if task == "ranking" else lightgbm.LGBMClassifier
    m = cls(n_estimators=100, num_leaves=31, n_jobs=1, verbose=-1, random_state=SEED)
    m.fit(Xtr, ytr, **({"group": _groups(qtr)} if task == "ranking" else {}))
    return evaluate(m, Xtr, costs).cost.mean


def envelope(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pareto envelope (cost ascending, best value so far) of (cost, value) points."""
    order = np.lexsort((-points[:, 1], points[:, 0]))
    c, v = points[order, 0], np.maximum.accumulate(points[order, 1])
    return c, v


def area_between(a: np.ndarray, b: np.ndarray) -> float:
    """Mean of (curve a - curve b) over their common range of positive costs, on a log-cost
    grid (> 0: a lies above b). Cost-0 points (the constant model) only set the start value."""
    ca, va = envelope(a)
    cb, vb = envelope(b)
    pos_a, pos_b = ca[ca > 0], cb[cb > 0]
    if not len(pos_a) or not len(pos_b):
        return float("nan")
    lo, hi = max(pos_a[0], pos_b[0]), min(ca[-1], cb[-1])
    if not hi > lo:
        return float("nan")
    grid = np.geomspace(lo, hi, 400)

    def at(c, v):
        i = np.searchsorted(c, grid, side="right") - 1
        return np.where(i >= 0, v[np.maximum(i, 0)], np.nan)

    return float(np.nanmean(at(ca, va) - at(cb, vb)))


def _fit_time_ratios(home: Path, n_est: int, tradeoff: float) -> tuple[float, float]:
    """(LightGBM trained with the translated cegb_* penalties, CEGBClassifier.fit) over plain
    LightGBM, same rows (higgs_small train) and size (n_est trees of 64 leaves), one thread,
    median of 3 paired repeats. The estimator also imports the booster into a thrifty Forest
    and measures its mean cost on the training rows."""
    import lightgbm

    from thrifty.datasets import load
    from thrifty.train.cegb import CEGBClassifier, cegb_params

    ds = load("higgs_small", data_home=home)
    X, y, _ = ds.subset("train")
    base = {"n_estimators": n_est, "num_leaves": 64, "n_jobs": 1, "verbose": -1, "random_state": SEED}
    engine, estimator = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        lightgbm.LGBMClassifier(**base).fit(X, y)
        t1 = time.perf_counter()
        lightgbm.LGBMClassifier(**base, **cegb_params(ds.costs, tradeoff, num_leaves=64)).fit(X, y)
        t2 = time.perf_counter()
        CEGBClassifier(
            costs=ds.costs,
            tradeoff=tradeoff,
            n_estimators=n_est,
            num_leaves=64,
            n_jobs=1,
            random_state=SEED,
            progress=False,
        ).fit(X, y)
        t3 = time.perf_counter()
        engine.append((t2 - t1) / (t1 - t0))
        estimator.append((t3 - t2) / (t1 - t0))
    return float(np.median(engine)), float(np.median(estimator))


def fit_time_breakdown(home: Path, n_est: int = 100, tradeoff: float = 0.003111, repeats: int = 5) -> dict:
    """Where CEGB's extra fit time goes: LightGBM trained with each part of the translated
    penalties, over plain LightGBM (higgs_small train, n_est trees of 64 leaves, one thread,
    median of ``repeats`` interleaved repeats; the default trade-off is the full run's).

    LightGBM prices a lazy (per-example) feature cost in ``CalculateOndemandCosts``, a loop over
    every row of a leaf for every feature, for both children of every split (the larger child's
    histogram comes from a subtraction, its lazy cost does not): the ratio "lazy only" carries
    almost all of the overhead."""
    import lightgbm

    from thrifty.datasets import load
    from thrifty.train.cegb import cegb_params

    ds = load("higgs_small", data_home=home)
    X, y, _ = ds.subset("train")
    base = {"n_estimators": n_est, "num_leaves": 64, "n_jobs": 1, "verbose": -1, "random_state": SEED}
    full = cegb_params(ds.costs, tradeoff, num_leaves=64)
    variants = {
        "plain": {},
        "all": full,
        "no_lazy": {k: v for k, v in full.items() if k != "cegb_penalty_feature_lazy"},
        "lazy_only": {k: v for k, v in full.items() if k in ("cegb_tradeoff", "cegb_penalty_feature_lazy")},
    }
    seconds: dict = {k: [] for k in variants}
    for _ in range(repeats):
        for k, params in variants.items():
            t0 = time.perf_counter()
            lightgbm.LGBMClassifier(**base, **params).fit(X, y)
            seconds[k].append(time.perf_counter() - t0)
    med = {k: float(np.median(v)) for k, v in seconds.items()}
    return {
        "bench": "cegb_fit_time",
        "tradeoff": tradeoff,
        "n_estimators": n_est,
        "plain_seconds": round(med["plain"], 3),
        **{f"ratio_{k}": round(med[k] / med["plain"], 3) for k in variants if k != "plain"},
    }


def _count_half(fractions: dict) -> int:
    """Datasets whose cost fraction is <= 0.5 (rank_small counts once, when both settings are)."""

    def ok(v):
        return v is not None and v <= 0.5

    rank = [v for k, v in fractions.items() if k.startswith("rank_small")]
    others = [v for k, v in fractions.items() if not k.startswith("rank_small")]
    return int(bool(rank) and all(ok(v) for v in rank)) + sum(ok(v) for v in others)


def _plot(key: str, table, task: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for method in METHODS:
        sub = table[table["method"] == method]
        if sub.empty:
            continue
        pts = sub[["mean_cost", "value"]].to_numpy(dtype=float)
        c, v = envelope(pts)
        ax.step(np.maximum(c, 1e-3), v, where="post", label=method)
        ax.scatter(np.maximum(pts[:, 0], 1e-3), pts[:, 1], s=8, alpha=0.4)
    ax.set_xscale("log")
    ax.set_xlabel("test mean cost per example")
    ax.set_ylabel("precision@5" if task == "ranking" else "accuracy")
    ax.set_title(f"CEGB vs GreedyMiser vs LightGBM: {key}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"cegb_{key}.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    import pandas as pd

    from thrifty.datasets import load

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--data-home", default=str(HERE.parent.parent / "shared" / "data"))
    parser.add_argument(
        "--fit-time",
        action="store_true",
        help="only break the fit-time ratio down by penalty (results/cegb_fit_time.json)",
    )
    args = parser.parse_args(argv)
    home = Path(args.data_home)
    if args.fit_time:
        figures = fit_time_breakdown(home)
        emit(figures, False)
        return figures
    cfg = _config(args.quick)
    RESULTS.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    fits: list[int] = []
    times: dict = {}
    higgs_lams: list[float] = []
    tables = []
    for setting in _settings(home):
        if args.quick and setting["key"] in QUICK_SKIP:
            continue
        ds = load(setting["data"], data_home=home)
        task = "ranking" if ds.task == "ranking" else "classification"
        costs = ds.costs if setting["costs"] in (None, "real") else setting["costs"]
        folds = _folds(ds, setting, cfg)
        scale = _train_cost(ds, folds[0], task, costs)
        budgets = scale * np.geomspace(0.02, 1.0, cfg["n_budgets"])
        rows = []
        times.clear()
        for i, fold in enumerate(folds):
            for r in _run_fold(fold, task, costs, budgets, cfg, fits, times):
                rows.append({**r, "fold": i})
        df = pd.DataFrame(rows)
        # average over folds the points present in every fold
        keys = ["method", "budget", "fraction"]
        df["budget"] = df["budget"].fillna(-1.0)
        counts = df.groupby(keys)["fold"].transform("count")
        avg = df[counts == len(folds)].groupby(keys, as_index=False)[["mean_cost", "value", "n_trees"]].mean()
        avg.insert(0, "dataset", setting["key"])
        tables.append(avg)
        _plot(setting["key"], avg, task)
        if setting["key"] == "higgs_small":
            higgs_lams = [lam for _, lam, full_size in times.get("CEGB", []) if full_size]
        print(f"{setting['key']}: {len(avg)} points, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    table = pd.concat(tables, ignore_index=True)
    table.to_csv(RESULTS / "cegb_curves.csv", index=False)

    areas, fractions = {}, {}
    for key, sub in table.groupby("dataset", sort=False):
        pts = {m: sub[sub["method"] == m][["mean_cost", "value"]].to_numpy(dtype=float) for m in METHODS}
        areas[key] = (
            area_between(pts["CEGB"], pts["GreedyMiser"])
            if len(pts["CEGB"]) and len(pts["GreedyMiser"])
            else float("nan")
        )
        plain = sub[(sub["method"] == "LightGBM")].sort_values("fraction").iloc[-1]
        ok = pts["CEGB"][pts["CEGB"][:, 1] >= plain["value"] - TOL]
        fractions[key] = (
            float(ok[:, 0].min() / plain["mean_cost"]) if len(ok) and plain["mean_cost"] > 0 else None
        )
    # timed at the median trade-off of higgs_small's full-size CEGB models (all trees kept)
    lams = sorted(lam for lam in higgs_lams if lam > 0)
    lam_ratio = lams[len(lams) // 2] if lams else 1e-3
    ratios = _fit_time_ratios(home, cfg["n_estimators"], lam_ratio)
    rank = [v for k, v in areas.items() if k.startswith("rank_small")]
    per_dataset = {"rank_small": min(rank)} if rank else {}
    per_dataset.update({k: v for k, v in areas.items() if not k.startswith("rank_small")})
    result = {
        "bench": "cegb",
        "quick": bool(args.quick),
        "yahoo_costs_seed": SEED,
        "datasets_cegb_dominates_greedymiser": int(sum(bool(v > 0) for v in per_dataset.values())),
        "n_datasets": len(per_dataset),
        "area_cegb_minus_greedymiser": {k: (None if np.isnan(v) else round(v, 5)) for k, v in areas.items()},
        "cost_fraction_at_full_accuracy": {
            k: (None if v is None else round(v, 4)) for k, v in fractions.items()
        },
        "datasets_cost_fraction_le_half": _count_half(fractions),
        "fit_time_ratio": round(ratios[0], 3),
        "fit_time_ratio_estimator": round(ratios[1], 3),
        "fit_time_tradeoff": float(f"{lam_ratio:.4g}"),
        "budget_search_fits": float(np.median(fits)) if fits else None,
        "budget_search_fits_max": int(max(fits)) if fits else None,
        "n_budget_searches": len(fits),
        "seconds": round(time.perf_counter() - start, 1),
    }
    emit(result, bool(args.quick))
    return result


if __name__ == "__main__":
    main()
