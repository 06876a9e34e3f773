"""The methods ``thrifty.compare`` runs: a registry of entries, each turning a prepared
:class:`Context` into candidate models.

An entry is a generator function ``run(ctx) -> Iterator[Candidate]``. It yields one candidate at
a time so that :func:`thrifty.compare` can stop at its time limit between two candidates and
still report what it has. Training-time methods get ``ctx.budgets`` (mean cost per example,
chosen from the plain LightGBM model's cost on the calibration split); post-hoc methods start
from ``ctx.lightgbm()`` or ``ctx.random_forest()``, fitted once and shared. This module holds
the methods on boosted models; ``forest_methods`` those on random forests and ADAPT's gates,
registered after them.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from thrifty import metrics
from thrifty.cascade import EarlyExitRanker, cronus, lambda_max
from thrifty.cascade.estimator import lam_grid
from thrifty.comparison.baselines import cheapest_models
from thrifty.comparison.context import Context
from thrifty.comparison.label_shift import prior_weights
from thrifty.comparison.registry import (
    METHODS,
    TASKS,
    Candidate,
    CostOrder,
    Method,
    fitted,
    method,
    spread,
    timed,
)
from thrifty.comparison.scores import paired_lead, unit_scores
from thrifty.comparison.splits import RANDOM
from thrifty.exceptions import BudgetError
from thrifty.forest import Forest
from thrifty.order import calibrate_margin, default_tolerance, fan, margin_early_exit, qwyc, qwyc_ranking
from thrifty.order.estimator import ALPHAS
from thrifty.runtime.evaluate import evaluate
from thrifty.train import (
    CEGBClassifier,
    CEGBRanker,
    CEGBRegressor,
    GreedyMiserClassifier,
    GreedyMiserRegressor,
)

# Context and the registry are re-exported: methods were written against this module.
__all__ = [
    "METHODS",
    "REFERENCE",
    "REFERENCE_SUFFIX",
    "TASKS",
    "Candidate",
    "Context",
    "Method",
    "method",
    "reference_name",
]


# ---------------------------------------------------------------------- reference
#: The plain model's series: its row with every tree is the baseline of every report.
REFERENCE_SUFFIX = ", first k trees"
REFERENCE = "LightGBM" + REFERENCE_SUFFIX
#: The library a Forest came from (``Forest.source`` up to its ":"), as its series names it.
LIBRARIES = {
    "lightgbm": "LightGBM",
    "xgboost": "XGBoost",
    "catboost": "CatBoost",
    "ydf": "YDF",
    "onnx": "ONNX",
    "sklearn": "scikit-learn",
}


def reference_name(source: str) -> str:
    """The reference series' name for a user's model from ``source`` (``Forest.source``):
    "CatBoost, first k trees" for a CatBoost model; "Your model, ..." for a source not known."""
    return LIBRARIES.get(source.split(":")[0], "Your model") + REFERENCE_SUFFIX


@method("lightgbm", REFERENCE, "reference")
def _truncated(ctx: Context) -> Iterator[Candidate]:
    """The plain model truncated after k trees: what a cost-blind practitioner would do."""
    forest = ctx.lightgbm()
    per_round = max(1, forest.n_trees // max(1, _rounds(forest)))
    rounds = _rounds(forest)
    grid = sorted({int(k) for k in np.unique(np.geomspace(1, rounds, 6 if ctx.quick else 12).round())})
    # The whole model first: it is the baseline every report compares with, so a time
    # allowance that stops the method early still leaves it; then coarse to fine (``spread``).
    for k in [grid[-1], *spread(grid[:-1])]:
        yield Candidate(f"k={k}", forest.subset(range(k * per_round)), {"k": k})


def _rounds(forest: Forest) -> int:
    """Boosting rounds: trees per round is the number of outputs (one tree per class)."""
    return max(1, forest.n_trees // max(1, forest.n_outputs))


@method("cheapest", "cheapest k features", "reference", after="lightgbm")
def _cheapest(ctx: Context) -> Iterator[Candidate]:
    """LightGBM models restricted to the k cheapest features (by price alone), k < n; after
    the plain model's task, so that the margin cascade of the two gets both."""
    yield from cheapest_models(ctx)


