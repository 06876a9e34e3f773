"""BudgetPrunedRegressor: the scikit-learn meta-estimator around budget_prune for regression forests."""

import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesRegressor, RandomForestClassifier, RandomForestRegressor
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

import thrifty
from thrifty import CostModel
from thrifty.estimator_checks import BudgetCase, parametrize_with_budget_checks
from thrifty.prune import BudgetPrunedClassifier, BudgetPrunedRegressor, budget_prune, budget_prune_path
from thrifty.train import BudgetRFRegressor


def _data(n=900, d=8, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = 4.0 * X[:, 0] + 2.0 * np.sin(2 * X[:, 1]) + X[:, 2] * X[:, 3] + rng.normal(scale=0.5, size=n)
    return X, y


@pytest.fixture(scope="module")
def data():
    X, y = _data()
    costs = CostModel(np.random.default_rng(3).uniform(0.5, 4.0, size=8))
    return X[:600], y[:600], X[600:], y[600:], costs


def _lightgbm_rf():
    lightgbm = pytest.importorskip("lightgbm")
    return lightgbm.LGBMRegressor(
        boosting_type="rf",
        n_estimators=10,
        num_leaves=16,
        subsample=0.7,
        subsample_freq=1,
        n_jobs=1,
        verbose=-1,
    )


# Made when a test runs, so that a missing library skips its own model only.
MODELS = {
    "BudgetRFRegressor": lambda: BudgetRFRegressor(10, max_depth=6, random_state=0, progress=False),
    "RandomForestRegressor": lambda: RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0),
    "ExtraTreesRegressor": lambda: ExtraTreesRegressor(n_estimators=10, max_depth=6, random_state=0),
    "DecisionTreeRegressor": lambda: DecisionTreeRegressor(max_depth=6, random_state=0),
    "LGBMRegressor": _lightgbm_rf,
}


@pytest.mark.filterwarnings("ignore:budget=.* falls between two prunings")
@pytest.mark.parametrize("name", list(MODELS))
def test_budget_is_met_for_every_supported_ensemble(data, name):
    X, y, X_test, y_test, costs = data
    fitted = MODELS[name]().fit(X[:300], y[:300])
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


def test_calibration_rows_measure_every_pruning(data):
    X, y, X_test, y_test, costs = data
    rf = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=0).fit(X[:300], y[:300])
    est = BudgetPrunedRegressor(rf, costs=costs, budget=6.0, progress=False).fit(
        X[300:], y[300:], calibration=(X_test, y_test)
    )
    path = budget_prune_path(rf, X[300:], y[300:], costs, progress=False)
    table = est.budget_search_
    assert len(table) == len(path)
    for k in (0, len(path) // 2, len(path) - 1):
        ev = thrifty.evaluate(path.forest(k), X_test, costs)
        assert table["cost"].iloc[k] == pytest.approx(ev.cost.mean)
        assert table["metric"].iloc[k] == pytest.approx(-np.mean((ev.raw - y_test) ** 2))


def test_lam_and_out_of_bag_match_the_function(data):
    X, y, _, _, costs = data
    rf = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=0).fit(X, y)
    mask = np.ones((len(X), 6), dtype=bool)
    for t, rows in enumerate(rf.estimators_samples_):
        mask[rows, t] = False
    est = BudgetPrunedRegressor(rf, costs=costs, lam=0.05, out_of_bag=True, progress=False).fit(X, y)
    direct = budget_prune(rf, X, y, costs, lam=0.05, count_mask=mask)
    np.testing.assert_array_equal(est.forest_.feature, direct.feature)
    np.testing.assert_allclose(est.forest_.value, direct.value)
    assert len(est.budget_search_) == 1 and est.lam_ == 0.05


def test_integer_weights_equal_repeated_rows(data):
    X, y, X_test, _, costs = data
    rf = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=0).fit(X[:300], y[:300])
    Xp, yp = X[300:], y[300:]
    w = np.random.default_rng(1).integers(0, 4, size=len(yp))
    kw = {"costs": costs, "budget": 4.0, "progress": False}
    est_w = BudgetPrunedRegressor(rf, **kw).fit(Xp, yp, sample_weight=w)
    est_r = BudgetPrunedRegressor(rf, **kw).fit(np.repeat(Xp, w, axis=0), np.repeat(yp, w))
    assert est_w.lam_ == pytest.approx(est_r.lam_, rel=1e-9)
    np.testing.assert_allclose(est_w.predict(X_test), est_r.predict(X_test), rtol=1e-12)


def test_a_budget_between_two_path_points_names_them_in_squared_error(data):
    X, y, _, _, costs = data
    rf = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0).fit(X[:300], y[:300])
    path = budget_prune_path(rf, X[300:], y[300:], costs, progress=False)
    score, cost = path.score(), path.cost
    levels = np.unique(cost)
    gaps = [
        ((lo + hi) / 2, hi)
        for lo, hi in zip(levels[:-1], levels[1:])
        if hi > 1.25 * lo and score[cost == hi].max() > score[path.best_within((lo + hi) / 2)]
    ]
    assert gaps, "the forest's path has no gap to test"
    budget, above = gaps[0]
    with pytest.warns(
        UserWarning, match=rf"falls between two prunings.*mean squared error.*give budget={above:.4g}"
    ):
        BudgetPrunedRegressor(rf, costs=costs, budget=budget, progress=False).fit(X[300:], y[300:])


def test_each_estimator_refuses_the_other_task(data):
    X, y, _, _, costs = data
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


def _expected_failures(estimator):
    if isinstance(estimator.estimator, RandomForestRegressor):
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
        BudgetPrunedRegressor(DecisionTreeRegressor(max_depth=4, random_state=0), lam=0.001, progress=False),
        # a random forest, pruned to a budget along the lambda path
        BudgetPrunedRegressor(
            RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0), budget=2.0, progress=False
        ),
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


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
