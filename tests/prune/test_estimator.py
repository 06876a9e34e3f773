"""BudgetPrunedClassifier and BudgetPrunedRegressor: the scikit-learn meta-estimators around
budget_prune."""

import warnings

import numpy as np
import pytest
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

import thrifty
from thrifty import CostModel
from thrifty.estimator_checks import BudgetCase, parametrize_with_budget_checks
from thrifty.exceptions import InvalidParameterError
from thrifty.prune import BudgetPrunedClassifier, BudgetPrunedRegressor, budget_prune, budget_prune_path
from thrifty.train.budgetrf import BudgetRFClassifier, BudgetRFRegressor


@pytest.fixture(scope="module")
def data():
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=900, n_features=8, n_informative=5, n_classes=3, n_clusters_per_class=1, random_state=3
    )
    costs = CostModel(np.random.default_rng(3).uniform(0.5, 4.0, size=8))
    return X[:600], y[:600], X[600:], y[600:], costs


def _lightgbm_rf(kind="Classifier"):
    lightgbm = pytest.importorskip("lightgbm")
    return getattr(lightgbm, f"LGBM{kind}")(
        boosting_type="rf",
        n_estimators=10,
        num_leaves=16,
        subsample=0.7,
        subsample_freq=1,
        colsample_bytree=0.7,
        n_jobs=1,
        verbose=-1,
    )


# Made when a test runs, so that a missing library skips its own model only.
MODELS = {
    # the paper's input
    "BudgetRFClassifier": lambda: BudgetRFClassifier(10, max_depth=6, random_state=0, progress=False),
    "RandomForestClassifier": lambda: RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0),
    "ExtraTreesClassifier": lambda: ExtraTreesClassifier(n_estimators=10, max_depth=6, random_state=0),
    "DecisionTreeClassifier": lambda: DecisionTreeClassifier(max_depth=6, random_state=0),
    "LGBMClassifier": _lightgbm_rf,
}


@pytest.mark.parametrize("name", list(MODELS))
def test_budget_is_met_for_every_supported_ensemble(data, name):
    X, y, X_test, y_test, costs = data
    fitted = MODELS[name]().fit(X[:300], y[:300])
    full_cost = thrifty.evaluate(fitted, X[300:], costs).cost.mean
    budget = 0.6 * full_cost
    clf = BudgetPrunedClassifier(fitted, costs=costs, budget=budget, progress=False).fit(X[300:], y[300:])
    # point 0 of the path is the unpruned forest, at its full cost
    assert clf.budget_search_["cost"].iloc[0] == pytest.approx(full_cost)
    assert clf.budget_search_["cost"].max() > budget >= clf.cost_report(X[300:]).mean
    np.testing.assert_array_equal(clf.classes_, fitted.classes_)
    proba = clf.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(clf.predict(X_test), clf.classes_[np.argmax(proba, axis=1)])
    # it still predicts far better than chance on held-out data
    assert np.mean(clf.predict(X_test) == y_test) > 0.6


def test_unfitted_estimator_is_fitted_on_the_data(data):
    X, y, _, _, costs = data
    clf = BudgetPrunedClassifier(
        RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0),
        costs=costs,
        lam=0.01,
        progress=False,
    ).fit(X, y)
    assert clf.estimator_ is not clf.estimator and hasattr(clf.estimator_, "estimators_")
    assert len(clf.budget_search_) == 1 and clf.lam_ == 0.01


