"""GreedyMiser as CEGB's special case: unit hessian, depth-4 trees, coupled feature costs."""

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from tests._helpers.data import linear_binary
from thrifty.costs import CostModel
from thrifty.train.greedymiser import (
    GreedyMiserClassifier,
    GreedyMiserRegressor,
    greedymiser_frontier,
    greedymiser_params,
)

FAST = {"n_jobs": 1, "progress": False}


_WEIGHT_REASON = (
    "LightGBM is not: min_child_samples, its histogram bins and the rows of weight 0 count rows, "
    "not weight (the coupled penalty itself is charged per unit of weight)"
)


# min_child_samples=5 so that the check's small data sets grow trees (with 20 they stay stumps
# and the weighted / repeated comparison passes vacuously)
@parametrize_with_checks(
    [
        GreedyMiserClassifier(n_estimators=20, learning_rate=0.3, min_child_samples=5, n_jobs=1),
        GreedyMiserRegressor(n_estimators=20, learning_rate=0.3, min_child_samples=5, n_jobs=1),
    ],
    expected_failed_checks=lambda est: {"check_sample_weight_equivalence_on_dense_data": _WEIGHT_REASON},
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_forest_equals_booster_plus_init_score(n_classes):
    X, y = linear_binary()
    if n_classes == 3:
        y = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])
    clf = GreedyMiserClassifier(tradeoff=1e-4, n_estimators=25, **FAST).fit(X, y)
    raw = clf.booster_.predict(X, raw_score=True) + clf.init_score_
    np.testing.assert_allclose(
        clf.decision_function(X), raw.reshape(clf.decision_function(X).shape), rtol=1e-12, atol=1e-12
    )
    assert clf.score(X, y) > 0.8


def test_first_order_leaf_values_and_complete_depth_four_trees():
    # unit hessian: a leaf's value is learning_rate * mean(negative gradient) of its rows
    X, y = linear_binary(2000)
    clf = GreedyMiserClassifier(
        tradeoff=0.0, n_estimators=1, learning_rate=0.5, min_child_samples=1, **FAST
    ).fit(X, y)
    f = clf.forest_
    assert f.tree_depths().tolist() == [4] and (f.feature < 0).sum() == 16
    p0 = 1.0 / (1.0 + np.exp(-clf.init_score_[0]))
    leaf = f.apply(X)[:, 0]
    for node in np.unique(leaf):
        rows = leaf == node
        assert f.value[node, 0] == pytest.approx(0.5 * np.mean(y[rows] - p0), rel=1e-6, abs=1e-9)


def test_coupled_cost_charged_once_per_model():
    X, y = linear_binary()
    costs = CostModel([1.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    params = greedymiser_params(costs, 0.5, n_rows=1500)
    assert params["cegb_tradeoff"] == 1.0
    assert params["cegb_penalty_feature_coupled"] == [1500.0] * 6
    clf = GreedyMiserClassifier(costs=costs, tradeoff=0.02, n_estimators=40, **FAST).fit(X, y)
    used = np.unique(clf.forest_.feature[clf.forest_.feature >= 0])
    n_splits = int((clf.forest_.feature >= 0).sum())
    # few features, each reused across many splits; every example pays for each used one
    assert 1 <= len(used) <= 3 and n_splits >= 10 * len(used)
    report = clf.cost_report(X)
    assert report.mean == pytest.approx(len(used), abs=0.05)


def test_frontier():
    X, y = linear_binary(2000)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0, 8.0])
    table = greedymiser_frontier(
        X[:1500], y[:1500], costs, budgets=[2.0, 8.0], test=(X[1500:], y[1500:]), n_estimators=20, **FAST
    )
    assert list(table["method"]) == ["GreedyMiser"] * 2
    assert table["value"].iloc[1] >= table["value"].iloc[0] - 0.02


def test_regressor_forest_equals_booster():
    X, y = linear_binary()
    t = 3 * X[:, 0] + X[:, 1] + 1.0
    reg = GreedyMiserRegressor(tradeoff=1e-3, n_estimators=30, **FAST).fit(X, t)
    np.testing.assert_allclose(reg.predict(X), reg.booster_.predict(X) + reg.init_score_[0], rtol=1e-12)
    assert reg.score(X, t) > 0.8


def test_coupled_penalty_is_charged_per_unit_of_weight():
    # doubling every weight doubles the loss and must double the penalty: the same model
    X, y = linear_binary(800)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0, 8.0])
    params = dict(costs=costs, tradeoff=0.003, n_estimators=30, **FAST)  # the penalty binds here
    one = GreedyMiserClassifier(**params).fit(X, y)
    two = GreedyMiserClassifier(**params).fit(X, y, sample_weight=np.full(len(y), 2.0))
    np.testing.assert_array_equal(one.forest_.feature, two.forest_.feature)
    np.testing.assert_allclose(one.predict_proba(X), two.predict_proba(X), rtol=1e-9)
    assert greedymiser_params(costs, 0.5, n_rows=2.0 * 800)["cegb_penalty_feature_coupled"][1] == 3200.0


def test_warm_start_reuses_the_path_of_earlier_budgets():
    X, y = linear_binary(1500)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0, 8.0])
    cal = (X[1000:], y[1000:])
    est = GreedyMiserClassifier(costs=costs, n_estimators=20, warm_start=True, **FAST)
    est.set_params(budget=6.0).fit(X[:1000], y[:1000], calibration=cal)
    first = est.n_fits_
    est.set_params(budget=4.0).fit(X[:1000], y[:1000], calibration=cal)
    cold = GreedyMiserClassifier(costs=costs, budget=4.0, n_estimators=20, **FAST)
    cold.fit(X[:1000], y[:1000], calibration=cal)
    assert int(est.budget_search_["reused"].sum()) == first
    assert est.n_fits_ <= cold.n_fits_ and est.calibration_cost_ <= 4.0
    assert est.calibration_cost_ >= cold.calibration_cost_ or np.isclose(
        est.calibration_cost_, cold.calibration_cost_
    )
