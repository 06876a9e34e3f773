"""Feature names as users write them: LightGBM's stored forms mapped back, through every importer."""

import lightgbm
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier

import thrifty
from tests._helpers.names import LIGHTGBM_OK, NASTY, XGBOOST_OK
from thrifty import CostModel, Forest
from thrifty.forest.names import align, check_unique, lightgbm_frame


def _frame(names, n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, len(names))), columns=names)
    y = (X.iloc[:, 0] + X.iloc[:, 1] - X.iloc[:, len(names) // 2] > 0).astype(int).to_numpy()
    return X, y


def _costs(names):
    return CostModel({n: float(i + 1) for i, n in enumerate(names)}, feature_names=names)


def _check_costs_by_name(forest, X, names):
    """evaluate finds each feature's cost by the user's name: the reported cost equals the sum
    of the prices of the acquired features."""
    ev = thrifty.evaluate(forest, X, _costs(names))
    prices = np.arange(1.0, len(names) + 1)
    np.testing.assert_allclose(ev.cost.feature, ev.cost.acquired @ prices)
    assert ev.cost.feature.max() > 0


def test_lightgbm_names_map_back_without_and_with_feature_names():
    X, y = _frame(LIGHTGBM_OK)
    model = lightgbm.LGBMClassifier(n_estimators=15, verbose=-1).fit(X, y)
    forest = Forest.from_model(model)
    assert forest.feature_names[0] == "blood_pressure"  # LightGBM's form, all it keeps
    np.testing.assert_allclose(forest.predict_proba(X), model.predict_proba(X), rtol=1e-12)
    _check_costs_by_name(forest, X, LIGHTGBM_OK)
    named = Forest.from_model(model, feature_names=list(X.columns))
    assert named.feature_names == LIGHTGBM_OK
    np.testing.assert_allclose(named.predict_proba(X), model.predict_proba(X), rtol=1e-12)
    # Columns in another order are matched by name.
    np.testing.assert_allclose(named.predict_proba(X[X.columns[::-1]]), model.predict_proba(X), rtol=1e-12)
    _check_costs_by_name(named, X, LIGHTGBM_OK)
    assert Forest.from_json(named.to_json()).feature_names == LIGHTGBM_OK


def test_lightgbm_booster_with_a_tab_in_a_name_imports():
    # LightGBM writes the tab unescaped into its JSON dump, which then does not parse.
    X, y = _frame(["tab\there", "z"])
    booster = lightgbm.train({"objective": "binary", "verbose": -1}, lightgbm.Dataset(X, y), 5)
    forest = Forest.from_model(booster)
    assert forest.feature_names == ["tab\there", "z"]
    np.testing.assert_allclose(forest.predict_raw(X), booster.predict(X, raw_score=True), rtol=1e-12)


def test_feature_names_that_do_not_match_the_model_are_refused():
    X, y = _frame(["a b", "c"])
    model = lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, y)
    with pytest.raises(ValueError, match=r"feature_names\[0\] is 'c' but the model's feature 0 is 'a_b'"):
        Forest.from_model(model, feature_names=["c", "a b"])
    with pytest.raises(ValueError, match="3 names but the model has 2 features"):
        Forest.from_model(model, feature_names=["a b", "c", "d"])
    with pytest.raises(ValueError, match=r"duplicate name\(s\) \['c'\]"):
        Forest.from_model(model, feature_names=["c", "c"])


def test_xgboost_keeps_names_exactly():
    xgboost = pytest.importorskip("xgboost")
    X, y = _frame(XGBOOST_OK)
    model = xgboost.XGBClassifier(n_estimators=10, max_depth=3).fit(X, y)
    forest = Forest.from_model(model)
    assert forest.feature_names == XGBOOST_OK
    np.testing.assert_array_equal(forest.predict_raw(X), model.predict(X, output_margin=True))
    _check_costs_by_name(forest, X, XGBOOST_OK)


@pytest.mark.parametrize(
    "make",
    [
        lambda: RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0),  # float32 trees
        lambda: HistGradientBoostingClassifier(max_iter=10),  # binned boosting
    ],
)
def test_sklearn_keeps_names_exactly(make):
    X, y = _frame(NASTY)
    model = make().fit(X, y)
    forest = Forest.from_model(model)
    assert forest.feature_names == NASTY
    np.testing.assert_allclose(forest.predict_proba(X), model.predict_proba(X), rtol=1e-9, atol=1e-12)
    _check_costs_by_name(forest, X, NASTY)


def test_a_frame_with_duplicate_columns_is_refused_naming_them():
    X, y = _frame(["a", "b", "c"])
    forest = Forest.from_model(RandomForestClassifier(n_estimators=2, random_state=0).fit(X, y))
    dup = X.set_axis(["a", "b", "a"], axis=1)
    with pytest.raises(ValueError, match=r"X has duplicate name\(s\) \['a'\]"):
        forest.predict(dup)
    with pytest.raises(ValueError, match=r"duplicate name\(s\) \['a'\]"):
        thrifty.evaluate(forest, dup)


def test_align_matches_exact_names_first_and_refuses_ambiguous_lightgbm_forms():
    assert align(["a_b", "c"], ["c", "a b"]) == [1, 0]
    assert align(["a_b"], ["a b", "a_b"]) == [1]  # the exact name wins
    assert align(["a_b_c"], ["a b_c", "a_b c"]) is None  # two names LightGBM stores as a_b_c
    assert align(["x"], ["y"]) is None


def test_cost_model_is_found_by_lightgbm_names():
    names = ["blood pressure", "a b", "c"]
    costs = CostModel(
        {"c": 3, "blood pressure": 1, "a b": 2},
        feature_names=names,
        groups={"panel": ["a b", "c"]},
        fixed_costs={"c": 7.0},
    )
    aligned = costs.for_features(["c", "blood_pressure", "a_b"], 3)
    assert aligned.feature_names == ["c", "blood_pressure", "a_b"]
    np.testing.assert_allclose(aligned.feature_costs, [3, 1, 2])
    np.testing.assert_allclose(aligned.fixed_costs, [7, 0, 0])
    assert aligned.acquisition_cost(["a_b"]) == 5.0  # the group is kept


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=6),
        min_size=2,
        max_size=4,
        unique=True,
    )
)
def test_any_unique_names_train_import_and_predict(names):
    # thrifty's own LightGBM training path: names LightGBM refuses become placeholders, and
    # the forest reads the user's names back.
    X, y = _frame(names, n=80, seed=len(names))
    model = lightgbm.LGBMClassifier(n_estimators=3, min_child_samples=5, verbose=-1)
    model.fit(lightgbm_frame(X), y)
    forest = Forest.from_model(model, feature_names=names)
    assert forest.feature_names == names
    np.testing.assert_allclose(forest.predict_proba(X), model.predict_proba(lightgbm_frame(X)), rtol=1e-12)


def test_check_unique_names_every_duplicate():
    check_unique(["a", "b"])
    with pytest.raises(ValueError, match=r"X has duplicate name\(s\) \['a', 'b'\]"):
        check_unique(["a", "b", "a", "b", "c"])
