"""scikit-learn import: trees, forests and gradient boosting reproduce scikit-learn's outputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.dummy import DummyRegressor
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor, ExtraTreeRegressor

from tests._helpers.importers import SETTINGS, assert_close, make_data, matrices
from thrifty.forest import Forest


class Case:
    """A fitted model with what the tests need about it."""

    def __init__(
        self,
        model: Any,
        n_features: int = 4,
        *,
        nan: bool = True,
        inf: bool = False,
        categorical: dict[int, int] | None = None,
    ):
        self.model, self.n_features = model, n_features
        self.nan, self.inf = nan, inf  # what the estimator accepts at predict time
        self.categorical = categorical or {}
        self.forest: Forest | None = None
        self.thresholds: dict = {}

    def __repr__(self) -> str:  # keeps hypothesis' failure reports short
        return f"Case({type(self.model).__name__})"


def _labels(X: np.ndarray, rng: np.random.Generator, k: int = 2) -> np.ndarray:
    score = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 3]) + rng.normal(scale=0.3, size=len(X))
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))


def _target(X: np.ndarray) -> np.ndarray:
    return 2 * np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) ** 2


def _tree_clf(rng):  # binary decision tree, NaN seen in training (missing_go_to_left)
    X = make_data(rng, nan_fraction=0.1)
    return Case(DecisionTreeClassifier(max_depth=6, random_state=0).fit(X, _labels(X, rng)))


def _tree_clf_multi(rng):  # string classes, class weights: leaves hold weighted fractions
    X = make_data(rng)
    y = np.array(["lo", "mid", "hi"])[_labels(X, rng, 3)]
    weights = {"lo": 2.0, "mid": 1.0, "hi": 0.5}
    model = DecisionTreeClassifier(max_leaf_nodes=20, class_weight=weights)
    return Case(model.fit(X, y))


def _tree_reg(rng):  # regression tree trained without NaN: NaN follows the default child
    X = make_data(rng)
    return Case(DecisionTreeRegressor(max_depth=7, random_state=0).fit(X, _target(X)))


def _extra_tree_reg(rng):  # a single extra tree (random thresholds)
    X = make_data(rng, nan_fraction=0.05)
    return Case(ExtraTreeRegressor(max_depth=6, random_state=0).fit(X, _target(X)))


def _rf_binary(rng):  # averaged class distributions; binary: one output P(class 1)
    X = make_data(rng, nan_fraction=0.1)
    model = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0)
    return Case(model.fit(X, _labels(X, rng)))


def _rf_multiclass(rng):  # vector leaves (tree_class -1)
    X = make_data(rng)
    model = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0)
    return Case(model.fit(X, _labels(X, rng, 3) + 10))


def _rf_regressor(rng):
    X = make_data(rng, nan_fraction=0.05)
    model = RandomForestRegressor(n_estimators=20, max_depth=6, random_state=0)
    return Case(model.fit(X, _target(X)))


def _et_multiclass(rng):  # extra-trees with NaN support
    X = make_data(rng, nan_fraction=0.1)
    model = ExtraTreesClassifier(n_estimators=20, max_depth=6, random_state=0)
    return Case(model.fit(X, _labels(X, rng, 4)))


def _et_regressor(rng):
    X = make_data(rng)
    model = ExtraTreesRegressor(n_estimators=20, max_depth=6, random_state=0)
    return Case(model.fit(X, _target(X)))


def _gb_binary(rng):  # log-loss: base = logit of the prior, sigmoid link (no NaN support)
    X = make_data(rng)
    model = GradientBoostingClassifier(n_estimators=25, max_depth=3, random_state=0)
    return Case(model.fit(X, _labels(X, rng)), nan=False)


def _gb_multiclass(rng):  # K trees per stage, softmax
    X = make_data(rng)
    model = GradientBoostingClassifier(n_estimators=15, max_depth=2, subsample=0.8, random_state=0)
    return Case(model.fit(X, _labels(X, rng, 3)), nan=False)


def _gb_huber(rng):  # huber loss: identity link, base = the init median
    X = make_data(rng)
    model = GradientBoostingRegressor(loss="huber", n_estimators=25, random_state=0)
    return Case(model.fit(X, _target(X)), nan=False)


def _gb_quantile_zero_init(rng):  # quantile loss with init="zero": base 0
    X = make_data(rng)
    model = GradientBoostingRegressor(loss="quantile", alpha=0.8, init="zero", n_estimators=20)
    return Case(model.fit(X, _target(X)), nan=False)


def _gb_early_stopped(rng):  # n_iter_no_change: only n_estimators_ stages
    X = make_data(rng, n=400)
    model = GradientBoostingRegressor(
        loss="absolute_error", n_estimators=200, n_iter_no_change=3, learning_rate=0.5, random_state=0
    )
    model.fit(X, _target(X) + rng.normal(scale=3, size=len(X)))
    assert model.n_estimators_ < 200
    return Case(model, nan=False)


def _hgb_binary(rng):  # NaN and infinities are accepted by HistGradientBoosting
    X = make_data(rng, nan_fraction=0.1)
    model = HistGradientBoostingClassifier(max_iter=25, max_leaf_nodes=8)
    return Case(model.fit(X, _labels(X, rng)), inf=True)


def _hgb_multiclass(rng):
    X = make_data(rng, nan_fraction=0.05)
    model = HistGradientBoostingClassifier(max_iter=15, max_leaf_nodes=8)
    return Case(model.fit(X, _labels(X, rng, 3)), inf=True)


def _hgb_regressor(rng):
    X = make_data(rng, nan_fraction=0.1)
    model = HistGradientBoostingRegressor(max_iter=25, max_leaf_nodes=8, loss="absolute_error")
    return Case(model.fit(X, _target(X)), inf=True)


def _hgb_categorical(rng):  # categories given by index on a NumPy array of raw values
    X = make_data(rng, n=400, nan_fraction=0.05)
    X[:, 1] = rng.choice([0.0, 2.0, 3.0, 7.0, 11.0, 12.0, 40.0], len(X))  # not 0..k-1
    X[rng.random(len(X)) < 0.05, 1] = np.nan
    y = (np.isin(X[:, 1], [2.0, 11.0, 40.0]) ^ (np.nan_to_num(X[:, 0]) > 0)).astype(int)
    model = HistGradientBoostingClassifier(max_iter=20, categorical_features=[1])
    return Case(model.fit(X, y), inf=True, categorical={1: 41})


BUILDERS: dict[str, Callable[[np.random.Generator], Case]] = {
    "tree_clf": _tree_clf,
    "tree_clf_multi": _tree_clf_multi,
    "tree_reg": _tree_reg,
    "extra_tree_reg": _extra_tree_reg,
    "rf_binary": _rf_binary,
    "rf_multiclass": _rf_multiclass,
    "rf_regressor": _rf_regressor,
    "et_multiclass": _et_multiclass,
    "et_regressor": _et_regressor,
    "gb_binary": _gb_binary,
    "gb_multiclass": _gb_multiclass,
    "gb_huber": _gb_huber,
    "gb_quantile_zero_init": _gb_quantile_zero_init,
    "gb_early_stopped": _gb_early_stopped,
    "hgb_binary": _hgb_binary,
    "hgb_multiclass": _hgb_multiclass,
    "hgb_regressor": _hgb_regressor,
    "hgb_categorical": _hgb_categorical,
}


def _raw(model: Any, X: np.ndarray) -> np.ndarray:
    """scikit-learn's raw score: decision function, raw prediction or (for averages) predict."""
    if isinstance(model, (HistGradientBoostingClassifier, HistGradientBoostingRegressor)):
        raw = model._raw_predict(X)
        return raw[:, 0] if raw.shape[1] == 1 else raw
    if isinstance(model, GradientBoostingClassifier):
        return model.decision_function(X)
    if hasattr(model, "predict_proba"):  # averaged class distributions
        proba = model.predict_proba(X)
        return proba[:, 1] if proba.shape[1] == 2 else proba
    return model.predict(X)


