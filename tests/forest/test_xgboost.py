"""XGBoost import: leaves match exactly, margins and probabilities to XGBoost's float32."""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._helpers.importers import SETTINGS, assert_close, make_data, matrices
from thrifty.forest import Forest

xgb = pytest.importorskip("xgboost")

SMALL = {"n_estimators": 20, "max_depth": 3, "learning_rate": 0.3}
# Margins are summed in float32 like XGBoost's and must match its DMatrix path bit for bit;
# probabilities (XGBoost's float32 expf) and the wrappers' inplace path agree to float32.
RTOL32, ATOL32 = 2e-6, 2e-6


class Case:
    """A fitted model with what the tests need about it."""

    def __init__(
        self,
        model: Any,
        n_features: int,
        categorical: dict[int, int] | None = None,
        feature_types: list[str] | None = None,
    ):
        self.model, self.n_features = model, n_features
        self.categorical = categorical or {}
        self.feature_types = feature_types
        self.forest: Forest | None = None
        self.thresholds: dict = {}

    def __repr__(self) -> str:  # keeps hypothesis' failure reports short
        return f"Case({type(self.model).__name__})"

    @property
    def booster(self) -> Any:
        return self.model if isinstance(self.model, xgb.Booster) else self.model.get_booster()

    def dmatrix(self, X: np.ndarray) -> Any:
        return xgb.DMatrix(
            X, feature_types=self.feature_types, enable_categorical=self.feature_types is not None
        )

    def margin(self, X: np.ndarray) -> np.ndarray:
        if isinstance(self.model, xgb.Booster):
            return self.model.predict(self.dmatrix(X), output_margin=True)
        return self.model.predict(X, output_margin=True)

    def iteration_range(self) -> tuple[int, int]:
        """The rounds the model's own ``predict`` uses (wrappers stop at best_iteration)."""
        if isinstance(self.model, xgb.Booster):
            return (0, 0)
        try:
            return (0, self.model.best_iteration + 1)
        except AttributeError:
            return (0, 0)

    def leaves(self, X: np.ndarray) -> np.ndarray:
        if isinstance(self.model, xgb.Booster):
            return self.model.predict(self.dmatrix(X), pred_leaf=True).astype(np.int64)
        return self.model.apply(X).astype(np.int64)


def _labels(X: np.ndarray, rng: np.random.Generator, k: int = 2) -> np.ndarray:
    score = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 2]) + rng.normal(scale=0.3, size=len(X))
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))


def _binary(rng):  # binary:logistic with NaN (learned default directions), logit base_score
    X = make_data(rng, nan_fraction=0.15)
    return Case(xgb.XGBClassifier(**SMALL).fit(X, _labels(X, rng)), 4)


def _binary_base_score(rng):  # a user base_score (probability space)
    X = make_data(rng)
    model = xgb.XGBClassifier(base_score=0.3, **SMALL).fit(X, _labels(X, rng))
    return Case(model, 4)


def _multiclass(rng):  # multi:softprob: one tree per class per round, vector base_score
    X = make_data(rng, nan_fraction=0.05)
    return Case(xgb.XGBClassifier(**SMALL).fit(X, _labels(X, rng, 3)), 4)


def _softmax_booster(rng):  # multi:softmax through the Booster API
    X = make_data(rng)
    params = {"objective": "multi:softmax", "num_class": 3, "max_depth": 3}
    return Case(xgb.train(params, xgb.DMatrix(X, _labels(X, rng, 3)), 15), 4)


def _regression(rng):  # reg:squarederror
    X = make_data(rng, nan_fraction=0.1)
    return Case(xgb.XGBRegressor(**SMALL).fit(X, np.nan_to_num(X[:, 0]) * 3 + 1), 4)


def _ranker(rng):  # rank:ndcg with query groups
    X = make_data(rng)
    model = xgb.XGBRanker(objective="rank:ndcg", **SMALL)
    return Case(model.fit(X, _labels(X, rng, 4), qid=np.repeat(np.arange(6), 50)), 4)


