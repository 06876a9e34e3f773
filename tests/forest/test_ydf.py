"""YDF import: gradient-boosted logits and random-forest averages bit for bit (float32, as YDF)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._helpers.importers import SETTINGS, assert_close, make_data, matrices
from thrifty.exceptions import InputError
from thrifty.forest import Forest

ydf = pytest.importorskip("ydf")

GBT = {"num_trees": 15, "max_depth": 4}
RF = {"num_trees": 12, "max_depth": 6}
COLORS = ["red", "green", "blue", "plum"]
# YDF applies its sigmoid and softmax in float32.
RTOL32, ATOL32 = 2e-6, 2e-6


class Case:
    """A fitted model with what the tests need about it."""

    def __init__(self, model: Any, n_features: int, categorical: dict[int, int] | None = None):
        self.model, self.n_features = model, n_features
        self.categorical = categorical or {}
        self.forest: Forest | None = None
        self.thresholds: dict = {}

    def __repr__(self) -> str:  # keeps hypothesis' failure reports short
        return f"Case({type(self.model).__name__})"

    def frame(self, X: np.ndarray) -> pd.DataFrame:
        """``X`` as YDF reads it: a categorical code ``c`` is the ``c``-th item of YDF's
        dictionary (code 0, out-of-dictionary, an unseen text; NaN, a missing value)."""
        names = self.forest.feature_names
        frame = pd.DataFrame({name: X[:, j] for j, name in enumerate(names)})
        for j in self.categorical:
            items = self.forest.categories[j]
            frame[names[j]] = [
                None if np.isnan(c) else (items[int(c)] if c > 0 else "unseen") for c in X[:, j]
            ]
        return frame

    def raw(self, X: np.ndarray) -> np.ndarray:
        """YDF's own scores: logits of boosted classifiers, averaged votes of forests."""
        return self.model.predict(self.frame(X))


def _frame(X: np.ndarray, **extra: Any) -> pd.DataFrame:
    return pd.DataFrame({f"f{j}": X[:, j] for j in range(X.shape[1])} | extra)


def _score(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 2]) + rng.normal(scale=0.3, size=len(X))


def _gbt(frame: pd.DataFrame, **params: Any) -> Any:
    model = ydf.GradientBoostedTreesLearner(label="y", **{**GBT, **params}).train(frame)
    if model.task() == ydf.Task.CLASSIFICATION:
        model.set_output_logits(True)
    return model


def _gbt_binary(rng):  # binomial log-likelihood, NaN (global imputation)
    X = make_data(rng, nan_fraction=0.15)
    return Case(_gbt(_frame(X, y=(_score(X, rng) > 0).astype(int))), 4)


def _gbt_multiclass(rng):  # one tree per class per iteration, softmax
    X = make_data(rng, nan_fraction=0.05)
    y = np.digitize(_score(X, rng), [-0.5, 0.5])
    return Case(_gbt(_frame(X, y=y)), 4)


def _gbt_regression(rng):  # squared error: initial prediction + trees, in float32
    X = make_data(rng, nan_fraction=0.1)
    return Case(_gbt(_frame(X, y=_score(X, rng) * 3 + 10), task=ydf.Task.REGRESSION), 4)


def _gbt_ranking(rng):  # LambdaMART NDCG scores
    X = make_data(rng)
    frame = _frame(X, y=np.digitize(_score(X, rng), [-1, 0, 1]), g=np.repeat(np.arange(6), 50))
    return Case(_gbt(frame, task=ydf.Task.RANKING, ranking_group="g"), 4)


def _gbt_categorical(rng):  # CategoricalIsInCondition on text, missing values
    X = make_data(rng, n=600, nan_fraction=0.05)
    color = rng.choice(COLORS, len(X))
    color[rng.random(len(X)) < 0.1] = None
    y = ((color == "red") ^ (np.nan_to_num(X[:, 0]) > 0)).astype(int)
    return Case(_gbt(_frame(X[:, [0, 2, 3]], y=y).assign(color=color)), 4, {3: len(COLORS) + 1})


def _gbt_discretized(rng):  # DiscretizedNumericalHigherThanCondition: bin boundaries
    X = make_data(rng, nan_fraction=0.05)
    return Case(_gbt(_frame(X, y=(_score(X, rng) > 0).astype(int)), discretize_numerical_columns=True), 4)


def _rf(frame: pd.DataFrame, **params: Any) -> Any:
    return ydf.RandomForestLearner(label="y", **{**RF, **params}).train(frame)


