"""Scores first (``compiled.raw_path``, ``compiled.ir_raw``): a compiled plan without exits on
branchy blocks (vector blocks: test_ir_vraw.py) computes its raw scores alone and the other
fields when read; every field equals the interpreter's bit for bit, whichever is read first and
whatever the caller does to its matrix after the call."""

from __future__ import annotations

import dataclasses
import gzip
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
from tests._helpers.compiled_plans import PLANS, assert_same, input_matrices
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from tests._helpers.shaped_forests import shaped_forest
from thrifty import Forest, Full, evaluate
from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.choice import BLOCKS_ENV
from thrifty.runtime.compiled.raw_path import DeferredEvaluation
from thrifty.runtime.evaluation import Evaluation

# Values on the test forests' thresholds and category codes, and the special ones.
EDGES = np.array([-1.0, 0.0, -0.0, 0.5, 1.0, 2.5, 3.0, 31.0, 32.0, 63.9, np.nan, np.inf, -np.inf])
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
COSTS = cost_model(tree_cost=0.25, split_cost=0.125)
CHAIN = Full(shaped_forest(np.random.default_rng(11), "chain", n_features=N_FEATURES, n_trees=7))
CHAIN3 = Full(
    shaped_forest(np.random.default_rng(12), "chain", n_features=N_FEATURES, n_trees=9, n_outputs=3)
)


@pytest.fixture
def branchy(monkeypatch):
    monkeypatch.setenv(BLOCKS_ENV, "branchy")


@pytest.mark.parametrize(
    "name, has",
    [
        ("full", True),  # numeric and categorical splits, every missing type
        ("full-multiclass", True),
        ("full-float32", False),  # inputs rounded to float32 first: the serving path's work
        ("sequential", False),  # exits: the scores depend on where a row stops
        ("sequential-bins", False),
    ],
)
def test_plans_without_exits_on_branchy_blocks_have_a_raw_path(name, has, branchy):
    assert (thrifty.compile(PLANS[name], COSTS).raw_path is not None) is has


def test_plain_scalar_blocks_have_none(monkeypatch):
    """Vector blocks have one too (``ir_vraw``, tests/runtime/test_ir_vraw.py)."""
    monkeypatch.setenv(BLOCKS_ENV, "scalar")
    assert thrifty.compile(PLANS["full"], COSTS).raw_path is None


def test_the_rule_gives_skewed_forests_one(monkeypatch):
    monkeypatch.delenv(BLOCKS_ENV, raising=False)
    assert thrifty.compile(CHAIN, COSTS).raw_path is not None


@pytest.mark.parametrize("name", ["full", "full-multiclass"])
@settings(max_examples=8, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(N_FEATURES, max_rows=150))
def test_scores_first_then_every_field_match_the_interpreter(name, X, branchy):
    """NaN, infinities, values on thresholds, category codes; 0 to 150 rows (past the
    per-thread buffers' ``SMALL``). The scores alone first, then every field, read after the
    caller overwrote its matrix (the call kept a copy)."""
    plan = PLANS[name]
    compiled = thrifty.compile(plan, COSTS)
    reference = evaluate(plan, X, COSTS)
    ev = compiled.evaluate(X)
    assert isinstance(ev, DeferredEvaluation)
    np.testing.assert_array_equal(ev.raw, reference.raw)
    X[...] = np.nan
    assert_same(ev, reference)


@settings(max_examples=6, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(N_FEATURES, max_rows=60))
def test_fields_read_in_any_order_match(X, branchy):
    """Costs before the scores, the multiclass forest's labels and probabilities."""
    compiled = thrifty.compile(CHAIN3, COSTS)
    reference = evaluate(CHAIN3, X, COSTS)
    ev = compiled.evaluate(X)
    np.testing.assert_array_equal(ev.cost.total, reference.cost.total)
    np.testing.assert_array_equal(ev.exit, reference.exit)
    assert_same(ev, reference)


@pytest.mark.parametrize("n", [0, 1, 2, 128, 129, 3000])
def test_batch_sizes_and_threads(n, branchy):
    """Empty and one-row batches, both sides of the buffers' bound, and a batch split over two
    threads."""
    rng = np.random.default_rng(n)
    shape = (n, N_FEATURES)
    X = np.where(rng.random(shape) < 0.3, rng.choice(EDGES, shape), rng.uniform(-5, 70, shape))
    compiled = thrifty.compile(PLANS["full"], COSTS)
    reference = evaluate(PLANS["full"], X, COSTS)
    for threads in (1, 2):
        assert_same(compiled.evaluate(X, n_threads=threads), reference)


