"""Compiled plans: bit for bit what the interpreter, lazy evaluation and the source library give."""

from __future__ import annotations

import functools
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
from tests._helpers.compiled_plans import PLANS, assert_same, check, input_matrices
from tests._helpers.reference import random_forest, random_inputs
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import Cascade, Forest, Full, Gated, Linear, Sequential, evaluate

pytestmark = pytest.mark.usefixtures("private_compile_cache")


@pytest.mark.parametrize("name", sorted(PLANS))
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(X=input_matrices(N_FEATURES))
def test_compiled_matches_interpreter_and_lazy(name, X):
    check(PLANS[name], X, cost_model(tree_cost=0.25, split_cost=0.125))


def test_many_rows_take_the_parallel_path():
    rng = np.random.default_rng(11)
    X = random_inputs(rng, 3000, N_FEATURES)
    for name in ("full", "sequential", "sequential-bins", "full-multiclass", "gated-forests"):
        check(PLANS[name], X, cost_model(tree_cost=0.5))


def test_the_serving_path_takes_any_numeric_matrix_and_hands_over_the_rest():
    """One-row and batch calls of a forest plan go straight from the matrix to the settled
    costs in native code; inputs it does not take (DataFrames, huge batches, other costs)
    take the general path. Every route gives the interpreter's results."""
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(14)
    costs = cost_model(tree_cost=0.5, split_cost=0.25)
    X = random_inputs(rng, 70_000, N_FEATURES)
    for name in ("full", "sequential-bins", "full-float32", "sequential-multiclass"):
        plan = PLANS[name]
        compiled = thrifty.compile(plan, costs)
        assert compiled.serving is not None
        for Z in (X[:1], X[:40], X[:3000], np.asfortranarray(X[:70]), X[:5].astype(np.float32)):
            assert_same(compiled.evaluate(Z), evaluate(plan, Z, costs))
        assert_same(compiled.evaluate(pd.DataFrame(X[:9])), evaluate(plan, X[:9], costs))
        assert_same(evaluate(compiled, X[:9], cost_model()), evaluate(plan, X[:9], cost_model()))
    # Beyond the serving path's batch size: chunks on the executors' native path.
    assert_same(thrifty.compile(PLANS["full"], costs).evaluate(X), evaluate(PLANS["full"], X, costs))
    ints = rng.integers(-2, 40, size=(20, N_FEATURES))
    assert_same(thrifty.compile(PLANS["full"]).evaluate(ints), evaluate(PLANS["full"], ints))
    # The method on plans is the same compiler.
    assert_same(
        PLANS["sequential"].compile(costs).evaluate(X[:50]), evaluate(PLANS["sequential"], X[:50], costs)
    )
    # Probabilities and labels are computed when read, and pickle as a plain Evaluation.
    served = thrifty.compile(PLANS["sequential"], costs).evaluate(X[:30])
    back = pickle.loads(pickle.dumps(served))
    assert type(back) is thrifty.Evaluation
    assert_same(back, evaluate(PLANS["sequential"], X[:30], costs))


def test_more_than_64_features():
    """Wide forests keep the features each path tests as bits, one word per 64 features, and
    have a serving path (lazy blocks mark the touched matrix)."""
    rng = np.random.default_rng(15)
    n_features = 70
    forest = random_forest(rng, n_features, n_trees=12)
    X = random_inputs(rng, 1500, n_features)
    costs = thrifty.CostModel(rng.uniform(0, 3, n_features).round(2), groups={"g": [0, 65, 69]})
    for plan in (Full(forest), Sequential(forest, rng.permutation(12), np.full(12, 1.0), np.full(12, -1.0))):
        compiled = check(plan, X, costs)
        assert compiled.serving is not None
        assert_same(compiled.evaluate(X[:1]), evaluate(plan, X[:1], costs))


