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
