"""Prefetch sets from calibration rows, rounds counted per row, and the rounds frontier."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from tests._helpers.reference import random_forest, random_inputs, reference_sequential
from tests._helpers.runtime_costs import N_FEATURES, REF, cost_model
from thrifty import Full, Sequential, evaluate
from thrifty.exceptions import InputError
from thrifty.runtime import plot_rounds_frontier, prefetch_plan, rounds_frontier
from thrifty.runtime.lazy.frontier import count_rounds


@pytest.fixture(scope="module")
def case():
    rng = np.random.default_rng(31)
    forest = random_forest(rng, N_FEATURES, n_trees=8)
    X = random_inputs(rng, 200, N_FEATURES)
    return Sequential(forest, rng.permutation(8), np.full(8, 1.0), np.full(8, -1.0)), X


def test_prefetch_p_takes_the_features_most_rows_test(case):
    plan, X = case
    costs = cost_model()
    dense = evaluate(plan, X, costs)
    # Brute force: each row's tested features from the reference walk of the plan.
    s = plan.schedule
    ref = reference_sequential(plan.forest, X, s.order, s.eps_pos, s.eps_neg)
    share = np.array([np.mean([f in r[3] for r in ref]) for f in range(N_FEATURES)])
    pre = prefetch_plan(plan, X, costs, p=0.5, progress=False)
    assert pre.frequency is not None
    np.testing.assert_allclose(pre.frequency, share)
    # The frequent features, then every feature they make free (brute force on the prices:
    # the panel's other member once one is paid; derived x4 once x0 and x3 are).
    frequent = set(np.flatnonzero(share >= 0.5).tolist())
    free = {g for g in range(N_FEATURES) if REF.price(frequent | {g}) == REF.price(frequent)}
    assert set(pre.features.tolist()) == frequent | free
    assert pre.features[: len(frequent)].tolist() == sorted(frequent, key=lambda f: -share[f])
    panel = prefetch_plan(plan, X, costs, p=min(share[1], 1.0), progress=False)
    assert 1 in panel.features and 2 in panel.features
    assert np.all(pre.frequency <= dense.cost.acquired.mean(axis=0) + 1e-12)
    assert prefetch_plan(plan, X, costs, p=1.0, progress=False).features.size <= pre.features.size


def test_max_rounds_is_met_and_charged(case):
    plan, X = case
    costs = cost_model()
    _, base = count_rounds(plan, X, costs, rounds="parallel")
    target = max(1.0, base.mean() - 1.0)
    pre = prefetch_plan(plan, X, costs, max_rounds=target, progress=False)
    ev, count = count_rounds(plan, X, costs, rounds=pre)
    assert count.mean() <= target
    # The target needed a prefetch, and an empty one is what a target already met gives.
    assert len(pre.features) and base.mean() > target
    met = prefetch_plan(plan, X, costs, max_rounds=base.mean(), progress=False)
    assert len(met.features) == 0
    dense = evaluate(plan, X, costs)
    for i in range(len(X)):
        tested = set(np.flatnonzero(dense.cost.acquired[i]).tolist())
        assert ev.cost.feature[i] == pytest.approx(REF.price(tested | set(pre.features.tolist())))
    with pytest.raises(InputError, match="max_rounds must be >= 1"):
        prefetch_plan(plan, X, costs, max_rounds=0.5)
    with pytest.raises(InputError, match="one of p="):
        prefetch_plan(plan, X, costs)


def test_the_frontier_table_and_plot(case):
    plan, X = case
    table = rounds_frontier(plan, X, cost_model(), ps=(0.9, 0.3))
    assert list(table["policy"]) == ["in_order", "parallel", "prefetch p=0.9", "prefetch p=0.3"]
    base = table.iloc[0]
    par = table.iloc[1]
    # Parallel rounds: the in-order cost exactly, never more rounds.
    assert par["mean_cost"] == base["mean_cost"] and par["extra_cost_frac"] == 0.0
    assert par["mean_rounds"] <= base["mean_rounds"] and par["p99_rounds"] <= base["p99_rounds"]
    assert np.all(table["mean_cost"] >= base["mean_cost"] - 1e-12)
    assert np.all(table["p95_rounds"] <= table["p99_rounds"])
    ax = plot_rounds_frontier(table)
    assert ax.get_xlabel() == "mean feature cost per row"
    assert len(ax.texts) == len(table)
    # A Full plan's frontier has the same columns.
    full = rounds_frontier(Full(plan.forest), X[:20], ps=())
    assert list(full["policy"]) == ["in_order", "parallel"]