# ---------------------------------------------------------------------- trained under a budget
def _capacity(ctx: Context) -> dict[str, Any]:
    """The plain model's settings for the CEGB family, so only the cost penalty differs."""
    p = dict(ctx.lightgbm_params)
    own: dict[str, Any] = {
        k: p.pop(k)
        for k in (
            "n_estimators",
            "learning_rate",
            "num_leaves",
            "max_depth",
            "min_child_samples",
            "random_state",
        )
        if k in p
    }
    for k in ("n_jobs", "verbose"):
        p.pop(k, None)
    return {**own, "lgbm_params": p, "n_jobs": ctx.n_jobs, "progress": False}


def _path(ctx: Context, key: str, cls: Any, **params: Any) -> Any:
    """The fold's one estimator of ``cls`` with ``warm_start``: each budget's search starts from
    every model the earlier budgets trained (one trade-off path; most budgets then need one to
    three fits). Kept in the context's shared models, so the refinements of a time-limited
    sweep start from the first pass's trials."""
    if key not in ctx._cache:
        ctx._cache[key] = cls(costs=ctx.costs, warm_start=True, **params)
    return ctx._cache[key]


def _on_path(ctx: Context, est: Any, budget: float, fit_kw: dict[str, Any]) -> Candidate:
    """``est`` fitted to ``budget`` as a candidate (named by its budget, the same on every fold),
    or the reason no model meets it."""
    name = _budget_name(budget)
    try:
        cand = timed(
            name,
            lambda: (
                est.set_params(budget=budget)
                .fit(ctx.X_train, ctx.y_train, calibration=(ctx.X_val, ctx.y_val), **fit_kw)
                .forest_
            ),
            budget=budget,
        )
    except BudgetError as exc:
        return Candidate(name, None, {"reason": " ".join(str(exc).split())})
    start = time.perf_counter()
    best = _best_on_path(ctx, est, budget)
    row = est.budget_search_.loc[best]
    cand.model = est.search_models_[best]
    cand.params.update(tradeoff=float(row["tradeoff"]), truncated=bool(row["truncated"]), n_fits=est.n_fits_)
    cand.fit_seconds += time.perf_counter() - start
    return cand


def _best_on_path(ctx: Context, est: Any, budget: float) -> int:
    """The row of ``est.budget_search_`` to offer at ``budget``: the estimator's own choice
    (the dearest model on the path within it), unless a model of the path within it is better
    on the calibration split beyond the noise: the one of best metric there (the cheaper on a
    tie), when the 95% interval of its lead over the estimator's choice, paired on the
    calibration rows (queries for ranking; ``scores.paired_lead``), excludes 0. A classifier's
    accuracy there is weighted to the class shares of all the fitting rows under a time split
    (:func:`calibration_weights`), as compare's validation rows are: unweighted, a calm window
    favours the models that answer the majority class nearly always.

    A dearer model is not always a better one (on flights, a model spending 2.0 of a budget of
    2.4 was less accurate on held-out rows than one spending 1.0 from the same path), but
    where the calibration rows cannot tell two models apart, the best of them there is mostly
    the luckiest. On rank_small's 41 calibration queries, GreedyMiser's path models scored
    NDCG@10 0.816 to 0.840 with no trend in cost, the cheapest (cost 194) came first and was
    offered at every budget from 221 to 3,312, while on the test queries the path's models
    rose from 0.730 at that cost to 0.755-0.764 past 800.
    The calibration split is part of the fitting rows: the fold's scored rows, and the test
    rows, take no part in the choice."""
    table = est.budget_search_
    scores = ctx._cache.setdefault("path scores", {})
    weights = calibration_weights(ctx)
    chosen = int(np.flatnonzero(table["chosen"].to_numpy())[0])
    best, best_key = chosen, None
    for i in np.flatnonzero((table["cost"] <= budget).to_numpy()):
        forest = est.search_models_[i]
        if id(forest) not in scores:  # a path's models are scored once (kept alive by it)
            ev = evaluate(forest, ctx.X_val, ctx.costs)
            name, value = metrics.score(ctx.task, ctx.y_val, ev, qid=ctx.qid_val)
            units = unit_scores(ctx.task, ctx.y_val, ev, ctx.qid_val)
            if weights is not None:  # accuracy weighted to the usual class mix (a time split)
                units = units * weights
                value = float(units.mean())
            scores[id(forest)] = (value if metrics.higher_is_better(name) else -value, name, units, forest)
        key = (scores[id(forest)][0], -float(table.loc[i, "cost"]))
        if best_key is None or key > best_key:
            best, best_key = int(i), key
    if best == chosen or float(table.loc[chosen, "cost"]) > budget:
        return best
    _, name, ours, _ = scores[id(est.search_models_[best])]
    theirs = scores[id(est.search_models_[chosen])][2]
    # The same answer on every calibration unit: the cheaper of the two, at no loss.
    same = np.array_equal(ours, theirs)
    return best if same or paired_lead(name, ours, theirs)[1] > 0 else chosen


