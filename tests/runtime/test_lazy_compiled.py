"""Compiled lazy evaluation and the ``rounds=`` policies.

A compiled plan's lazy rounds run natively: they must ask for the same features in the same
rounds and end in the same evaluation, bit for bit, as the interpreter's lazy rounds and dense
evaluation. The parallel policy must fetch exactly what the in-order one fetches, in no more
rounds; a prefetch must charge what it fetches, exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thrifty
from tests._helpers.compiled_plans import PLANS, assert_same, input_matrices
from tests._helpers.reference import random_forest, random_inputs, reference_sequential
from tests._helpers.runtime_costs import N_FEATURES, REF, cost_model
from thrifty import Full, Sequential, evaluate
from thrifty.exceptions import InputError
from thrifty.runtime import array_provider, lazy_rounds
from thrifty.runtime.lazy.policies import Prefetch

COSTS = cost_model(tree_cost=0.25, split_cost=0.125)
# Plans whose every round can look ahead (``rounds="parallel"``).
FOREST_PLANS = [name for name, plan in PLANS.items() if isinstance(plan, (Full, Sequential))]


pytestmark = pytest.mark.usefixtures("private_compile_cache")


_COMPILED: dict[str, thrifty.CompiledPlan] = {}


def compiled(name: str) -> thrifty.CompiledPlan:
    if name not in _COMPILED:
        _COMPILED[name] = thrifty.compile(PLANS[name], COSTS)
    return _COMPILED[name]


def drive(gen, X, order=None):
    """Answer every round from ``X`` (the pairs fetched in the order ``order`` draws, as a
    provider answering in any order would); returns the evaluation and the rounds seen."""
    seen = []
    try:
        request = next(gen)
        while True:
            seen.append([(f, rows.copy()) for f, rows in request])
            answers: list = [None] * len(request)
            for j in order(len(request)) if order is not None else range(len(request)):
                f, rows = request[j]
                answers[j] = X[rows, f].copy()
            request = gen.send(answers)
    except StopIteration as stop:
        return stop.value, seen


def same_rounds(a, b):
    assert len(a) == len(b), "different numbers of rounds"
    for ra, rb in zip(a, b):
        assert [f for f, _ in ra] == [f for f, _ in rb]
        for (_, x), (_, y) in zip(ra, rb):
            np.testing.assert_array_equal(x, y)


def fetched(seen):
    return sorted((int(r), f) for request in seen for f, rows in request for r in rows)


def rounds_per_row(seen, n):
    count = np.zeros(n, dtype=np.int64)
    for request in seen:
        rows = np.unique(np.concatenate([r for _, r in request]))
        count[rows] += 1
    return count


@pytest.mark.parametrize("name", sorted(PLANS))
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(X=input_matrices(N_FEATURES), seed=st.integers(0, 2**16), chunk=st.sampled_from([None, 1, 7]))
def test_compiled_lazy_is_interpreter_lazy_is_dense(name, X, seed, chunk):
    rng = np.random.default_rng(seed)

    def shuffled(k):
        return rng.permutation(k).tolist()

    plan, code = PLANS[name], compiled(name)
    dense = evaluate(plan, X, COSTS)
    ref, ref_seen = drive(lazy_rounds(plan, COSTS, n_rows=len(X), chunk_size=chunk), X)
    ev, seen = drive(lazy_rounds(code, n_rows=len(X), chunk_size=chunk), X, shuffled)
    assert_same(ref, dense)
    assert_same(ev, dense)
    same_rounds(seen, ref_seen)
    if len(X):
        # The synchronous driver with a plain provider, and one row alone.
        assert_same(evaluate(code, array_provider(X), n_rows=len(X)), dense)
        one, _ = drive(lazy_rounds(code, n_rows=1), X[-1:])
        assert_same(one, evaluate(plan, X[-1:], COSTS))


@pytest.mark.parametrize("name", FOREST_PLANS)
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(X=input_matrices(N_FEATURES))
def test_parallel_rounds_fetch_what_in_order_fetches_in_fewer_rounds(name, X):
    plan = PLANS[name]
    in_order, in_seen = drive(lazy_rounds(plan, COSTS, n_rows=len(X)), X)
    par, par_seen = drive(lazy_rounds(plan, COSTS, n_rows=len(X), rounds="parallel"), X)
    native, native_seen = drive(lazy_rounds(compiled(name), n_rows=len(X), rounds="parallel"), X)
    assert_same(par, in_order)
    assert_same(native, in_order)
    same_rounds(native_seen, par_seen)
    # Exactly the same (row, feature) pairs, none twice: no extra feature cost.
    assert fetched(par_seen) == fetched(in_seen)
    assert len(set(fetched(par_seen))) == len(fetched(par_seen))
    assert np.all(rounds_per_row(par_seen, len(X)) <= rounds_per_row(in_seen, len(X)))


def test_parallel_rounds_of_a_full_plan_wait_for_the_deepest_tree():
    """A Full plan's trees all advance: a row takes as many rounds as the most features any one
    of its paths fetches in turn (brute force over the trees' paths)."""
    rng = np.random.default_rng(21)
    forest = random_forest(rng, N_FEATURES, n_trees=6)
    X = random_inputs(rng, 60, N_FEATURES)
    _, seen = drive(lazy_rounds(Full(forest), COSTS, n_rows=len(X), rounds="parallel"), X)
    ref = reference_sequential(forest, X, np.arange(6), np.full(6, np.inf), np.full(6, -np.inf))
    got = rounds_per_row(seen, len(X))
    for i in range(len(X)):
        known: set[int] = set()
        rounds = 0
        while True:
            # Every tree walks on the known values; the first unknown feature of each is fetched.
            want = set()
            for t in range(6):
                node = int(forest.roots[t])
                while forest.feature[node] >= 0:
                    f = int(forest.feature[node])
                    if f not in known:
                        want.add(f)
                        break
                    node = _child(forest, node, X[i, f])
            if not want:
                break
            known |= want
            rounds += 1
        assert got[i] == rounds
        assert known == set(ref[i][3])


def _child(forest, node, v):
    from tests._helpers.reference import go

    return go(forest, node, v)


def test_parallel_rounds_stop_at_the_next_exit():
    """A Sequential plan with an exit after every position asks, per round, only for what the
    tree it is at needs: exactly the in-order rounds."""
    rng = np.random.default_rng(22)
    forest = random_forest(rng, N_FEATURES, n_trees=8)
    X = random_inputs(rng, 80, N_FEATURES)
    plan = Sequential(forest, rng.permutation(8), np.full(8, 0.5), np.full(8, -0.5))
    _, a = drive(lazy_rounds(plan, COSTS, n_rows=len(X)), X)
    _, b = drive(lazy_rounds(plan, COSTS, n_rows=len(X), rounds="parallel"), X)
    assert [len(r) for r in a] != [] and fetched(a) == fetched(b)
    # An exit at every position: the segment is one tree, which blocks on one feature at a time.
    np.testing.assert_array_equal(rounds_per_row(a, len(X)), rounds_per_row(b, len(X)))


@pytest.mark.parametrize("parallel", [False, True])
@pytest.mark.parametrize("name", ["full", "sequential", "sequential-bins", "gated-forests"])
def test_a_prefetch_charges_exactly_what_it_fetches(name, parallel):
    """Brute force: each row of the first round pays for the union of the features its trees
    test and the prefetched ones (groups and dependencies priced once); outputs are dense's."""
    plan = PLANS[name]
    if parallel and not isinstance(plan, (Full, Sequential)):
        pytest.skip("parallel rounds need a forest plan")
    rng = np.random.default_rng(23)
    X = random_inputs(rng, 50, N_FEATURES)
    costs = cost_model()
    prefetch = Prefetch(np.array([1, 3]), N_FEATURES, parallel)
    dense = evaluate(plan, X, costs)
    for model in (plan, thrifty.compile(plan, costs)):
        ev, seen = drive(lazy_rounds(model, costs, n_rows=len(X), rounds=prefetch), X)
        np.testing.assert_array_equal(ev.raw, dense.raw)
        np.testing.assert_array_equal(ev.exit, dense.exit)
        first = np.unique(np.concatenate([r for _, r in seen[0]]))
        for i in range(len(X)):
            tested = set(np.flatnonzero(dense.cost.acquired[i]).tolist())
            want = tested | ({1, 3} if i in first else set())
            assert ev.cost.feature[i] == pytest.approx(REF.price(want), abs=1e-12)
            fetched_i = {f for request in seen for f, rows in request if i in rows}
            prefetched = {1, 3} if i in first else set()
            assert prefetched <= fetched_i and fetched_i - prefetched <= tested
            assert set(np.flatnonzero(ev.cost.acquired[i])) == REF.acquired(want)


def test_bad_policies_say_what_to_do():
    forest = random_forest(np.random.default_rng(5), N_FEATURES, n_trees=3)
    with pytest.raises(InputError, match="prefetch_plan"):
        next(lazy_rounds(forest, n_rows=2, rounds="speculative"))
    with pytest.raises(InputError, match="rounds must be"):
        next(lazy_rounds(forest, n_rows=2, rounds="fast"))
    with pytest.raises(InputError, match="Full or Sequential"):
        next(lazy_rounds(PLANS["gated"], n_rows=2, rounds="parallel"))
    with pytest.raises(InputError, match="made for 3 features"):
        next(lazy_rounds(forest, n_rows=2, rounds=Prefetch(np.array([0]), 3)))
    with pytest.raises(InputError, match="only for lazy"):
        evaluate(forest, np.zeros((2, N_FEATURES)), rounds="parallel")


def test_wide_forests_and_the_native_executor():
    """Forests of more than 64 features (tested features marked in ``touched`` by the native
    code) run lazily natively too; a compiled plan's lazy executor is the native one."""
    from thrifty.runtime.compiled.lazy_executor import NativeLazyExecutor
    from thrifty.runtime.interpret.executors import Context, executor

    rng = np.random.default_rng(24)
    n_features = 70
    forest = random_forest(rng, n_features, n_trees=10)
    X = random_inputs(rng, 300, n_features)
    costs = thrifty.CostModel(rng.uniform(0, 3, n_features).round(2), groups={"g": [0, 65, 69]})
    for plan in (Full(forest), Sequential(forest, rng.permutation(10), np.full(10, 1.0), np.full(10, -1.0))):
        code = thrifty.compile(plan, costs)
        ctx = Context(
            np.full((2, n_features), np.nan), np.zeros((2, n_features), dtype=np.bool_), False, costs
        )
        assert isinstance(executor(plan, ctx, code), NativeLazyExecutor)
        dense = evaluate(plan, X, costs)
        for policy in ("in_order", "parallel"):
            ref, ref_seen = drive(lazy_rounds(plan, costs, n_rows=len(X), rounds=policy), X)
            ev, seen = drive(lazy_rounds(code, n_rows=len(X), rounds=policy, chunk_size=128), X)
            assert_same(ref, dense)
            assert_same(ev, dense)
            assert fetched(seen) == fetched(ref_seen)


@pytest.mark.parametrize("n", [1, 50])
def test_results_are_collected_when_the_serving_path_declines(monkeypatch, n):
    """A compiled plan's lazy rounds end in its serving path; where that declines the input,
    the executor's deferred results are collected instead, with the same evaluation."""
    plan = PLANS["sequential-bins"]
    code = thrifty.compile(plan, COSTS)
    X = random_inputs(np.random.default_rng(25), n, N_FEATURES)
    served, _ = drive(lazy_rounds(code, n_rows=n), X)
    monkeypatch.setattr(type(code), "serve", lambda self, X, n_threads: None)
    collected, _ = drive(lazy_rounds(code, n_rows=n), X)
    dense = evaluate(plan, X, COSTS)
    assert_same(served, dense)
    assert_same(collected, dense)


def test_dense_evaluation_refuses_a_round_policy():
    code = compiled("full")
    with pytest.raises(InputError, match="only for lazy"):
        evaluate(code, np.zeros((2, N_FEATURES)), rounds="parallel")
    with pytest.raises(InputError, match="only for lazy"):
        evaluate(code, np.zeros((2, N_FEATURES)), rounds=Prefetch(np.array([0]), N_FEATURES))


@pytest.mark.parametrize("rounds", ["in_order", "parallel"])
def test_evaluate_async_runs_the_compiled_plan(rounds):
    """``evaluate_async`` on a compiled plan: the interpreter's evaluation and latency."""
    import asyncio

    from thrifty import evaluate_async

    plan = PLANS["sequential"]
    X = random_inputs(np.random.default_rng(26), 40, N_FEATURES)
    for n in (1, len(X)):
        ref = asyncio.run(evaluate_async(plan, array_provider(X[:n]), COSTS, n_rows=n, rounds=rounds))
        got = asyncio.run(
            evaluate_async(compiled("sequential"), array_provider(X[:n]), n_rows=n, rounds=rounds)
        )
        assert_same(got, ref)
        np.testing.assert_array_equal(got.cost.latency, ref.cost.latency)
