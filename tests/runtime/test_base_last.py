"""Forests that add their base after the trees (``Forest.base_last``, CatBoost's order): every
engine sums the trees from zero and forms ``scale * sum + base`` bit for bit, and exits decide on
that score: thresholds at any scale (below 0 and 0 included), margins of several outputs and
Fan et al.'s bins, each against a pure-Python reference."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
from tests._helpers.compiled_plans import check, input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model, lazy_provider
from thrifty import Cascade, Full, Gated, Sequential, evaluate
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.runtime import BinnedExits, plan_from_dict
from thrifty.runtime.compiled.choice import BLOCKS_ENV
from thrifty.runtime.compiled.serving import serving_path
from thrifty.runtime.evaluation import costs_for
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
# Binary classifiers, so the side each row exits on shows in its label.
BINARY = dataclasses.replace(FOREST, task="binary", link="sigmoid", classes=np.array([0, 1]))
NEGATIVE = _base_last(BINARY, scale=-0.61, base=0.25)
ZERO = _base_last(BINARY, scale=0.0, base=0.3)
# Per-class bases that differ, so margins of scale * sum + base are not margins of the sums.
SPREAD = dataclasses.replace(MULTI, base_score=np.array([0.1234567, -0.35, 0.6]))
BINS = BinnedExits(
    _RNG.uniform(0.2, 1.0, 9).round(2),
    [{int(b): (0.8, -0.6) for b in _RNG.integers(-3, 3, 4)} for _ in range(9)],
)
# Plans whose exits form the raw score at each exit (margins, bins): interpreter only.
FORMED = {
    "margins": Sequential(SPREAD, ORDER, np.full(9, 0.35)),
    "margins-negative-scale": Sequential(dataclasses.replace(SPREAD, scale=-0.8), ORDER, np.full(9, 0.2)),
    "bins": Sequential(BINARY, ORDER, np.full(9, 1.5), np.full(9, -1.5), bins=BINS),
    "bins-only": Sequential(BINARY, None, bins=BINS),
    "bins-negative-scale": Sequential(NEGATIVE, ORDER, bins=BINS),
    "bins-zero-scale": Sequential(ZERO, ORDER, bins=BINS),
}
PLANS = {
    "full": Full(FOREST),
    "full-multiclass": Full(MULTI),
    "full-unit-scale": Full(_base_last(FOREST, scale=1.0, base=-7.3)),
    "sequential": Sequential(FOREST, ORDER, np.full(9, 1.5), np.full(9, -1.5)),
    "sequential-subset": Sequential(FOREST, ORDER[:5], np.full(5, 0.9), np.full(5, -np.inf)),
    "sequential-negative-scale": Sequential(NEGATIVE, ORDER, np.full(9, 0.9), np.full(9, -0.4)),
    "sequential-zero-scale": Sequential(ZERO, ORDER, [np.inf, 0.5, 0.0, *[np.inf] * 6], np.full(9, -1.0)),
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


def reference(
    forest: Forest, X: np.ndarray, order, eps_pos, eps_neg, bins: BinnedExits | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Raw scores, exit positions and exit sides (+1, -1, 0: none), one row and one tree at a
    time in Python: the trees'
    leaf values times their weights summed from 0.0 in ``order``, the raw scores ``scale * sum +
    base`` formed after each position and compared with the thresholds (one output), or their
    leading class's margin over the runner-up with ``eps_pos`` (several); then the position's
    bin table (Fan et al.: ``floor(g / width)``, a bin missing from the table freezes the row)."""
    leaves = forest.apply(X)
    K = forest.n_outputs
    tables = bins.tables() if bins is not None else None
    raw = np.empty((len(X), K))
    exit_at = np.empty(len(X), dtype=np.int64)
    side = np.zeros(len(X), dtype=np.int64)
    for i in range(len(X)):
        acc = [0.0] * K
        p, frozen = len(order), False
        for r, t in enumerate(order):
            k, w = int(forest.tree_class[t]), float(forest.tree_weight[t])
            for c in range(K) if k < 0 else [k]:
                acc[c] = acc[c] + w * float(forest.value[leaves[i, t], c if k < 0 else 0])
            scores = [forest.scale * acc[c] + float(forest.base_score[c]) for c in range(K)]
            if frozen:
                continue
            top = sorted(scores)
            g = scores[0] if K == 1 else top[-1] - top[-2]
            if g > eps_pos[r] or g < eps_neg[r]:
                p, side[i] = r + 1, 1 if g > eps_pos[r] else -1
                break
            if tables is not None and bins.width[r] > 0:
                cell = tables[r].get(int(np.floor(g / bins.width[r])))
                if cell is None:
                    frozen = True
                elif g > cell[0] or g < cell[1]:
                    p, side[i] = r + 1, 1 if g > cell[0] else -1
                    break
        raw[i] = [forest.scale * acc[c] + float(forest.base_score[c]) for c in range(K)]
        exit_at[i] = p
    return (raw[:, 0] if K == 1 else raw), exit_at, side


