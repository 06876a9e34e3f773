"""Multiclass QWYC (beyond the paper): rounds ordered greedily with margin exits."""

from __future__ import annotations

import numpy as np
import pytest

from thrifty import evaluate
from thrifty.forest import Forest
from thrifty.order._qwyc_multiclass import _threshold, qwyc_multiclass, rounds_of

lgb = pytest.importorskip("lightgbm")


@pytest.fixture(scope="module")
def forest_and_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 6))
    y = np.digitize(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=900), [-0.7, 0.0, 0.7])
    model = lgb.LGBMClassifier(n_estimators=30, num_leaves=6, learning_rate=0.2, verbose=-1).fit(X, y)
    return Forest.from_model(model), X


@pytest.mark.parametrize("alpha", [0.0, 0.01, 0.05])
@pytest.mark.parametrize("optimize", [True, False])
def test_disagreement_within_alpha_and_cost_as_reported(forest_and_data, alpha, optimize):
    forest, X = forest_and_data
    plan, order, eps, mean_cost, n_disagree = qwyc_multiclass(
        forest, X, alpha=alpha, cost_per_tree=np.ones(forest.n_trees), optimize=optimize
    )
    ev = evaluate(plan, X)
    full = forest.predict(X)
    disagree = int((ev.labels != full).sum())
    assert disagree == n_disagree <= np.floor(alpha * len(X))
    assert ev.cost.n_trees.mean() == pytest.approx(mean_cost)
    assert sorted(order.tolist()) == list(range(forest.n_trees // forest.n_outputs))
    if alpha > 0 and optimize:
        assert mean_cost < forest.n_trees  # some examples exit early


def test_greedy_is_no_worse_than_the_given_order(forest_and_data):
    forest, X = forest_and_data
    costs = np.ones(forest.n_trees)
    greedy = qwyc_multiclass(forest, X, alpha=0.02, cost_per_tree=costs, optimize=True)[3]
    given = qwyc_multiclass(forest, X, alpha=0.02, cost_per_tree=costs, optimize=False)[3]
    assert greedy <= given * 1.05


def test_threshold_search_equals_brute_force():
    rng = np.random.default_rng(4)
    for _ in range(200):
        m = int(rng.integers(1, 12))
        margins = rng.choice([0.0, 0.5, 1.0, 1.5, 2.0, 3.0], size=m)
        wrong = rng.integers(0, 2, size=m).astype(float)
        budget = int(rng.integers(0, 3))
        k, e, w, eps = _threshold(margins, wrong, np.ones(m), budget)
        best = 0
        for cut in sorted(set(margins.tolist()) | {0.0, np.inf}):  # exits: margin > cut >= 0
            ex = margins > cut
            if wrong[ex].sum() <= budget:
                best = max(best, int(ex.sum()))
        assert k == best == e
        assert int((margins > eps).sum()) == k and int(wrong[margins > eps].sum()) == w


def test_rounds_layout():
    assert [r.tolist() for r in rounds_of(np.array([0, 1, 2, 0, 1, 2]), 3)] == [[0, 1, 2], [3, 4, 5]]
    assert len(rounds_of(np.array([0, 0, 1]), 2)) == 3


def test_integer_weights_are_repeated_rows(forest_and_data):
    from thrifty.order import qwyc

    forest, X = forest_and_data
    X, w = X[:300], np.random.default_rng(1).integers(0, 3, size=300)
    _, weighted = qwyc(forest, X, alpha=0.03, sample_weight=w, return_result=True)
    _, repeated = qwyc(forest, np.repeat(X, w, axis=0), alpha=0.03, return_result=True)
    for name in ("order", "eps_pos", "n_exit"):
        np.testing.assert_array_equal(getattr(weighted, name), getattr(repeated, name))
    assert (weighted.mean_cost, weighted.n_disagree) == (repeated.mean_cost, repeated.n_disagree)