def _rf_binary(rng):  # winner take all: each tree votes 1/T, summed in float32 and clamped
    X = make_data(rng, nan_fraction=0.1)
    return Case(_rf(_frame(X, y=(_score(X, rng) > 0).astype(int))), 4)


def _rf_distribution(rng):  # averaged class distributions (winner_take_all=False)
    X = make_data(rng, nan_fraction=0.1)
    y = np.digitize(_score(X, rng), [-0.5, 0.5])
    return Case(_rf(_frame(X, y=y), winner_take_all=False), 4)


def _rf_regression(rng):  # leaf / T in float32
    X = make_data(rng, nan_fraction=0.1)
    return Case(_rf(_frame(X, y=_score(X, rng)), task=ydf.Task.REGRESSION), 4)


BUILDERS: dict[str, Callable[[np.random.Generator], Case]] = {
    "gbt_binary": _gbt_binary,
    "gbt_multiclass": _gbt_multiclass,
    "gbt_regression": _gbt_regression,
    "gbt_ranking": _gbt_ranking,
    "gbt_categorical": _gbt_categorical,
    "gbt_discretized": _gbt_discretized,
    "rf_binary": _rf_binary,
    "rf_distribution": _rf_distribution,
    "rf_regression": _rf_regression,
}


def _check(case: Case, X: np.ndarray) -> None:
    forest, model = case.forest, case.model
    for j, levels in case.categorical.items():  # YDF has no codes outside its dictionary
        X[(X[:, j] < 0) | (X[:, j] >= levels), j] = 0.0
    raw = forest.predict_raw(X)
    if len(X) == 0:
        assert raw.shape[0] == 0
        return
    expected = case.raw(X)
    if forest.link == "proba":  # YDF's forests return the averages clamped to [0, 1]
        proba = forest.predict_proba(X)
        np.testing.assert_array_equal(proba[:, 1] if forest.n_outputs == 1 else proba, expected)
    else:
        np.testing.assert_array_equal(raw, expected)
    if forest.link in ("sigmoid", "softmax"):
        model.set_output_logits(False)
        try:
            proba = model.predict(case.frame(X))
        finally:
            model.set_output_logits(True)
        got = forest.predict_proba(X)
        assert_close(got[:, 1] if forest.n_outputs == 1 else got, proba, rtol=RTOL32, atol=ATOL32)


@given(data=st.data())
@SETTINGS
def test_predictions_match_ydf(case, data):
    X = data.draw(matrices(case.n_features, case.thresholds, categorical=case.categorical))
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
    forest, model = case.forest, case.model
    assert forest.source.startswith("ydf") and forest.input_dtype == forest.accumulate == "float32"
    assert forest.n_trees == model.num_trees()
    assert forest.feature_names == model.input_feature_names()
    if case.categorical:
        assert np.any(forest.cat_start >= 0)
        assert forest.categories[3][0] == "<OOD>"


@pytest.fixture(scope="module")
def categorical() -> Case:
    case = _gbt_categorical(np.random.default_rng(11))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # out-of-dictionary and missing go the same way
        case.forest = Forest.from_model(case.model)
    return case


@given(data=st.data())
@SETTINGS
def test_dataframe_categories_match(categorical, data):
    case = categorical
    n = data.draw(st.integers(1, 25))
    frame = pd.DataFrame(
        {
            name: data.draw(st.lists(st.one_of(st.floats(-3, 3), st.just(np.nan)), min_size=n, max_size=n))
            for name in case.forest.feature_names[:3]
        }
    )
    # An unseen category is out-of-dictionary in YDF and missing in the forest: the same side
    # of every split of this model (the fixture checks from_ydf does not warn otherwise).
    frame["color"] = data.draw(st.lists(st.sampled_from([*COLORS, None, "teal"]), min_size=n, max_size=n))
    np.testing.assert_array_equal(case.forest.predict_raw(frame), case.model.predict(frame))


# ----------------------------------------------------------------- unsupported models
def _train(learner: Any, **params: Any) -> Any:
    rng = np.random.default_rng(3)
    X = make_data(rng, n=200)
    return learner(label="y", **params).train(_frame(X, y=np.abs(X[:, 0]) + 1))


