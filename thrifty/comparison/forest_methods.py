"""The methods of ``thrifty.compare`` on random forests and gates: BudgetPrune, BudgetRF and
their compositions, ADAPT's gate and low-cost model in front of a model, and the margin cascade
of a cheapest-k-features model into the plain model (registered after the methods of
``methods``)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from thrifty.cascade.margin import margin_band, margin_cascade
from thrifty.comparison.baselines import cheapest_models
from thrifty.comparison.context import Context
from thrifty.comparison.registry import TASKS, Candidate, CostOrder, fitted, method
from thrifty.forest import Forest, to_matrix
from thrifty.prune import budget_prune_path
from thrifty.train import ADAPTClassifier, ADAPTRegressor, BudgetRFClassifier, BudgetRFRegressor
from thrifty.train.adapt import DEFAULT_GAMMA, GAMMA_GRID, P_FULL_GRID

__all__: list[str] = []


# ---------------------------------------------------------------------- ADAPT
def _adapt_grid(kind: str, quick: bool) -> list[tuple[float, float]]:
    """(p_full, gamma) pairs: the grid ADAPTClassifier's budget search tries, cheapest first
    (small p_full, large gamma); quick: two values of p_full at the method's default gamma."""
    if quick:
        return [(p, DEFAULT_GAMMA[kind]) for p in P_FULL_GRID[1::3]]
    return [(p, g) for p in P_FULL_GRID for g in sorted(GAMMA_GRID[kind], reverse=True)]


def _gated(ctx: Context, hpc: Forest, kind: str, base: Candidate | None = None) -> Iterator[Candidate]:
    """ADAPT gates and low-cost models in front of ``hpc`` over ADAPT's grid of (p_full, gamma);
    ``base``: the composition's model ``hpc`` is (named "largest budget, ...", with its
    parameters and, on the first gate, its seconds).

    The estimator reads ``hpc``'s own coding of the table (category codes), so that gate, low
    model and hpc read the same columns alike."""
    X = to_matrix(ctx.X_train, hpc.n_features, hpc.feature_names, hpc.categories)
    cls = ADAPTClassifier if ctx.task in ("binary", "multiclass") else ADAPTRegressor
    order = CostOrder(_adapt_grid(kind, ctx.quick))  # their costs covered first
    prefix, extra = ("", {}) if base is None else ("largest budget, ", base.params)
    for p_full, gamma in order:
        name = f"{prefix}p_full={p_full:g}, gamma={gamma:g}"
        cand = fitted(
            ctx,
            name,
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
            base=None if base is None else base.model,
            **extra,
            p_full=p_full,
            gamma=gamma,
        )
        if base is not None and ctx.replay.get(name) is not cand:  # fitted here
            cand.fit_seconds += base.fit_seconds
        order.cost(ctx.order_cost(cand.model))
        yield cand


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
@method("budgetprune", "BudgetPrune (random forest)", "post-hoc")
def _budgetprune(ctx: Context) -> Iterator[Candidate]:
    """The plain random forest pruned by BudgetPrune (the exact (IP3) solve, features shared
    across trees), for each budget the most accurate pruning within it (see ``_pruned``). For
    ranking the forest regresses the relevance grades and (IP3) takes their squared error: a
    pointwise ranker, scored by the ranking metric per query."""
    yield Candidate("unpruned", ctx.random_forest(), {"lam": 0.0, **_sampled(ctx)})
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


def _sampled(ctx: Context) -> dict[str, int]:
    """The rows of each tree's bootstrap sample, declared in the candidate's parameters when
    compare caps them (``Context.rows_per_tree``)."""
    return {} if ctx.rows_per_tree is None else {"rows_per_tree": ctx.rows_per_tree}


# ---------------------------------------------------------------------- BudgetRF
def _budgetrf(ctx: Context) -> Forest:
    """A BudgetRF forest on the training split (fitted once; categories as codes)."""
    if "budgetrf" not in ctx._cache:
        X = ctx.matrix(ctx.X_train)  # categories as codes, missing values NaN (BudgetRF routes them)
        cls = BudgetRFClassifier if ctx.task in ("binary", "multiclass") else BudgetRFRegressor
        est = cls(
            15 if ctx.quick else 40,
            costs=ctx.costs,
            max_depth=10,
            max_samples=ctx.rows_per_tree,  # see Context.rows_per_tree
            random_state=ctx.random_state,
            progress=False,
        ).fit(X, ctx.y_train)
        ctx._cache["budgetrf"] = ctx.adopt(est.forest_)
    return ctx._cache["budgetrf"]


