"""LightGBM's ``pred_early_stop`` as a Sequential plan; LightGBM itself is the reference."""

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification

import thrifty
from tests._helpers.reference import random_forest, random_inputs
from thrifty.forest import Forest
from thrifty.order.margin import calibrate_margin, margin_early_exit, margin_frontier
from thrifty.runtime.plans import Sequential

N_TREES = 60


@pytest.fixture(scope="module")
def binary():
    X, y = make_classification(800, 10, n_informative=6, flip_y=0.1, random_state=0)
    booster = lgb.train(
        dict(objective="binary", num_leaves=8, learning_rate=0.1, verbose=-1, num_threads=1),
        lgb.Dataset(X, y),
        N_TREES,
    )
    return booster, X


def lgb_early(booster, X, k, m, raw):
    return booster.predict(
        X, raw_score=raw, pred_early_stop=True, pred_early_stop_freq=k, pred_early_stop_margin=m
    )


def stumps(a, b, base=0.0):
    """Trees t = stumps on feature 0 at 0.5: row x=0 gets a[t], row x=1 gets b[t]."""
    T = len(a)
    value = np.zeros(3 * T)
    value[1::3], value[2::3] = a, b
    return Forest(
        feature=np.tile([0, -1, -1], T),
        threshold=np.tile([0.5, 0, 0], T),
        children_left=np.ravel([[3 * t + 1, -1, -1] for t in range(T)]),
        children_right=np.ravel([[3 * t + 2, -1, -1] for t in range(T)]),
        missing_left=[False] * 3 * T,
        missing_type=[0] * 3 * T,
        cat_start=[-1] * 3 * T,
        cat_size=[0] * 3 * T,
        cat_bitsets=np.zeros(0),
        value=value,
        roots=3 * np.arange(T),
        tree_weight=np.ones(T),
        tree_class=np.zeros(T),
        base_score=[base],
        n_features=1,
        link="sigmoid",
        task="binary",
    )


def disagreement(plan, forest, X):
    return float(np.mean(thrifty.evaluate(plan, X).labels != forest.predict(X)))


# ------------------------------------------------------------------------------ the rule


@pytest.mark.parametrize("every", [1, 7, 10, 60, 100])
@pytest.mark.parametrize("margin", [0.0, 1.0, 2.5, 6.0, np.inf])
def test_matches_lightgbm_pred_early_stop(binary, every, margin):
    booster, X = binary
    ev = thrifty.evaluate(margin_early_exit(booster, margin, every=every), X)
    lgb_margin = 1e300 if np.isinf(margin) else margin
    labels = lgb_early(booster, X, every, lgb_margin, raw=False) > 0.5
    assert np.array_equal(ev.labels == 1, labels)
    # LightGBM returns the partial raw score at the stop: thrifty's exit score equals it.
    np.testing.assert_allclose(ev.raw, lgb_early(booster, X, every, lgb_margin, raw=True), rtol=0, atol=1e-9)
    # Trees evaluated: a check position (every, 2 every, ...) or all trees.
    assert np.array_equal(ev.exit, ev.cost.n_trees)
    assert np.all((ev.exit % every == 0) | (ev.exit == N_TREES))


def test_lightgbm_returns_the_partial_score(binary):
    booster, X = binary
    stopped = lgb_early(booster, X, 10, 1.0, raw=True)
    at10 = booster.predict(X, raw_score=True, num_iteration=10)
    full = booster.predict(X, raw_score=True)
    exited = 2 * np.abs(at10) > 1.0
    assert exited.any() and (~exited).any()
    np.testing.assert_array_equal(stopped[exited], at10[exited])
    assert not np.allclose(stopped[exited], full[exited])


def test_exit_positions_and_extremes(binary):
    booster, X = binary
    plan = margin_early_exit(booster, 2.0, every=7)
    assert isinstance(plan, Sequential)
    checks = np.arange(6, N_TREES, 7)
    assert np.array_equal(np.flatnonzero(np.isfinite(plan.eps_pos)), checks)
    assert np.all(plan.eps_pos[checks] == 1.0) and np.all(plan.eps_neg[checks] == -1.0)
    assert np.array_equal(plan.order, np.arange(N_TREES))
    zero = thrifty.evaluate(margin_early_exit(booster, 0.0, every=10), X)
    assert np.all(zero.exit == 10)  # every row exits at the first check
    never = thrifty.evaluate(margin_early_exit(booster, np.inf, every=10), X)
    assert np.all(never.exit == N_TREES)
    np.testing.assert_array_equal(never.raw, booster.predict(X, raw_score=True))
    # A thrifty Forest and the scikit-learn wrapper give the same plan.
    forest = Forest.from_model(booster)
    again = thrifty.evaluate(margin_early_exit(forest, 2.0, every=7), X)
    np.testing.assert_array_equal(again.raw, thrifty.evaluate(plan, X).raw)


def test_sklearn_wrapper():
    X, y = make_classification(300, 5, random_state=1)
    clf = lgb.LGBMClassifier(n_estimators=20, num_leaves=4, verbose=-1).fit(X, y)
    ev = thrifty.evaluate(margin_early_exit(clf, 1.0, every=5), X)
    ref = clf.predict(X, pred_early_stop=True, pred_early_stop_freq=5, pred_early_stop_margin=1.0)
    assert np.array_equal(ev.labels, ref)


# ------------------------------------------------------------------------------ calibration


def reference_calibration(booster, X, every, alpha):
    """Brute force over every candidate margin, with LightGBM's own partial scores."""
    checks = np.arange(every, N_TREES + 1, every)
    S = np.column_stack([booster.predict(X, raw_score=True, num_iteration=int(k)) for k in checks])
    full = booster.predict(X, raw_score=True) > 0
    for m in np.concatenate([[0.0], np.unique(2 * np.abs(S))]):
        fires = 2 * np.abs(S) > m
        first = np.argmax(fires, axis=1)
        lab = np.where(fires.any(axis=1), S[np.arange(len(S)), first] > 0, full)
        if np.mean(lab != full) <= alpha:
            return m
    return np.inf


