"""Forests that add their base after the trees (``Forest.base_last``, CatBoost's order): every
engine sums the trees from zero and forms ``scale * sum + base`` bit for bit, exits decide on
that score, and plans that cannot are refused."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests._helpers.compiled_plans import check, input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model, lazy_provider
from thrifty import Cascade, Full, Gated, Sequential, evaluate
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.runtime import BinnedExits
from thrifty.runtime.compiled.choice import BLOCKS_ENV
from thrifty.runtime.exits import sum_thresholds

SCALE, BASE = 0.37, 0.1234567


def _base_last(forest: Forest, scale: float = SCALE, base: float = BASE) -> Forest:
    return dataclasses.replace(
        forest, base_score=np.full(forest.n_outputs, base), base_last=True, scale=scale
    )


_RNG = np.random.default_rng(41)
FOREST = _base_last(random_forest(_RNG, N_FEATURES, n_trees=9))
MULTI = _base_last(random_forest(_RNG, N_FEATURES, n_trees=9, n_outputs=3))
ORDER = _RNG.permutation(9)
PLANS = {
    "full": Full(FOREST),
    "full-multiclass": Full(MULTI),
    "full-unit-scale": Full(_base_last(FOREST, scale=1.0, base=-7.3)),
    "sequential": Sequential(FOREST, ORDER, np.full(9, 1.5), np.full(9, -1.5)),
    "sequential-subset": Sequential(FOREST, ORDER[:5], np.full(5, 0.9), np.full(5, -np.inf)),
    # A gate (a forest adding its base first) routing rows to two base_last parts.
    "gated": Gated(
        Full(random_forest(_RNG, N_FEATURES, n_trees=4)),
        Sequential(FOREST, ORDER, np.full(9, 1.0)),
        Full(FOREST),
    ),
}
SETTINGS = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def reference(forest: Forest, X: np.ndarray, order, eps_pos, eps_neg) -> tuple[np.ndarray, np.ndarray]:
    """Raw scores and exit positions, one row and one tree at a time in Python: the trees'
    leaf values times their weights summed from 0.0 in ``order``, the raw score ``scale * sum +
    base`` compared with the thresholds after each position (single output)."""
    leaves = forest.apply(X)
    raw = np.empty(len(X))
    exit_at = np.empty(len(X), dtype=np.int64)
    for i in range(len(X)):
        acc = 0.0
        g = forest.scale * acc + float(forest.base_score[0])
        p = len(order)
        for r, t in enumerate(order):
            acc = acc + float(forest.tree_weight[t]) * float(forest.value[leaves[i, t], 0])
            g = forest.scale * acc + float(forest.base_score[0])
            if g > eps_pos[r] or g < eps_neg[r]:
                p = r + 1
                break
        raw[i], exit_at[i] = g, p
    return raw, exit_at


@given(X=input_matrices(N_FEATURES))
@SETTINGS
def test_predict_raw_sums_from_zero_then_scales_and_adds_the_base(X):
    raw, _ = reference(FOREST, X, np.arange(9), np.full(9, np.inf), np.full(9, -np.inf))
    np.testing.assert_array_equal(FOREST.predict_raw(X), raw)
    # Several outputs: each output's sum from zero, scaled, plus its base.
    leaves = MULTI.apply(X)
    acc = np.zeros((len(X), 3))
    for t in range(MULTI.n_trees):
        k = int(MULTI.tree_class[t])
        acc[:, k] = acc[:, k] + MULTI.tree_weight[t] * MULTI.value[leaves[:, t], 0]
    np.testing.assert_array_equal(MULTI.predict_raw(X).reshape(len(X), 3), SCALE * acc + BASE)


def test_the_order_matters_on_these_forests():
    """The base added first gives other raw scores on some rows: the tests above could fail."""
    X = np.random.default_rng(3).uniform(-5, 70, size=(2000, N_FEATURES))
    assert np.any(FOREST.predict_raw(X) != FOREST.base_first().predict_raw(X))
    first = FOREST.base_first().predict_raw(X)
    np.testing.assert_allclose(FOREST.predict_raw(X), first, rtol=1e-14, atol=1e-14)


@given(X=input_matrices(N_FEATURES))
@SETTINGS
def test_sequential_exits_compare_the_raw_score_the_row_stops_with(X):
    """Dense and lazy (the interpreter's rounds), the reference's scores and exits."""
    for plan in (PLANS["sequential"], PLANS["sequential-subset"], PLANS["full"]):
        if isinstance(plan, Full):
            exits = (np.arange(9), np.full(9, np.inf), np.full(9, -np.inf))
        else:
            exits = (plan.order, plan.eps_pos, plan.eps_neg)
        raw, exit_at = reference(plan.forest, X, *exits)
        for ev in (evaluate(plan, X), evaluate(plan, lazy_provider(X)[0], n_rows=len(X))):
            np.testing.assert_array_equal(ev.raw, raw)
            np.testing.assert_array_equal(ev.exit, exit_at)


@pytest.mark.parametrize("name", list(PLANS))
@pytest.mark.parametrize("kind", ["vector", "scalar", "branchy"])
@SETTINGS
@given(X=input_matrices(N_FEATURES))
def test_compiled_engines_match_the_interpreter(name, kind, X, monkeypatch):
    """Compiled on vector, scalar and branchy blocks, dense, one row (lanes for a Full plan) and lazily:
    the interpreter's raw scores, exits and costs bit for bit."""
    monkeypatch.setenv(BLOCKS_ENV, kind)
    check(PLANS[name], X, cost_model(tree_cost=0.25, split_cost=0.125))


def test_thresholds_on_sums_decide_as_thresholds_on_raw_scores():
    """``sum_thresholds``' thresholds against every double near them and random sums."""
    rng = np.random.default_rng(5)
    eps = np.concatenate([rng.normal(scale=4, size=300), [np.inf, -np.inf, 0.0, BASE, 1e308, -1e308]])
    for scale, base in ((SCALE, BASE), (1.0, -7.3), (1.7, -1e3), (1e-300, 5.0)):
        forest = _base_last(FOREST, scale=scale, base=base)
        pos, neg = sum_thresholds(forest, eps, eps)
        near = [pos, neg, *(np.nextafter(t, d) for t in (pos, neg) for d in (np.inf, -np.inf))]
        a = np.concatenate([rng.normal(scale=5, size=5000), *near, [np.inf, -np.inf, 1.7e308, -1.7e308]])
        with np.errstate(over="ignore"):
            g = scale * a[:, None] + base
        np.testing.assert_array_equal(g > eps, a[:, None] > pos)
        np.testing.assert_array_equal(g < eps, a[:, None] < neg)


def test_cascade_trees_add_their_scaled_output():
    """A cascade's tree outputs are what each tree adds to the raw score, scale included: the
    same as on the forest summing onto its base."""
    X = np.random.default_rng(8).uniform(-5, 70, size=(300, N_FEATURES))
    W = np.ones((2, 9))
    W[0, 4:] = 0.0
    plan = Cascade(FOREST, W, [-0.5, 0.0])
    same = Cascade(FOREST.base_first(), W, [-0.5, 0.0])
    np.testing.assert_array_equal(evaluate(plan, X).raw, evaluate(same, X).raw)
    check(plan, X[:40], cost_model(tree_cost=0.25))


@pytest.mark.parametrize(
    "make, match",
    [
        (
            lambda: Sequential(FOREST, bins=BinnedExits(np.full(9, 0.5), [{0: (1.0, -1.0)}] * 9)),
            "binned exits",
        ),
        (lambda: Sequential(MULTI, None, np.full(9, 0.8)), "margin exits"),
        (lambda: Sequential(_base_last(FOREST, scale=-1.0), None, np.full(9, 0.8)), "scale -1"),
    ],
)
def test_exits_without_thresholds_on_sums_are_refused(make, match):
    with pytest.raises(InputError, match=match):
        make()


def test_plans_without_exits_and_base_first_take_any():
    Sequential(MULTI, np.arange(9)[::-1])  # no exits: nothing to compare
    bins = BinnedExits(np.full(9, 0.5), [{0: (1.0, -1.0)}] * 9)
    Sequential(FOREST.base_first(), bins=bins)


def test_scale_needs_base_last():
    plain = FOREST.base_first()
    assert not plain.base_last and plain.scale == 1.0
    np.testing.assert_array_equal(plain.tree_weight, FOREST.contribution_weight)
    with pytest.raises(InputError, match="base_last"):
        dataclasses.replace(plain, scale=2.0)
    with pytest.raises(InputError, match="finite"):
        dataclasses.replace(FOREST, scale=np.inf)


def test_partial_scores_are_the_scores_exits_see():
    """The methods' partial scores of a base_last forest: the trees from zero, then the base;
    with scale 1 the raw scores bit for bit, with another scale within a few ulps."""
    from thrifty.forest.scores import partial_scores, tree_scores

    X = np.random.default_rng(9).uniform(-5, 70, size=(500, N_FEATURES))
    unit = _base_last(FOREST, scale=1.0, base=-7.3)
    G = partial_scores(unit, tree_scores(unit, X), np.arange(9))
    np.testing.assert_array_equal(G[:, -1], unit.predict_raw(X))
    G = partial_scores(FOREST, tree_scores(FOREST, X), np.arange(9))
    np.testing.assert_allclose(G[:, -1], FOREST.predict_raw(X), rtol=1e-14, atol=1e-14)