def test_out_of_bag_counting_matches_the_mask(data):
    X, y, _, _, costs = data
    for rf in (
        BudgetRFClassifier(6, max_depth=5, random_state=0, progress=False).fit(X, y),
        RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0).fit(X, y),
    ):
        clf = BudgetPrunedClassifier(rf, costs=costs, lam=0.002, out_of_bag=True, progress=False).fit(X, y)
        mask = np.ones((len(X), 6), dtype=bool)
        for t, rows in enumerate(rf.estimators_samples_):
            mask[rows, t] = False
        direct = budget_prune(rf, X, y, costs, lam=0.002, count_mask=mask)
        np.testing.assert_array_equal(clf.forest_.feature, direct.feature)
        np.testing.assert_allclose(clf.forest_.value, direct.value)
    with pytest.raises(ValueError, match="pass the rows the forest was fitted on"):
        BudgetPrunedClassifier(rf, costs=costs, lam=0.002, out_of_bag=True).fit(X[:50], y[:50])
    with pytest.raises(ValueError, match="records its bootstrap samples"):
        BudgetPrunedClassifier(
            DecisionTreeClassifier(max_depth=3).fit(X, y), costs=costs, lam=0.01, out_of_bag=True
        ).fit(X, y)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"lam": 0.1, "budget": 3.0}, "not both"),
        ({"lam": 0.1, "mode": "x"}, "mode must be a str among 'ensemble', 'individual', got 'x'"),
        ({"lam": 0.1, "evaluation": "yes"}, "evaluation must be a bool, got 'yes'"),
        ({"budget": -1.0}, "budget must be a float >= 0 or None, got -1.0"),
    ],
)
def test_errors(data, kwargs, match):
    X, y, _, _, costs = data
    with pytest.raises(InvalidParameterError, match=match):
        BudgetPrunedClassifier(
            DecisionTreeClassifier(max_depth=2), costs=costs, progress=False, **kwargs
        ).fit(X, y)


def _expected_failures(estimator):
    if isinstance(estimator.estimator, RandomForestClassifier | RandomForestRegressor):
        return {
            "check_sample_weight_equivalence_on_dense_data": (
                "the unfitted forest is fitted first, and a random forest's bootstrap draws rows, "
                "not weight; pruning itself counts integer weights as repeated rows"
            )
        }
    return {}


@parametrize_with_checks(
    [
        # a single tree, pruned at one trade-off
        BudgetPrunedClassifier(
            DecisionTreeClassifier(max_depth=4, random_state=0), lam=0.001, progress=False
        ),
        # a random forest, pruned to a budget along the lambda path
        BudgetPrunedClassifier(
            RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0), budget=2.0, progress=False
        ),
        # the same for regression
        BudgetPrunedRegressor(DecisionTreeRegressor(max_depth=4, random_state=0), lam=0.001, progress=False),
        BudgetPrunedRegressor(
            RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0), budget=2.0, progress=False
        ),
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _a_gap(path):
    """A budget in a gap of the path whose upper point beats the best pruning within it, and that
    upper point's cost."""
    score, cost = path.score(), path.cost
    levels = np.unique(cost)
    gaps = [
        ((lo + hi) / 2, hi)
        for lo, hi in zip(levels[:-1], levels[1:])
        if hi > 1.25 * lo and score[cost == hi].max() > score[path.best_within((lo + hi) / 2)]
    ]
    assert gaps, "the forest's path has no gap to test"
    return gaps[0]