@pytest.mark.parametrize("every,alpha", [(10, 0.002), (10, 0.0), (7, 0.001), (4, 0.002)])
def test_calibrate_margin_is_minimal(binary, every, alpha):
    booster, X = binary
    forest = Forest.from_model(booster)
    plan, m = calibrate_margin(booster, X, max_disagreement=alpha, every=every)
    assert isinstance(plan, Sequential) and m > 0
    assert m == reference_calibration(booster, X, every, alpha)
    assert disagreement(plan, forest, X) <= alpha
    # LightGBM with this margin agrees (up to the float64 rounding of the margin itself).
    lab = lgb_early(booster, X, every, m, raw=False) > 0.5
    assert np.mean(lab != forest.predict(X).astype(bool)) <= alpha
    smaller = margin_early_exit(booster, np.nextafter(m, 0), every=every)
    assert disagreement(smaller, forest, X) > alpha
    # The smallest margin is also the cheapest plan meeting the budget.
    front = margin_frontier(booster, X, [np.nextafter(m, 0), m, 2 * m, np.inf], every=every)
    assert front.mean_trees.is_monotonic_increasing


def test_calibrate_margin_loose_budget_gives_zero(binary):
    booster, X = binary
    plan, m = calibrate_margin(booster, X, max_disagreement=1.0)
    assert m == 0.0
    assert np.all(thrifty.evaluate(plan, X).exit == 10)


def test_disagreement_is_not_monotone_and_calibration_is_still_exact():
    # Row x=0: partial scores 1, -3, 0.5 (full positive): right exit, then a wrong one.
    # Row x=1: partial scores 0.1, -0.2, -0.1 (full negative): wrong exit, then right ones.
    forest = stumps(a=[1.0, -4.0, 3.5], b=[0.1, -0.3, 0.1])
    X = np.array([[0.0], [1.0]])
    front = margin_frontier(forest, X, [0.0, 0.2, 1.0, 2.0, 5.9, 6.0], every=1)
    assert front.disagreement.tolist() == [0.5, 0.0, 0.0, 0.5, 0.5, 0.0]
    plan, m = calibrate_margin(forest, X, max_disagreement=0.25, every=1)
    assert m == 2 * 0.1  # row x=1 must skip its first (wrong) exit
    assert disagreement(plan, forest, X) == 0.0
    assert disagreement(margin_early_exit(forest, np.nextafter(m, 0), every=1), forest, X) == 0.5


@pytest.mark.parametrize("seed", range(4))
def test_frontier_and_calibration_match_the_runtime(seed):
    # Random forests with base scores, tree weights, missing values, categories, float32 input.
    rng = np.random.default_rng(seed)
    forest = random_forest(rng, n_trees=12, float32=seed % 2 == 1)
    X = random_inputs(rng, 200, forest.n_features)
    every = [1, 2, 3, 5][seed]
    plan, m = calibrate_margin(forest, X, max_disagreement=0.05, every=every)
    assert disagreement(plan, forest, X) <= 0.05
    if m > 0:
        smaller = margin_early_exit(forest, np.nextafter(m, 0), every=every)
        assert disagreement(smaller, forest, X) > 0.05
    margins = [0.0, 0.5, m, 2.0, np.inf]
    front = margin_frontier(forest, X, margins, every=every)
    assert isinstance(front, pd.DataFrame)
    assert list(front.columns) == ["margin", "mean_trees", "disagreement"]
    for row, margin in zip(front.itertuples(), margins):
        ev = thrifty.evaluate(margin_early_exit(forest, margin, every=every), X)
        assert row.margin == margin
        assert row.mean_trees == pytest.approx(ev.cost.n_trees.mean())
        assert row.disagreement == pytest.approx(np.mean(ev.labels != forest.predict(X)))


# ------------------------------------------------------------------------------ errors


def test_clear_errors(binary):
    booster, X = binary
    with pytest.raises(ValueError, match="margin_early_exit: margin must be a float >= 0, got -1.0"):
        margin_early_exit(booster, -1.0)
    with pytest.raises(ValueError, match="margin must be a float >= 0, got nan"):
        margin_early_exit(booster, np.nan)
    with pytest.raises(ValueError, match="every must be an int >= 1, got 0"):
        margin_early_exit(booster, 1.0, every=0)
    with pytest.raises(TypeError, match="every must be an int >= 1, got 2.5"):
        margin_early_exit(booster, 1.0, every=2.5)
    with pytest.raises(ValueError, match=r"max_disagreement must be a float in the range \[0, 1\]"):
        calibrate_margin(booster, X, max_disagreement=1.5)
    with pytest.raises(ValueError, match="at least one row"):
        calibrate_margin(booster, X[:0], max_disagreement=0.1)
    with pytest.raises(ValueError, match="each margin must be a float >= 0, got -2.0"):
        margin_frontier(booster, X, [1.0, -2.0])
    Xr = np.random.default_rng(0).normal(size=(200, 3))
    reg = lgb.train(dict(objective="regression", num_leaves=4, verbose=-1), lgb.Dataset(Xr, Xr[:, 0]), 5)
    with pytest.raises(ValueError, match="regressor's early exit takes tolerance="):
        margin_early_exit(reg, 1.0)  # a regressor's exit is the remaining-trees bound
    with pytest.raises(ValueError, match="need a classifier; this model's task is 'regression'"):
        calibrate_margin(reg, Xr, max_disagreement=0.1)