@pytest.mark.parametrize(
    "learner, params, match",
    [
        (ydf.GradientBoostedTreesLearner, {"task": ydf.Task.REGRESSION, "loss": "POISSON"}, "POISSON"),
        (
            ydf.GradientBoostedTreesLearner,
            {"task": ydf.Task.REGRESSION, "split_axis": "SPARSE_OBLIQUE", "num_trees": 5},
            "NumericalSparseObliqueCondition",
        ),
        (ydf.IsolationForestLearner, {}, "cannot import"),
    ],
)
def test_unsupported_ydf_models_raise(learner, params, match):
    if learner is ydf.IsolationForestLearner:
        model = learner(num_trees=3).train(_frame(make_data(np.random.default_rng(3), n=100)))
    else:
        model = _train(learner, **params)
    with pytest.raises((InputError, TypeError), match=match):
        Forest.from_model(model)


def test_budget_prune_runs_on_a_ydf_forest():
    from thrifty import CostModel, budget_prune, evaluate

    rng = np.random.default_rng(5)
    X = make_data(rng, n=500, n_features=4, nan_fraction=0.05)
    y = (_score(X, rng) > 0).astype(int)
    forest = Forest.from_model(_rf(_frame(X, y=y)))
    costs = CostModel([1.0, 2.0, 3.0, 4.0])
    full = evaluate(forest, X, costs).cost.mean
    # Without a price on features the pruned trees keep the forest's decisions: its leaves are
    # class distributions, as BudgetPrune reads them.
    kept = budget_prune(forest, X, y, costs, lam=0.0)
    assert np.mean(kept.predict(X) == forest.predict(X)) > 0.97
    pruned = budget_prune(forest, X, y, costs, lam=0.05)
    assert pruned.n_nodes < forest.n_nodes
    assert evaluate(pruned, X, costs).cost.mean < full
    assert np.mean(pruned.predict(X) == y) > 0.6


def test_out_of_dictionary_apart_from_missing_warns():
    from ydf.model.tree import Leaf, NonLeaf, RegressionValue, Tree
    from ydf.model.tree.condition import CategoricalIsInCondition

    case = _gbt_categorical(np.random.default_rng(12))
    attribute = case.model.input_features()[3].column_idx
    # "green" (and missing values) go positive, out-of-dictionary (code 0) negative.
    green = [i for i, key in enumerate(Forest.from_model(case.model).categories[3]) if key == "green"]
    split = CategoricalIsInCondition(missing=True, score=1.0, attribute=attribute, mask=green)
    leaf = [Leaf(value=RegressionValue(num_examples=1.0, value=v)) for v in (0.25, -0.5)]
    case.model.set_tree(0, Tree(root=NonLeaf(condition=split, pos_child=leaf[0], neg_child=leaf[1])))
    with pytest.warns(UserWarning, match="color"):
        case.forest = Forest.from_model(case.model)
    X = np.zeros((3, 4))
    X[:, 3] = [0.0, np.nan, green[0]]  # out-of-dictionary, missing, green: each as YDF routes it
    # Such a model has only YDF's generic engine, which returns probabilities.
    expected = case.model.predict(case.frame(X), use_slow_engine=True)
    assert_close(case.forest.predict_proba(X)[:, 1], expected, rtol=RTOL32, atol=ATOL32)
    assert case.forest.predict_raw(X)[0] != case.forest.predict_raw(X)[1]


# ----------------------------------------------------------------- shared datasets
@pytest.mark.parametrize("name", ["adult", "higgs_small", "letter"])
def test_shared_datasets_match(data_home, name):
    from thrifty.datasets import load

    dataset = load(name, data_home)
    X, y, _ = dataset.subset("train")
    X_test, _, _ = dataset.subset("test")
    X, y, X_test = X.iloc[:3000], y[:3000], X_test.iloc[:2000]
    for c in dataset.categorical:  # YDF reads missing text as None, not NaN
        X = X.assign(**{c: X[c].astype(object).where(X[c].notna(), None)})
        X_test = X_test.assign(**{c: X_test[c].astype(object).where(X_test[c].notna(), None)})
    gbt = _gbt(X.assign(y=y), num_trees=30, max_depth=5)
    rf = _rf(X.assign(y=y), num_trees=20)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the test rows' unseen categories go as YDF sends them
        boosted, forest = Forest.from_model(gbt), Forest.from_model(rf)
    np.testing.assert_array_equal(boosted.predict_raw(X_test), gbt.predict(X_test))
    proba = forest.predict_proba(X_test)
    np.testing.assert_array_equal(proba[:, 1] if forest.n_outputs == 1 else proba, rf.predict(X_test))
