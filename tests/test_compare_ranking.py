"""compare's ranking methods: what each offers is fitted for the metric compare chooses on
(NDCG@10 over queries)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from thrifty import CostModel, metrics
from thrifty.comparison import METHODS
from thrifty.comparison.settings import Settings
from thrifty.comparison.sweep import fitting_context, measure

pytest.importorskip("lightgbm")

N_QUERIES, N_DOCS = 60, 14


def _ranking_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    qid = np.repeat(np.arange(N_QUERIES), N_DOCS)
    X = rng.normal(size=(len(qid), 6))
    s = X[:, 0] + 0.6 * X[:, 1] * X[:, 2] + 0.4 * X[:, 4] + 0.4 * rng.normal(size=len(qid))
    y = np.clip(np.round(s + 1.5), 0, 4).astype(int)
    return pd.DataFrame(X, columns=[f"f{j}" for j in range(6)]), y, qid


@pytest.fixture(scope="module")
def ctx():
    X, y, qid = _ranking_data()
    costs = CostModel([1, 1, 5, 20, 20, 50], feature_names=list(X.columns), tree_cost=0.0)
    params = {
        "n_estimators": 40,
        "num_leaves": 8,
        "learning_rate": 0.1,
        "min_child_samples": 3,
        "verbose": -1,
    }
    settings = Settings(task="ranking", costs=costs, budgets=(20.0, 60.0), lightgbm_params=params)
    return fitting_context(settings, X, y, qid)


def test_qwyc_for_ranking_keeps_each_query_top10_list(ctx):
    """compare's QWYC at alpha=0 keeps every calibration query's top 10 in order, so its
    NDCG@10 there is the plain model's on every query (with the top-5 *set* kept, documents of
    the top 5 exited with partial scores and the order, which NDCG@10 weighs, changed)."""
    full = measure(ctx.lightgbm(), ctx.X_val, ctx.y_val, ctx.qid_val, ctx.costs, "ranking")[1]
    plans = {c.name: c.model for c in METHODS["qwyc"].run(ctx)}
    ev = measure(plans["alpha=0"], ctx.X_val, ctx.y_val, ctx.qid_val, ctx.costs, "ranking")[1]
    np.testing.assert_array_equal(
        metrics.ndcg_per_query(ctx.y_val, ev.raw, ctx.qid_val, k=10),
        metrics.ndcg_per_query(ctx.y_val, full.raw, ctx.qid_val, k=10),
    )


def _path(forests_and_costs, chosen):
    """A stand-in for a budgeted estimator after ``fit``: its path's models and their costs,
    the estimator's own choice (the dearest within the budget) marked ``chosen``."""
    from types import SimpleNamespace

    table = pd.DataFrame(
        {
            "tradeoff": [0.0] * len(forests_and_costs),
            "cost": [c for _, c in forests_and_costs],
            "truncated": False,
            "chosen": [i == chosen for i in range(len(forests_and_costs))],
        }
    )
    return SimpleNamespace(budget_search_=table, search_models_=[f for f, _ in forests_and_costs])


def test_a_path_model_better_on_calibration_within_the_noise_is_not_offered(ctx):
    """Of a budgeted path's models within the budget, compare offers the estimator's choice
    (the dearest) unless another is better on the calibration queries beyond the noise. Here
    the plain model's first 29 trees beat all 40 on the 12 calibration queries by 0.0016 of
    NDCG@10, with a paired 95% interval of about [-0.007, 0.012]: the 40 trees are offered
    (the best calibration figure was, before)."""
    from thrifty.comparison.methods import _best_on_path
    from thrifty.comparison.scores import paired_lead, unit_scores

    full = ctx.lightgbm()
    part = full.subset(range(29))
    units = [
        unit_scores(
            "ranking",
            ctx.y_val,
            measure(f, ctx.X_val, ctx.y_val, ctx.qid_val, ctx.costs, "ranking")[1],
            ctx.qid_val,
        )
        for f in (part, full)
    ]
    lead, low, high = paired_lead("ndcg@10", units[0], units[1])
    assert lead > 0 and low < 0 < high  # better on calibration, within the noise
    assert _best_on_path(ctx, _path([(part, 29.0), (full, 40.0)], chosen=1), 50.0) == 1
    # The same model at two costs: the cheaper.
    assert _best_on_path(ctx, _path([(full, 39.0), (full, 40.0)], chosen=1), 50.0) == 0


def test_a_path_model_better_beyond_the_noise_is_offered(ctx):
    """The plain model beats its first tree on the calibration queries beyond the noise: it
    is offered though cheaper on this made-up path than the estimator's choice."""
    from thrifty.comparison.methods import _best_on_path

    full = ctx.lightgbm()
    assert _best_on_path(ctx, _path([(full, 10.0), (full.subset(range(1)), 20.0)], chosen=1), 50.0) == 0
    # Nothing but the estimator's choice within the budget: it.
    assert _best_on_path(ctx, _path([(full, 60.0), (full.subset(range(1)), 20.0)], chosen=1), 50.0) == 1


