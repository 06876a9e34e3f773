"""Compiled Cascade and Linear plans: bit for bit the interpreter's (and the pure-Python
reference's) scores, exits and costs, on NaN, infinities, categories, 0- and 1-row batches and
forests of more than 64 features."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thrifty
from tests._helpers.compiled_plans import assert_same, check, input_matrices
from tests._helpers.reference import random_forest, random_inputs, reference_cascade
from tests._helpers.runtime_costs import N_FEATURES, REF, cost_model
from thrifty import Cascade, CostModel, Full, Gated, Linear, Sequential, evaluate
from thrifty.forest.kernels import SERIAL_ROWS
from thrifty.runtime.compiled.ir_cascade import Stages

_RNG = np.random.default_rng(29)
_FOREST = random_forest(_RNG, N_FEATURES, n_trees=9)
_FOREST32 = random_forest(_RNG, N_FEATURES, n_trees=7, float32=True)


def _weights(rng: np.random.Generator, n_stages: int, n_trees: int, keep: float) -> np.ndarray:
    W = rng.normal(size=(n_stages, n_trees)).round(2)
    W[rng.random(W.shape) > keep] = 0.0
    return W


def _cascades() -> dict[str, Cascade]:
    rng = np.random.default_rng(3)
    W = _weights(rng, 3, 9, 0.6)
    # Stage 1 reads nothing (it costs nothing), stage 2 only trees stage 0 evaluated.
    reuse = np.zeros((3, 9))
    reuse[0, [1, 4, 7]] = [0.5, -1.0, 2.0]
    reuse[2, [4, 7]] = [1.5, -0.25]
    return {
        # Cronus's shape: stage k reads the first trees, later stages more of them.
        "prefixes": Cascade(
            _FOREST, np.tril(np.ones((3, 9)))[:, [0, 0, 0, 1, 1, 1, 2, 2, 2]], [-0.5, 0.2, 0.0]
        ),
        "random": Cascade(_FOREST, W, [-0.3, 0.1, 0.0], [0.1, -0.2, 0.3]),
        "reuse": Cascade(_FOREST, reuse, [-np.inf, 0.5, 0.0]),
        "one-stage": Cascade(_FOREST, W[:1], [0.25]),
        "float32": Cascade(_FOREST32, _weights(rng, 2, 7, 0.8), [0.0, 0.0]),
    }


CASCADES = _cascades()


def _linears() -> dict[str, thrifty.runtime.Plan]:
    coef = np.zeros((N_FEATURES, 3))
    # A zero coefficient of one output beside non-zero ones of others: it still multiplies.
    coef[[0, 2, 5], 0] = [0.5, -1.25, 3.0]
    coef[[2, 3], 1] = [1e-3, -2.0]
    coef[5, 2] = 7.0
    return {
        "regression": Linear(np.arange(N_FEATURES) - 2.5, 0.75),
        "binary": Linear(coef[:, 0], -0.5, link="sigmoid", task="binary"),
        "multiclass": Linear(coef, [0.1, 0.0, -0.1], link="softmax", task="multiclass", classes=[3, 5, 9]),
        "empty": Linear(np.zeros(N_FEATURES), 1.5),
        # ADAPT-LIN: a linear gate and low-cost model in front of a forest, every part native.
        "gated": Gated(
            Linear(coef[:, 1]), Linear(coef[:, 0], 0.5, link="sigmoid", task="binary"), Full(_FOREST)
        ),
        "gated-cascade": Gated(
            Linear(coef[:, 0]), CASCADES["random"], Sequential(_FOREST, np.arange(9)[::-1])
        ),
    }


LINEARS = _linears()
_SETTINGS = settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("name", sorted(CASCADES))
@_SETTINGS
@given(X=input_matrices(N_FEATURES))
def test_cascade_matches_the_interpreter_and_the_reference(name, X):
    plan = CASCADES[name]
    compiled = check(plan, X, cost_model(tree_cost=0.25, split_cost=0.125))
    ev = compiled.evaluate(X)
    Xr = X.astype(np.float32).astype(np.float64) if plan.forest.input_dtype == "float32" else X
    ref = reference_cascade(plan.forest, Xr, plan.stage_weights, plan.stage_thresholds, plan.stage_bias)
    for i, (s, stage, decision, touched, nodes, n_trees) in enumerate(ref):
        assert ev.raw[i] == s and ev.exit[i] == stage
        assert ev.labels[i] == (decision > 0)
        assert ev.cost.n_nodes[i] == nodes and ev.cost.n_trees[i] == n_trees
        assert ev.cost.feature[i] == pytest.approx(REF.price(set(touched)))


@pytest.mark.parametrize("name", sorted(LINEARS))
@_SETTINGS
@given(X=input_matrices(N_FEATURES))
def test_linear_matches_the_interpreter(name, X):
    check(LINEARS[name], X, cost_model(split_cost=0.5))


@_SETTINGS
@given(coef=st.lists(st.sampled_from([0.0, -0.0, 1.0, -2.5, 1e-300, 1e300, 0.1]), min_size=6, max_size=6))
def test_linear_products_are_rounded_as_the_interpreter_rounds_them(coef):
    """Products and sums in the interpreter's order, each rounded: no fused multiply-add, no
    reassociation (1e300 * 1e300 overflows to inf in both)."""
    X = random_inputs(np.random.default_rng(1), 60, N_FEATURES)
    X[:10] *= 1e300
    check(Linear(np.asarray(coef), 1e-17), X, cost_model())


def test_zero_and_one_row_and_the_parallel_path():
    X = random_inputs(np.random.default_rng(5), 2 * SERIAL_ROWS + 3, N_FEATURES)
    costs = cost_model(tree_cost=1.0)
    for plan in (CASCADES["random"], CASCADES["float32"], LINEARS["multiclass"], LINEARS["gated-cascade"]):
        compiled = thrifty.compile(plan, costs)
        for Z in (X[:0], X[:1], X):
            assert_same(compiled.evaluate(Z), evaluate(plan, Z, costs))


def _wide() -> tuple[Cascade, Gated, CostModel]:
    rng = np.random.default_rng(9)
    F = 130
    forest = random_forest(rng, F, n_trees=12, max_depth=4)
    coef = np.zeros(F)
    coef[[0, 63, 64, 129]] = [1.0, -0.5, 2.0, 0.25]
    plan = Cascade(forest, _weights(rng, 3, 12, 0.7), [-0.5, 0.0, 0.0])
    costs = CostModel(rng.uniform(0, 3, F).round(2), groups={"g": [1, 64, 128]}, split_cost=0.5)
    return plan, Gated(Linear(coef), Linear(coef[::-1], link="sigmoid", task="binary"), plan), costs


_WIDE = _wide()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(X=input_matrices(130, max_rows=12))
def test_over_64_features(X):
    cascade, gated, costs = _WIDE
    check(cascade, X, costs)
    check(gated, X, costs)


def test_wide_forests_and_many_trees():
    """Over 64 features the tested features are several words of bits; over 32 new trees a
    stage spans several blocks, over 100 several modules."""
    rng = np.random.default_rng(8)
    F = 150
    forest = random_forest(rng, F, n_trees=140, max_depth=3)
    W = np.zeros((3, 140))
    W[0, :40] = rng.normal(size=40)
    W[1, :100] = rng.normal(size=100)
    W[2, rng.permutation(140)[:90]] = rng.normal(size=90)
    costs = CostModel(rng.uniform(0, 3, F).round(2), groups={"g": [0, 65, 140]}, tree_cost=0.5)
    X = random_inputs(rng, 400, F)
    plan = Cascade(forest, W, [-1.0, -0.5, 0.0])
    compiled = check(plan, X, costs)
    assert len(compiled.plan_code.stages.blocks()) > 4
    coef = np.zeros(F)
    coef[[1, 64, 66, 149]] = [1.0, -2.0, 0.5, 0.25]
    check(Gated(Linear(coef), plan, Full(forest)), X, costs)


def test_stages_know_which_trees_each_evaluates_first():
    W = np.array([[0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 0, 1], [1, 0, 1, 1.0]])
    plan = Cascade(random_forest(np.random.default_rng(2), N_FEATURES, n_trees=4), W, [0.0] * 4)
    st_ = Stages.of(plan.stage_ptr, plan.stage_trees, 4)
    assert st_.first.tolist() == [1, 3, 0, 2]
    assert st_.new_ptr.tolist() == [0, 2, 3, 3, 4]
    assert st_.slot.tolist() == [2, 0, 3, 1]


def test_cache_and_pickle():
    plan, costs = CASCADES["reuse"], cost_model()
    thrifty.compile(plan, costs)
    again = thrifty.compile(plan, costs)
    assert again.compile_seconds == 0.0 and again.plan_code.code.from_cache
    # Only the weights, biases and thresholds differ: the code is shared.
    other = Cascade(plan.forest, 3 * plan.stage_weights, [0.0, 0.25, -1.0], [1.0, 2.0, 3.0])
    assert thrifty.compile(other).plan_code.code.from_cache
    # Another tree in a stage is other code.
    W = plan.stage_weights.copy()
    W[1, 0] = 1.0
    assert not thrifty.compile(Cascade(plan.forest, W, plan.stage_thresholds)).plan_code.code.from_cache
    X = random_inputs(np.random.default_rng(6), 30, N_FEATURES)
    assert_same(thrifty.compile(other).evaluate(X), evaluate(other, X))
    clone = pickle.loads(pickle.dumps(again))
    assert clone.native
    assert_same(clone.evaluate(X), evaluate(plan, X, costs))
    linear = thrifty.compile(LINEARS["binary"])
    assert pickle.loads(pickle.dumps(linear)).native