#: How closely compare's CEGB path searches each budget (``search_tradeoff``): a model
#: costing within 20% below the budget. compare offers the best of the
#: path's models within each budget anyway (``_best_on_path``), and its default budgets are at
#: least 1.5 times apart, so a model within 20% of each is still dearer than the budget below
#: it. Each fit is a LightGBM training with CEGB's per-example feature penalty (on rank_small's
#: 300 features about 3 times a plain fit); the estimator's default 5% took 29 fits for the
#: 6 budgets of a rank_small fold, 20% 13. The estimator's ``max_fits`` stays: a search
#: stopped by it goes on from its trials when the budget is asked again (the refinement pass
#: of a time allowance), so fewer would fit more models there than in a run without one.
CEGB_SEARCH = {"tolerance": 0.2}


def _cegb_path(ctx: Context) -> tuple[Any, dict[str, Any]]:
    """The fold's CEGB path (``_path``) and what its ``fit`` takes besides the rows."""
    cls = {"ranking": CEGBRanker, "regression": CEGBRegressor}.get(ctx.task, CEGBClassifier)
    fit_kw = {"qid": ctx.qid_train} if ctx.task == "ranking" else {}
    return _path(ctx, "cegb path", cls, **_capacity(ctx), **CEGB_SEARCH), fit_kw


def _cegb_models(ctx: Context, own: bool = False) -> Iterator[Candidate]:
    """CEGB models, one per budget along one trade-off path, fitted once and shared
    (compositions reuse them); ``own``: CEGB's own task, whose first pass's models are handed
    back (``Context.replay``; a composition's are its own candidates, under the same names)."""
    if "cegb" not in ctx._cache:
        est, fit_kw = _cegb_path(ctx)
        found = []
        for budget in spread(ctx.budgets):  # coarse to fine, should the allowance stop it
            cand = _path_model(ctx, est, budget, fit_kw) if own else _on_path(ctx, est, budget, fit_kw)
            found.append(cand)
            yield cand
        ctx._cache["cegb"] = found
    else:
        yield from ctx._cache["cegb"]


@method("cegb", "CEGB", "train")
def _cegb(ctx: Context) -> Iterator[Candidate]:
    """CEGB (Peter et al. 2017): one model per budget, trade-off searched on the calibration split
    (along one path per fold), and of the path's models within the budget, the one of best
    calibration metric."""
    yield from _cegb_models(ctx, own=True)