def test_the_cascade_of_a_cegb_model_fits_the_largest_budget_only(ctx, monkeypatch):
    """The Cronus cascade of a CEGB model needs the CEGB model of the largest budget: where
    the first pass of a time-limited sweep left CEGB's path incomplete, it fits that budget
    alone (before, every budget's, about 70 s of a loaded rank_small fold before the first
    cascade). Where CEGB's path is complete in the context, it fits none."""
    from thrifty.comparison import methods

    fresh = fitting_context(ctx.settings, *_fitting_rows(ctx))
    asked: list[float] = []
    on_path = methods._on_path

    def spy(c, est, budget, fit_kw):
        asked.append(budget)
        return on_path(c, est, budget, fit_kw)

    monkeypatch.setattr(methods, "_on_path", spy)
    first = next(METHODS["cegb+cronus"].run(fresh))
    assert asked == [max(ctx.settings.budgets)]
    assert first.params["budget"] == max(ctx.settings.budgets)
    # CEGB's complete path in the context: its largest budget's model is cascaded, no fit.
    done = fitting_context(ctx.settings, *_fitting_rows(ctx))
    models = list(METHODS["cegb"].run(done))
    asked.clear()
    again = next(METHODS["cegb+cronus"].run(done))
    assert asked == []
    largest = max((c for c in models if c.model is not None), key=lambda c: c.params["budget"])
    assert again.params["budget"] == largest.params["budget"]


def _fitting_rows(ctx):
    """The rows ``ctx`` was made from (its training and calibration splits together)."""
    X = pd.concat([ctx.X_train, ctx.X_val], ignore_index=True)
    return X, np.r_[ctx.y_train, ctx.y_val], np.r_[ctx.qid_train, ctx.qid_val]


def test_cegb_path_searches_each_budget_to_within_a_fifth(ctx):
    """compare's CEGB path stops a budget's search at a model within 20% below it: fewer
    LightGBM fits with CEGB's penalty than the estimator's default 5% over the same budgets,
    and each budget's choice still within [0.8, 1] of it, so dearer than the budget below
    (compare's budgets are at least 1.5 times apart)."""
    from thrifty.comparison import methods
    from thrifty.train import CEGBRanker

    budgets = (10.0, 20.0, 40.0, 60.0)
    settings = type(ctx.settings)(**{**vars(ctx.settings), "budgets": budgets})
    fits = {}
    for label, search in (("compare", methods.CEGB_SEARCH), ("default", {})):
        c = fitting_context(settings, *_fitting_rows(ctx))
        est = methods._path(c, "cegb path", CEGBRanker, **methods._capacity(c), **search)
        fits[label] = 0
        for b in methods.spread(budgets):
            cand = methods._on_path(c, est, b, {"qid": c.qid_train})
            if cand.model is None:
                continue
            fits[label] += cand.params["n_fits"]
            if label == "compare" and not est.truncated_:
                assert 0.8 * b - 1e-9 <= est.calibration_cost_ <= b + 1e-9
    assert est.get_params()["tolerance"] == 0.05
    assert fits["compare"] < fits["default"], fits
    c = fitting_context(settings, *_fitting_rows(ctx))
    assert methods._cegb_path(c)[0].get_params()["tolerance"] == methods.CEGB_SEARCH["tolerance"]


def test_qwyc_searches_once_per_whole_number_of_queries_allowed(ctx, monkeypatch):
    """QWYC's ranking bound is a count of calibration queries, alpha times their number: the
    alphas allowing the same whole number give the same plan, and compare searches it once
    (on 12 calibration queries, 4 searches for the 11 alphas), offering it under each name.
    Each plan equals a search of its own alpha."""
    from thrifty.comparison import methods
    from thrifty.order import qwyc_ranking

    calls = []

    def counting(*args, **kw):
        calls.append(kw["alpha"])
        return qwyc_ranking(*args, **kw)

    monkeypatch.setattr(methods, "qwyc_ranking", counting)
    plans = {c.name: c.model for c in METHODS["qwyc"].run(ctx)}
    n_q = len(np.unique(ctx.qid_val))
    assert len(plans) == len(methods.QWYC_ALPHAS)
    assert len(calls) == len({int(np.floor(a * n_q)) for a in methods.QWYC_ALPHAS}) < len(plans)
    for alpha in methods.QWYC_ALPHAS:
        own = qwyc_ranking(
            ctx.lightgbm(), ctx.X_val, ctx.qid_val, k=10, keep="order", alpha=alpha, costs=ctx.costs
        )
        got = plans[f"alpha={alpha:g}"]
        np.testing.assert_array_equal(got.order, own.order)
        np.testing.assert_array_equal(got.eps_pos, own.eps_pos)
        np.testing.assert_array_equal(got.eps_neg, own.eps_neg)