def test_a_budget_between_two_path_points_warns_naming_both(data):
    X, y, _, _, costs = data
    rf = RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0).fit(X[:300], y[:300])
    path = budget_prune_path(rf, X[300:], y[300:], costs, progress=False)
    cost = path.cost
    budget, above = _a_gap(path)
    with pytest.warns(
        UserWarning,
        match=rf"budget={budget:.4g} falls between two prunings.*"
        rf"mean cost {above:.4g}.*give budget={above:.4g}",
    ):
        clf = BudgetPrunedClassifier(rf, costs=costs, budget=budget, progress=False).fit(X[300:], y[300:])
    assert clf.cost_report(X[300:]).mean == pytest.approx(cost[path.best_within(budget)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a budget on a path point has nothing to warn about
        BudgetPrunedClassifier(rf, costs=costs, budget=above, progress=False).fit(X[300:], y[300:])


# ------------------------------------------------------------------------------ sample weights
@pytest.mark.parametrize("leaf_values", ["keep", "distribution"])
def test_integer_weights_equal_repeated_rows_and_zero_drops_the_row(data, leaf_values):
    X, y, X_test, _, costs = data
    rf = RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0).fit(X[:300], y[:300])
    Xp, yp = X[300:], y[300:]
    w = np.random.default_rng(1).integers(0, 4, size=len(yp))
    kw = {"leaf_values": leaf_values, "progress": False}
    weighted = budget_prune_path(rf, Xp, yp, costs, sample_weight=w, **kw)
    repeated = budget_prune_path(rf, np.repeat(Xp, w, axis=0), np.repeat(yp, w), costs, **kw)
    assert len(weighted) == len(repeated) > 3
    for name in ("lambdas", "error", "cost"):
        np.testing.assert_allclose(getattr(weighted, name), getattr(repeated, name), rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(weighted.n_splits, repeated.n_splits)
    np.testing.assert_allclose(weighted.accuracy(), repeated.accuracy(), rtol=1e-12)
    for k in (1, len(weighted) // 2, -1):
        a, b = weighted.forest(k), repeated.forest(k)
        np.testing.assert_array_equal(a.feature, b.feature)
        np.testing.assert_allclose(a.value, b.value, rtol=1e-12)
    # the estimator: the same choice, the same predictions
    est_w = BudgetPrunedClassifier(rf, costs=costs, budget=4.0, **kw).fit(Xp, yp, sample_weight=w)
    est_r = BudgetPrunedClassifier(rf, costs=costs, budget=4.0, **kw).fit(
        np.repeat(Xp, w, axis=0), np.repeat(yp, w)
    )
    assert est_w.lam_ == pytest.approx(est_r.lam_, rel=1e-9)
    np.testing.assert_allclose(est_w.predict_proba(X_test), est_r.predict_proba(X_test), rtol=1e-12)
    # and the weights matter
    plain = budget_prune_path(rf, Xp, yp, costs, **kw)
    assert len(plain) != len(weighted) or not np.allclose(plain.cost, weighted.cost)


def test_out_of_bag_selection_uses_out_of_bag_accuracy(data):
    X, y, _, _, costs = data
    rf = RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0).fit(X, y)
    est = BudgetPrunedClassifier(rf, costs=costs, budget=1e9, out_of_bag=True, progress=False).fit(X, y)
    mask = np.ones((len(X), 8), dtype=bool)
    for t, rows in enumerate(rf.estimators_samples_):
        mask[rows, t] = False
    path = budget_prune_path(rf, X, y, costs, count_mask=mask, progress=False)
    # point 0 is the unpruned forest: its out-of-bag accuracy, by hand from the trees' votes
    votes = np.zeros((len(X), 3))
    for t, tree in enumerate(rf.estimators_):
        votes += mask[:, [t]] * tree.predict_proba(X)
    seen = mask.any(axis=1)
    oob = np.mean(np.argmax(votes[seen], axis=1) == y[seen])
    assert path.accuracy(out_of_bag=True)[0] == pytest.approx(oob)
    np.testing.assert_allclose(est.budget_search_["metric"], path.accuracy(out_of_bag=True))
    assert path.accuracy(out_of_bag=True)[0] < path.accuracy()[0]  # in-bag rows flatter the forest


@pytest.mark.parametrize(
    "forest,wrapper,rows",
    [
        (RandomForestClassifier, BudgetPrunedClassifier, "data"),  # accuracy
        (RandomForestRegressor, BudgetPrunedRegressor, "regression_data"),  # minus the squared error
    ],
)
def test_calibration_rows_measure_every_pruning(forest, wrapper, rows, request):
    X, y, X_test, y_test, costs = request.getfixturevalue(rows)
    rf = forest(n_estimators=6, max_depth=5, random_state=0).fit(X[:300], y[:300])
    est = wrapper(rf, costs=costs, budget=6.0, progress=False).fit(
        X[300:], y[300:], calibration=(X_test, y_test)
    )
    path = budget_prune_path(rf, X[300:], y[300:], costs, progress=False)
    table = est.budget_search_
    assert len(table) == len(path)
    for k in (0, len(path) // 2, len(path) - 1):
        ev = thrifty.evaluate(path.forest(k), X_test, costs)
        assert table["cost"].iloc[k] == pytest.approx(ev.cost.mean)
        hits = ev.labels == y_test if forest is RandomForestClassifier else -((ev.raw - y_test) ** 2)
        assert table["metric"].iloc[k] == pytest.approx(np.mean(hits))


@pytest.mark.parametrize("kind", ["budgetrf", "lightgbm"])
def test_a_categorical_frame_goes_through_to_the_forest(kind):
    import pandas as pd

    rng = np.random.default_rng(0)
    n = 800
    colour = rng.choice(["red", "green", "blue"], size=n)
    x1 = rng.standard_normal(n)
    y = ((colour == "red") ^ (x1 > 0.3)).astype(int)
    X = pd.DataFrame({"colour": pd.Categorical(colour), "x1": x1, "x2": rng.standard_normal(n)})
    costs = {"x2": 5.0, "x1": 2.0, "colour": 1.0}  # by name, in another order
    if kind == "budgetrf":
        rf = BudgetRFClassifier(10, costs=costs, max_depth=6, random_state=0, progress=False)
    else:
        rf = _lightgbm_rf()
    rf.fit(X[:500], y[:500])
    est = BudgetPrunedClassifier(rf, costs=costs, budget=3.0, progress=False).fit(X[500:], y[500:])
    assert est.costs_.feature_costs.tolist() == [1.0, 2.0, 5.0]
    assert est.cost_report(X[500:]).mean <= 3.0 < est.budget_search_["cost"].max()
    assert np.mean(est.predict(X[500:]) == y[500:]) > 0.9
    shuffled = X.assign(colour=X["colour"].cat.reorder_categories(["red", "blue", "green"]))
    np.testing.assert_array_equal(est.predict(shuffled), est.predict(X))


@pytest.mark.parametrize("module", ["polars", "pyarrow"])
def test_polars_and_pyarrow_frames_equal_pandas(data, module):
    import pandas as pd

    lib = pytest.importorskip(module)
    X, y, X_test, _, costs = data
    names = [f"f{i}" for i in range(X.shape[1])]
    frame, test = pd.DataFrame(X, columns=names), pd.DataFrame(X_test, columns=names)
    rf = RandomForestClassifier(n_estimators=5, max_depth=5, random_state=0).fit(frame[:300], y[:300])
    kw = {"costs": dict(zip(names, costs.feature_costs)), "budget": 6.0, "progress": False}
    ref = BudgetPrunedClassifier(rf, **kw).fit(frame[300:], y[300:])
    convert = lib.Table.from_pandas if module == "pyarrow" else lib.from_pandas
    est = BudgetPrunedClassifier(rf, **kw).fit(convert(frame[300:]), y[300:])
    assert list(est.feature_names_in_) == names
    np.testing.assert_array_equal(est.predict_proba(convert(test)), ref.predict_proba(test))
    np.testing.assert_array_equal(est.cost_report(convert(test)).total, ref.cost_report(test).total)


# ------------------------------------------------------------------------------ regression
def _data(n=900, d=8, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = 4.0 * X[:, 0] + 2.0 * np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 3] + rng.normal(scale=0.5, size=n)
    return X, y


@pytest.fixture(scope="module")
def regression_data():
    X, y = _data()
    costs = CostModel(np.random.default_rng(3).uniform(0.5, 4.0, size=8))
    return X[:600], y[:600], X[600:], y[600:], costs


REGRESSORS = {
    # Every feature a candidate at every node, as scikit-learn's regression forests beside it
    # (the default "sqrt" draws 2 of these 8: 10 such trees on 300 rows explain less of y).
    "BudgetRFRegressor": lambda: BudgetRFRegressor(
        10, max_depth=6, max_features=1.0, random_state=0, progress=False
    ),
    "RandomForestRegressor": lambda: RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0),
    "ExtraTreesRegressor": lambda: ExtraTreesRegressor(n_estimators=10, max_depth=6, random_state=0),
    "DecisionTreeRegressor": lambda: DecisionTreeRegressor(max_depth=6, random_state=0),
    "LGBMRegressor": lambda: _lightgbm_rf("Regressor"),
}


@pytest.mark.filterwarnings("ignore:budget=.* falls between two prunings")
@pytest.mark.parametrize("name", list(REGRESSORS))
def test_regression_budget_is_met_for_every_supported_ensemble(regression_data, name):
    X, y, X_test, y_test, costs = regression_data
    fitted = REGRESSORS[name]().fit(X[:300], y[:300])
    full_cost = thrifty.evaluate(fitted, X[300:], costs).cost.mean
    budget = 0.6 * full_cost
    est = BudgetPrunedRegressor(fitted, costs=costs, budget=budget, progress=False).fit(X[300:], y[300:])
    # point 0 of the path is the unpruned forest, at its full cost and with its predictions
    assert est.budget_search_["cost"].iloc[0] == pytest.approx(full_cost)
    mse_full = np.mean((fitted.predict(X[300:]) - y[300:]) ** 2)
    assert est.budget_search_["metric"].iloc[0] == pytest.approx(-mse_full, rel=1e-9)
    assert est.budget_search_["cost"].max() > budget >= est.cost_report(X[300:]).mean
    np.testing.assert_allclose(est.predict(X_test), est.evaluate(X_test).raw)
    # the chosen pruning has the least squared error within the budget, and still predicts
    table = est.budget_search_
    assert table.loc[table["chosen"], "metric"].iloc[0] == table.loc[table["cost"] <= budget, "metric"].max()
    assert est.score(X_test, y_test) > 0.5


def test_regression_lam_and_out_of_bag_match_the_function(regression_data):
    X, y, _, _, costs = regression_data
    rf = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=0).fit(X, y)
    mask = np.ones((len(X), 6), dtype=bool)
    for t, rows in enumerate(rf.estimators_samples_):
        mask[rows, t] = False
    est = BudgetPrunedRegressor(rf, costs=costs, lam=0.05, out_of_bag=True, progress=False).fit(X, y)
    direct = budget_prune(rf, X, y, costs, lam=0.05, count_mask=mask)
    np.testing.assert_array_equal(est.forest_.feature, direct.feature)
    np.testing.assert_allclose(est.forest_.value, direct.value)
    assert len(est.budget_search_) == 1 and est.lam_ == 0.05


def test_regression_integer_weights_equal_repeated_rows(regression_data):
    X, y, X_test, _, costs = regression_data
    rf = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=0).fit(X[:300], y[:300])
    Xp, yp = X[300:], y[300:]
    w = np.random.default_rng(1).integers(0, 4, size=len(yp))
    kw = {"costs": costs, "budget": 4.0, "progress": False}
    est_w = BudgetPrunedRegressor(rf, **kw).fit(Xp, yp, sample_weight=w)
    est_r = BudgetPrunedRegressor(rf, **kw).fit(np.repeat(Xp, w, axis=0), np.repeat(yp, w))
    assert est_w.lam_ == pytest.approx(est_r.lam_, rel=1e-9)
    np.testing.assert_allclose(est_w.predict(X_test), est_r.predict(X_test), rtol=1e-12)