@method("budgetrf", "BudgetRF", "train")
def _budgetrf_alone(ctx: Context) -> Iterator[Candidate]:
    """BudgetRF (cost-aware splits, Nan et al. 2015), unpruned; for ranking, a regressor of the
    relevance grades (a pointwise ranker)."""
    yield fitted(ctx, "40 trees" if not ctx.quick else "15 trees", lambda: _budgetrf(ctx), **_sampled(ctx))


def _budgetrf_pruned_models(ctx: Context) -> Iterator[Candidate]:
    if "budgetrf+prune" not in ctx._cache:
        ctx._cache["budgetrf+prune"] = list(_pruned(ctx, _budgetrf(ctx)))
    yield from ctx._cache["budgetrf+prune"]


@method(
    "budgetrf+prune",
    "BudgetRF pruned by BudgetPrune",
    "composition",
    TASKS,
    after="budgetrf",
)
def _budgetrf_pruned(ctx: Context) -> Iterator[Candidate]:
    """BudgetRF's forest pruned by BudgetPrune: the pairing of the BudgetPrune paper."""
    yield from _budgetrf_pruned_models(ctx)


@method(
    "budgetrf+prune+adapt",
    "BudgetRF, pruned, gated by ADAPT",
    "composition",
    TASKS,
    after="budgetrf+prune",
)
def _budgetrf_pruned_gated(ctx: Context) -> Iterator[Candidate]:
    """The most accurate pruned BudgetRF forest (largest budget) as ADAPT's expensive model f0,
    behind an ADAPT-GBRT gate and low-cost model (for ranking, ADAPT's regressor on the
    relevance grades: every part of it is pointwise)."""
    pruned = [c for c in _budgetrf_pruned_models(ctx) if c.model is not None]
    if not pruned:
        return
    base = pruned[-1]
    yield from _gated(ctx, base.model, "gbrt", base)  # named by the gate's setting (see above)


# ---------------------------------------------------------------------- margin cascade
#: Shares of the calibration rows the margin cascade sends on to the plain model.
MARGIN_SHARES = (0.02, 0.05, 0.1, 0.2, 0.35)


@method(
    "cheapest+plain",
    "cheapest k features, plain model where unsure",
    "composition",
    ("binary",),
    after="cheapest",
    fits=False,
)
def _margin_cascades(ctx: Context) -> Iterator[Candidate]:
    """The cheapest-k-features baseline's models, each answering unless its raw score lies in
    the band around its decision threshold holding a share of the calibration rows, where the
    plain model answers (``thrifty.cascade.margin_cascade``: an IDK cascade, Wang et al. 2018).

    Built from the two baselines' fitted models (no fit of its own: scheduled with the
    post-hoc methods, ``Method.fits``), for the cheap models that cost less than the plain
    model, dearest first, over :data:`MARGIN_SHARES` (two shares when quick), their costs
    covered first (``CostOrder``). Binary only: a multiclass model's top-two margin would
    need a gate on the gap between its two leading scores, which no one-output gate computes."""
    plain = ctx.lightgbm()
    plain_cost = ctx.order_cost(plain)
    cheap = [(c, ctx.order_cost(c.model)) for c in cheapest_models(ctx) if c.model is not None]
    shares = MARGIN_SHARES[1::3] if ctx.quick else MARGIN_SHARES
    # The dearest cheap model first: the most accurate of them, whose cascades span the costs
    # between its own and the plain model's, where the cheapest-k baseline has none (on flights the
    # cheapest-24 model's, between 2 and 12); under an allowance a model's shares come in the
    # order that covers their costs first.
    for cand, cost in sorted(cheap, key=lambda p: -p[1]):
        if cost >= plain_cost:
            continue
        raw = cand.model.predict_raw(ctx.X_val)  # its scores of the calibration rows, once
        order = CostOrder(shares)
        for share in order:
            start = time.perf_counter()
            lo, hi = margin_band(cand.model, None, share, raw=raw)
            seconds = time.perf_counter() - start
            plan = fitted(
                ctx,
                f"{cand.name}, share={share:g}",
                lambda m=cand.model, lo=lo, hi=hi: margin_cascade(m, plain, lo, hi),
                base=cand.model,
                k=cand.params["k"],
                features=cand.params["features"],
                share=share,
                band=f"({lo:.4g}, {hi:.4g})",
            )
            if ctx.replay.get(plan.name) is not plan:  # built here: with its band's and model's seconds
                plan.fit_seconds += seconds + cand.fit_seconds
            order.cost(ctx.order_cost(plan.model))
            yield plan
