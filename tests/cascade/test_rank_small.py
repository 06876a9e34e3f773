"""Cronus and the ranking early exit on the shared rank_small data (skipped without THRIFTY_DATA)."""

import numpy as np
import pytest

import thrifty
from thrifty import CostModel, Forest, datasets
from thrifty.cascade import cascade_scores, cronus, lambda_max, ranking_early_exit
from thrifty.metrics import precision_at_k

lightgbm = pytest.importorskip("lightgbm")


def _precision_at_5(relevant, scores, qid):
    """Mean over queries of the relevant share of the query's 5 best-scored documents (ties in
    input order), the queries' documents picked out one query at a time."""
    shares = []
    for q in np.unique(qid):
        rows = np.flatnonzero(qid == q)
        best = rows[np.argsort(-scores[rows], kind="stable")[:5]]
        shares.append(relevant[best].sum() / 5)
    return float(np.mean(shares))


def test_rank_small_cascade_is_cheaper(data_home):
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
    assert p5 == pytest.approx(_precision_at_5(y_te >= 3, scores, q_te), abs=1e-12)
    early = ranking_early_exit(forest, X_te, q_te, 0.2, costs, every=10)
    assert early.cost.mean <= full.cost.mean
    assert np.all(early.cost.n_trees == early.n_trees)