def test_a_budget_between_two_path_points_names_them_in_squared_error(regression_data):
    X, y, _, _, costs = regression_data
    rf = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0).fit(X[:300], y[:300])
    path = budget_prune_path(rf, X[300:], y[300:], costs, progress=False)
    budget, above = _a_gap(path)
    with pytest.warns(
        UserWarning, match=rf"falls between two prunings.*mean squared error.*give budget={above:.4g}"
    ):
        BudgetPrunedRegressor(rf, costs=costs, budget=budget, progress=False).fit(X[300:], y[300:])


def test_each_estimator_refuses_the_other_task(regression_data):
    X, y, _, _, costs = regression_data
    reg = RandomForestRegressor(n_estimators=2, max_depth=2).fit(X, y)
    clf = RandomForestClassifier(n_estimators=2, max_depth=2).fit(X, y > 0)
    with pytest.raises(
        ValueError, match="BudgetPrunedRegressor prunes regressors.*use BudgetPrunedClassifier"
    ):
        BudgetPrunedRegressor(clf, costs=costs, lam=0.1).fit(X, y)
    with pytest.raises(ValueError, match="prunes classifiers.*use BudgetPrunedRegressor"):
        BudgetPrunedClassifier(reg, costs=costs, lam=0.1).fit(X, y > 0)
    with pytest.raises(ValueError, match="leaf_values='distribution' is not for a regressor"):
        BudgetPrunedRegressor(reg, costs=costs, lam=0.1, leaf_values="distribution").fit(X, y)


_X, _y = _data(n=200, d=6, seed=0)


@parametrize_with_budget_checks(
    [
        BudgetCase(
            BudgetPrunedRegressor(
                RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0), progress=False
            ),
            _X,
            _y,
            budgets=[4.0, 8.0, 30.0],
            costs=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        )
    ]
)
def test_budget_contract(check):
    check()
