"""Cronus and the ranking early exit on the shared rank_small data (skipped without THRIFTY_DATA)."""

import numpy as np
import pytest

import thrifty
from thrifty import CostModel, Forest, datasets
from thrifty.cascade import cascade_scores, cronus, lambda_max, ranking_early_exit
from thrifty.metrics import precision_at_k

lightgbm = pytest.importorskip("lightgbm")


def test_rank_small_cascade_is_cheaper(data_home, precision_by_query):
    ds = datasets.load("rank_small", data_home=data_home)
    X_tr, y_tr, _ = ds.subset("train")
    X_te, y_te, q_te = ds.subset("test")
    costs = CostModel(
        datasets.yahoo_costs(300, seed=0, data_home=data_home), feature_names=ds.feature_names, tree_cost=1.0
    )
    rel = y_tr >= 3
    model = lightgbm.LGBMRegressor(
        n_estimators=40, num_leaves=8, learning_rate=0.1, verbose=-1, n_jobs=1, random_state=0
    ).fit(X_tr, np.where(rel, 1.0, -1.0))
    forest = Forest.from_model(model)
    lam = lambda_max(forest, X_tr, rel, costs, rho=1e-3, exact=False) / 2
    plan = cronus(forest, X_tr, rel, costs, lam=lam, n_stages=3, max_cycles=1, n_threads=1)
    ev = thrifty.evaluate(plan, X_te, costs)
    full = thrifty.evaluate(forest, X_te, costs)
    assert ev.cost.mean < full.cost.mean
    scores = cascade_scores(ev)
    p5 = precision_at_k((y_te >= 3).astype(int), scores, q_te, 5)
    assert p5 == pytest.approx(precision_by_query(y_te >= 3, scores, q_te), abs=1e-12)
    early = ranking_early_exit(forest, X_te, q_te, 0.2, costs, every=10)
    assert early.cost.mean <= full.cost.mean
    assert np.all(early.cost.n_trees == early.n_trees)


def test_rank_small_cronus_ranker(data_home, precision_by_query):
    """The paper's setting: an LGBMRanker, relevance >= 3, a budget met on calibration queries
    held out of the training split (precision@5 selects), confirmed on the test queries."""
    ds = datasets.load("rank_small", data_home=data_home)
    X, y, q = ds.subset("train")
    held = np.isin(q, np.unique(q)[::4])
    X_tr, y_tr, q_tr = X[~held], y[~held], q[~held]
    X_va, y_va, q_va = X[held], y[held], q[held]
    X_te, y_te, q_te = ds.subset("test")
    costs = CostModel(
        datasets.yahoo_costs(300, seed=0, data_home=data_home), feature_names=ds.feature_names, tree_cost=1.0
    )
    _, sizes = np.unique(q_tr, return_counts=True)  # the rows of each query are consecutive
    model = lightgbm.LGBMRanker(
        n_estimators=40, num_leaves=8, learning_rate=0.1, verbose=-1, n_jobs=1, random_state=0
    ).fit(X_tr, y_tr, group=sizes)
    full = thrifty.evaluate(model, X_va, costs).cost.mean
    ranker = thrifty.CronusRanker(
        model, costs=costs, budget=0.3 * full, n_stages=3, max_cycles=1, n_lams=4, progress=False
    ).fit(X_tr, y_tr, qid=q_tr, calibration=(X_va, y_va, q_va))
    assert ranker.cost_report(X_va).mean <= 0.3 * full
    full_test = thrifty.evaluate(model, X_te, costs)
    assert ranker.cost_report(X_te).mean < 0.5 * full_test.cost.mean
    p5 = ranker.score(X_te, y_te, q_te)
    assert p5 == pytest.approx(precision_by_query(y_te >= 3, ranker.predict(X_te), q_te), abs=1e-12)
    assert p5 >= precision_by_query(y_te >= 3, full_test.raw, q_te) - 0.03