def test_other_matrices_give_the_same_results(branchy):
    """A non-contiguous view (copied: scores first), float32 and integer matrices (the serving
    path): the same results."""
    compiled = thrifty.compile(PLANS["full"], COSTS)
    X = np.random.default_rng(1).uniform(-5, 70, (40, 2 * N_FEATURES))
    for Y in (X[:, ::2], X[:, :N_FEATURES].astype(np.float32), X[:, :N_FEATURES].astype(np.int64)):
        assert_same(compiled.evaluate(Y), evaluate(PLANS["full"], Y, COSTS))
    assert not isinstance(compiled.evaluate(X[:, :N_FEATURES].astype(np.float32)), DeferredEvaluation)


def test_an_unpickled_matrix_takes_scores_first(branchy):
    """A float64 array loaded by pickle holds a dtype object equal to numpy's but not it: it
    takes the same path as the array it was (it took the slower serving path)."""
    X = np.random.default_rng(3).uniform(-5, 70, (40, N_FEATURES))
    back = pickle.loads(pickle.dumps(X))
    if back.dtype is X.dtype:
        pytest.skip("this numpy gives unpickled arrays its own float64 dtype object")
    compiled = thrifty.compile(PLANS["full"], COSTS)
    ev = compiled.evaluate(back)
    assert isinstance(ev, DeferredEvaluation)
    assert_same(ev, evaluate(PLANS["full"], X, COSTS))


def test_it_pickles_as_a_plain_evaluation(branchy):
    X = np.random.default_rng(2).uniform(-5, 70, (20, N_FEATURES))
    ev = thrifty.compile(PLANS["full"], COSTS).evaluate(X)
    back = pickle.loads(pickle.dumps(ev))
    assert type(back) is Evaluation
    assert_same(back, evaluate(PLANS["full"], X, COSTS))


def test_lleaves_nyc_taxi_scores_equal_lightgbms(data_home, monkeypatch):
    """lleaves' NYC_taxi model, which the rule puts on branchy blocks: scores first equal
    LightGBM's raw scores bit for bit, NaN included, and its costs the interpreter's."""
    lgb = pytest.importorskip("lightgbm")
    monkeypatch.delenv(BLOCKS_ENV, raising=False)
    path = data_home / "lleaves_models" / "NYC_taxi.txt.gz"
    if not path.exists():
        pytest.skip(f"{path} is missing")
    booster = lgb.Booster(model_str=gzip.open(path, "rt").read())
    forest = Forest.from_model(booster)
    compiled = thrifty.compile(forest)
    assert compiled.raw_path is not None
    # On AVX-512 its calls from ``choice.VECTOR_FROM`` rows take 16-bit vector scores.
    lo = compiled.raw_path.second_rows[0]
    assert (compiled.raw_path.second is not None) is (targets.current().name == "avx512")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, forest.n_features)) * rng.choice([1, 10, 1000], (2000, forest.n_features))
    X[rng.random(X.shape) < 0.1] = np.nan
    X[:5] = [np.inf, -np.inf, 0.0, -0.0, np.nan]
    for rows in (X[:1], X[:100], X[: max(lo, 1)], X):
        ev = compiled.evaluate(rows)
        np.testing.assert_array_equal(ev.raw, booster.predict(rows, raw_score=True))
        assert_same(ev, evaluate(Full(forest), rows))


def test_a_float32_twins_cached_code_serves_without_a_raw_path(branchy):
    """The cache key does not name the input's precision: a float64 forest whose float32 twin
    was compiled first loads objects without ``raw``, compiles ``raw`` (completing the entry)
    and gives the interpreter's results."""
    base = shaped_forest(np.random.default_rng(21), "chain", n_features=N_FEATURES, n_trees=5)
    twin = dataclasses.replace(base, input_dtype="float32")
    assert thrifty.compile(Full(twin), COSTS).raw_path is None
    compiled = thrifty.compile(Full(base), COSTS)
    assert compiled.forest_code.code.from_cache and compiled.raw_path is not None
    X = np.random.default_rng(3).uniform(-5, 70, (30, N_FEATURES))
    assert_same(compiled.evaluate(X), evaluate(Full(base), X, COSTS))


@pytest.mark.parametrize("outputs", [1, 3])
def test_forests_adding_their_base_last_finish_the_scores(outputs, branchy):
    """``Forest.base_last`` (CatBoost's order): the sum from zero, scaled, plus the base, as the
    serving path forms it."""
    f = shaped_forest(np.random.default_rng(31), "chain", n_features=N_FEATURES, n_trees=6, n_outputs=outputs)
    f = dataclasses.replace(f, base_score=np.full(outputs, 0.3), base_last=True, scale=1.7)
    compiled = thrifty.compile(Full(f), COSTS)
    assert compiled.raw_path is not None
    X = np.random.default_rng(4).uniform(-5, 70, (50, N_FEATURES))
    X[::7, 1] = np.nan
    reference = evaluate(Full(f), X, COSTS)
    ev = compiled.evaluate(X)
    np.testing.assert_array_equal(ev.raw, reference.raw)
    assert_same(ev, reference)
