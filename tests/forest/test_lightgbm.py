"""LightGBM import: raw scores, probabilities and leaves match LightGBM's own predictions."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import thrifty
from tests._helpers.importers import SETTINGS, assert_close, make_data, matrices
from thrifty.forest import Forest

lgb = pytest.importorskip("lightgbm")

SMALL = {"n_estimators": 25, "num_leaves": 8, "min_child_samples": 5, "verbose": -1}


class Case:
    """A fitted model with what the tests need about it."""

    def __init__(self, model: Any, n_features: int, categorical: dict[int, int] | None = None):
        self.model, self.n_features, self.categorical = model, n_features, categorical or {}
        self.forest: Forest | None = None
        self.thresholds: dict = {}

    def __repr__(self) -> str:  # keeps hypothesis' failure reports short
        return f"Case({self.model!r})"

    @property
    def booster(self) -> Any:
        return self.model if isinstance(self.model, lgb.Booster) else self.model.booster_


def _labels(X: np.ndarray, rng: np.random.Generator, k: int = 2) -> np.ndarray:
    noise = rng.normal(scale=0.3, size=len(X))
    score = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) + noise
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))


def _binary_nan(rng):  # NaN in training data: missing_type NaN splits with learned default
    X = make_data(rng, nan_fraction=0.15)
    return Case(lgb.LGBMClassifier(**SMALL).fit(X, _labels(X, rng)), 4)


def _multiclass(rng):  # string labels, softmax over 3 classes
    X = make_data(rng)
    y = np.array(["ant", "bee", "cat"])[_labels(X, rng, 3)]
    return Case(lgb.LGBMClassifier(**SMALL).fit(X, y), 4)


def _zero_as_missing(rng):  # missing_type Zero: NaN and zeros go the default way
    X = make_data(rng, nan_fraction=0.1, zero_fraction=0.2)
    params = {
        "objective": "regression",
        "zero_as_missing": True,
        "num_leaves": 8,
        "verbose": -1,
        "min_data_in_leaf": 5,
    }
    return Case(lgb.train(params, lgb.Dataset(X, np.nan_to_num(X[:, 0]) * 2), 20), 4)


def _no_missing(rng):  # use_missing=False: missing_type None, NaN is read as 0.0
    X = make_data(rng, nan_fraction=0.1)
    params = {
        "objective": "huber",
        "use_missing": False,
        "num_leaves": 8,
        "verbose": -1,
        "min_data_in_leaf": 5,
    }
    return Case(lgb.train(params, lgb.Dataset(X, np.nan_to_num(X[:, 1]) - X[:, 2]), 20), 4)


def _lambdarank(rng):  # ranking objective: identity link
    X = make_data(rng)
    model = lgb.LGBMRanker(**SMALL).fit(X, _labels(X, rng, 4), group=[50] * 6)
    return Case(model, 4)


def _rf_binary(rng):  # boosting="rf": trees averaged (average_output)
    X = make_data(rng, nan_fraction=0.05)
    model = lgb.LGBMClassifier(boosting_type="rf", bagging_fraction=0.7, bagging_freq=1, **SMALL).fit(
        X, _labels(X, rng)
    )
    return Case(model, 4)


def _rf_multiclass(rng):  # rf with 3 classes: each class averaged over the iterations
    X = make_data(rng)
    model = lgb.LGBMClassifier(boosting_type="rf", bagging_fraction=0.7, bagging_freq=1, **SMALL).fit(
        X, _labels(X, rng, 3)
    )
    return Case(model, 4)


def _categorical_codes(rng):  # integer-coded categories (many-vs-many bitset splits)
    X = make_data(rng, n=400, cat_levels={1: 12, 3: 3}, nan_fraction=0.05)
    codes = np.nan_to_num(X[:, 1], nan=0).astype(int)
    y = (np.isin(codes, [1, 4, 5, 9]) ^ (np.nan_to_num(X[:, 0]) > 0)).astype(int)
    model = lgb.LGBMClassifier(min_data_per_group=5, cat_smooth=1, max_cat_to_onehot=2, **SMALL)
    model.fit(X, y, categorical_feature=[1, 3])
    return Case(model, 4, {1: 12, 3: 3})


def _single_leaf(rng):  # no split is possible: every tree is one leaf
    X = make_data(rng)
    params = {"objective": "regression", "min_data_in_leaf": 200, "verbose": -1}
    return Case(lgb.train(params, lgb.Dataset(X, X[:, 0]), 5), 4)


def _early_stopped(rng):  # best_iteration < n_estimators: predict uses best_iteration
    X = make_data(rng, n=400)
    y = X[:, 0] + rng.normal(scale=2.0, size=len(X))
    model = lgb.LGBMRegressor(n_estimators=60, learning_rate=0.5, num_leaves=16, verbose=-1)
    model.fit(
        X[:200],
        y[:200],
        eval_X=(X[200:],),
        eval_y=(y[200:],),
        callbacks=[lgb.early_stopping(3, verbose=False)],
    )
    assert 0 < model.best_iteration_ < 60
    return Case(model, 4)


def _dart(rng):  # dart rescales dropped trees in place; prediction is a plain sum
    X = make_data(rng)
    model = lgb.LGBMClassifier(boosting_type="dart", drop_rate=0.3, **SMALL)
    return Case(model.fit(X, _labels(X, rng)), 4)


BUILDERS: dict[str, Callable[[np.random.Generator], Case]] = {
    "binary_nan": _binary_nan,
    "multiclass": _multiclass,
    "zero_as_missing": _zero_as_missing,
    "no_missing": _no_missing,
    "lambdarank": _lambdarank,
    "rf_binary": _rf_binary,
    "rf_multiclass": _rf_multiclass,
    "categorical_codes": _categorical_codes,
    "single_leaf": _single_leaf,
    "early_stopped": _early_stopped,
    "dart": _dart,
}


def _check(case: Case, forest: Forest, X: np.ndarray) -> None:
    raw = forest.predict_raw(X)
    if len(X) == 0:
        assert raw.shape[0] == 0
        return
    expected = case.model.predict(X, raw_score=True)
    dump = case.booster.dump_model()
    if dump["average_output"]:
        # LightGBM's raw_score of a random forest is the *sum* of its trees (PredictRaw skips
        # the averaging that Predict applies before the link); the forest's raw score is the
        # average, whose sigmoid/softmax is LightGBM's probability.
        expected = expected / (len(dump["tree_info"]) // dump["num_tree_per_iteration"])
    assert_close(raw, expected)
    if forest.is_classifier:
        assert_close(forest.predict_proba(X), case.model.predict_proba(X))
        assert np.array_equal(forest.predict(X), case.model.predict(X))
    # Leaf by leaf: the forest reaches a leaf with LightGBM's value in every tree.
    leaves = case.booster.predict(X, pred_leaf=True).reshape(len(X), -1)
    ours = forest.value[forest.apply(X), 0]
    for t, info in enumerate(dump["tree_info"]):
        values = _leaf_values(info["tree_structure"])
        np.testing.assert_array_equal(ours[:, t], values[leaves[:, t]])


def _leaf_values(node: dict) -> np.ndarray:
    out: dict[int, float] = {}
    stack = [node]
    while stack:
        n = stack.pop()
        if "split_index" in n:
            stack.extend((n["left_child"], n["right_child"]))
        else:
            out[n.get("leaf_index", 0)] = n["leaf_value"]
    return np.array([out[i] for i in range(len(out))])


@given(data=st.data())
@SETTINGS
def test_predictions_match_lightgbm(case, data):
    X = data.draw(matrices(case.n_features, case.thresholds, categorical=case.categorical))
    _check(case, case.forest, X)


def test_empty_and_single_row(case):
    forest = case.forest
    empty = np.zeros((0, case.n_features))
    expected = (0,) if forest.n_outputs == 1 else (0, forest.n_outputs)
    assert forest.predict_raw(empty).shape == expected
    assert forest.apply(empty).shape == (0, forest.n_trees)
    if forest.is_classifier:
        assert forest.predict_proba(empty).shape == (0, max(2, forest.n_outputs))
    _check(case, forest, np.ones((1, case.n_features)))


def test_structure(case):
    forest = case.forest
    booster = case.booster
    dump = booster.dump_model()
    n_per_iter = dump["num_tree_per_iteration"]
    assert forest.n_trees == len(dump["tree_info"])
    assert forest.source == "lightgbm"
    assert forest.feature_names == dump["feature_names"]
    if dump.get("average_output"):
        assert forest.aggregation == "mean"
        np.testing.assert_allclose(forest.tree_weight, n_per_iter / forest.n_trees)
    if isinstance(case.model, lgb.LGBMClassifier):
        assert list(forest.classes) == list(case.model.classes_)
    if isinstance(case.model, lgb.LGBMRegressor) and case.model.best_iteration_:
        assert forest.n_trees == case.model.best_iteration_
    if case.categorical:
        assert np.any(forest.cat_start >= 0)


# ----------------------------------------------------------------- pandas categorical columns
@pytest.fixture(scope="module")
def pandas_model(rng):
    n = 400
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "color": pd.Categorical(rng.choice(["red", "green", "blue", "plum", "teal"], n)),
            "size": rng.integers(0, 4, n).astype(float),
            "grade": pd.Categorical(rng.choice([10, 20, 30, 40], n), categories=[40, 10, 30, 20]),
        }
    )
    y = (frame.color.isin(["red", "plum"]) ^ (frame.x > 0) ^ (frame.grade == 30)).astype(int)
    model = lgb.LGBMClassifier(min_data_per_group=5, cat_smooth=1, max_cat_to_onehot=2, **SMALL)
    return model.fit(frame, y)


def test_pandas_categories_are_stored(pandas_model):
    forest = Forest.from_model(pandas_model)
    assert forest.categories == {1: ["blue", "green", "plum", "red", "teal"], 3: [40, 10, 30, 20]}


@given(data=st.data())
@SETTINGS
def test_pandas_predictions_match_with_unseen_categories(pandas_model, data):
    forest = Forest.from_model(pandas_model)
    n = data.draw(st.integers(1, 25))
    color = st.sampled_from(["red", "green", "blue", "plum", "teal", "mauve", None])
    frame = pd.DataFrame(
        {
            "x": data.draw(st.lists(st.one_of(st.floats(-3, 3), st.just(np.nan)), min_size=n, max_size=n)),
            # the prediction frame's categories differ from training (order, unseen values)
            "color": pd.Categorical(
                data.draw(st.lists(color, min_size=n, max_size=n)),
                categories=["teal", "mauve", "red", "green", "blue", "plum"],
            ),
            "size": data.draw(
                st.lists(st.sampled_from([0.0, 1.0, 2.5, 3.0, np.nan]), min_size=n, max_size=n)
            ),
            "grade": pd.Categorical(
                data.draw(st.lists(st.sampled_from([10, 20, 30, 40, 50]), min_size=n, max_size=n))
            ),
        }
    )
    assert_close(forest.predict_raw(frame), pandas_model.predict(frame, raw_score=True))
    assert_close(forest.predict_proba(frame), pandas_model.predict_proba(frame))


def test_ordered_pandas_category_is_ambiguous(rng):
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=200),
            "c": pd.Categorical(rng.choice(list("abc"), 200)),
            "o": pd.Categorical(rng.choice(list("pq"), 200), ordered=True),
        }
    )
    model = lgb.LGBMRegressor(n_estimators=2, verbose=-1).fit(frame, frame.x)
    with pytest.raises(ValueError, match="pandas categorical"):
        Forest.from_model(model)


# ----------------------------------------------------------------- unsupported models
def _train(params: dict, rng, y=None, rounds: int = 2) -> Any:
    X = make_data(rng, n=200)
    y = np.abs(X[:, 0]) if y is None else y
    return lgb.train({"verbose": -1, **params}, lgb.Dataset(X, y), rounds)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"objective": "poisson"}, "poisson"),  # exp link
        ({"objective": "tweedie"}, "tweedie"),  # exp link
        ({"objective": "cross_entropy"}, "cross_entropy"),  # sigmoid on a regression
        ({"objective": "regression", "reg_sqrt": True}, "reg_sqrt"),  # sign(raw) * raw**2
        ({"objective": "binary", "sigmoid": 2.0}, "sigmoid=2"),  # probability is sigmoid(2 raw)
        ({"linear_tree": True}, "linear trees"),  # leaves are linear models
    ],
)
def test_unsupported_lightgbm_models_raise(params, match, rng):
    y = None
    if params.get("objective") in ("cross_entropy", "binary"):
        y = (rng.random(200) < 0.5).astype(float)
    with pytest.raises(ValueError, match=match):
        Forest.from_model(_train(params, rng, y))


def test_multiclassova_raises(rng):  # one-vs-all sigmoids, not a softmax
    booster = _train({"objective": "multiclassova", "num_class": 3}, rng, y=rng.integers(0, 3, 200))
    with pytest.raises(ValueError, match="multiclassova"):
        Forest.from_model(booster)


def test_custom_objective_classifier_raises(rng):
    def logloss(y, raw):
        p = 1 / (1 + np.exp(-raw))
        return p - y, p * (1 - p)

    X = make_data(rng, n=200)
    model = lgb.LGBMClassifier(objective=logloss, n_estimators=2, verbose=-1)
    model.fit(X, (X[:, 0] > 0).astype(int))
    with pytest.raises(ValueError, match="custom objective"):
        Forest.from_model(model)


def test_custom_objective_regressor_is_identity(rng):
    def l2(y, raw):
        return raw - y, np.ones_like(raw)

    X = make_data(rng, n=200)
    model = lgb.LGBMRegressor(objective=l2, n_estimators=3, verbose=-1).fit(X, X[:, 0])
    assert_close(Forest.from_model(model).predict_raw(X), model.predict(X, raw_score=True))


def test_unfitted_model_raises():
    with pytest.raises(Exception, match="not fitted|No booster"):
        Forest.from_model(lgb.LGBMClassifier())


def test_numbers_beyond_1e300_go_where_lightgbm_sends_them():
    """A split that separates missing values from every number has threshold +inf in the
    model, which LightGBM's JSON dump writes as 1e300: infinity and 1e301 go left there.
    Imported, such rows score as LightGBM scores them (interpreter and compiled code), where
    comparing with 1e300 itself sent them right."""
    rng = np.random.default_rng(29)
    X = rng.normal(size=(6000, 6))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) + np.sin(3 * np.nan_to_num(X[:, 2])) > 0).astype(int)
    model = lgb.LGBMClassifier(
        n_estimators=5, num_leaves=160, min_child_samples=2, verbose=-1, random_state=0
    )
    model.fit(X, y)
    lines = re.findall(r"^threshold=(.*)$", model.booster_.model_to_string(), re.MULTILINE)
    dumped = [float(t) for line in lines for t in line.split()]
    assert np.inf in dumped  # the case this test is about is in the model
    forest = Forest.from_model(model)
    specials = np.array([np.inf, -np.inf, 1e301, -1e301, 1e300, -1e300, 1e299, np.nan, 0.0, 1.0, -1.0])
    T = rng.choice(specials, size=(3000, 6))
    expected = model.booster_.predict(T, raw_score=True)
    np.testing.assert_array_equal(forest.predict_raw(T), expected)
    np.testing.assert_array_equal(thrifty.compile(thrifty.Full(forest)).evaluate(T).raw, expected)