def _leaves(model: Any, X: np.ndarray) -> np.ndarray | None:
    """The node each example reaches in each tree, in the forest's tree order."""
    if isinstance(model, (HistGradientBoostingClassifier, HistGradientBoostingRegressor)):
        return None  # no apply()
    leaves = model.apply(X)
    return leaves.reshape(len(X), -1)


@given(data=st.data())
@SETTINGS
def test_predictions_match_sklearn(case, data):
    X = data.draw(
        matrices(case.n_features, case.thresholds, categorical=case.categorical, nan=case.nan, inf=case.inf)
    )
    _check(case, X)


def _check(case: Case, X: np.ndarray) -> None:
    forest, model = case.forest, case.model
    raw = forest.predict_raw(X)
    if len(X) == 0:
        assert raw.shape[0] == 0
        return
    assert_close(raw, _raw(model, X))
    if forest.is_classifier:
        proba = model.predict_proba(X)
        assert_close(forest.predict_proba(X), proba)
        # Labels agree wherever the two best classes are not tied (ties break on rounding).
        top = np.sort(proba, axis=1)
        clear = top[:, -1] - top[:, -2] > 1e-9
        assert np.array_equal(forest.predict(X)[clear], model.predict(X)[clear])
    else:
        assert_close(forest.predict(X), model.predict(X))
    expected = _leaves(model, X)
    if expected is not None:
        np.testing.assert_array_equal(forest.apply(X) - forest.roots, expected)


