"""BudgetPrunedClassifier: the scikit-learn meta-estimator around budget_prune."""

import warnings

import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

import thrifty
from thrifty import CostModel
from thrifty.prune import BudgetPrunedClassifier
from thrifty.train.budgetrf import BudgetRFClassifier

lightgbm = pytest.importorskip("lightgbm")


@pytest.fixture(scope="module")
def data():
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=900, n_features=8, n_informative=5, n_classes=3, n_clusters_per_class=1, random_state=3
    )
    costs = CostModel(np.random.default_rng(3).uniform(0.5, 4.0, size=8))
    return X[:600], y[:600], X[600:], y[600:], costs


def _models():
    return [
        BudgetRFClassifier(10, max_depth=6, random_state=0, progress=False),  # the paper's input
        RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0),
        ExtraTreesClassifier(n_estimators=10, max_depth=6, random_state=0),
        DecisionTreeClassifier(max_depth=6, random_state=0),
        lightgbm.LGBMClassifier(
            boosting_type="rf",
            n_estimators=10,
            num_leaves=16,
            subsample=0.7,
            subsample_freq=1,
            colsample_bytree=0.7,
            n_jobs=1,
            verbose=-1,
        ),
    ]


@pytest.mark.parametrize("model", _models(), ids=lambda m: type(m).__name__)
def test_budget_is_met_for_every_supported_ensemble(data, model):
    X, y, X_test, y_test, costs = data
    fitted = model.fit(X[:300], y[:300])
    full_cost = thrifty.evaluate(fitted, X[300:], costs).cost.mean
    budget = 0.6 * full_cost
    clf = BudgetPrunedClassifier(fitted, costs, budget=budget, progress=False).fit(X[300:], y[300:])
    report = clf.cost_report(X[300:])
    assert report.mean <= budget + 1e-12
    assert report.mean == pytest.approx(clf.fit_cost_)
    assert clf.path_.cost[0] == pytest.approx(full_cost)
    np.testing.assert_array_equal(clf.classes_, fitted.classes_)
    proba = clf.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.predict(X_test), clf.classes_[np.argmax(proba, axis=1)])
    # it still predicts far better than chance on held-out data
    assert np.mean(clf.predict(X_test) == y_test) > 0.6


def test_unfitted_estimator_is_fitted_on_the_data(data):
    X, y, _, _, costs = data
    clf = BudgetPrunedClassifier(
        RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0), costs, lam=0.01, progress=False
    ).fit(X, y)
    assert clf.estimator_ is not clf.estimator and hasattr(clf.estimator_, "estimators_")
    assert clf.path_ is None and clf.lam_ == 0.01


def test_larger_budget_never_costs_more(data):
    X, y, _, _, costs = data
    rf = RandomForestClassifier(n_estimators=8, max_depth=5, random_state=1).fit(X, y)
    spent = [
        BudgetPrunedClassifier(rf, costs, budget=b, progress=False).fit(X, y).fit_cost_
        for b in (2.0, 4.0, 8.0, 100.0)
    ]
    assert spent == sorted(spent)


def test_out_of_bag_counting_matches_the_mask(data):
    from thrifty.prune import budget_prune

    X, y, _, _, costs = data
    for rf in (
        BudgetRFClassifier(6, max_depth=5, random_state=0, progress=False).fit(X, y),
        RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0).fit(X, y),
    ):
        clf = BudgetPrunedClassifier(rf, costs, lam=0.002, out_of_bag=True, progress=False).fit(X, y)
        mask = np.ones((len(X), 6), dtype=bool)
        for t, rows in enumerate(rf.estimators_samples_):
            mask[rows, t] = False
        direct = budget_prune(rf, X, y, costs, lam=0.002, count_mask=mask)
        np.testing.assert_array_equal(clf.forest_.feature, direct.feature)
        np.testing.assert_allclose(clf.forest_.value, direct.value)
    with pytest.raises(ValueError, match="pass the rows the forest was fitted on"):
        BudgetPrunedClassifier(rf, costs, lam=0.002, out_of_bag=True).fit(X[:50], y[:50])
    with pytest.raises(ValueError, match="records its bootstrap samples"):
        BudgetPrunedClassifier(
            DecisionTreeClassifier(max_depth=3).fit(X, y), costs, lam=0.01, out_of_bag=True
        ).fit(X, y)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({}, "exactly one of"),
        ({"lam": 0.1, "mode": "x"}, "mode must be"),
        ({"lam": 0.1, "evaluation": "yes"}, "evaluation must be"),
        ({"budget": -1.0}, "budget must be"),
    ],
)
def test_errors(data, kwargs, match):
    X, y, _, _, costs = data
    with pytest.raises(ValueError, match=match):
        BudgetPrunedClassifier(DecisionTreeClassifier(max_depth=2), costs, progress=False, **kwargs).fit(X, y)


def test_regression_forests_are_rejected(data):
    from sklearn.ensemble import RandomForestRegressor

    X, y, _, _, costs = data
    reg = RandomForestRegressor(n_estimators=2, max_depth=2).fit(X, y)
    with pytest.raises(ValueError, match="prunes classifiers"):
        BudgetPrunedClassifier(reg, costs, lam=0.1).fit(X, y)


@parametrize_with_checks(
    [
        BudgetPrunedClassifier(
            DecisionTreeClassifier(max_depth=4, random_state=0), lam=0.001, progress=False
        ),
        BudgetPrunedClassifier(
            RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0), budget=2.0, progress=False
        ),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_a_budget_between_two_path_points_warns_naming_both(data):
    X, y, _, _, costs = data
    rf = RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0).fit(X[:300], y[:300])
    path = BudgetPrunedClassifier(rf, costs, budget=1e9, progress=False).fit(X[300:], y[300:]).path_
    acc, cost = path.accuracy(), path.cost
    levels = np.unique(cost)
    # A gap whose upper point is more accurate than the best pruning within its midpoint.
    gaps = [
        ((lo + hi) / 2, hi)
        for lo, hi in zip(levels[:-1], levels[1:])
        if hi > 1.25 * lo and acc[cost == hi].max() > acc[path.best_within((lo + hi) / 2)]
    ]
    assert gaps, "the forest's path has no gap to test"
    budget, above = gaps[0]
    with pytest.warns(
        UserWarning,
        match=rf"budget={budget:.4g} falls between two prunings.*"
        rf"mean cost {above:.4g}.*give budget={above:.4g}",
    ):
        clf = BudgetPrunedClassifier(rf, costs, budget=budget, progress=False).fit(X[300:], y[300:])
    assert clf.fit_cost_ == pytest.approx(cost[path.best_within(budget)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a budget on a path point has nothing to warn about
        BudgetPrunedClassifier(rf, costs, budget=above, progress=False).fit(X[300:], y[300:])