@method("greedymiser", "GreedyMiser", "train")
def _greedymiser(ctx: Context) -> Iterator[Candidate]:
    """GreedyMiser (Xu et al. 2012): depth-4 first-order trees, feature costs once per model;
    for ranking, a pointwise ranker (squared loss on the relevance grades). One model per
    budget along one trade-off path."""
    cls = GreedyMiserClassifier if ctx.task in ("binary", "multiclass") else GreedyMiserRegressor
    kw = _capacity(ctx)
    kw.pop("num_leaves", None)
    kw.pop("max_depth", None)
    est = _path(ctx, "greedymiser path", cls, **kw)
    for budget in spread(ctx.budgets):
        yield _path_model(ctx, est, budget, {})


def _path_model(ctx: Context, est: Any, budget: float, fit_kw: dict[str, Any]) -> Candidate:
    """:func:`_on_path`, or the model the first pass fitted for ``budget`` (``Context.replay``):
    asking the path again fitted no model, or, past a search stopped at ``max_fits``, more
    than a run without an allowance."""
    done = ctx.replay.get(_budget_name(budget))
    return done if done is not None else _on_path(ctx, est, budget, fit_kw)


def _budget_name(budget: float) -> str:
    """A budget's candidate name, the same on every fold."""
    return f"budget={budget:.4g}"


@method("cegb+qwyc", "CEGB ordered by QWYC", "composition", after="cegb")
def _cegb_qwyc(ctx: Context) -> Iterator[Candidate]:
    """Each CEGB model with QWYC's order and exits (alpha=0.01) fitted on the calibration split:
    CEGB buys cheap features, QWYC stops evaluating once the decision is safe."""
    for cand in _cegb_models(ctx):
        if cand.model is None:
            continue
        plan = fitted(
            ctx,
            cand.name,
            lambda m=cand.model: _quit(ctx, m, 0.01),
            base=cand.model,
            **cand.params,
            alpha=0.01,
        )
        if ctx.replay.get(cand.name) is not plan:  # fitted here: with its CEGB model's seconds
            plan.fit_seconds += cand.fit_seconds
        yield plan


# ---------------------------------------------------------------------- post-hoc, on LightGBM
#: compare's QWYC bounds: QWYCClassifier's grid (0 to 0.2) with 0.15 and 0.3, so that its plans
#: reach the low budgets too (on flights, calibrated on the latest rows, the plans of alpha=0.1,
#: 0.15 and 0.2 spent 5.4, 3.2 and 0.1 of the plain model's 12 per flight on the validation rows:
#: the cost falls steeply between the grid's points).
QWYC_ALPHAS = tuple(sorted({*ALPHAS, 0.15, 0.3}))
#: Calibration rows QWYC's search reads at most (``_qwyc_rows``).
QWYC_ROWS = 20_000


def _quit(ctx: Context, forest: Forest, alpha: float) -> Any:
    """QWYC's order and exits on ``forest`` fitted on the calibration split, for the task: a
    decision (classification), a prediction within ``_tolerance`` (regression) or each query's
    top-10 list (ranking, ``qwyc_ranking`` with ``keep="order"``; trees priced by the cost
    model, features not) changes on at most a fraction ``alpha`` of the rows (queries).

    A ranker's plan keeps the top 10 in order because compare scores NDCG@10: with the top-5
    *set* kept (``qwyc_ranking``'s default, precision@5), the documents of the top 5 exited
    with partial scores and were ranked by them among full ones, and on rank_small the plan of
    alpha=0.05 lost 8.5 points of NDCG@10 on its own calibration queries (0.735 against the
    full model's 0.820); keeping the list, it loses none there at alpha=0."""
    if ctx.task == "ranking":
        return qwyc_ranking(
            forest, ctx.X_val, ctx.qid_val, k=10, keep="order", alpha=alpha, costs=ctx.costs, progress=False
        )
    tol = _tolerance(ctx) if ctx.task == "regression" else None
    rows, weights = _qwyc_rows(ctx)
    return qwyc(
        forest,
        rows,
        alpha=alpha,
        costs=ctx.costs,
        feature_costs=True,
        tolerance=tol,
        sample_weight=weights,
        progress=False,
    )


