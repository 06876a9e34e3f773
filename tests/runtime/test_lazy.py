"""``lazy_rounds``: the resumable generator behind lazy evaluation, driven by hand."""

from __future__ import annotations

import numpy as np
import pytest

from tests._helpers.reference import random_forest, random_inputs
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import Sequential, evaluate
from thrifty.runtime import lazy_rounds


def drive(rounds, X):
    """Answer every round from ``X``; returns the evaluation and the rounds seen."""
    seen = []
    try:
        request = next(rounds)
        while True:
            seen.append(request)
            request = rounds.send([X[rows, f] for f, rows in request])
    except StopIteration as stop:
        return stop.value, seen


def test_rounds_match_dense_and_never_repeat_a_fetch():
    rng = np.random.default_rng(3)
    forest = random_forest(rng, N_FEATURES, n_trees=8)
    X = random_inputs(rng, 90, N_FEATURES)
    plan = Sequential(forest, rng.permutation(8), np.full(8, 0.4), np.full(8, -0.4))
    dense = evaluate(plan, X, cost_model(tree_cost=0.5))
    ev, seen = drive(lazy_rounds(plan, cost_model(tree_cost=0.5), n_rows=len(X), chunk_size=40), X)
    np.testing.assert_array_equal(ev.raw, dense.raw)
    np.testing.assert_array_equal(ev.exit, dense.exit)
    np.testing.assert_array_equal(ev.cost.total, dense.cost.total)
    fetched = [(int(r), f) for request in seen for f, rows in request for r in rows]
    assert len(fetched) == len(set(fetched))
    for request in seen:
        features = [f for f, _ in request]
        assert len(features) == len(set(features)), "a round names a feature twice"
        for _, rows in request:
            assert rows.dtype == np.int64 and rows.min() >= 0 and rows.max() < len(X)


def test_bad_answers_are_rejected():
    rng = np.random.default_rng(4)
    forest = random_forest(rng, N_FEATURES, n_trees=3)
    rounds = lazy_rounds(forest, n_rows=5)
    request = next(rounds)
    with pytest.raises(ValueError, match="one array of values per requested"):
        rounds.send([])
    rounds = lazy_rounds(forest, n_rows=5)
    request = next(rounds)
    with pytest.raises(ValueError, match="one value per requested row"):
        rounds.send([np.zeros(len(rows) + 1) for _, rows in request])
    with pytest.raises(ValueError, match="n_rows must be >= 0"):
        lazy_rounds(forest, n_rows=-1)


def test_no_rows_returns_at_once():
    forest = random_forest(np.random.default_rng(5), N_FEATURES, n_trees=3)
    with pytest.raises(StopIteration) as stop:
        next(lazy_rounds(forest, n_rows=0))
    assert stop.value.value.raw.shape == (0,)