def _pairwise_booster(rng):  # rank:pairwise through the Booster API
    X = make_data(rng)
    dtrain = xgb.DMatrix(X, _labels(X, rng, 3), group=[100, 100, 100])
    return Case(xgb.train({"objective": "rank:pairwise", "max_depth": 3}, dtrain, 15), 4)


def _logitraw(rng):  # binary:logitraw: base_score is already a margin
    X = make_data(rng)
    params = {"objective": "binary:logitraw", "max_depth": 3}
    return Case(xgb.train(params, xgb.DMatrix(X, _labels(X, rng)), 15), 4)


def _multi_target(rng):  # two regression targets: one tree per target per round
    X = make_data(rng, nan_fraction=0.05)
    Y = np.column_stack([np.nan_to_num(X[:, 0]), np.nan_to_num(X[:, 1]) ** 2])
    return Case(xgb.XGBRegressor(**SMALL).fit(X, Y), 4)


def _pruned(rng):  # pruned in place: deleted nodes stay in the model's arrays, unreachable
    X = make_data(rng, n=400)
    dtrain = xgb.DMatrix(X, X[:, 0] + rng.normal(scale=2.0, size=len(X)))
    booster = xgb.train({"max_depth": 6}, dtrain, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # xgboost warns about the legacy update process
        params = {"process_type": "update", "updater": "prune", "min_split_loss": 50.0}
        booster = xgb.train(params, dtrain, 5, xgb_model=booster)
    trees = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]
    deleted = [int(t["tree_param"]["num_deleted"]) for t in trees]
    assert sum(deleted) > 0
    return Case(booster, 4)


def _dart(rng):  # dart: prediction weighs each tree by weight_drop
    X = make_data(rng)
    model = xgb.XGBRegressor(
        booster="dart", rate_drop=0.5, skip_drop=0.0, one_drop=True, normalize_type="forest", **SMALL
    )
    return Case(model.fit(X, X[:, 0] - X[:, 1]), 4)


def _random_forest(rng):  # num_parallel_tree > 1: several trees per round, summed
    X = make_data(rng)
    return Case(xgb.XGBRFClassifier(n_estimators=8, max_depth=4).fit(X, _labels(X, rng, 3)), 4)


def _early_stopped(rng):  # sklearn wrappers predict with best_iteration
    X = make_data(rng, n=400)
    y = (X[:, 0] + rng.normal(scale=2.0, size=len(X)) > 0).astype(int)
    model = xgb.XGBClassifier(n_estimators=80, learning_rate=0.8, max_depth=5, early_stopping_rounds=3)
    model.fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
    assert model.best_iteration < 79
    return Case(model, 4)


def _categorical(rng):  # partition splits on integer codes (feature_types "c")
    X = make_data(rng, n=400, cat_levels={1: 10, 3: 3}, nan_fraction=0.05)
    codes = np.nan_to_num(X[:, 1], nan=0).astype(int)
    y = (np.isin(codes, [1, 4, 5, 8]) ^ (np.nan_to_num(X[:, 0]) > 0)).astype(int)
    types = ["q", "c", "q", "c"]
    dtrain = xgb.DMatrix(X, y, feature_types=types, enable_categorical=True)
    params = {"objective": "binary:logistic", "max_depth": 3, "max_cat_to_onehot": 1}
    return Case(xgb.train(params, dtrain, 20), 4, {1: 10, 3: 3}, types)


def _onehot_categorical(rng):  # one-hot categorical splits (a single category per node)
    X = make_data(rng, n=400, cat_levels={1: 4})
    y = (np.nan_to_num(X[:, 1]) == 2).astype(float) + X[:, 0]
    types = ["q", "c", "q", "q"]
    dtrain = xgb.DMatrix(X, y, feature_types=types, enable_categorical=True)
    params = {"objective": "reg:squarederror", "max_depth": 3, "max_cat_to_onehot": 8}
    return Case(xgb.train(params, dtrain, 10), 4, {1: 4}, types)