@given(X=input_matrices(N_FEATURES))
@SETTINGS
def test_predict_raw_sums_from_zero_then_scales_and_adds_the_base(X):
    raw, *_ = reference(FOREST, X, np.arange(9), np.full(9, np.inf), np.full(9, -np.inf))
    np.testing.assert_array_equal(FOREST.predict_raw(X), raw)
    raw, *_ = reference(MULTI, X, np.arange(9), np.full(9, np.inf), np.full(9, -np.inf))
    np.testing.assert_array_equal(MULTI.predict_raw(X).reshape(raw.shape), raw)
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
    names = ["sequential", "sequential-subset", "full", "sequential-negative-scale", "sequential-zero-scale"]
    for plan in [*(PLANS[name] for name in names), *FORMED.values()]:
        if isinstance(plan, Full):
            exits = (np.arange(9), np.full(9, np.inf), np.full(9, -np.inf))
        else:
            exits = (plan.order, plan.eps_pos, plan.eps_neg, plan.bins)
        raw, exit_at, side = reference(plan.forest, X, *exits)
        if plan.task == "binary":  # the exit's side, else the full score against 0
            labels = np.where(side != 0, side > 0, raw > 0).astype(np.int64)
        elif plan.task == "multiclass":  # an exit predicts the leading class
            labels = np.argmax(raw, axis=1) if len(X) else np.zeros(0, np.int64)
        for ev in (evaluate(plan, X), evaluate(plan, lazy_provider(X)[0], n_rows=len(X))):
            np.testing.assert_array_equal(ev.raw.reshape(raw.shape), raw)
            np.testing.assert_array_equal(ev.exit, exit_at)
            if plan.is_classifier:
                np.testing.assert_array_equal(ev.labels, labels)


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


@pytest.mark.parametrize("name", list(FORMED))
@pytest.mark.parametrize("kind", ["vector", "scalar", "branchy"])
@SETTINGS
@given(X=input_matrices(N_FEATURES))
def test_compiled_formed_exits_match_the_interpreter(name, kind, X, monkeypatch):
    """Margins and bins of a base_last forest compare the raw score formed at each exit; the
    native blocks form it with the same two roundings (``layout.formed_ir``): the interpreter's
    results bit for bit, dense, one row and lazily, on vector (bins take scalar blocks),
    scalar and branchy blocks."""
    monkeypatch.setenv(BLOCKS_ENV, kind)
    check(FORMED[name], X, cost_model(tree_cost=0.25, split_cost=0.125))


@pytest.mark.parametrize("kind", ["vector", "scalar", "branchy"])
def test_compiled_formed_exits_on_many_rows(kind, monkeypatch):
    """3,000 rows, where forming the score changes which rows exit (the next test): compiled,
    dense and lazily, the interpreter's exits and labels."""
    monkeypatch.setenv(BLOCKS_ENV, kind)
    X = np.random.default_rng(4).uniform(-5, 70, size=(3000, N_FEATURES))
    for plan in FORMED.values():
        compiled = thrifty.compile(plan, cost_model(tree_cost=0.25))
        assert compiled.native
        expected = evaluate(plan, X)
        for ev in (compiled.evaluate(X), evaluate(compiled, lazy_provider(X)[0], n_rows=len(X))):
            np.testing.assert_array_equal(ev.exit, expected.exit)
            np.testing.assert_array_equal(ev.raw, expected.raw)
            np.testing.assert_array_equal(ev.labels, expected.labels)