def test_empty_and_single_row(case):
    empty = np.zeros((0, case.n_features))
    one = np.ones((1, case.n_features))
    assert case.forest.predict_raw(empty).shape == _raw(case.model, one)[:0].shape
    assert case.forest.apply(empty).shape == (0, case.forest.n_trees)
    _check(case, one)


def test_structure(case):
    forest, model = case.forest, case.model
    assert forest.source == f"sklearn:{type(model).__name__}"
    assert forest.n_features == model.n_features_in_
    if hasattr(model, "classes_"):
        assert list(forest.classes) == list(model.classes_)
    if isinstance(model, (GradientBoostingClassifier, GradientBoostingRegressor)):
        assert forest.n_trees == model.estimators_[: model.n_estimators_].size
        np.testing.assert_array_equal(forest.tree_weight, model.learning_rate)
    if isinstance(
        model, (RandomForestClassifier, RandomForestRegressor, ExtraTreesClassifier, ExtraTreesRegressor)
    ):
        assert forest.aggregation == "mean"
        np.testing.assert_array_equal(forest.tree_weight, 1.0 / len(model.estimators_))
    if not isinstance(model, (HistGradientBoostingClassifier, HistGradientBoostingRegressor)):
        assert forest.input_dtype == "float32"  # scikit-learn trees compare in float32


# ----------------------------------------------------------------- pandas categorical columns
@pytest.fixture(scope="module")
def pandas_hgb():
    rng = np.random.default_rng(11)
    n = 400
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "size": rng.normal(size=n),
            # missing colours in training: the encoder then lists NaN as a last "category"
            "color": pd.Categorical(
                rng.choice(["red", "green", "blue", "plum", "teal", None], n),
                categories=["teal", "red", "plum", "green", "blue"],
            ),
            "z": rng.normal(size=n),
        }
    )
    y = (frame.color.isin(["red", "plum"]) ^ (frame.x > 0)).astype(int) + (frame.z > 1)
    return HistGradientBoostingClassifier(max_iter=15).fit(frame, y)