BUILDERS: dict[str, Callable[[np.random.Generator], Case]] = {
    "binary": _binary,
    "binary_base_score": _binary_base_score,
    "multiclass": _multiclass,
    "softmax_booster": _softmax_booster,
    "regression": _regression,
    "ranker": _ranker,
    "pairwise_booster": _pairwise_booster,
    "logitraw": _logitraw,
    "multi_target": _multi_target,
    "pruned": _pruned,
    "dart": _dart,
    "random_forest": _random_forest,
    "early_stopped": _early_stopped,
    "categorical": _categorical,
    "onehot_categorical": _onehot_categorical,
}


def _float32_resum(forest: Forest, X: np.ndarray) -> np.ndarray:
    """The forest's margins re-added in float32, tree by tree, as XGBoost's CPU predictor does."""
    leaves = forest.apply(X)
    out = np.tile(forest.base_score.astype(np.float32), (len(X), 1))
    for t in range(forest.n_trees):
        contribution = forest.value[leaves[:, t], 0].astype(np.float32)
        out[:, forest.tree_class[t]] += np.float32(forest.tree_weight[t]) * contribution
    return out[:, 0] if forest.n_outputs == 1 else out


def _check(case: Case, X: np.ndarray) -> None:
    forest = case.forest
    raw = forest.predict_raw(X)
    if len(X) == 0:
        assert raw.shape[0] == 0
        return
    margin = case.margin(X)
    leaves = case.leaves(X).reshape(len(X), -1)
    np.testing.assert_array_equal(forest.apply(X) - forest.roots, leaves)
    # The DMatrix path adds w * leaf in float32 tree by tree (the sklearn wrappers' inplace
    # path can differ from it by an ulp for dart), so a float32 re-sum of the forest's leaves
    # must reproduce it bit for bit: same leaves, same values, same base margin.
    exact = case.booster.predict(
        case.dmatrix(X) if case.feature_types else xgb.DMatrix(X, feature_names=case.booster.feature_names),
        output_margin=True,
        iteration_range=case.iteration_range(),
    )
    np.testing.assert_array_equal(_float32_resum(forest, X), exact)
    np.testing.assert_array_equal(raw, exact)
    assert_close(raw, margin, rtol=RTOL32, atol=ATOL32)
    if isinstance(case.model, xgb.XGBClassifier):
        assert_close(forest.predict_proba(X), case.model.predict_proba(X), rtol=RTOL32, atol=ATOL32)


@given(data=st.data())
@SETTINGS
def test_predictions_match_xgboost(case, data):
    # XGBoost rejects infinite inputs, so none are drawn.
    X = data.draw(matrices(case.n_features, case.thresholds, categorical=case.categorical, inf=False))
    _check(case, X)


def test_empty_and_single_row(case):
    forest = case.forest
    empty = np.zeros((0, case.n_features))
    expected = (0,) if forest.n_outputs == 1 else (0, forest.n_outputs)
    assert forest.predict_raw(empty).shape == expected
    assert forest.apply(empty).shape == (0, forest.n_trees)
    if forest.is_classifier:
        assert forest.predict_proba(empty).shape == (0, max(2, forest.n_outputs))
    _check(case, np.ones((1, case.n_features)))


def test_structure(case):
    forest = case.forest
    assert forest.input_dtype == "float32"
    assert forest.source.startswith("xgboost")
    if isinstance(case.model, xgb.XGBClassifier):
        assert list(forest.classes) == list(case.model.classes_)
    rounds = case.iteration_range()[1]
    if rounds and not isinstance(case.model, xgb.Booster):
        assert forest.n_trees == rounds * forest.n_outputs
    if case.categorical:
        assert np.any(forest.cat_start >= 0)


