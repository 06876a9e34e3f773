"""Vector blocks (QuickScorer on eight rows at a time) and the scalar blocks they replace agree
with the interpreter; plans the vector blocks do not take compile to scalar blocks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import PLANS, check, input_matrices
from tests._helpers.reference import random_forest, random_inputs
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import Forest, Full, Sequential, evaluate
from thrifty.runtime.compiled.layout import Layout, inorder_leaves
from thrifty.runtime.compiled.tables import leaf_tables
from thrifty.runtime.compiled.vblocks import (
    VCHUNK,
    VCHUNK_FULL,
    VECTOR_LEAVES,
    VSPLITS,
    vblocks,
    vblocks_of,
    vector_ok,
)


def layout(forest, order, exits) -> Layout:
    return Layout(forest, np.asarray(order), np.asarray(exits, dtype=np.int8), *leaf_tables(forest)[1:])


def test_which_plans_take_vector_blocks():
    for name, plan in PLANS.items():
        for part in (plan.gate, plan.low, plan.high) if hasattr(plan, "gate") else (plan,):
            if not hasattr(part, "schedule"):
                continue
            s = part.schedule
            kinds = np.where(s.bins.width > 0, 2, np.isfinite(s.eps_pos) | np.isfinite(s.eps_neg))
            # Bin exits (Fan et al.) stay on scalar blocks; everything else here is vector.
            assert vector_ok(layout(part.forest, s.order, kinds)) is (name != "sequential-bins"), name


def test_blocks_grow_from_one_position_when_the_plan_has_exits():
    assert vblocks_of(np.zeros(150, dtype=np.int8)) == [
        (0, VCHUNK),
        (VCHUNK, VCHUNK),
        (2 * VCHUNK, 150 - 2 * VCHUNK),
    ]
    got = vblocks_of(np.ones(200, dtype=np.int8))
    assert [k for _, k in got] == [1, 2, 4, 8, 16, 32, 64, 64, 9]
    assert [p for p, _ in got] == list(np.cumsum([0] + [k for _, k in got[:-1]]))


def test_blocks_without_exits_hold_a_budget_of_splits():
    exits = np.zeros(700, dtype=np.int8)
    # Shallow trees: VCHUNK_FULL positions a block.
    assert [k for _, k in vblocks_of(exits, np.full(700, 30))] == [
        VCHUNK_FULL,
        VCHUNK_FULL,
        700 - 2 * VCHUNK_FULL,
    ]
    # 255-leaf trees: as many as VSPLITS splits hold (64).
    deep = VSPLITS // 254
    got = vblocks_of(np.zeros(3 * deep - 10, dtype=np.int8), np.full(3 * deep - 10, 254))
    assert [k for _, k in got] == [deep, deep, deep - 10]
    # A tree past the budget sits alone; the blocks cover every position once, in order.
    splits = np.array([5, VSPLITS + 3, 5, 5])
    assert vblocks_of(exits[:4], splits) == [(0, 1), (1, 1), (2, 2)]
    assert vblocks_of(exits[:0], splits[:0]) == []
    # With exits, the splits change nothing.
    assert vblocks_of(np.ones(9, dtype=np.int8), np.full(9, 30)) == vblocks_of(np.ones(9, dtype=np.int8))


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(X=input_matrices(N_FEATURES))
def test_a_plan_of_several_long_blocks(X, monkeypatch):
    """A Full plan of a forest over 64 features past ``VCHUNK_FULL`` trees runs as several
    long vector blocks, each taking the rows' state where the one before left it: the
    interpreter's results."""
    F = 70
    forest = random_forest(np.random.default_rng(8), F, n_trees=VCHUNK_FULL + 40, max_depth=3)
    lay = layout(forest, np.arange(forest.n_trees), np.zeros(forest.n_trees))
    assert [k for _, k in vblocks(lay)] == [VCHUNK_FULL, 40]
    monkeypatch.setattr(objects, "use_vector", lambda lay: True)
    check(Full(forest), np.tile(X, (1, -(-F // N_FEATURES)))[:, :F], None)


def test_leaves_left_to_right():
    rng = np.random.default_rng(3)
    forest = random_forest(rng, N_FEATURES, n_trees=5)
    ptr, nodes = inorder_leaves(forest)
    assert ptr[-1] == np.sum(forest.feature < 0) and np.all(forest.feature[nodes] < 0)

    def walk(node):
        if forest.feature[node] < 0:
            return [node]
        return walk(forest.children_left[node]) + walk(forest.children_right[node])

    for t, root in enumerate(forest.roots):
        assert list(nodes[ptr[t] : ptr[t + 1]]) == walk(root)


@pytest.mark.parametrize(
    "name", ["full", "sequential", "full-multiclass", "full-float32", "sequential-multiclass"]
)
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(X=input_matrices(N_FEATURES))
@pytest.mark.parametrize("vector", [False, True])
def test_scalar_and_vector_blocks_match(name, vector, X, monkeypatch):
    """Either kind of blocks, whatever this CPU would choose, gives the interpreter's results
    (scalar blocks serve deep trees and CPUs without AVX-512; vector blocks run on any CPU)."""
    monkeypatch.setattr(objects, "use_vector", lambda lay: vector)
    check(PLANS[name], X, cost_model(tree_cost=0.25, split_cost=0.125))


@pytest.mark.parametrize("vector", [True, False], ids=["vector", "scalar"])
def test_trees_of_more_than_64_leaves(vector, monkeypatch):
    """Leaf masks of several words (trees of about 390 leaves, past ``VECTOR_LEAVES``: forced
    onto vector blocks here) and scalar blocks both give the interpreter's results."""
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(5)
    X = rng.normal(size=(600, 6)).round(2)
    y = X[:, 0] + rng.normal(size=len(X))
    model = RandomForestRegressor(n_estimators=4, random_state=0).fit(X, y)
    forest = Forest.from_model(model)
    assert np.diff(inorder_leaves(forest)[0]).min() > VECTOR_LEAVES
    plan = Sequential(forest, np.arange(4), np.full(4, 1.0), np.full(4, -1.0))
    # Past VECTOR_LEAVES this CPU would choose scalar blocks.
    assert not vector_ok(layout(forest, np.arange(4), np.ones(4)))
    monkeypatch.setattr(objects, "use_vector", lambda lay: vector)
    for p in (Full(forest), plan):
        E = X.copy()
        E[rng.random(E.shape) < 0.1] = np.nan
        E[rng.random(E.shape) < 0.05] = np.inf
        check(p, E, thrifty.CostModel(np.arange(1.0, 7.0), groups={"g": [1, 4]}, tree_cost=0.5))
    np.testing.assert_allclose(
        evaluate(forest, np.nan_to_num(X)).raw, model.predict(np.nan_to_num(X)), rtol=1e-12
    )


# Trees of 64 to 219 leaves (leaf masks of one to four words).
DEEP = random_forest(np.random.default_rng(33), N_FEATURES, n_trees=6, max_depth=9)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(X=input_matrices(N_FEATURES))
@pytest.mark.parametrize("vector", [True, False], ids=["vector", "scalar"])
def test_deep_trees_on_vector_blocks(vector, X, monkeypatch):
    """Trees of more than 64 leaves take vector blocks (up to ``VECTOR_LEAVES``), with the
    interpreter's results on either kind of block, dense, served, one row and lazily."""
    leaves = np.diff(inorder_leaves(DEEP)[0])
    assert leaves.min() == 64 and 192 < leaves.max() <= VECTOR_LEAVES
    assert vector_ok(layout(DEEP, np.arange(6), np.ones(6)))
    monkeypatch.setattr(objects, "use_vector", lambda lay: vector)
    costs = cost_model(tree_cost=0.25, split_cost=0.125)
    check(Full(DEEP), X, costs)
    check(Sequential(DEEP, np.arange(6)[::-1], np.full(6, 1.0), np.full(6, -1.0)), X, costs)


def test_modules_compile_in_helper_processes(monkeypatch):
    """A forest of several modules is shared with a helper process; its objects are the ones
    this process makes, and a helper that cannot start leaves its share to this process."""
    rng = np.random.default_rng(8)
    forest = random_forest(rng, N_FEATURES, n_trees=9)
    X = random_inputs(rng, 200, N_FEATURES)
    monkeypatch.setattr(objects, "_TREES_PER_MODULE", 2)
    monkeypatch.setattr(objects, "_cores", lambda: 2)
    # Exits at every position: blocks of 1, 2, 4 and 2 trees, one module each (and ``run``).
    lay = layout(forest, np.arange(9), np.ones(9))
    shared = objects._compile(lay, "k", False)
    monkeypatch.setattr(objects, "_cores", lambda: 1)
    assert objects._compile(lay, "k", False) == shared and len(shared) > 3
    monkeypatch.setattr(objects, "_cores", lambda: 2)
    monkeypatch.setattr(objects.sys, "executable", "/nonexistent/python")
    assert objects._compile(lay, "k", False) == shared
    check(Sequential(forest, np.arange(9), np.full(9, 1.0), np.full(9, -1.0)), X, cost_model(tree_cost=0.5))


def test_the_helper_refuses_what_is_not_packed_modules():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "thrifty.runtime.compiled.llc"], input=b"not packed", capture_output=True
    )
    assert done.returncode == 2 and b"packed" in done.stderr


def test_a_plan_of_no_trees_compiles():
    """One module only (``run``): no helper process, no block."""
    rng = np.random.default_rng(9)
    forest = random_forest(rng, N_FEATURES, n_trees=3)
    empty = Sequential(forest, np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0))
    check(empty, random_inputs(rng, 20, N_FEATURES), cost_model(tree_cost=0.5))


@pytest.mark.parametrize("vector", [True, False], ids=["vector", "scalar"])
def test_a_nan_threshold_sends_every_value_right(vector, monkeypatch):
    """``x <= NaN`` fails for every value: with zero as missing (LightGBM's "Zero"), values
    that are not missing go right on vector blocks as in the interpreter (they once went left)."""
    import dataclasses

    rng = np.random.default_rng(21)
    forest = random_forest(rng, N_FEATURES, n_trees=6, categorical=False)
    splits = forest.feature >= 0
    forest = dataclasses.replace(
        forest,
        threshold=np.where(splits & (rng.random(forest.n_nodes) < 0.5), np.nan, forest.threshold),
        missing_type=np.where(splits, 2, forest.missing_type).astype(np.int8),
    )
    monkeypatch.setattr(objects, "use_vector", lambda lay: vector)
    check(Full(forest), random_inputs(rng, 64, N_FEATURES), cost_model(tree_cost=0.25))