def calibration_weights(ctx: Context) -> np.ndarray | None:
    """Under a time split, a classifier's calibration rows (the latest of its fitting rows)
    weighted to the class shares of all its fitting rows (``label_shift.prior_weights``);
    None otherwise, or when the shares are the same (every row counts 1)."""
    if ctx.settings.split == RANDOM or ctx.task not in ("binary", "multiclass"):
        return None
    return prior_weights(ctx.y_val, np.concatenate([ctx.y_train, ctx.y_val]), ctx.task)


def _qwyc_rows(ctx: Context) -> tuple[Any, np.ndarray | None]:
    """The calibration rows QWYC's search reads, and their weights: all of them up to
    :data:`QWYC_ROWS`, else that many drawn at random (in their order; the same draw for every
    alpha). Its search over orders is linear in the rows and quadratic in the trees; an exit
    rate of alpha is estimated within about 0.003 on 20,000 rows, and the plan is then measured
    exactly on the validation rows like every other.

    Under a time split, a classifier's calibration rows (the latest of its fitting rows) are
    weighted to the class shares of all its fitting rows (``label_shift.prior_weights``), so
    that alpha bounds the share of decisions changed among rows of the classes' usual mix, not
    of one window's. On a simulated calm window (8% positives against 30%) the plans of
    alpha=0.1 changed 16% of the later rows' decisions unweighted and 10% weighted
    (``tests/test_calibration_label_shift.py``); on flights the plan of alpha=0.15 spends 3.6
    per flight on the validation months weighted, against 3.2 unweighted. Elsewhere the
    weights are None (every row counts 1)."""
    n = len(ctx.y_val)
    weights = calibration_weights(ctx)
    if n <= QWYC_ROWS:
        return ctx.X_val, weights
    if "qwyc rows" not in ctx._cache:
        rng = np.random.default_rng(ctx.random_state)
        ctx._cache["qwyc rows"] = np.sort(rng.choice(n, QWYC_ROWS, replace=False))
    keep = ctx._cache["qwyc rows"]
    return ctx.X_val.iloc[keep], None if weights is None else weights[keep]


def _tolerance(ctx: Context) -> float:
    """A regressor's tolerance: 5% of the calibration targets' spread (``default_tolerance``)."""
    return default_tolerance(ctx.y_val)


@method("qwyc", "QWYC", "post-hoc", after="lightgbm")
def _qwyc(ctx: Context) -> Iterator[Candidate]:
    """QWYC's order and exits on the plain model, fitted on the calibration split (no labels)."""
    forest = ctx.lightgbm()
    plans: dict[int, Any] = {}  # a ranker's plans by the changed queries they allow
    # QWYCClassifier's grid and the larger bounds of QWYC_ALPHAS, in the order that covers
    # their costs first (the plans' cost falls steeply between a few of the grid's points).
    order = CostOrder(QWYC_ALPHAS[::3] if ctx.quick else QWYC_ALPHAS)
    for alpha in order:
        allowed = _allowed_queries(ctx, alpha)
        if allowed is not None and allowed in plans:
            # The same bound in whole queries: the same plan, offered under this name too.
            order.cost(ctx.order_cost(plans[allowed]))
            yield Candidate(f"alpha={alpha:g}", plans[allowed], {"alpha": alpha})
            continue
        cand = fitted(ctx, f"alpha={alpha:g}", lambda a=alpha: _quit(ctx, forest, a), alpha=alpha)
        if allowed is not None:
            plans[allowed] = cand.model
        order.cost(ctx.order_cost(cand.model))
        yield cand


def _allowed_queries(ctx: Context, alpha: float) -> int | None:
    """For a ranker, how many calibration queries QWYC's plan of ``alpha`` may change: its
    search bounds the count of changed queries (whole numbers) by ``alpha`` times the number
    of queries (``_qwyc_targets.targets``), so two alphas with the same whole part of that
    product give the same plan. On rank_small's 41 calibration queries, alpha 0 to 0.02
    (6 of QWYC_ALPHAS' 11) all allow none: one search instead of six. None for other tasks
    (rows weighted, and thousands of them)."""
    if ctx.task != "ranking" or ctx.qid_val is None:
        return None
    return math.floor(float(alpha) * float(len(np.unique(ctx.qid_val))))