# ----------------------------------------------------------------- pandas categorical columns
@pytest.fixture(scope="module")
def pandas_model():
    rng = np.random.default_rng(7)
    n = 400
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "color": pd.Categorical(
                rng.choice(["red", "green", "blue", "plum", "teal"], n),
                categories=["teal", "red", "plum", "green", "blue"],
            ),
            "grade": pd.Categorical(rng.choice([10, 20, 30, 40], n), categories=[40, 10, 30, 20]),
        }
    )
    y = (frame.color.isin(["red", "plum"]) ^ (frame.x > 0) ^ (frame.grade == 30)).astype(int)
    model = xgb.XGBClassifier(enable_categorical=True, max_cat_to_onehot=1, **SMALL)
    return model.fit(frame, y)


def test_pandas_categories_are_stored(pandas_model):
    forest = Forest.from_model(pandas_model)
    assert forest.categories == {1: ["teal", "red", "plum", "green", "blue"], 2: [40, 10, 30, 20]}
    assert forest.feature_names == ["x", "color", "grade"]


@given(data=st.data())
@SETTINGS
def test_pandas_predictions_match(pandas_model, data):
    forest = Forest.from_model(pandas_model)
    n = data.draw(st.integers(1, 25))
    # Prediction frames code their categories differently from training (XGBoost re-codes
    # them; it raises on unseen categories, so none are drawn here).
    frame = pd.DataFrame(
        {
            "x": data.draw(st.lists(st.one_of(st.floats(-3, 3), st.just(np.nan)), min_size=n, max_size=n)),
            "color": pd.Categorical(
                data.draw(
                    st.lists(
                        st.sampled_from(["red", "green", "blue", "plum", "teal", None]),
                        min_size=n,
                        max_size=n,
                    )
                ),
                categories=["blue", "green", "plum", "red", "teal"],
            ),
            "grade": pd.Categorical(
                data.draw(st.lists(st.sampled_from([10, 20, 30, 40]), min_size=n, max_size=n))
            ),
        }
    )
    np.testing.assert_array_equal(forest.apply(frame) - forest.roots, pandas_model.apply(frame))
    assert_close(
        forest.predict_raw(frame), pandas_model.predict(frame, output_margin=True), rtol=RTOL32, atol=ATOL32
    )
    assert_close(forest.predict_proba(frame), pandas_model.predict_proba(frame), rtol=RTOL32, atol=ATOL32)


# ----------------------------------------------------------------- unsupported models
def _train(params: dict, y: np.ndarray | None = None, rounds: int = 2) -> Any:
    rng = np.random.default_rng(3)
    X = make_data(rng, n=200)
    y = np.abs(X[:, 0]) + 0.1 if y is None else y
    return xgb.train(params, xgb.DMatrix(X, y), rounds)


BINARY_Y = (np.arange(200) % 2).astype(float)


@pytest.mark.parametrize(
    "params, y, match",
    [
        ({"booster": "gblinear"}, None, "gblinear"),  # a linear model
        ({"objective": "count:poisson"}, None, "count:poisson"),  # exp link
        ({"objective": "reg:gamma"}, None, "reg:gamma"),  # exp link
        ({"objective": "reg:tweedie"}, None, "reg:tweedie"),  # exp link
        ({"objective": "reg:logistic"}, BINARY_Y, "reg:logistic"),  # sigmoid on a regression
        ({"objective": "binary:hinge"}, BINARY_Y, "binary:hinge"),  # 0/1 outputs
        ({"objective": "survival:cox"}, None, "survival:cox"),  # exp link
        (
            {"multi_strategy": "multi_output_tree", "tree_method": "hist"},
            np.column_stack([np.arange(200.0), np.arange(200.0) % 7]),
            "vector-leaf",
        ),
    ],
)
def test_unsupported_xgboost_models_raise(params, y, match):
    with pytest.raises(ValueError, match=match):
        Forest.from_model(_train(params, y))


def test_non_nan_missing_raises():
    X = make_data(np.random.default_rng(4), n=100)
    model = xgb.XGBRegressor(missing=0.0, n_estimators=2).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="missing=0.0"):
        Forest.from_model(model)
