"""The margin-style exit of a regressor: the bound of the remaining trees, exact on every input."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import thrifty
from thrifty.forest.builder import ForestBuilder
from thrifty.order import margin_early_exit
from thrifty.order.regression import remaining_bound, tree_ranges

lightgbm = pytest.importorskip("lightgbm")


def stumps(leaves, weights=None, base=0.0):
    """A regressor of stumps on feature 0 (split at 0): tree t's leaves are ``leaves[t]``."""
    b = ForestBuilder()
    for t, (lo, hi) in enumerate(leaves):
        w = 1.0 if weights is None else weights[t]
        b.add_tree([0, -1, -1], [0.0, 0.0, 0.0], [1, -1, -1], [2, -1, -1], [0.0, lo, hi], weight=w)
    return b.build(base_score=np.array([base]), n_features=1, task="regression")


def test_hand_computation():
    # leaves (-2, 3), (-1, 0.5), (0.25, -0.25) with weights 1, 1, 2:
    # after tree 0 the rest add R in [-1 - 0.5, 0.5 + 0.5] = [-1.5, 1]: bound 1.5;
    # after tree 1 the rest add R in [-0.5, 0.5]: bound 0.5; after tree 2 nothing: 0
    forest = stumps([(-2.0, 3.0), (-1.0, 0.5), (0.25, -0.25)], weights=[1.0, 1.0, 2.0], base=10.0)
    lo, hi = tree_ranges(forest)
    np.testing.assert_array_equal(lo, [-2.0, -1.0, -0.5])
    np.testing.assert_array_equal(hi, [3.0, 0.5, 0.5])
    B = remaining_bound(forest, np.arange(3))
    slack = 2 * 3 * np.finfo(float).eps * (10.0 + 3.0 + 1.0 + 0.5)  # the float sums' rounding
    np.testing.assert_allclose(B, np.array([1.5, 0.5, 0.0]) + slack, rtol=0, atol=1e-15)
    # 0.5 is just below B[1] (its rounding slack): no early exit, every tree runs
    for tol, exits in [(2.0, [0]), (1.5, [1]), (1.0, [1]), (0.5, []), (0.4, [])]:
        plan = margin_early_exit(forest, tolerance=tol, every=1)
        assert np.flatnonzero(np.isfinite(plan.eps_pos)).tolist() == exits
    plan = margin_early_exit(forest, tolerance=1.0, every=1)
    X = np.array([[-1.0], [1.0]])
    ev = thrifty.evaluate(plan, X)
    np.testing.assert_array_equal(ev.exit, [2, 2])  # two trees evaluated
    np.testing.assert_array_equal(ev.raw.reshape(-1), [10.0 - 2 - 1, 10.0 + 3 + 0.5])
    np.testing.assert_array_equal(forest.predict(X), [10.0 - 2 - 1 + 0.5, 10.0 + 3 + 0.5 - 0.5])
    # every=2 checks after the second tree only (0-based position 1)
    assert np.isfinite(margin_early_exit(forest, tolerance=2.0, every=2).eps_pos).tolist() == [
        False,
        True,
        False,
    ]


def _models():
    from sklearn.datasets import make_regression
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

    X, y = make_regression(n_samples=300, n_features=4, noise=5.0, random_state=1)
    return [
        lightgbm.LGBMRegressor(n_estimators=30, num_leaves=6, verbose=-1).fit(X, y),
        GradientBoostingRegressor(n_estimators=25, max_depth=3, random_state=0).fit(X, y),
        RandomForestRegressor(n_estimators=10, max_depth=4, random_state=0).fit(X, y),
    ]


MODELS = _models()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(range(len(MODELS))),
    arrays(
        np.float64,
        st.tuples(st.integers(1, 30), st.just(4)),
        elements=st.one_of(st.floats(-1e6, 1e6), st.just(np.nan)),
    ),
    st.floats(1e-3, 500.0),
    st.integers(1, 7),
)
def test_never_exceeds_the_tolerance(k, X, tol, every):
    model = MODELS[k]
    plan = margin_early_exit(model, tolerance=tol, every=every)
    ev = thrifty.evaluate(plan, X)
    full = thrifty.evaluate(thrifty.Full(plan.forest), X).raw.reshape(-1)
    assert np.all(np.abs(ev.raw.reshape(-1) - full) <= tol)


def test_large_tolerance_exits_at_the_first_check_and_small_never():
    model = MODELS[0]
    assert np.isfinite(margin_early_exit(model, tolerance=1e9, every=3).eps_pos[2])
    plan = margin_early_exit(model, tolerance=1e-9, every=1)
    assert not np.isfinite(plan.eps_pos).any()


def test_validation():
    with pytest.raises(thrifty.exceptions.InputError, match="not margin"):
        margin_early_exit(MODELS[0], 1.0)
    with pytest.raises(thrifty.exceptions.InvalidParameterError):
        margin_early_exit(MODELS[0], tolerance=0.0)
