"""Cronus (Chen et al., AISTATS 2012) against GBRT truncation, single-stage re-weighting and early exits.

The paper's setting on rank_small (the offline stand-in for Yahoo! LTR): relevance binarized
(label >= 3 relevant, targets -1/+1), the 300 feature costs drawn from the real Yahoo! cost list
(``thrifty.datasets.yahoo_costs(300, seed=0)``, values 1..200) and a tree cost of 1 (the paper's
cost unit is about one tree evaluation), each negative *test* document replicated 10 times, the
test rows shuffled with seed 0 (so that ties in score are not broken by the file's order), a
LightGBM GBRT regressing the -1/+1 targets (1,000 trees, learning rate 0.05, 16 leaves, one
thread, seed 0), precision@5 per query against the mean cost per test document, all costs
measured by ``thrifty.evaluate``:

* GBRT: the first k trees (the paper's dashed curve).
* Early exit (Cambazoglu et al. 2010, proximity threshold as the paper ran it): an exit every 10
  trees, the i-th dropping documents at least ``(n_exits - i) / (n_exits - 1) * s`` below their
  query's fifth best partial score; swept over ``s``.
* Single stage (eq. 7), Cronus after initialization (Algorithm 2) and Cronus optimized
  (Algorithm 1), swept over ``lam = lambda_max / 2**j`` (``lambda_max``: the smallest lam keeping
  no tree). K = 10, eps = 0.15, delta = 1.3, gamma = 50, positives weighted 3.5 (the paper's
  values), rho = 1e-3 for every stage.

Writes benchmarks/results/cronus.json (the JSON line), cronus_curves.csv, cronus_curves.png and
cronus_rank_small_stages.png (--quick: cronus_quick_*). Figures: precision@5 vs cost (the paper's
Figure 2), the fraction of test inputs remaining per stage (Figure 3) and the fraction of features
of each cost extracted by stages 1..k (Figure 4), for the Cronus cascade that defines
``cost_reduction_at_1pct`` (or the middle lam when none does).

Also adult (a random 10,000 of its training rows fit Cronus) and higgs_small with uniform feature
costs (1 each) and a unit tree cost: a 300-tree LightGBM classifier (learning rate 0.1, 16
leaves), accuracy vs mean cost, with LightGBM's margin early exit (``pred_early_stop``, every 10
trees) as the early-exit baseline. adult is tested on its own test split (16,281 rows).
higgs_small's test split has 500 rows, a standard error of about 2 points of accuracy, more
than the gaps between the methods: it runs 5-fold stratified cross-validation over its 7,500
rows instead (seed 0), each method's i-th point averaged over the folds (Cronus rows: lam =
lambda_max / 2**j of each fold, the folds' mean lam reported). For accuracy the squared loss is
unweighted (class_weight None): the paper's positive weight 3.5 serves precision on skewed
ranking data and moves a classifier's decision threshold away from the accuracy-optimal one.

``fit_seconds``: one Cronus fit (initialization + optimization, lam = lambda_max / 16, one BLAS
thread) on 50,000 synthetic rows (``make_classification``, 20 features, seed 0) with a 1,000-tree
LightGBM; with --quick on 5,000 rows and 100 trees (``fit_size`` names the sizes).

Sizes: full run - rank_small 1,000 trees x 3,005 training rows, 10 lam values; adult and
higgs_small 300 trees x 10,000 / 6,000 rows (x 5 folds), 10 lam values; the 50,000 x 1,000
timing (its score matrix is 400 MB); about 6 minutes on a quiet 2-core machine, 20 on a busy
one. --quick: rank_small with 100 trees and 3 lam values, higgs_small only (its own split) with
60 trees and 3 lam values, the timing on 5,000 x 100.

JSON: ``cost_reduction_at_1pct`` (full GBRT's mean cost / Cronus's lowest mean cost whose
precision@5 is within 1% relative of the full GBRT's), ``cronus_beats_early_exit`` and
``cronus_beats_single_stage`` (datasets where the frontier of optimized Cronus lies above the
other's: positive mean gap of the best-value-within-cost step functions over the common cost
range, log cost), ``fit_seconds``, and ``smallest_lam_rejection`` per classification dataset
(folds' means): the share of test inputs the cascade with the smallest lam rejects before its
last stage, the share of positives among them, and its accuracy beside the full model's.

    python benchmarks/cronus.py [--quick] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
COST_SEED = 0
RHO = 1e-3
# Datasets whose test split has fewer rows are run by CV_FOLDS-fold cross-validation instead.
CV_BELOW, CV_FOLDS = 2_000, 5
GBRT, EARLY, SINGLE, INIT, OPT = (
    "GBRT (first k trees)",
    "Early exit",
    "Single stage",
    "Cronus (init)",
    "Cronus (optimized)",
)


def _rank_setup(data_home: str, n_trees: int):
    import lightgbm as lgb

    from thrifty import CostModel, Forest, datasets

    ds = datasets.load("rank_small", data_home=data_home)
    X_tr, y_tr, _ = ds.subset("train")
    X_te, y_te, q_te = ds.subset("test")
    X_tr, X_te = X_tr.to_numpy(np.float64), X_te.to_numpy(np.float64)
    rel_tr = y_tr >= 3
    costs = CostModel(
        datasets.yahoo_costs(300, seed=COST_SEED, data_home=data_home),
        feature_names=ds.feature_names,
        tree_cost=1.0,
    )
    neg = np.flatnonzero(y_te < 3)
    rows = np.r_[np.arange(len(y_te)), np.repeat(neg, 9)]  # each negative 10 times in all
    rows = rows[np.random.default_rng(0).permutation(len(rows))]
    rows = rows[np.argsort(q_te[rows], kind="stable")]
    X_te, rel_te, q_te = X_te[rows], (y_te[rows] >= 3).astype(int), q_te[rows]
    model = lgb.LGBMRegressor(
        n_estimators=n_trees,
        learning_rate=0.05,
        num_leaves=16,
        min_child_samples=5,
        verbose=-1,
        n_jobs=1,
        random_state=0,
    ).fit(X_tr, np.where(rel_tr, 1.0, -1.0))
    return dict(
        forest=Forest.from_model(model),
        X_tr=X_tr,
        y_tr=rel_tr,
        X_te=X_te,
        rel_te=rel_te,
        q_te=q_te,
        costs=costs,
        names=ds.feature_names,
    )


def _sweep_cronus(forest, X, y, costs, js, score, rows, dataset, log, class_weight):
    """Single stage, Cronus init and Cronus optimized at lam = lambda_max / 2**j."""
    from thrifty import evaluate
    from thrifty.cascade import cronus, lambda_max, reweight

    top = lambda_max(forest, X, y, costs, rho=RHO, class_weight=class_weight)
    fits = []
    for j in js:
        lam = top / 2.0**j
        t0 = time.perf_counter()
        single = reweight(forest, X, y, costs, lam=lam, rho=RHO, class_weight=class_weight, n_threads=1)
        t1 = time.perf_counter()
        res = cronus(
            forest, X, y, costs, lam=lam, rho=RHO, class_weight=class_weight, n_threads=1, return_result=True
        )
        t2 = time.perf_counter()
        for method, plan, secs in (
            (SINGLE, single, t1 - t0),
            (INIT, res.init_plan, None),
            (OPT, res.plan, t2 - t1),
        ):
            ev = evaluate(plan, score.X, costs)
            rows.append(
                dict(
                    dataset=dataset,
                    method=method,
                    param_name="lam",
                    param=lam,
                    mean_cost=ev.cost.mean,
                    value=score(ev),
                    fit_seconds=secs,
                )
            )
        fits.append((lam, res))
        points = "  ".join(
            f"{name} {r['value']:.4f}@{r['mean_cost']:.1f}"
            for name, r in zip(("single", "init", "opt"), rows[-3:])
        )
        log.append(f"{dataset} lam=lambda_max/2^{j}: {points}  ({t2 - t1:.1f} s, {res.cycles} cycles)")
        print(log[-1], flush=True)
    return fits


class _Scorer:
    """Metric of an Evaluation on fixed test rows. precision@5 ranks by ``cascade_scores``:
    documents a cascade rejected rank below those that passed every stage (for a plain forest
    it is a monotone map of the raw score)."""

    def __init__(self, X, kind, y, qid=None):
        self.X, self.kind, self.y, self.qid = X, kind, y, qid

    def __call__(self, ev) -> float:
        from thrifty.cascade import cascade_scores
        from thrifty.metrics import precision_at_k

        if self.kind == "p@5":
            return precision_at_k(self.y, cascade_scores(ev), self.qid, 5)
        return float(np.mean(ev.labels == self.y))


def run_rank_small(args, rows, log) -> dict:
    from thrifty import evaluate
    from thrifty.cascade import ranking_early_exit, truncate
    from thrifty.metrics import precision_at_k

    n_trees = 100 if args.quick else 1000
    t0 = time.perf_counter()
    s = _rank_setup(args.data_home, n_trees)
    forest, costs = s["forest"], s["costs"]
    print(
        f"rank_small: GBRT of {n_trees} trees in {time.perf_counter() - t0:.1f} s; "
        f"{len(s['rel_te'])} test documents ({s['rel_te'].mean():.2%} relevant)",
        flush=True,
    )

    def p5(score):
        return precision_at_k(s["rel_te"], score, s["q_te"], 5)

    scorer = _Scorer(s["X_te"], "p@5", s["rel_te"], s["q_te"])
    full = evaluate(forest, s["X_te"], costs)
    full_value, full_cost = p5(full.raw), full.cost.mean
    for k in [k for k in (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300, 500, 1000) if k <= n_trees]:
        ev = evaluate(truncate(forest, k), s["X_te"], costs)
        rows.append(
            dict(
                dataset="rank_small",
                method=GBRT,
                param_name="k",
                param=k,
                mean_cost=ev.cost.mean,
                value=p5(ev.raw),
                fit_seconds=0.0,
            )
        )
    for sv in (0.02, 0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, np.inf):
        r = ranking_early_exit(forest, s["X_te"], s["q_te"], sv, costs, every=10, k=5)
        rows.append(
            dict(
                dataset="rank_small",
                method=EARLY,
                param_name="s",
                param=sv,
                mean_cost=r.cost.mean,
                value=p5(r.score),
                fit_seconds=0.0,
            )
        )
    js = (1, 3, 5) if args.quick else tuple(range(1, 11))
    fits = _sweep_cronus(forest, s["X_tr"], s["y_tr"], costs, js, scorer, rows, "rank_small", log, 3.5)
    opt = [r for r in rows if r["dataset"] == "rank_small" and r["method"] == OPT]
    ok = [r for r in opt if r["value"] >= 0.99 * full_value]
    reduction = full_cost / min(r["mean_cost"] for r in ok) if ok else 0.0
    chosen = min(ok, key=lambda r: r["mean_cost"])["param"] if ok else fits[len(fits) // 2][0]
    res = dict(fits)[chosen]
    plot_stages(res, res.init_plan, s, costs, RESULTS / f"cronus{_tag(args)}_rank_small_stages.png")
    log.append(
        f"rank_small: full GBRT p@5 {full_value:.4f} at {full_cost:.1f}; cost reduction within 1%: "
        f"{reduction:.2f}x (lam={chosen:.3g})"
    )
    print(log[-1], flush=True)
    return dict(full_value=full_value, full_cost=full_cost, reduction=reduction, metric="precision@5")


def run_classification(name, args, rows, log) -> dict:
    """Accuracy vs cost on ``name``: its own split, or 5-fold cross-validation when its test
    split is too small to tell the methods apart (higgs_small's 500 rows: a standard error of
    about 2 points of accuracy, more than the gaps measured)."""
    import pandas as pd

    from thrifty import datasets

    ds = datasets.load(name, data_home=args.data_home)
    X_tr, y_tr, _ = ds.subset("train")
    X_te, y_te, _ = ds.subset("test")
    if len(X_te) >= CV_BELOW or args.quick:
        return _classification_split(name, X_tr, np.asarray(y_tr), X_te, np.asarray(y_te), args, rows, log)
    from sklearn.model_selection import StratifiedKFold

    X = pd.concat([X_tr, X_te], ignore_index=True)
    y = np.concatenate([np.asarray(y_tr), np.asarray(y_te)])
    folds, infos = [], []
    for k, (tr, te) in enumerate(StratifiedKFold(CV_FOLDS, shuffle=True, random_state=0).split(X, y)):
        fold_rows: list = []
        infos.append(
            _classification_split(
                f"{name} (fold {k + 1}/{CV_FOLDS})",
                X.iloc[tr],
                y[tr],
                X.iloc[te],
                y[te],
                args,
                fold_rows,
                log,
            )
        )
        seen: dict = {}
        for r in fold_rows:  # the i-th point of a method in every fold: same k, margin or j
            r["step"] = seen[r["method"]] = seen.get(r["method"], -1) + 1
        folds.extend(fold_rows)
    df = pd.DataFrame(folds)
    mean = (
        df.groupby(["method", "step"], sort=False)
        .agg(
            param_name=("param_name", "first"),
            param=("param", "mean"),
            mean_cost=("mean_cost", "mean"),
            value=("value", "mean"),
            fit_seconds=("fit_seconds", "mean"),
        )
        .reset_index()
    )
    for r in mean.drop(columns="step").to_dict("records"):
        rows.append(dict(dataset=name, **r))
    rejection = {k: float(np.mean([i["rejection"][k] for i in infos])) for k in infos[0]["rejection"]}
    full_value = float(np.mean([i["full_value"] for i in infos]))
    full_cost = float(np.mean([i["full_cost"] for i in infos]))
    log.append(
        f"{name}: {CV_FOLDS}-fold CV over {len(y)} rows, full GBT accuracy {full_value:.4f} at "
        f"{full_cost:.1f} (lam of the Cronus rows: the folds' mean)"
    )
    print(log[-1], flush=True)
    return dict(full_value=full_value, full_cost=full_cost, metric="accuracy", rejection=rejection)


def _classification_split(name, X_tr, y_tr, X_te, y_te, args, rows, log) -> dict:
    import lightgbm as lgb

    from thrifty import CostModel, Forest, evaluate
    from thrifty.cascade import truncate
    from thrifty.order import margin_early_exit

    n_trees = 60 if args.quick else 300
    model = lgb.LGBMClassifier(
        n_estimators=n_trees, learning_rate=0.1, num_leaves=16, verbose=-1, n_jobs=1, random_state=0
    ).fit(X_tr, y_tr)
    forest = Forest.from_model(model)
    costs = CostModel.uniform(forest.n_features, feature_names=forest.feature_names, tree_cost=1.0)
    scorer = _Scorer(X_te, "accuracy", y_te)
    if len(X_tr) > 10_000:
        pick = np.sort(np.random.default_rng(0).choice(len(X_tr), 10_000, replace=False))
        X_fit, y_fit = X_tr.iloc[pick], y_tr[pick]
    else:
        X_fit, y_fit = X_tr, y_tr
    full = evaluate(forest, X_te, costs)
    for k in [k for k in (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 300) if k <= n_trees]:
        ev = evaluate(truncate(forest, k), X_te, costs)
        rows.append(
            dict(
                dataset=name,
                method=GBRT,
                param_name="k",
                param=k,
                mean_cost=ev.cost.mean,
                value=scorer(ev),
                fit_seconds=0.0,
            )
        )
    for m in (0.5, 1, 2, 3, 4, 6, 8, 12, np.inf):
        ev = evaluate(margin_early_exit(forest, m, every=10), X_te, costs)
        rows.append(
            dict(
                dataset=name,
                method=EARLY,
                param_name="margin",
                param=m,
                mean_cost=ev.cost.mean,
                value=scorer(ev),
                fit_seconds=0.0,
            )
        )
    js = (1, 3, 5) if args.quick else tuple(range(1, 11))
    fits = _sweep_cronus(forest, X_fit, y_fit, costs, js, scorer, rows, name, log, None)
    # What the cascade with the smallest lam (almost no cost pressure) rejects: every input
    # that exits before the last stage is labelled negative.
    lam, res = fits[-1]
    ev = evaluate(res.plan, X_te, costs)
    early = ev.exit < res.plan.n_stages - 1
    positive = y_te == forest.classes[1] if forest.classes is not None else y_te == 1
    rejection = {
        "lam": lam,
        "rejected_early": float(early.mean()),
        "positive_share_of_rejected": float(positive[early].mean()) if early.any() else 0.0,
        "positives_rejected": float(early[positive].mean()),
        "cascade_accuracy": scorer(ev),
        "full_accuracy": scorer(full),
    }
    log.append(
        f"{name}: full GBT accuracy {scorer(full):.4f} at {full.cost.mean:.1f}; the smallest-lam "
        f"cascade rejects {early.mean():.1%} early ({rejection['positive_share_of_rejected']:.1%} "
        f"of them positive), accuracy {scorer(ev):.4f}"
    )
    print(log[-1], flush=True)
    return dict(full_value=scorer(full), full_cost=full.cost.mean, metric="accuracy", rejection=rejection)


def time_fit(quick: bool) -> tuple[str, float]:
    import lightgbm as lgb
    from sklearn.datasets import make_classification

    from thrifty import CostModel, Forest
    from thrifty.cascade import cronus, lambda_max

    n, T = (5_000, 100) if quick else (50_000, 1000)
    X, y = make_classification(n_samples=n, n_features=20, n_informative=10, weights=[0.8], random_state=0)
    gbt = lgb.LGBMClassifier(
        n_estimators=T, learning_rate=0.1, num_leaves=16, verbose=-1, n_jobs=1, random_state=0
    )
    forest = Forest.from_model(gbt.fit(X, y))
    costs = CostModel.uniform(20, tree_cost=1.0)
    lam = lambda_max(forest, X, y, costs, rho=RHO) / 16
    t0 = time.perf_counter()
    cronus(forest, X, y, costs, lam=lam, rho=RHO, n_threads=1)
    secs = time.perf_counter() - t0
    print(f"one Cronus fit on {n:,} rows x {T:,} trees: {secs:.1f} s", flush=True)
    return f"{n}x{T}", secs


def plot_curves(rows, info, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    import pandas as pd

    df = pd.DataFrame(rows)
    datasets_ = list(dict.fromkeys(df["dataset"]))
    fig, axes = plt.subplots(1, len(datasets_), figsize=(5.5 * len(datasets_), 4.2), squeeze=False)
    styles = {
        GBRT: ("k", "--", "."),
        EARLY: ("tab:purple", "-", "v"),
        SINGLE: ("tab:blue", "-", "s"),
        INIT: ("tab:green", "-", "^"),
        OPT: ("tab:red", "-", "o"),
    }
    for ax, name in zip(axes[0], datasets_):
        for method, (color, ls, marker) in styles.items():
            d = df[(df["dataset"] == name) & (df["method"] == method)].sort_values("mean_cost")
            d = d[d["mean_cost"] > 0]
            ax.plot(d["mean_cost"], d["value"], ls, color=color, marker=marker, ms=4, label=method)
        ax.axhline(info[name]["full_value"], color="0.6", lw=0.8)
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("mean cost per example (test, measured)")
        ax.set_ylabel(info[name]["metric"])
        ax.set_title(name)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_stages(res, init_plan, s, costs, path):
    """Figure 3 (inputs remaining per stage) and Figure 4 (features by cost used by stages 1..k)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from thrifty import evaluate

    fig, (a3, a4) = plt.subplots(1, 2, figsize=(11, 4.2))
    K = res.plan.n_stages
    for label, plan, color in (
        ("Cronus (init)", init_plan, "tab:green"),
        ("Cronus (optimized)", res.plan, "tab:red"),
    ):
        ev = evaluate(plan, s["X_te"], costs)
        remaining = [(ev.exit >= k).mean() for k in range(K)]
        a3.plot(range(1, K + 1), remaining, "-o", color=color, label=label)
    a3.set_xlabel("stage")
    a3.set_ylabel("fraction of test inputs remaining")
    a3.set_title("Figure 3: inputs per stage (rank_small)")
    a3.legend()
    forest = res.plan.forest
    tree_feats = [set(forest.tree_features(t).tolist()) for t in range(forest.n_trees)]
    c = costs.feature_costs
    used_by = np.zeros((K, len(c)), dtype=bool)
    for k in range(K):
        for t in np.flatnonzero(res.plan.stage_weights[k]):
            used_by[k, list(tree_feats[t])] = True
    cumulative = np.logical_or.accumulate(used_by, axis=0)
    for value in np.unique(c):
        group = c == value
        a4.plot(
            range(1, K + 1),
            cumulative[:, group].mean(axis=1),
            "-o",
            ms=3,
            label=f"c={value:g} ({group.sum()})",
        )
    a4.set_xlabel("stage")
    a4.set_ylabel("fraction of features extracted by stages 1..k")
    a4.set_title("Figure 4: features by cost (Cronus optimized)")
    a4.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _tag(args) -> str:
    """--quick writes its own files, so that it never overwrites the full run's."""
    return "_quick" if args.quick else ""


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller models and sweeps (< 1 min)")
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home, help="folder of the shared datasets")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    import pandas as pd

    from thrifty.frontier import frontier_gap

    RESULTS.mkdir(parents=True, exist_ok=True)
    rows: list = []
    log: list = []
    info = {"rank_small": run_rank_small(args, rows, log)}
    for name in ["higgs_small"] if args.quick else ["adult", "higgs_small"]:
        info[name] = run_classification(name, args, rows, log)
    size, secs = time_fit(args.quick)
    df = pd.DataFrame(rows)
    df.to_csv(RESULTS / f"cronus{_tag(args)}_curves.csv", index=False)
    plot_curves(rows, info, RESULTS / f"cronus{_tag(args)}_curves.png")
    beats_early, beats_single, gaps = [], [], {}
    for name in info:
        d = df[df["dataset"] == name]
        opt = d[d["method"] == OPT]
        for other, out in ((EARLY, beats_early), (SINGLE, beats_single)):
            gap = frontier_gap(opt, d[d["method"] == other], log_cost=True)
            gaps[f"{name}: {OPT} - {other}"] = gap
            if gap > 0:
                out.append(name)
    for k, v in gaps.items():
        print(f"  mean frontier gap {k}: {v:+.4f}")
    out = {
        "bench": "cronus",
        "quick": bool(args.quick),
        "cost_reduction_at_1pct": round(float(info["rank_small"]["reduction"]), 3),
        "cronus_beats_early_exit": beats_early,
        "cronus_beats_single_stage": beats_single,
        "fit_seconds": round(secs, 2),
        "fit_size": size,
        "rank_small_full_p5": round(info["rank_small"]["full_value"], 4),
        "rank_small_full_cost": round(info["rank_small"]["full_cost"], 1),
        "frontier_gaps": {k: round(float(v), 4) for k, v in gaps.items()},
        "smallest_lam_rejection": {
            name: {k: float(f"{v:.4g}") for k, v in i["rejection"].items()}
            for name, i in info.items()
            if "rejection" in i
        },
        "seconds": round(time.perf_counter() - t_start, 1),
    }
    (RESULTS / f"cronus{_tag(args)}.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