def test_cascade_and_linear_plans_run_natively():
    """Cronus's Cascade and ADAPT-LIN's Linear parts compile too (tests/runtime/
    test_compiled_cascade.py checks them in depth); only an Opaque part stays on the interpreter
    (tests/runtime/test_opaque.py)."""
    rng = np.random.default_rng(12)
    forest = random_forest(rng, N_FEATURES, n_trees=6)
    W = rng.normal(size=(2, 6)).round(2)
    X = random_inputs(rng, 50, N_FEATURES)
    check(Cascade(forest, W, [-0.5, 0.0]), X, cost_model())
    check(Linear(np.arange(N_FEATURES) - 2.0), X, cost_model())
    assert thrifty.compile(
        Gated(Linear(np.ones(N_FEATURES)), Cascade(forest, W, [-0.5, 0.0]), Full(forest))
    ).native


def test_cache_and_pickle():
    plan = PLANS["sequential"]
    first = thrifty.compile(plan, cost_model())
    again = thrifty.compile(plan, cost_model())
    assert again.compile_seconds == 0.0 and again.forest_code.code.from_cache
    X = random_inputs(np.random.default_rng(13), 30, N_FEATURES)
    clone = pickle.loads(pickle.dumps(first))
    assert clone.native and clone.forest_code.code.from_cache
    assert_same(clone.evaluate(X), first.evaluate(X))
    assert (
        clone.costs is not None
        and clone.evaluate(X).cost.total.sum() == evaluate(plan, X, cost_model()).cost.total.sum()
    )


@functools.cache
def _library_data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Five features with NaN and a binary label; for LightGBM, a copy whose fifth feature is
    category codes."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2 > 0.7).astype(int)
    Xc = X.copy()
    Xc[:, 4] = rng.integers(0, 6, size=len(X))
    return X, Xc, y


def _lightgbm():
    lgb = pytest.importorskip("lightgbm")
    _, Xc, y = _library_data()
    model = lgb.LGBMClassifier(n_estimators=15, num_leaves=8, verbose=-1, min_child_samples=5).fit(
        Xc, y, categorical_feature=[4]
    )
    return model, lambda m, Z: m.booster_.predict(Z, raw_score=True)


def _xgboost():
    xgb = pytest.importorskip("xgboost")
    X, _, y = _library_data()
    model = xgb.XGBClassifier(n_estimators=15, max_depth=3).fit(X, y)
    return model, lambda m, Z: m.get_booster().inplace_predict(Z, predict_type="margin")


def _sklearn_gb():
    from sklearn.ensemble import GradientBoostingRegressor

    Xf = np.nan_to_num(_library_data()[0])
    model = GradientBoostingRegressor(n_estimators=15, max_depth=3).fit(Xf, Xf[:, 0])
    return model, lambda m, Z: m.predict(Z)


def _sklearn_rf():
    from sklearn.ensemble import RandomForestClassifier

    X, _, y = _library_data()
    model = RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0).fit(np.nan_to_num(X), y)
    return model, lambda m, Z: m.predict_proba(Z)[:, 1]


# Each library's model and its raw prediction, built once, on first use: a library that is not
# installed skips its own case only.
LIBRARIES = {"lightgbm": _lightgbm, "xgboost": _xgboost, "sklearn-gb": _sklearn_gb, "sklearn-rf": _sklearn_rf}


@functools.cache
def _library_model(name: str):
    return LIBRARIES[name]()


@pytest.mark.parametrize("name", list(LIBRARIES))
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(X=input_matrices(5, max_rows=30))
def test_compiled_matches_the_source_library(name, X):
    model, predict = _library_model(name)
    forest = Forest.from_model(model)
    if name.startswith("sklearn"):
        X = np.nan_to_num(X, nan=0.0, posinf=1e30, neginf=-1e30)
    if name == "lightgbm":
        X[:, 4] = np.where(np.isfinite(X[:, 4]), np.trunc(X[:, 4]), X[:, 4])
    compiled = thrifty.compile(forest)
    ev = compiled.evaluate(X)
    assert_same(ev, evaluate(forest, X))
    if len(X):
        with np.errstate(over="ignore"):
            expected = predict(model, X.astype(np.float32) if name == "xgboost" else X)
        np.testing.assert_array_equal(ev.raw if ev.raw.ndim == 1 else ev.proba[:, 1], expected)
