"""CronusClassifier: the scikit-learn meta-estimator around Cronus."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

import thrifty
from thrifty import CostModel
from thrifty.cascade import CronusClassifier, cronus

lightgbm = pytest.importorskip("lightgbm")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(1400, 6))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.4 * rng.normal(size=1400) > 0.9).astype(int)
    model = lightgbm.LGBMClassifier(
        n_estimators=30, num_leaves=8, learning_rate=0.2, verbose=-1, n_jobs=1
    ).fit(X[:900], y[:900])
    costs = CostModel([1, 2, 2, 5, 10, 20], tree_cost=1.0)
    return model, X[:900], y[:900], X[900:], y[900:], costs


def test_outputs_agree_with_the_plan(data):
    model, X, y, X_test, _, costs = data
    clf = CronusClassifier(model, costs, n_stages=4, max_cycles=2, progress=False, n_threads=1).fit(X, y)
    ev = thrifty.evaluate(clf.plan_, X_test, costs)
    np.testing.assert_array_equal(clf.predict(X_test), ev.labels)
    proba = clf.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[np.argmax(proba, axis=1)], clf.predict(X_test))
    dec = clf.decision_function(X_test)
    np.testing.assert_array_equal(dec > 0, clf.predict(X_test) == clf.classes_[1])
    np.testing.assert_allclose(clf.cost_report(X_test).total, ev.cost.total)
    # the same cascade as the function layer with the default lam
    top = thrifty.cascade.lambda_max(model, X, y, costs, exact=False)
    plan = cronus(model, X, y, costs, lam=top / 16, n_stages=4, max_cycles=2, n_threads=1)
    np.testing.assert_array_equal(plan.stage_weights, clf.plan_.stage_weights)
    assert clf.lam_ == pytest.approx(top / 16)
    assert clf.score(X_test, data[4]) > 0.75


def test_budget(data):
    model, X, y, _, _, costs = data
    full_cost = thrifty.evaluate(model, X, costs).cost.mean
    accuracies = []
    for budget in (0.2 * full_cost, 10 * full_cost):
        clf = CronusClassifier(
            model, costs, budget=budget, n_stages=3, max_cycles=1, n_lams=4, progress=False, n_threads=1
        ).fit(X, y)
        assert clf.cost_report(X).mean <= budget
        chosen = [r for r in clf.sweep_ if r["lam"] == clf.lam_][0]
        assert chosen["mean_cost"] == pytest.approx(clf.cost_report(X).mean)
        assert chosen["accuracy"] == max(r["accuracy"] for r in clf.sweep_ if r["mean_cost"] <= budget)
        accuracies.append(clf.score(X, y))
    # the same sweep: a larger budget never chooses a less accurate cascade
    assert accuracies == sorted(accuracies)
    # lambda_max keeps no tree: a zero budget is always met, by a constant cascade
    clf = CronusClassifier(model, costs, budget=0.0, n_stages=3, max_cycles=1, n_lams=2, progress=False)
    clf.fit(X, y)
    assert clf.cost_report(X).mean == 0.0


def test_clone_pickle_and_unfitted(data):
    model, X, y, X_test, _, costs = data
    clf = CronusClassifier(model, costs, n_stages=3, max_cycles=1, progress=False).fit(X, y)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict(X_test), clf.predict(X_test))
    unfitted = lightgbm.LGBMClassifier(n_estimators=10, num_leaves=4, verbose=-1, n_jobs=1)
    fitted = clone(CronusClassifier(unfitted, costs, n_stages=3, max_cycles=1, progress=False)).fit(X, y)
    assert fitted.estimator_ is not unfitted and fitted.forest_.n_trees == 10


def test_errors(data):
    model, X, y, _, _, costs = data
    with pytest.raises(ValueError, match="budget"):
        CronusClassifier(model, costs, budget=-1.0, progress=False).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        CronusClassifier(model, costs, progress=False).fit(X[:, :5], y)
    with pytest.raises(TypeError, match="CostModel"):
        CronusClassifier(model, [1.0] * 6, progress=False).fit(X, y)
    with pytest.raises(ValueError, match="label"):
        CronusClassifier(model, costs, progress=False).fit(X, np.where(y == 1, 5, 0))
    multi = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1)
    multi.fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="binary"):
        CronusClassifier(multi, progress=False).fit(X, y)
    reg = lightgbm.LGBMRegressor(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y)
    with pytest.raises(ValueError, match="binary classifier"):
        CronusClassifier(reg, progress=False).fit(X, y)


_SMALL_GBT = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1)


@parametrize_with_checks(
    [
        CronusClassifier(_SMALL_GBT, n_stages=2, max_cycles=1, progress=False, n_threads=1),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