@method("fan", "Fan et al.", "post-hoc", ("binary", "multiclass"), after="lightgbm")
def _fan(ctx: Context) -> Iterator[Candidate]:
    """Fan et al.'s binned exits on the plain model's own tree order (a multiclass model's on
    the margin of its leading class, after each round)."""
    forest = ctx.lightgbm()
    for gamma in spread((1.0, 2.0, 4.0) if ctx.quick else (0.5, 1.0, 2.0, 3.0, 4.0, 6.0)):
        yield fitted(ctx, f"gamma={gamma:g}", lambda g=gamma: fan(forest, ctx.X_val, gamma=g), gamma=gamma)


@method("margin", "margin early exit", "post-hoc", ("binary", "multiclass", "regression"), after="lightgbm")
def _margin(ctx: Context) -> Iterator[Candidate]:
    """LightGBM's ``pred_early_stop`` rule (a multiclass model's on the gap between its two
    leading classes, checked after whole rounds), margins calibrated on the calibration split; for a
    regressor, the exit where the remaining trees' bound is within a tolerance (1, 4, 16... times
    ``_tolerance``), so every early prediction is that close to the full one."""
    forest = ctx.lightgbm()
    every = max(1, _rounds(forest) // 20)
    if ctx.task == "regression":
        for times in spread((1, 4, 16) if ctx.quick else (1, 2, 4, 8, 16, 32)):
            tol = times * _tolerance(ctx)
            yield fitted(
                ctx,
                f"tolerance={times}x",
                lambda t=tol: margin_early_exit(forest, tolerance=t, every=every),
                tolerance=tol,
                every=every,
            )
        return
    for rate in spread((0.0, 0.01, 0.05) if ctx.quick else (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1)):
        yield fitted(
            ctx,
            f"disagreement<={rate:g}",
            lambda r=rate: calibrate_margin(forest, ctx.X_val, max_disagreement=r, every=every)[0],
            max_disagreement=rate,
            every=every,
        )


def _cascades(ctx: Context, forest: Forest, base: Candidate | None = None) -> Iterator[Candidate]:
    """Cronus cascades of ``forest`` fitted on the training rows (as the paper does), lambda
    swept down from ``lambda_max`` (the smallest lambda keeping no tree) over the grid
    CronusClassifier's budget search tries (every other value when quick). ``base``: the
    composition's model ``forest`` is (named "largest budget, ...", with its parameters)."""
    # Accuracy is the target here: unweighted squared loss (the paper's 3.5 on positives serves
    # ranking precision; a ranker's cascade is fitted to its relevant documents, `_relevant`).
    y = _relevant(ctx.y_train) if ctx.task == "ranking" else ctx.y_train

    def top_of() -> float:
        return lambda_max(forest, ctx.X_train, y, ctx.costs, rho=1e-3, class_weight=None)

    top = ctx.figure("lambda_max", forest, top_of)  # once per forest: a second pass reads the first's
    lams = list(enumerate(lam_grid(top)))
    # The cascades' costs covered first; lambda_max's keeps no tree (cost 0, fitted last).
    order = CostOrder(lams[1::2] if ctx.quick else lams, known=None if ctx.quick else {0: 0.0})
    prefix, extra = ("", {}) if base is None else ("largest budget, ", base.params)
    for j, lam in order:
        cand = fitted(
            ctx,
            f"{prefix}lam=lambda_max/2^{j}",
            lambda lam=lam: cronus(
                forest,
                ctx.X_train,
                y,
                ctx.costs,
                lam=lam,
                rho=1e-3,
                class_weight=None,
                n_stages=5,
                n_threads=1,
            ),
            base=None if base is None else base.model,
            **extra,
            lam=lam,
        )
        order.cost(ctx.order_cost(cand.model))
        yield cand


def _relevant(y: np.ndarray) -> np.ndarray:
    """Ranking labels as Cronus's binary targets: relevant from grade 3 (the paper's, and
    CronusRanker's ``relevant_min``), or from the median grade when no document reaches 3."""
    y = np.asarray(y, dtype=float)
    for cut in (3.0, float(np.median(y))):
        if 0 < np.count_nonzero(y >= cut) < len(y):
            return (y >= cut).astype(int)
    return (y > np.median(y)).astype(int)


@method("cronus", "Cronus", "post-hoc", ("binary", "ranking"), after="lightgbm")
def _cronus(ctx: Context) -> Iterator[Candidate]:
    """Cronus (Chen et al. 2012): the plain model's trees re-weighted into a cascade of
    early-reject stages."""
    yield from _cascades(ctx, ctx.lightgbm())


@method("early-exit", "early exit (Cambazoglu et al.)", "post-hoc", ("ranking",), after="lightgbm")
def _early_exit(ctx: Context) -> Iterator[Candidate]:
    """Cambazoglu et al.'s early exits on the plain ranker (the Cronus paper's baseline): an exit
    every tenth of the trees drops a document whose partial score is far enough below the fifth
    best of its query's remaining documents; the proximity scale ``s`` in multiples of the
    spread of the full scores on the calibration documents. Scored per query
    (:class:`~thrifty.cascade.EarlyExitRanker`), its cost measured on each document's prefix."""
    forest = ctx.lightgbm()
    every = max(1, forest.n_trees // 10)
    scale = float(np.std(forest.predict_raw(ctx.X_val))) or 1.0
    for times in spread((0.25, 1.0, 4.0) if ctx.quick else (0.0, 0.125, 0.25, 0.5, 1.0, 2.0, 4.0)):
        yield fitted(
            ctx,
            f"s={times:g}x",
            lambda s=times * scale: EarlyExitRanker(forest, s, every, 5),
            s=times * scale,
            every=every,
        )


@method("cegb+cronus", "Cronus cascade of a CEGB model", "composition", ("binary", "ranking"), after="cegb")
def _cegb_cronus(ctx: Context) -> Iterator[Candidate]:
    """The CEGB model of the largest budget (cheap features already) turned into a Cronus
    cascade (early rejects skip its trees)."""
    base = _largest_cegb(ctx)
    if base is None:
        return
    # Named by the cascade's setting alone: folds may differ in their largest budget with a model.
    for i, cand in enumerate(_cascades(ctx, base.model, base)):
        if i == 0 and ctx.replay.get(cand.name) is not cand:  # the base's seconds, once: fitted here
            cand.fit_seconds += base.fit_seconds
        yield cand


def _largest_cegb(ctx: Context) -> Candidate | None:
    """The CEGB model of the largest budget that has one: CEGB's own when its path is complete
    in the context, else fitted on the fold's path for the largest budgets only, largest
    first, until one is feasible.

    Before, the cascade fitted every budget's CEGB model to take the largest: after a first pass
    of one budget, on rank_small 6 searches, about 70 s of a loaded fold (6 to 12 s for one)."""
    if "cegb" in ctx._cache:
        found = [c for c in ctx._cache["cegb"] if c.model is not None]
        return max(found, key=lambda c: c.params["budget"], default=None)
    est, fit_kw = _cegb_path(ctx)
    # On a copy, as in a worker: CEGB's own path (the same object in this process) is left as
    # CEGB made it (its second pass found this search's trials, and reported no fit).
    est = copy.copy(est)
    if hasattr(est, "_only_fits"):
        est._only_fits = dict(est._only_fits)
    for budget in sorted(ctx.budgets, reverse=True):
        cand = _on_path(ctx, est, budget, fit_kw)
        if cand.model is not None:
            return cand
    return None


# The methods on random forests and ADAPT's gates register after these (the order they run).
import thrifty.comparison.forest_methods  # noqa: E402, F401
