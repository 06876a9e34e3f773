"""The declared-constraints validator and the shared estimator base's selection and calibration."""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import pandas as pd
import pytest
from sklearn.linear_model import LogisticRegression

from thrifty._estimator import Candidate, ThriftyEstimator
from thrifty._param_validation import HasMethods, Interval, Options, StrOptions, validate_params
from thrifty._validation import as_forest, as_plan, check_sample_weight, is_fitted_model, to_frame
from thrifty.exceptions import BudgetError, InputError, InvalidParameterError, UnsupportedModelError

CONSTRAINTS = {
    "p": [Interval(Real, 0, 1, closed="neither")],
    "n": [Interval(Integral, 1, None, closed="left")],
    "method": [StrOptions({"gbrt", "lin"})],
    "flag": ["boolean"],
    "budget": [None, Interval(Real, 0, None, closed="neither")],
    "model": [HasMethods(["fit", "predict"])],
    "jobs": [Options(int, {-1}), Interval(Integral, 1, None, closed="left")],
    "seed": ["random_state"],
    "costs": [None, "cost-model"],
}
GOOD = dict(
    p=0.5, n=3, method="lin", flag=True, budget=None, model=LogisticRegression(), jobs=-1, seed=0, costs=None
)


def test_valid_parameters_pass():
    validate_params(CONSTRAINTS, GOOD, "Est")
    validate_params(CONSTRAINTS, {**GOOD, "budget": 2, "jobs": 4, "costs": {"a": 1.0}}, "Est")


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("p", 1.0, r"p must be a float in the range \(0, 1\), got 1.0"),
        ("p", float("nan"), "p must be"),
        ("n", 0, "n must be an int >= 1, got 0"),
        ("n", 2.0, "n must be an int"),
        ("n", True, "n must be an int"),
        ("method", "tree", "method must be a str among 'gbrt', 'lin', got 'tree'"),
        ("flag", 1, "flag must be a bool"),
        ("budget", -1, "budget must be None or a float > 0, got -1"),
        ("model", 3, r"model must be an object with fit\(\), predict\(\)"),
        ("jobs", 0, "jobs must be one of -1 or an int >= 1, got 0"),
        ("seed", "x", "seed must be an int in"),
        ("costs", "cheap", "costs must be None or a CostModel"),
    ],
)
def test_invalid_parameters_name_the_problem(name, value, message):
    with pytest.raises(InvalidParameterError, match=message) as info:
        validate_params(CONSTRAINTS, {**GOOD, name: value}, "Est")
    assert str(info.value).startswith("Est: ")
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


def test_undeclared_parameter_is_a_bug():
    with pytest.raises(InvalidParameterError, match="'other' has no declared constraints"):
        validate_params(CONSTRAINTS, {**GOOD, "other": 1}, "Est")


class Picker(ThriftyEstimator):
    def __init__(self, budget=None):
        self.budget = budget


def test_select_best_metric_within_budget_ties_to_cheaper():
    cands = [
        Candidate({"k": 1}, 1.0, 0.7),
        Candidate({"k": 2}, 2.0, 0.9),
        Candidate({"k": 3}, 2.5, 0.9),
        Candidate({"k": 4}, 5.0, 0.95),
    ]
    est = Picker(budget=3.0)
    assert est._select(cands).params == {"k": 2}
    table = est.budget_search_
    assert list(table.columns) == ["candidate", "k", "cost", "metric", "chosen"]
    assert table["chosen"].tolist() == [False, True, False, False]
    assert Picker(budget=10.0)._select(cands).params == {"k": 4}


def test_select_by_cost_when_no_metric_and_the_budget_error():
    cands = [Candidate({"lam": 1.0}, 3.0), Candidate({"lam": 0.1}, 6.0), Candidate({"lam": 0.01}, 9.0)]
    assert Picker(budget=7.0)._select(cands).params == {"lam": 0.1}
    with pytest.raises(BudgetError, match=r"budget=2.*cheapest of the 3 tried costs 3.*at least 3") as info:
        Picker(budget=2.0)._select(cands)
    assert len(info.value.budget_search) == 3
    est = Picker()
    assert est._select([cands[0]]) is cands[0] and len(est.budget_search_) == 1


