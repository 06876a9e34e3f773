"""CronusClassifier: the scikit-learn meta-estimator around Cronus."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

import thrifty
from tests._helpers.data import categorical_frame
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
    clf = CronusClassifier(model, costs=costs, n_stages=4, max_cycles=2, progress=False, n_threads=1)
    clf.fit(X, y)
    ev = thrifty.evaluate(clf.plan_, X_test, costs)
    np.testing.assert_array_equal(clf.predict(X_test), ev.labels)
    proba = clf.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.classes_[np.argmax(proba, axis=1)], clf.predict(X_test))
    dec = clf.decision_function(X_test)
    np.testing.assert_array_equal(dec > 0, clf.predict(X_test) == clf.classes_[1])
    # the same cascade as the function layer with the default lam
    top = thrifty.cascade.lambda_max(model, X, y, costs, exact=False)
    plan = cronus(model, X, y, costs, lam=top / 16, n_stages=4, max_cycles=2, n_threads=1)
    np.testing.assert_array_equal(plan.stage_weights, clf.plan_.stage_weights)
    assert clf.lam_ == pytest.approx(top / 16)
    assert clf.score(X_test, data[4]) > 0.75


def test_budget_search_on_calibration_rows(data):
    model, X, y, X_test, y_test, costs = data
    full_cost = thrifty.evaluate(model, X_test, costs).cost.mean
    clf = CronusClassifier(model, costs=costs, budget=0.3 * full_cost, n_stages=3, max_cycles=1, n_lams=4)
    clf.set_params(progress=False).fit(X, y, calibration=(X_test, y_test))
    table = clf.budget_search_
    assert len(table) == 4 and table["lam"].is_monotonic_decreasing
    # the rule, recomputed: the most accurate cascade within the budget on the calibration rows
    ok = table[table["cost"] <= clf.budget]
    assert table.loc[table["chosen"], "lam"].item() == ok.loc[ok["metric"].idxmax(), "lam"] == clf.lam_
    assert clf.score(X_test, y_test) == pytest.approx(ok["metric"].max())
    # lambda_max keeps no tree: a zero budget is always met, by a constant cascade
    clf = CronusClassifier(model, costs=costs, budget=0.0, n_stages=3, max_cycles=1, n_lams=2, progress=False)
    assert clf.fit(X, y).cost_report(X).mean == 0.0


def test_sample_weight(data):
    model, X, y, _, _, costs = data
    X, y = X[:300], y[:300]
    w = np.random.default_rng(2).integers(0, 3, size=len(y))
    # Algorithm 2 alone: closed-form stages, so rounding differences stay at rounding level
    # (L-BFGS on a non-convex eq. (8) can amplify them)
    kw = dict(costs=costs, lam=0.01, n_stages=3, init_only=True, class_weight="balanced", progress=False)
    weighted = CronusClassifier(model, **kw).fit(X, y, sample_weight=w)
    repeated = CronusClassifier(model, **kw).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    np.testing.assert_allclose(
        weighted.plan_.stage_weights, repeated.plan_.stage_weights, rtol=1e-6, atol=1e-9
    )
    np.testing.assert_array_equal(weighted.predict(X), repeated.predict(X))
    assert weighted.slope_ == pytest.approx(repeated.slope_, rel=1e-6)
    # an unfitted estimator is fitted with the weights
    unfitted = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=4, verbose=-1, n_jobs=1)
    clf = CronusClassifier(unfitted, **kw).fit(X, y, sample_weight=w)
    ref = clone(unfitted).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(clf.estimator_.predict_proba(X), ref.predict_proba(X))


def test_clone_and_unfitted(data):
    model, X, y, X_test, _, costs = data
    unfitted = lightgbm.LGBMClassifier(n_estimators=10, num_leaves=4, verbose=-1, n_jobs=1)
    fitted = clone(CronusClassifier(unfitted, costs=costs, n_stages=3, max_cycles=1, progress=False)).fit(
        X, y
    )
    assert fitted.estimator_ is not unfitted and fitted.forest_.n_trees == 10


def test_errors(data):
    model, X, y, _, _, costs = data
    with pytest.raises(ValueError, match="budget must be"):
        CronusClassifier(model, costs=costs, budget=-1.0, progress=False).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        CronusClassifier(model, costs=costs, progress=False).fit(X[:, :5], y)
    with pytest.raises(TypeError, match="costs must be"):
        CronusClassifier(model, costs="cheap", progress=False).fit(X, y)
    with pytest.raises(ValueError, match="rho must be"):
        CronusClassifier(model, n_stages=3, rho=[1.0] * 4, progress=False).fit(X, y)
    with pytest.raises(ValueError, match="label"):
        CronusClassifier(model, costs=costs, progress=False).fit(X, np.where(y == 1, 5, 0))
    multi = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1)
    multi.fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="binary"):
        CronusClassifier(multi, progress=False).fit(X, y)
    reg = lightgbm.LGBMRegressor(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y)
    with pytest.raises(ValueError, match="binary classifier"):
        CronusClassifier(reg, progress=False).fit(X, y)


_SMALL_GBT = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1)
# Not Cronus's weighting (tested exactly above) but the wrapped LightGBM's: its min_child_samples
# and histogram bins count rows, so a weighted fit is not the fit of repeated rows.
_WRAPPED_WEIGHTS = {
    "check_sample_weight_equivalence_on_dense_data": "the wrapped LightGBM model counts rows, not weights"
}


@parametrize_with_checks(
    [CronusClassifier(_SMALL_GBT, n_stages=2, max_cycles=1, progress=False, n_threads=1)],
    expected_failed_checks=lambda est: _WRAPPED_WEIGHTS,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_weights_equal_repeated_rows_end_to_end():
    """scikit-learn's own equivalence check, with a wrapped model that weights exactly (a tree)."""
    from sklearn.tree import DecisionTreeClassifier
    from sklearn.utils.estimator_checks import check_sample_weight_equivalence_on_dense_data

    tree = DecisionTreeClassifier(max_depth=3, random_state=0)
    est = CronusClassifier(tree, n_stages=2, max_cycles=1, progress=False)
    check_sample_weight_equivalence_on_dense_data("CronusClassifier", est)


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow"])
def test_categorical_frames(kind):
    X, y, X_in = categorical_frame(kind)
    model = lightgbm.LGBMClassifier(n_estimators=20, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y)
    costs = {"age": 1.0, "colour": 5.0, "blood pressure": 2.0}
    clf = CronusClassifier(model, costs=costs, n_stages=2, max_cycles=1, progress=False).fit(X_in, y)
    assert clf.feature_names_in_.tolist() == ["age", "colour", "blood pressure"]
    assert clf.forest_.feature_names == ["age", "colour", "blood pressure"]  # not LightGBM's blood_pressure
    ev = thrifty.evaluate(clf.plan_, X, clf.costs_)
    np.testing.assert_array_equal(clf.predict(X_in), ev.labels)
    np.testing.assert_array_equal(clf.cost_report(X_in).total, ev.cost.total)
    assert clf.score(X_in, y) > 0.9
