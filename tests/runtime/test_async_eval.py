"""evaluate_async: same predictions and costs as dense, concurrent rounds, per-example latency."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from tests._helpers.reference import random_forest, random_inputs
from tests._helpers.runtime_costs import cost_model
from thrifty import CostModel, Forest, Full, evaluate, evaluate_async
from thrifty.exceptions import InputError
from thrifty.runtime import array_provider


def run(coro, timeout: float = 60.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


def same(a, b) -> None:
    np.testing.assert_array_equal(a.raw, b.raw)
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.exit, b.exit)
    np.testing.assert_array_equal(a.cost.total, b.cost.total)
    np.testing.assert_array_equal(a.cost.acquired, b.cost.acquired)


def test_sync_async_and_round_providers_agree_with_dense(small_model):
    plan, X, costs = small_model
    dense = evaluate(plan, X, costs)
    sync = array_provider(X)

    async def async_call(features, rows):
        await asyncio.sleep(0)
        return X[np.ix_(rows, features)]

    class Rounds:
        def __init__(self):
            self.rounds = []

        async def fetch(self, requests):
            self.rounds.append(requests)
            return [X[rows, f] for f, rows in requests]

    class SyncRounds:
        def fetch(self, requests):
            return [X[rows, f] for f, rows in requests]

    rounds = Rounds()
    for provider in (sync, async_call, rounds, SyncRounds()):
        ev = run(evaluate_async(plan, provider, costs, n_rows=len(X), chunk_size=128))
        same(ev, dense)
        # Fetches of one example are one after another under "sum": latency is the feature cost.
        summed = run(evaluate_async(plan, provider, costs, n_rows=len(X), latency="sum"))
        np.testing.assert_allclose(summed.cost.latency, dense.cost.feature, rtol=0, atol=1e-9)
    rounds = Rounds()
    run(evaluate_async(plan, rounds, costs, n_rows=len(X)))
    asked = [(int(r), f) for req in rounds.rounds for f, rows in req for r in rows]
    assert len(asked) == len(set(asked)), "a (row, feature) was fetched twice"


def test_tree_parallel_rounds_same_results_fewer_rounds(small_model):
    plan, X, costs = small_model
    full = Full(plan.forest)
    dense = evaluate(full, X, costs)
    counts = {}
    for trees in ("in-order", "parallel"):
        log = []

        async def fetch_log(features, rows, log=log):
            log.append((int(features[0]), rows.copy()))
            return X[np.ix_(rows, features)]

        ev = run(evaluate_async(full, fetch_log, costs, n_rows=len(X), trees=trees))
        same(ev, dense)
        asked = [(int(r), f) for f, rows in log for r in rows]
        assert len(asked) == len(set(asked))
        assert set(asked) == {(int(r), int(f)) for r, f in zip(*np.nonzero(dense.cost.acquired))}
        counts[trees] = ev.cost.latency
    # Each round of an example costs its slowest fetch; overlapping trees can only shorten it.
    assert np.all(counts["parallel"] <= counts["in-order"] + 1e-9)
    assert np.any(counts["parallel"] < counts["in-order"])
    with pytest.raises(ValueError, match="Full plan"):
        run(evaluate_async(plan, array_provider(X), costs, n_rows=len(X), trees="parallel"))


def test_latency_of_a_round_is_its_slowest_fetch_by_hand():
    """Stumps on x0 and x1: tree-parallel fetches both in one round, costing max(3, 5), not 3 + 5."""
    stumps = Forest(
        feature=[0, -1, -1, 1, -1, -1],
        threshold=[0.0] * 6,
        children_left=[1, -1, -1, 4, -1, -1],
        children_right=[2, -1, -1, 5, -1, -1],
        missing_left=[True] * 6,
        missing_type=[0] * 6,
        cat_start=[-1] * 6,
        cat_size=[0] * 6,
        cat_bitsets=np.zeros(0, np.uint32),
        value=[0, -1.0, 1.0, 0, -2.0, 2.0],
        roots=[0, 3],
        tree_weight=[1.0, 1.0],
        tree_class=[0, 0],
        base_score=[0.0],
        n_features=2,
        link="sigmoid",
        task="binary",
    )
    X = np.random.default_rng(0).normal(size=(50, 2))
    costs = CostModel([3.0, 5.0])
    parallel = run(evaluate_async(Full(stumps), array_provider(X), costs, n_rows=50, trees="parallel"))
    in_order = run(evaluate_async(Full(stumps), array_provider(X), costs, n_rows=50))
    np.testing.assert_allclose(parallel.cost.latency, 5.0)
    np.testing.assert_allclose(in_order.cost.latency, 8.0)
    np.testing.assert_allclose(parallel.cost.total, 8.0)
    same(parallel, evaluate(Full(stumps), X, costs))
    # Values at hand (sent with a request) take no fetch: x1 given on the first 20 rows leaves
    # them only x0's wait, while both are still paid for as acquired features.
    given = np.zeros((50, 2), dtype=bool)
    given[:20, 1] = True
    served = run(evaluate_async(Full(stumps), array_provider(X), costs, n_rows=50, given=given))
    np.testing.assert_allclose(served.cost.latency, np.where(np.arange(50) < 20, 3.0, 8.0))
    np.testing.assert_allclose(served.cost.total, 8.0)
    same(served, evaluate(Full(stumps), X, costs))
    with pytest.raises(InputError, match="given must be a bool array of shape \\(50, 2\\)"):
        run(evaluate_async(Full(stumps), array_provider(X), costs, n_rows=50, given=given[:, :1]))


@pytest.mark.parametrize("seed", range(4))
def test_tree_parallel_with_groups_and_dependencies(seed):
    """Random trees (categorical, missing values), a priced panel and a derived feature."""
    rng = np.random.default_rng(seed)
    forest = random_forest(rng, n_trees=10)
    X = random_inputs(rng, 120, 6)
    costs = cost_model(tree_cost=0.5)
    dense = evaluate(Full(forest), X, costs)
    for latency in ("max", "sum"):
        ev = run(
            evaluate_async(
                Full(forest),
                array_provider(X),
                costs,
                n_rows=120,
                trees="parallel",
                latency=latency,
                chunk_size=50,
            )
        )
        same(ev, dense)
        if latency == "sum":
            np.testing.assert_allclose(ev.cost.latency, dense.cost.feature, atol=1e-9)
        else:
            assert np.all(ev.cost.latency <= dense.cost.feature + 1e-9)


def test_bad_arguments(small_model):
    plan, X, costs = small_model
    with pytest.raises(ValueError, match="latency"):
        run(evaluate_async(plan, array_provider(X), n_rows=1, latency="mean"))

    async def async_call(features, rows):
        return X[np.ix_(rows, features)]

    with pytest.raises(TypeError, match="evaluate_async"):
        evaluate(plan, async_call, costs, n_rows=len(X))


@pytest.mark.parametrize(
    "answer",
    [
        lambda f, r: np.zeros(3),  # too few values
        lambda f, r: np.zeros((1, len(r))),  # transposed: one row of values
        lambda f, r: np.array([["a"]] * len(r)),  # not numbers
    ],
)
def test_plain_providers_are_checked_alike_sync_and_async(small_model, answer):
    # One check of a plain provider's answer serves both drivers: the same error either way.
    plan, X, costs = small_model

    async def async_answer(f, r):
        return answer(f, r)

    with pytest.raises(ValueError) as sync_error:
        evaluate(plan, answer, costs, n_rows=len(X))
    with pytest.raises(ValueError) as async_error:
        run(evaluate_async(plan, async_answer, costs, n_rows=len(X)))
    assert str(sync_error.value) == str(async_error.value)
