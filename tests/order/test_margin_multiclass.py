"""The margin early exit for multiclass models: LightGBM's ``pred_early_stop`` (gap between the
two largest class scores after every ``freq`` rounds) is the reference, and a brute force over
every candidate margin on LightGBM's own partial scores checks the calibration."""

import lightgbm as lgb
import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier

import thrifty
from thrifty.order.margin import calibrate_margin, margin_early_exit, margin_frontier

K, ROUNDS = 4, 30


@pytest.fixture(scope="module")
def multiclass():
    X, y = make_classification(600, 8, n_informative=6, n_classes=K, flip_y=0.1, random_state=3)
    booster = lgb.train(
        dict(objective="multiclass", num_class=K, num_leaves=6, learning_rate=0.1, verbose=-1, num_threads=1),
        lgb.Dataset(X, y),
        ROUNDS,
    )
    return booster, X


def lgb_early(booster, X, every, margin):
    return booster.predict(
        X, raw_score=True, pred_early_stop=True, pred_early_stop_freq=every, pred_early_stop_margin=margin
    )


@pytest.mark.parametrize("every", [1, 4, 10, ROUNDS])
@pytest.mark.parametrize("margin", [0.0, 0.5, 1.5, np.inf])
def test_matches_lightgbm_pred_early_stop(multiclass, every, margin):
    booster, X = multiclass
    ev = thrifty.evaluate(margin_early_exit(booster, margin, every=every), X)
    ref = lgb_early(booster, X, every, 1e300 if np.isinf(margin) else margin)
    # LightGBM returns the partial raw scores at the stop: thrifty's exit scores equal them
    np.testing.assert_allclose(ev.raw, ref, rtol=0, atol=1e-9)
    assert np.array_equal(ev.labels, np.argmax(ref, axis=1))
    # trees evaluated: whole rounds at a check (every, 2 every, ... rounds) or all of them
    assert np.all((ev.cost.n_trees % (every * K) == 0) | (ev.cost.n_trees == ROUNDS * K))
    if margin == 0.0:
        assert ev.cost.n_trees.max() <= every * K or every == ROUNDS
    if np.isinf(margin):
        assert np.all(ev.cost.n_trees == ROUNDS * K)


def test_plan_exits_after_whole_rounds(multiclass):
    booster, _ = multiclass
    plan = margin_early_exit(booster, 0.8, every=4)
    checks = np.arange(4 * K - 1, ROUNDS * K, 4 * K)
    assert np.array_equal(np.flatnonzero(np.isfinite(plan.eps_pos)), checks)
    assert np.all(plan.eps_pos[checks] == 0.8) and np.all(np.isinf(plan.eps_neg))


def _reference_calibration(booster, X, every, alpha):
    """Brute force over every candidate margin with LightGBM's partial scores per round."""
    checks = np.arange(every, ROUNDS + 1, every)
    full = np.argmax(booster.predict(X, raw_score=True), axis=1)
    gaps, leads = [], []
    for k in checks:
        S = booster.predict(X, raw_score=True, num_iteration=int(k))
        top = np.sort(S, axis=1)
        gaps.append(top[:, -1] - top[:, -2])
        leads.append(np.argmax(S, axis=1))
    A, L = np.column_stack(gaps), np.column_stack(leads)
    for m in np.concatenate([[0.0], np.unique(A)]):
        fires = A > m
        first = np.argmax(fires, axis=1)
        label = np.where(fires.any(axis=1), L[np.arange(len(X)), first], full)
        if np.mean(label != full) <= alpha:
            return m
    raise AssertionError("no margin meets alpha")


@pytest.mark.parametrize("alpha", [0.0, 0.01, 0.05, 0.2])
@pytest.mark.parametrize("every", [1, 5])
def test_calibration_matches_brute_force(multiclass, alpha, every):
    booster, X = multiclass
    plan, m = calibrate_margin(booster, X, max_disagreement=alpha, every=every)
    assert m == pytest.approx(_reference_calibration(booster, X, every, alpha), abs=1e-9)
    ev = thrifty.evaluate(plan, X)
    assert np.mean(ev.labels != np.argmax(booster.predict(X, raw_score=True), axis=1)) <= alpha
    if alpha >= 0.05:
        assert ev.cost.n_trees.mean() < ROUNDS * K  # the exits save trees


def test_frontier_agrees_with_the_runtime(multiclass):
    booster, X = multiclass
    table = margin_frontier(booster, X, [0.0, 0.5, 2.0], every=3)
    full = np.argmax(booster.predict(X, raw_score=True), axis=1)
    for _, row in table.iterrows():
        ev = thrifty.evaluate(margin_early_exit(booster, row["margin"], every=3), X)
        assert row["mean_trees"] == pytest.approx(ev.cost.n_trees.mean())
        assert row["disagreement"] == pytest.approx(np.mean(ev.labels != full))


def test_gradient_boosting_partial_sums_by_hand():
    """scikit-learn's multiclass gradient boosting: the exit after round r predicts the argmax
    of the partial scores its staged_decision_function gives, when their top-two gap is wide."""
    X, y = make_classification(300, 6, n_informative=4, n_classes=3, random_state=0)
    gb = GradientBoostingClassifier(n_estimators=12, max_depth=2, random_state=0).fit(X, y)
    ev = thrifty.evaluate(margin_early_exit(gb, 1.0, every=3), X)
    staged = list(gb.staged_decision_function(X))
    for i in range(0, len(X), 7):
        for r in range(3, 13, 3):
            top = np.sort(staged[r - 1][i])
            if top[-1] - top[-2] > 1.0 or r == 12:
                assert ev.cost.n_trees[i] == 3 * r
                assert ev.labels[i] == np.argmax(staged[r - 1][i])
                np.testing.assert_allclose(ev.raw[i], staged[r - 1][i], atol=1e-9)
                break


def test_refuses_a_random_forest():
    X, y = make_classification(200, 5, n_informative=3, n_classes=3, random_state=0)
    rf = RandomForestClassifier(5, max_depth=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="rounds add one tree to each class"):
        margin_early_exit(rf, 1.0)
    with pytest.raises(ValueError, match="rounds add one tree to each class"):
        calibrate_margin(rf, X, max_disagreement=0.01)
