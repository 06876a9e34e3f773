"""The methods ``thrifty.compare`` runs: a registry of entries, each turning a prepared
:class:`Context` into candidate models.

An entry is a generator function ``run(ctx) -> Iterator[Candidate]``. It yields one candidate at
a time so that :func:`thrifty.compare` can stop at its time limit between two candidates and
still report what it has. Training-time methods get ``ctx.budgets`` (mean cost per example,
chosen from the plain LightGBM model's cost on the calibration split); post-hoc methods start
from ``ctx.lightgbm()`` or ``ctx.random_forest()``, fitted once and shared.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from thrifty.cascade import cronus, lambda_max
from thrifty.cascade.estimator import lam_grid
from thrifty.comparison.context import Context
from thrifty.exceptions import BudgetError, InputError
from thrifty.forest import Forest, to_matrix
from thrifty.order import calibrate_margin, default_tolerance, fan, margin_early_exit, qwyc, qwyc_ranking
from thrifty.order.estimator import ALPHAS
from thrifty.prune import budget_prune_path
from thrifty.train import (
    ADAPTClassifier,
    ADAPTRegressor,
    BudgetRFClassifier,
    BudgetRFRegressor,
    CEGBClassifier,
    CEGBRanker,
    CEGBRegressor,
    GreedyMiserClassifier,
    GreedyMiserRegressor,
)
from thrifty.train.adapt import DEFAULT_GAMMA, GAMMA_GRID, P_FULL_GRID

# Context (comparison/context.py) is re-exported: methods were written against this module.
__all__ = ["METHODS", "REFERENCE", "Candidate", "Context", "Method", "method"]

TASKS = ("binary", "multiclass", "ranking", "regression")


@dataclass
class Candidate:
    """One model a method offers, with what produced it.

    Attributes
    ----------
    name : str
        Unique within its method (e.g. ``"budget=12.5"``).
    model : object
        Anything :func:`thrifty.evaluate` takes (a Forest, a plan, a fitted thrifty estimator).
    params : dict
        The parameters behind it (a budget, alpha, lambda...), shown in the table.
    fit_seconds : float
        Wall-clock seconds to produce it, excluding the shared base models.
    """

    name: str
    model: Any
    params: dict[str, Any] = field(default_factory=dict)
    fit_seconds: float = 0.0


Run = Callable[[Context], Iterator[Candidate]]


@dataclass(frozen=True)
class Method:
    """A registered method.

    Attributes
    ----------
    key : str
        Short id used to select it (``methods=["qwyc"]``, ``--methods qwyc``).
    name : str
        Its series name in tables and plots.
    family : {"reference", "train", "post-hoc", "composition"}
    tasks : tuple of str
        The tasks it supports.
    run : callable
        ``run(ctx) -> iterator of Candidate``.
    after : str, optional
        Key of the method whose shared models this one builds on (``ctx.lightgbm()``, the CEGB
        models, the BudgetRF forest): when both run, :func:`thrifty.compare` fits that method
        first on the same rows and hands its models over instead of fitting them again.
    """

    key: str
    name: str
    family: str
    tasks: tuple[str, ...]
    run: Run
    after: str | None = None


#: Every method ``thrifty.compare`` knows, by key, in the order they run.
METHODS: dict[str, Method] = {}


def method(
    key: str, name: str, family: str, tasks: Sequence[str] = TASKS, *, after: str | None = None
) -> Callable[[Run], Run]:
    """Register ``run(ctx)`` as the method ``key`` of :func:`thrifty.compare` (``after``: see
    :class:`Method`)."""
    bad = set(tasks) - set(TASKS)
    if bad or family not in ("reference", "train", "post-hoc", "composition") or "," in key:
        raise InputError(f"bad registration of {key!r}: tasks {sorted(bad)}, family {family!r}")

    def register(run: Run) -> Run:
        METHODS[key] = Method(key, name, family, tuple(tasks), run, after)
        return run

    return register


def timed(name: str, build: Callable[..., Any], **params: Any) -> Candidate:
    """Run ``build()`` and wrap its result as a Candidate with its wall-clock time."""
    start = time.perf_counter()
    model = build()
    return Candidate(name, model, params, time.perf_counter() - start)


# ---------------------------------------------------------------------- reference
#: The plain model's series: its row with every tree is the baseline of every report.
REFERENCE = "LightGBM, first k trees"


@method("lightgbm", REFERENCE, "reference")
def _truncated(ctx: Context) -> Iterator[Candidate]:
    """The plain model truncated after k trees: what a cost-blind practitioner would do."""
    forest = ctx.lightgbm()
    per_round = max(1, forest.n_trees // max(1, _rounds(forest)))
    rounds = _rounds(forest)
    grid = sorted({int(k) for k in np.unique(np.geomspace(1, rounds, 6 if ctx.quick else 12).round())})
    # The whole model first: it is the baseline every report compares with, so a time
    # allowance that stops the method early still leaves it.
    for k in [grid[-1], *grid[:-1]]:
        yield Candidate(f"k={k}", forest.subset(range(k * per_round)), {"k": k})


def _rounds(forest: Forest) -> int:
    """Boosting rounds: trees per round is the number of outputs (one tree per class)."""
    return max(1, forest.n_trees // max(1, forest.n_outputs))


@method("cheapest", "cheapest k features", "reference")
def _cheapest(ctx: Context) -> Iterator[Candidate]:
    """LightGBM models restricted to the k cheapest features (by price alone), k < n."""
    names = ctx.feature_names
    # A stable sort keeps the data's column order among equally priced features.
    price = [ctx.costs.acquisition_cost([i]) for i in range(len(names))]
    order = np.argsort(price, kind="stable")
    n = len(names)
    ks = sorted({int(k) for k in np.geomspace(1, max(1, n - 1), 4 if ctx.quick else 8).round()})
    for k in ks:
        if k >= n:
            continue
        keep = [names[i] for i in order[:k]]
        yield timed(
            f"k={k}",
            lambda keep=keep: Forest.from_model(
                ctx.fit_lightgbm(_only(ctx.X_train, keep)), feature_names=names
            ),
            k=k,
            features=", ".join(keep),
            price=ctx.costs.acquisition_cost(order[:k].tolist()),
        )


def _only(X: Any, keep: list[str]) -> Any:
    """``X`` with every column but ``keep`` blanked out (all missing).

    An all-missing column never wins a split, so the model uses only ``keep`` yet still reads
    the full table: every candidate then takes the same test matrix and cost model.
    """
    blank = pd.Series(False, index=X.index)
    return X.assign(**{c: X[c].where(blank) for c in X.columns if c not in keep})


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


def _cegb_models(ctx: Context) -> Iterator[Candidate]:
    """CEGB models, one per budget, fitted once and shared (compositions reuse them)."""
    if "cegb" not in ctx._cache:
        cls = {"ranking": CEGBRanker, "regression": CEGBRegressor}.get(ctx.task, CEGBClassifier)
        fit_kw = {"qid": ctx.qid_train} if ctx.task == "ranking" else {}
        found = []
        for budget in ctx.budgets:
            est = cls(costs=ctx.costs, budget=budget, **_capacity(ctx))
            try:
                cand = timed(
                    f"budget={budget:.4g}",
                    lambda e=est: (
                        e.fit(ctx.X_train, ctx.y_train, calibration=(ctx.X_val, ctx.y_val), **fit_kw).forest_
                    ),
                    budget=budget,
                )
            except BudgetError as exc:
                cand = Candidate(f"budget={budget:.4g}", None, {"reason": " ".join(str(exc).split())})
            else:
                cand.params.update(tradeoff=est.tradeoff_, n_fits=est.n_fits_)
            found.append(cand)
            yield cand
        ctx._cache["cegb"] = found
    else:
        yield from ctx._cache["cegb"]


@method("cegb", "CEGB", "train")
def _cegb(ctx: Context) -> Iterator[Candidate]:
    """CEGB (Peter et al. 2017): one model per budget, trade-off searched on the calibration split."""
    yield from _cegb_models(ctx)


@method("greedymiser", "GreedyMiser", "train", ("binary", "multiclass", "regression"))
def _greedymiser(ctx: Context) -> Iterator[Candidate]:
    """GreedyMiser (Xu et al. 2012): depth-4 first-order trees, feature costs once per model."""
    cls = GreedyMiserRegressor if ctx.task == "regression" else GreedyMiserClassifier
    kw = _capacity(ctx)
    kw.pop("num_leaves", None)
    kw.pop("max_depth", None)
    for budget in ctx.budgets:
        est = cls(costs=ctx.costs, budget=budget, **kw)
        try:
            cand = timed(
                f"budget={budget:.4g}",
                lambda e=est: e.fit(ctx.X_train, ctx.y_train, calibration=(ctx.X_val, ctx.y_val)).forest_,
                budget=budget,
            )
        except BudgetError as exc:
            yield Candidate(f"budget={budget:.4g}", None, {"reason": " ".join(str(exc).split())})
            continue
        cand.params.update(tradeoff=est.tradeoff_, n_fits=est.n_fits_)
        yield cand


@method("cegb+qwyc", "CEGB ordered by QWYC", "composition", after="cegb")
def _cegb_qwyc(ctx: Context) -> Iterator[Candidate]:
    """Each CEGB model with QWYC's order and exits (alpha=0.01) fitted on the calibration split:
    CEGB buys cheap features, QWYC stops evaluating once the decision is safe."""
    for cand in _cegb_models(ctx):
        if cand.model is None:
            continue
        start = time.perf_counter()
        plan = _quit(ctx, cand.model, 0.01)
        yield Candidate(
            cand.name, plan, {**cand.params, "alpha": 0.01}, cand.fit_seconds + time.perf_counter() - start
        )


# ---------------------------------------------------------------------- post-hoc, on LightGBM
def _quit(ctx: Context, forest: Forest, alpha: float) -> Any:
    """QWYC's order and exits on ``forest`` fitted on the calibration split, for the task: a
    decision (classification), a prediction within ``_tolerance`` (regression) or each query's
    top-5 set (ranking, ``qwyc_ranking``; trees priced by the cost model, features not)
    changes on at most a fraction ``alpha`` of the rows (queries)."""
    if ctx.task == "ranking":
        return qwyc_ranking(forest, ctx.X_val, ctx.qid_val, alpha=alpha, costs=ctx.costs, progress=False)
    tol = _tolerance(ctx) if ctx.task == "regression" else None
    return qwyc(
        forest, ctx.X_val, alpha=alpha, costs=ctx.costs, feature_costs=True, tolerance=tol, progress=False
    )


def _tolerance(ctx: Context) -> float:
    """A regressor's tolerance: 5% of the calibration targets' spread (``default_tolerance``)."""
    return default_tolerance(ctx.y_val)


@method("qwyc", "QWYC", "post-hoc", after="lightgbm")
def _qwyc(ctx: Context) -> Iterator[Candidate]:
    """QWYC's order and exits on the plain model, fitted on the calibration split (no labels)."""
    forest = ctx.lightgbm()
    for alpha in ALPHAS[::3] if ctx.quick else ALPHAS:  # the grid QWYCClassifier's budget search tries
        yield timed(f"alpha={alpha:g}", lambda a=alpha: _quit(ctx, forest, a), alpha=alpha)