def test_calibration_default_train_split_and_given():
    X = np.arange(40, dtype=float).reshape(20, 2)
    y = np.array([0, 1] * 10)
    est = Picker()
    s = est._calibration(X, y, None, None)
    assert s.X_cal is X and s.y_cal is y
    s = est._calibration(X, y, np.ones(20), None, default="split", fraction=0.25, random_state=0)
    assert len(s.y) == 15 and len(s.y_cal) == 5 and len(s.w_cal) == 5
    assert set(s.X[:, 0]).isdisjoint(s.X_cal[:, 0]) and set(s.y_cal) == {0, 1}
    s = est._calibration(X, y, None, (X[:4], y[:4], [1, 2, 3, 4]))
    assert s.w_cal.tolist() == [1, 2, 3, 4]
    with pytest.raises(InputError, match="X has 3 features, but the training X has 2"):
        est._calibration(X, y, None, (np.ones((4, 3)), y[:4]))
    with pytest.raises(InputError, match="calibration must be a tuple"):
        est._calibration(X, y, None, X)
    frame = pd.DataFrame(X, columns=["a", "b"])
    with pytest.raises(InputError, match="other column names"):
        est._calibration(frame, y, None, (frame.rename(columns={"a": "c"}), y))


def test_sample_weight_checks():
    assert check_sample_weight(None, 3) is None
    assert check_sample_weight(2, 3).tolist() == [2, 2, 2]
    for bad, message in [
        ([1, 2], "2 values for 3 rows"),
        ([1, -1, 1], ">= 0"),
        ([0, 0, 0], "all weights zero"),
    ]:
        with pytest.raises(InputError, match=message):
            check_sample_weight(bad, 3)


def test_to_frame_keeps_polars_names_and_categories():
    pl = pytest.importorskip("polars")
    df = pl.DataFrame({"age": [1.0, 2.0], "city": pl.Series(["a", "b"], dtype=pl.Categorical)})
    out = to_frame(df)
    assert list(out.columns) == ["age", "city"] and isinstance(out["city"].dtype, pd.CategoricalDtype)


def test_to_frame_keeps_pyarrow_names_and_categories():
    pa = pytest.importorskip("pyarrow")
    table = pa.table({"x": [1.0, 2.0], "c": pa.array(["u", "v"]).dictionary_encode()})
    out = to_frame(table)
    assert list(out.columns) == ["x", "c"] and isinstance(out["c"].dtype, pd.CategoricalDtype)


def test_to_frame_passes_arrays_through():
    arr = np.ones((2, 2))
    assert to_frame(arr) is arr


def test_as_forest_and_as_plan():
    from sklearn.frozen import FrozenEstimator
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    from thrifty.forest import Forest
    from thrifty.runtime import Full

    X = np.random.default_rng(0).normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(int)
    tree = DecisionTreeClassifier(max_depth=2, random_state=0).fit(X, y)
    forest = as_forest(tree)
    assert isinstance(forest, Forest) and as_forest(forest) is forest
    np.testing.assert_array_equal(as_forest(FrozenEstimator(tree)).predict_proba(X), tree.predict_proba(X))
    plan = as_plan(tree)
    assert isinstance(plan, Full) and as_plan(plan) is plan
    assert not is_fitted_model(DecisionTreeClassifier()) and is_fitted_model(tree)
    with pytest.raises(InputError, match="needs a fitted DecisionTreeClassifier"):
        as_forest(DecisionTreeClassifier(), who="Pruning")
    with pytest.raises(UnsupportedModelError, match="cannot import a model of type"):
        as_forest(LogisticRegression().fit(X, y))


def test_fitted_model_and_fitted_forest():
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.tree import DecisionTreeClassifier

    from thrifty._validation import fitted_forest, fitted_model

    X = pd.DataFrame(np.random.default_rng(1).normal(size=(40, 3)), columns=["a", "b", "c"])
    y = (X["a"] > 0).astype(int).to_numpy()
    w = np.arange(40, dtype=float) % 3
    unfitted = DecisionTreeClassifier(max_depth=2, random_state=0)
    model, forest = fitted_forest(unfitted, X, y, w, who="Est")
    assert model is not unfitted and forest.feature_names == ["a", "b", "c"]
    reference = DecisionTreeClassifier(max_depth=2, random_state=0).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(forest.predict_proba(X), reference.predict_proba(X))
    assert fitted_model(model, X, y, who="Est") is model
    with pytest.raises(InputError, match="Est requires y to be passed"):
        fitted_model(unfitted, X, None, who="Est")
    with pytest.raises(InputError, match="KNeighborsClassifier.fit takes no sample_weight"):
        fitted_model(KNeighborsClassifier(), X, y, w, who="Est")
    with pytest.raises(InputError, match="X has 2 features, but the estimator's model was fitted on 3"):
        fitted_forest(model, X[["a", "b"]], y, who="Est")