@pytest.mark.parametrize("name", ["margins", "margins-negative-scale"])
def test_one_row_in_the_lanes_forms_the_scores(name):
    """One row served with the trees in the lanes (``ir_lanes``, forced: plans with exits take
    the scalar blocks by default) forms the margins' scores too: the interpreter's exits."""
    plan, costs = FORMED[name], cost_model(tree_cost=0.25)
    compiled = thrifty.compile(plan, costs)
    path = serving_path(plan, compiled.forest_code, costs_for(plan, costs))
    assert path is not None
    path.lane_rows = 1
    X = np.random.default_rng(12).uniform(-5, 70, size=(300, N_FEATURES))
    expected = evaluate(plan, X, costs)
    for i in range(len(X)):
        one = path.serve(X[i : i + 1])
        assert one.exit[0] == expected.exit[i] and one.labels[0] == expected.labels[i]


def test_the_formed_scores_change_exits():
    """The checks above could fail: on these forests, the margin of the sums and the margin of
    the formed scores exit different rows, and bins on the sums differ from bins on the raw
    scores; a negative scale exits rows on both sides."""
    X = np.random.default_rng(4).uniform(-5, 70, size=(3000, N_FEATURES))
    plain = dataclasses.replace(SPREAD, base_score=np.zeros(3), base_last=False, scale=1.0)
    ref_sums = evaluate(Sequential(plain, ORDER, np.full(9, 0.35)), X).exit
    assert np.any(evaluate(FORMED["margins"], X).exit != ref_sums)
    sums = dataclasses.replace(FOREST, base_score=np.zeros(1), base_last=False, scale=1.0)
    on_sums = evaluate(Sequential(sums, None, bins=BINS), X).exit
    assert np.any(evaluate(FORMED["bins-only"], X).exit != on_sums)
    negative = evaluate(PLANS["sequential-negative-scale"], X)
    raw, exit_at, side = reference(NEGATIVE, X, ORDER, np.full(9, 0.9), np.full(9, -0.4))
    # Rows exit on both sides, each label the side's (a side swapped would flip it).
    assert np.any(side > 0) and np.any(side < 0)
    np.testing.assert_array_equal(negative.exit, exit_at)
    np.testing.assert_array_equal(negative.labels, np.where(side != 0, side > 0, raw > 0))


def test_a_negative_scale_runs_as_its_mirror_image():
    """Thresholds of a forest with scale < 0 are thresholds on the sums of its mirror image
    (tree weights and scale negated): the same raw scores bit for bit."""
    plan = PLANS["sequential-negative-scale"]
    assert plan.forest.scale == 0.61 and np.array_equal(plan.forest.tree_weight, -NEGATIVE.tree_weight)
    X = np.random.default_rng(6).uniform(-5, 70, size=(2000, N_FEATURES))
    np.testing.assert_array_equal(plan.forest.predict_raw(X), NEGATIVE.predict_raw(X))
    again = plan_from_dict(plan.to_dict())
    np.testing.assert_array_equal(evaluate(again, X).exit, evaluate(plan, X).exit)


def test_a_zero_scale_exits_every_row_or_none():
    """Scale 0 (CatBoost's ``set_scale_and_bias(0, b)``): the raw score is the base for any
    sums, so each position's thresholds decide every row alike: none passes position 1's
    (0.5 > 0.3) and all pass position 2's (0.0 < 0.3), exiting positive at position 3."""
    X = np.random.default_rng(7).uniform(-5, 70, size=(500, N_FEATURES))
    ev = evaluate(PLANS["sequential-zero-scale"], X)
    np.testing.assert_array_equal(ev.exit, np.full(500, 3))
    np.testing.assert_array_equal(ev.raw, np.full(500, 0.3))


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