def test_pandas_category_columns_are_remapped(pandas_hgb):
    forest = Forest.from_model(pandas_hgb)
    # scikit-learn's encoder sorts the categories; splits test positions in this list
    assert forest.categories == {2: ["blue", "green", "plum", "red", "teal"]}
    assert forest.feature_names == ["x", "size", "color", "z"]
    # the encoded column moved first inside scikit-learn; the forest keeps original positions
    assert 2 in forest.feature[forest.cat_start >= 0]


@given(data=st.data())
@SETTINGS
def test_pandas_predictions_match_with_unseen_categories(pandas_hgb, data):
    forest = Forest.from_model(pandas_hgb)
    n = data.draw(st.integers(1, 25))
    floats = st.one_of(st.floats(-3, 3), st.just(np.nan), st.just(np.inf))
    frame = pd.DataFrame(
        {
            "x": data.draw(st.lists(floats, min_size=n, max_size=n)),
            "size": data.draw(st.lists(floats, min_size=n, max_size=n)),
            "color": pd.Categorical(
                data.draw(
                    st.lists(
                        st.sampled_from(["red", "green", "blue", "plum", "teal", "mauve", None]),
                        min_size=n,
                        max_size=n,
                    )
                ),
                categories=["mauve", "blue", "green", "plum", "red", "teal"],
            ),
            "z": data.draw(st.lists(floats, min_size=n, max_size=n)),
        }
    )
    assert_close(forest.predict_raw(frame), pandas_hgb._raw_predict(frame))
    assert_close(forest.predict_proba(frame), pandas_hgb.predict_proba(frame))


# ----------------------------------------------------------------- unsupported models
@pytest.fixture(scope="module")
def small_data():
    rng = np.random.default_rng(5)
    X = make_data(rng, n=120)
    return X, (X[:, 0] > 0).astype(int), _target(X)


@pytest.mark.parametrize(
    "make, match",
    [
        # probability is sigmoid(2 * raw), not a sigmoid link
        (
            lambda X, y, t: GradientBoostingClassifier(loss="exponential", n_estimators=2).fit(X, y),
            "exponential",
        ),
        # an init estimator whose raw prediction depends on X
        (
            lambda X, y, t: GradientBoostingRegressor(init=LinearRegression(), n_estimators=2).fit(X, t),
            "init estimator",
        ),
        (
            lambda X, y, t: GradientBoostingRegressor(init=DummyRegressor(), n_estimators=2).fit(X, t),
            "init estimator",
        ),
        # log link (prediction is exp of the raw score)
        (
            lambda X, y, t: HistGradientBoostingRegressor(loss="poisson", max_iter=2).fit(X, np.abs(t)),
            "poisson",
        ),
        # two outputs
        (lambda X, y, t: RandomForestRegressor(n_estimators=2).fit(X, np.column_stack([t, t])), "2 outputs"),
        (lambda X, y, t: DecisionTreeClassifier().fit(X, np.column_stack([y, y])), "2 outputs"),
    ],
)
def test_unsupported_sklearn_models_raise(make, match, small_data):
    with pytest.raises(ValueError, match=match):
        Forest.from_model(make(*small_data))


@pytest.mark.parametrize(
    "model",
    [
        LinearRegression(),  # not a tree model
        make_pipeline(StandardScaler(), DecisionTreeRegressor()),  # pipelines are not unwrapped
        object(),  # not a model at all
        "a string",
    ],
)
def test_unsupported_types_raise_type_error_listing_supported(model):
    with pytest.raises(TypeError, match=r"cannot import a model of type .*supported models are"):
        Forest.from_model(model)


def test_unfitted_model_raises():
    with pytest.raises(NotFittedError):
        Forest.from_model(RandomForestClassifier())


def test_forest_passes_through(small_data):
    forest = Forest.from_model(DecisionTreeRegressor(max_depth=2).fit(small_data[0], small_data[2]))
    assert Forest.from_model(forest) is forest