@method("fan", "Fan et al.", "post-hoc", ("binary",), after="lightgbm")
def _fan(ctx: Context) -> Iterator[Candidate]:
    """Fan et al.'s binned exits on the plain model's own tree order."""
    forest = ctx.lightgbm()
    for gamma in (1.0, 2.0, 4.0) if ctx.quick else (0.5, 1.0, 2.0, 3.0, 4.0, 6.0):
        yield timed(f"gamma={gamma:g}", lambda g=gamma: fan(forest, ctx.X_val, gamma=g), gamma=gamma)


@method("margin", "margin early exit", "post-hoc", ("binary", "regression"), after="lightgbm")
def _margin(ctx: Context) -> Iterator[Candidate]:
    """LightGBM's ``pred_early_stop`` rule, margins calibrated on the calibration split; for a
    regressor, the exit where the remaining trees' bound is within a tolerance (1, 4, 16... times
    ``_tolerance``), so every early prediction is that close to the full one."""
    forest = ctx.lightgbm()
    every = max(1, _rounds(forest) // 20)
    if ctx.task == "regression":
        for times in (1, 4, 16) if ctx.quick else (1, 2, 4, 8, 16, 32):
            tol = times * _tolerance(ctx)
            yield timed(
                f"tolerance={times}x",
                lambda t=tol: margin_early_exit(forest, tolerance=t, every=every),
                tolerance=tol,
                every=every,
            )
        return
    for rate in (0.0, 0.01, 0.05) if ctx.quick else (0.0, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1):
        yield timed(
            f"disagreement<={rate:g}",
            lambda r=rate: calibrate_margin(forest, ctx.X_val, max_disagreement=r, every=every)[0],
            max_disagreement=rate,
            every=every,
        )


def _cascades(ctx: Context, forest: Forest) -> Iterator[Candidate]:
    """Cronus cascades of ``forest`` fitted on the training rows (as the paper does), lambda
    swept down from ``lambda_max`` (the smallest lambda keeping no tree) over the grid
    CronusClassifier's budget search tries (every other value when quick)."""
    # Accuracy is the target here: unweighted squared loss (the paper's 3.5 on positives serves
    # ranking precision; a ranker's cascade is fitted to its relevant documents, `_relevant`).
    y = _relevant(ctx.y_train) if ctx.task == "ranking" else ctx.y_train
    top = lambda_max(forest, ctx.X_train, y, ctx.costs, rho=1e-3, class_weight=None)
    lams = list(enumerate(lam_grid(top)))
    for j, lam in lams[1::2] if ctx.quick else lams:
        yield timed(
            f"lam=lambda_max/2^{j}",
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
            lam=lam,
        )


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


@method("cegb+cronus", "Cronus cascade of a CEGB model", "composition", ("binary", "ranking"), after="cegb")
def _cegb_cronus(ctx: Context) -> Iterator[Candidate]:
    """The CEGB model of the largest budget (cheap features already) turned into a Cronus
    cascade (early rejects skip its trees)."""
    models = [c for c in _cegb_models(ctx) if c.model is not None]
    if not models:
        return
    base = models[-1]
    # Named by the cascade's setting alone: which budget is the largest feasible one can vary
    # between the folds of the selection, and a candidate must keep its name across them.
    for cand in _cascades(ctx, base.model):
        yield Candidate(
            f"largest budget, {cand.name}",
            cand.model,
            {**base.params, **cand.params},
            base.fit_seconds + cand.fit_seconds,
        )


# ---------------------------------------------------------------------- ADAPT
def _adapt_grid(kind: str, quick: bool) -> list[tuple[float, float]]:
    """(p_full, gamma) pairs: the grid ADAPTClassifier's budget search tries, cheapest first
    (small p_full, large gamma); quick: two values of p_full at the method's default gamma."""
    if quick:
        return [(p, DEFAULT_GAMMA[kind]) for p in P_FULL_GRID[1::3]]
    return [(p, g) for p in P_FULL_GRID for g in sorted(GAMMA_GRID[kind], reverse=True)]


def _gated(ctx: Context, hpc: Forest, kind: str) -> Iterator[Candidate]:
    """ADAPT gates and low-cost models in front of ``hpc`` over ADAPT's grid of (p_full, gamma).

    The estimator reads ``hpc``'s own coding of the table (category codes), so that gate, low
    model and hpc read the same columns alike."""
    X = to_matrix(ctx.X_train, hpc.n_features, hpc.feature_names, hpc.categories)
    cls = ADAPTRegressor if ctx.task == "regression" else ADAPTClassifier
    for p_full, gamma in _adapt_grid(kind, ctx.quick):
        yield timed(
            f"p_full={p_full:g}, gamma={gamma:g}",
            lambda p=p_full, g=gamma: (
                cls(
                    hpc,
                    costs=ctx.costs,
                    method=kind,
                    p_full=p,
                    gamma=g,
                    random_state=ctx.random_state,
                    progress=False,
                )
                .fit(X, ctx.y_train)
                .plan_
            ),
            p_full=p_full,
            gamma=gamma,
        )


@method("adapt-gbrt", "ADAPT-GBRT", "train", ("binary", "multiclass", "regression"), after="lightgbm")
def _adapt_gbrt(ctx: Context) -> Iterator[Candidate]:
    """ADAPT-GBRT (Nan and Saligrama 2017): a boosted gate and low-cost model in front of the
    plain model, which answers only the examples the gate sends on."""
    yield from _gated(ctx, ctx.lightgbm(), "gbrt")


@method("adapt-lin", "ADAPT-LIN", "train", ("binary", "multiclass", "regression"), after="lightgbm")
def _adapt_lin(ctx: Context) -> Iterator[Candidate]:
    """ADAPT-LIN: a linear gate and low-cost model (group-sparse) in front of the plain model."""
    yield from _gated(ctx, ctx.lightgbm(), "lin")


# ---------------------------------------------------------------------- post-hoc, on a random forest
@method("budgetprune", "BudgetPrune (random forest)", "post-hoc", ("binary", "multiclass", "regression"))
def _budgetprune(ctx: Context) -> Iterator[Candidate]:
    """The plain random forest pruned by BudgetPrune (the exact (IP3) solve, features shared
    across trees), for each budget the most accurate pruning within it (see ``_pruned``)."""
    yield Candidate("unpruned", ctx.random_forest(), {"lam": 0.0})
    yield from _pruned(ctx, ctx.random_forest())


def _pruned(ctx: Context, forest: Forest) -> Iterator[Candidate]:
    """BudgetPrune's most accurate pruning of ``forest`` within each budget, on one lambda path
    over the calibration rows (their errors are honest: the forest has seen the training rows).
    A pruning that serves several budgets is offered once."""
    start = time.perf_counter()
    path = budget_prune_path(forest, ctx.X_val, ctx.y_val, ctx.costs, progress=False)
    seconds = time.perf_counter() - start  # one path serves every budget: charged to the first
    seen: set[int] = set()
    for budget in ctx.budgets:
        if budget < path.cost.min():
            yield Candidate(
                f"budget={budget:.4g}",
                None,
                {"reason": f"below the cheapest pruning's cost {path.cost.min():.4g}"},
            )
            continue
        k = path.best_within(budget)
        if k in seen:
            continue
        seen.add(k)
        yield Candidate(
            f"budget={budget:.4g}", path.forest(k), {"budget": budget, "lam": float(path.lambdas[k])}, seconds
        )
        seconds = 0.0


# ---------------------------------------------------------------------- BudgetRF
def _budgetrf(ctx: Context) -> Forest:
    """A BudgetRF forest on the training split (fitted once; categories as codes)."""
    if "budgetrf" not in ctx._cache:
        X = ctx.matrix(ctx.X_train)  # categories as codes, missing values NaN (BudgetRF routes them)
        cls = BudgetRFRegressor if ctx.task == "regression" else BudgetRFClassifier
        est = cls(
            15 if ctx.quick else 40,
            costs=ctx.costs,
            max_depth=10,
            random_state=ctx.random_state,
            progress=False,
        ).fit(X, ctx.y_train)
        ctx._cache["budgetrf"] = ctx.adopt(est.forest_)
    return ctx._cache["budgetrf"]


@method("budgetrf", "BudgetRF", "train", ("binary", "multiclass", "regression"))
def _budgetrf_alone(ctx: Context) -> Iterator[Candidate]:
    """BudgetRF (cost-aware splits, Nan et al. 2015), unpruned."""
    yield timed("40 trees" if not ctx.quick else "15 trees", lambda: _budgetrf(ctx))


def _budgetrf_pruned_models(ctx: Context) -> Iterator[Candidate]:
    if "budgetrf+prune" not in ctx._cache:
        ctx._cache["budgetrf+prune"] = list(_pruned(ctx, _budgetrf(ctx)))
    yield from ctx._cache["budgetrf+prune"]


@method(
    "budgetrf+prune",
    "BudgetRF pruned by BudgetPrune",
    "composition",
    ("binary", "multiclass", "regression"),
    after="budgetrf",
)
def _budgetrf_pruned(ctx: Context) -> Iterator[Candidate]:
    """BudgetRF's forest pruned by BudgetPrune: the pairing of the BudgetPrune paper."""
    yield from _budgetrf_pruned_models(ctx)


@method(
    "budgetrf+prune+adapt",
    "BudgetRF, pruned, gated by ADAPT",
    "composition",
    ("binary", "multiclass", "regression"),
    after="budgetrf+prune",
)
def _budgetrf_pruned_gated(ctx: Context) -> Iterator[Candidate]:
    """The most accurate pruned BudgetRF forest (largest budget) as ADAPT's expensive model f0,
    behind an ADAPT-GBRT gate and low-cost model."""
    pruned = [c for c in _budgetrf_pruned_models(ctx) if c.model is not None]
    if not pruned:
        return
    base = pruned[-1]
    for cand in _gated(ctx, base.model, "gbrt"):  # named by the gate's setting (see above)
        yield Candidate(
            f"largest budget, {cand.name}",
            cand.model,
            {**base.params, **cand.params},
            base.fit_seconds + cand.fit_seconds,
        )
