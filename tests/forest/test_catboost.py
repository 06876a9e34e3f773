"""CatBoost import: the same leaf in every tree, raw scores (bias and scale included) and
probabilities (binary and multiclass, CatBoost's own softmax) bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._helpers.importers import SETTINGS, make_data, matrices
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.importers import from_catboost

cb = pytest.importorskip("catboost")

# allow_writing_files=False: CatBoost otherwise writes a catboost_info folder into the working directory.
QUIET = {"verbose": 0, "thread_count": 1, "allow_writing_files": False}
SMALL = {"iterations": 20, "depth": 4, "random_seed": 0, **QUIET}


class Case:
    """A fitted model with what the tests need about it."""

    def __init__(self, model: Any, n_features: int, categorical: dict[int, int] | None = None):
        self.model, self.n_features = model, n_features
        self.categorical = categorical or {}
        self.forest: Forest | None = None
        self.thresholds: dict = {}

    def __repr__(self) -> str:  # keeps hypothesis' failure reports short
        return f"Case({type(self.model).__name__})"

    def frame(self, X: np.ndarray) -> Any:
        """``X`` as CatBoost takes it: categorical columns as integers."""
        if not self.categorical:
            return X
        frame = pd.DataFrame(X, columns=[str(j) for j in range(self.n_features)])
        for j in self.categorical:
            frame[str(j)] = X[:, j].astype(np.int64)
        return frame


def _labels(X: np.ndarray, rng: np.random.Generator, k: int = 2) -> np.ndarray:
    score = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 2]) + rng.normal(scale=0.3, size=len(X))
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))


def _binary(rng):  # Logloss, NaN as the minimum (nan_mode="Min", the default)
    X = make_data(rng, nan_fraction=0.15)
    return Case(cb.CatBoostClassifier(**SMALL).fit(X, _labels(X, rng)), 4)


def _binary_nan_max(rng):  # NaN as the maximum: it takes the bit-set side of every split
    X = make_data(rng, nan_fraction=0.15)
    return Case(cb.CatBoostClassifier(nan_mode="Max", **SMALL).fit(X, _labels(X, rng)), 4)


def _no_nan_seen(rng):  # trained without NaN ("AsIs" borders): NaN at prediction reads as the minimum
    X = make_data(rng)
    return Case(cb.CatBoostClassifier(**SMALL).fit(X, _labels(X, rng)), 4)


def _multiclass(rng):  # MultiClass: vector leaves, leaf-major
    X = make_data(rng, nan_fraction=0.05)
    return Case(cb.CatBoostClassifier(loss_function="MultiClass", **SMALL).fit(X, _labels(X, rng, 3)), 4)


def _regression(rng):  # RMSE without boost_from_average: zero bias
    X = make_data(rng, nan_fraction=0.1)
    y = np.nan_to_num(X[:, 0]) * 3 + 1
    return Case(cb.CatBoostRegressor(boost_from_average=False, **SMALL).fit(X, y), 4)


def _regression_bias(rng):  # RMSE's default boost_from_average: a bias CatBoost adds last
    X = make_data(rng, nan_fraction=0.1)
    return Case(cb.CatBoostRegressor(**SMALL).fit(X, np.nan_to_num(X[:, 0]) * 3 + 10), 4)


def _yetirank(rng):  # YetiRank ranking scores
    X = make_data(rng)
    model = cb.CatBoostRanker(loss_function="YetiRank", **SMALL)
    return Case(model.fit(X, _labels(X, rng, 4), group_id=np.repeat(np.arange(6), 50)), 4)


def _pairlogit(rng):  # PairLogit through the plain CatBoost class
    X = make_data(rng)
    model = cb.CatBoost({"loss_function": "PairLogit", **SMALL})
    pool = cb.Pool(X, _labels(X, rng, 3), group_id=np.repeat(np.arange(6), 50))
    return Case(model.fit(pool), 4)


def _early_stopped(rng):  # use_best_model keeps the trees up to the best iteration
    X = make_data(rng, n=400)
    y = (X[:, 0] + rng.normal(scale=2.0, size=len(X)) > 0).astype(int)
    model = cb.CatBoostClassifier(iterations=200, learning_rate=0.8, depth=5, **QUIET)
    model.fit(X[:200], y[:200], eval_set=(X[200:], y[200:]), early_stopping_rounds=3)
    assert model.tree_count_ < 200
    return Case(model, 4)


def _onehot(rng):  # one-hot splits on integer categories (CatBoost hashes their text)
    X = make_data(rng, n=600, cat_levels={1: 6, 3: 3}, nan_fraction=0.05)
    X[:, [1, 3]] = np.nan_to_num(X[:, [1, 3]], nan=0.0)
    y = (np.isin(X[:, 1], [1, 4]) ^ (np.nan_to_num(X[:, 0]) > 0) | (X[:, 3] == 2)).astype(int)
    case = Case(None, 4, {1: 6, 3: 3})
    model = cb.CatBoostClassifier(cat_features=[1, 3], one_hot_max_size=10, **SMALL)
    case.model = model.fit(case.frame(X), y)
    return case


def _loaded(rng):  # a model read back from its .cbm file is a plain CatBoost
    X = make_data(rng, nan_fraction=0.1)
    model = cb.CatBoostRegressor(boost_from_average=False, **SMALL).fit(X, np.nan_to_num(X[:, 1] - X[:, 3]))
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.cbm")
        model.save_model(path)
        return Case(cb.CatBoost().load_model(path), 4)


def _scaled(rng):  # set_scale_and_bias: raw = scale * sum of leaves + bias
    X = make_data(rng, nan_fraction=0.1)
    model = cb.CatBoostClassifier(**SMALL).fit(X, _labels(X, rng))
    model.set_scale_and_bias(0.3, 0.1)
    return Case(model, 4)


def _regression_scaled(rng):  # boost_from_average's bias, then a scale and bias of its own
    X = make_data(rng, nan_fraction=0.1)
    model = cb.CatBoostRegressor(**SMALL).fit(X, np.nan_to_num(X[:, 0]) * 3 + 10)
    model.set_scale_and_bias(1.7, model.get_scale_and_bias()[1] - 0.3)
    return Case(model, 4)


def _multiclass_scaled(rng):  # a bias per class, after the scaled sum of vector leaves
    X = make_data(rng, nan_fraction=0.05)
    model = cb.CatBoostClassifier(loss_function="MultiClass", **SMALL).fit(X, _labels(X, rng, 3))
    model.set_scale_and_bias(0.7, [0.1, -0.25, 0.3])
    return Case(model, 4)


def _ranking_bias(rng):  # ranking scores with a scale and bias
    X = make_data(rng)
    model = cb.CatBoostRanker(loss_function="YetiRank", **SMALL)
    model.fit(X, _labels(X, rng, 4), group_id=np.repeat(np.arange(6), 50))
    model.set_scale_and_bias(1.3, 0.2)
    return Case(model, 4)


BUILDERS: dict[str, Callable[[np.random.Generator], Case]] = {
    "binary": _binary,
    "binary_nan_max": _binary_nan_max,
    "no_nan_seen": _no_nan_seen,
    "multiclass": _multiclass,
    "regression": _regression,
    "regression_bias": _regression_bias,
    "yetirank": _yetirank,
    "pairlogit": _pairlogit,
    "early_stopped": _early_stopped,
    "onehot": _onehot,
    "loaded": _loaded,
    "scaled": _scaled,
    "regression_scaled": _regression_scaled,
    "multiclass_scaled": _multiclass_scaled,
    "ranking_bias": _ranking_bias,
}


def catboost_leaves(forest: Forest, X: Any) -> np.ndarray:
    """CatBoost's leaf index of each tree: the level outcomes read as bits, level d as bit d."""
    depth = forest.tree_depths()
    heap = forest.apply(X) - forest.roots - ((1 << depth) - 1)  # position among the 2^D leaves
    out = np.zeros_like(heap)
    for t, d in enumerate(depth):
        for level in range(d):
            out[:, t] |= ((heap[:, t] >> (d - 1 - level)) & 1) << level
    return out


def _raw(model: Any, data: Any) -> np.ndarray:
    if isinstance(model, cb.CatBoostRanker):  # its predict has no prediction_type: raw scores
        return model.predict(data)
    return model.predict(data, prediction_type="RawFormulaVal")


def _check(case: Case, X: np.ndarray) -> None:
    forest, model = case.forest, case.model
    for j in case.categorical:  # CatBoost refuses NaN categories; unseen ones are tested below
        X[np.isnan(X[:, j]), j] = -1.0
    raw = forest.predict_raw(X)
    if len(X) == 0:
        assert raw.shape[0] == 0
        return
    data = case.frame(X)
    np.testing.assert_array_equal(catboost_leaves(forest, X), model.calc_leaf_indexes(data))
    # Bit for bit, bias and scale included (CatBoost adds them after the trees: ``base_last``).
    np.testing.assert_array_equal(raw, _raw(model, data))
    if forest.is_classifier:
        # The sigmoid with the C library's exp; the softmax with CatBoost's own (this CPU's path).
        np.testing.assert_array_equal(forest.predict_proba(X), model.predict_proba(data))
        np.testing.assert_array_equal(forest.predict(X), model.predict(data).reshape(-1))


@given(data=st.data())
@SETTINGS
def test_predictions_match_catboost(case, data):
    X = data.draw(matrices(case.n_features, case.thresholds, categorical=case.categorical))
    _check(case, X)


_COMPILED: dict[int, Any] = {}


@given(data=st.data())
@SETTINGS
def test_compiled_oblivious_blocks_match_catboost(case, data, monkeypatch):
    """Compiled, on vector blocks whatever this CPU would choose (CatBoost's trees take the
    oblivious path, ``ir_oblivious``), the raw scores are the interpreter's bit for bit and so
    CatBoost's ``RawFormulaVal``, bias and scale included, on 0 to 40 rows."""
    import thrifty
    import thrifty.runtime.compiled.objects as objects
    from thrifty.runtime.compiled.layout import oblivious_levels

    forest, model = case.forest, case.model
    assert all(oblivious_levels(forest, int(r)) is not None for r in forest.roots)
    monkeypatch.setattr(objects, "use_vector", lambda lay: True)
    if id(case) not in _COMPILED:
        _COMPILED[id(case)] = thrifty.compile(forest, thrifty.CostModel(np.ones(forest.n_features)))
    X = data.draw(matrices(case.n_features, case.thresholds, categorical=case.categorical))
    for j in case.categorical:  # CatBoost refuses NaN categories
        X[np.isnan(X[:, j]), j] = -1.0
    ev = _COMPILED[id(case)].evaluate(X)
    raw = ev.raw.reshape(forest.predict_raw(X).shape)
    np.testing.assert_array_equal(raw, forest.predict_raw(X))
    if len(X) == 0:
        return
    np.testing.assert_array_equal(raw, _raw(model, case.frame(X)).reshape(raw.shape))
    if forest.is_classifier:
        np.testing.assert_array_equal(ev.proba, model.predict_proba(case.frame(X)))


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
    assert forest.source == "catboost" and forest.input_dtype == "float32"
    assert forest.n_trees == model.tree_count_
    scale, bias = model.get_scale_and_bias()
    np.testing.assert_array_equal(forest.base_score, np.atleast_1d(bias))
    # Bias or scale make the forest add its base after the trees (CatBoost's order).
    assert forest.base_last == (scale != 1.0 or np.any(np.atleast_1d(bias) != 0.0))
    assert forest.scale == (scale if forest.base_last else 1.0)
    np.testing.assert_array_equal(forest.tree_weight, 1.0)
    if isinstance(model, cb.CatBoostClassifier):
        assert list(forest.classes) == list(model.classes_)
    if case.categorical:
        assert np.any(forest.cat_start >= 0)


# ----------------------------------------------------------------- text categories
@pytest.fixture(scope="module")
def text_model():
    rng = np.random.default_rng(7)
    n = 500
    frame = pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "color": rng.choice(["red", "green", "blue", "plum"], n),
            "grade": rng.integers(0, 5, n),
        }
    )
    y = ((frame.color == "red") ^ (frame.x > 0) | (frame.grade == 3) | (frame.color == "plum")).astype(int)
    model = cb.CatBoostClassifier(cat_features=["color", "grade"], one_hot_max_size=10, **SMALL)
    return model.fit(frame, y)


def test_text_categories_need_their_values(text_model):
    with pytest.raises(InputError, match="color.*categories="):
        Forest.from_model(text_model)
    with pytest.raises(InputError, match="not among the categories"):
        from_catboost(text_model, categories={"color": ["red", "green"]})
    with pytest.raises(InputError, match="not a categorical feature"):
        from_catboost(text_model, categories={"x": ["red", "green"]})
    with pytest.raises(InputError, match="repeat a value"):
        from_catboost(text_model, categories={"color": ["red", "red", "plum", "green", "blue"]})


@given(data=st.data())
@SETTINGS
def test_text_categories_match(text_model, data):
    forest = from_catboost(text_model, categories={"color": ["plum", "red", "green", "blue"]})
    assert forest.categories == {1: ["plum", "red", "green", "blue"]}
    n = data.draw(st.integers(1, 25))
    frame = pd.DataFrame(
        {
            "x": data.draw(st.lists(st.one_of(st.floats(-3, 3), st.just(np.nan)), min_size=n, max_size=n)),
            "color": data.draw(
                st.lists(st.sampled_from(["red", "green", "blue", "plum", "teal"]), min_size=n, max_size=n)
            ),
            "grade": data.draw(st.lists(st.integers(-2, 8), min_size=n, max_size=n)),
        }
    )
    np.testing.assert_array_equal(
        forest.predict_raw(frame), text_model.predict(frame, prediction_type="RawFormulaVal")
    )
    np.testing.assert_array_equal(forest.predict_proba(frame), text_model.predict_proba(frame))


# ----------------------------------------------------------------- unsupported models
def _fit(params: dict, y: np.ndarray | None = None, cat: bool = False) -> Any:
    rng = np.random.default_rng(3)
    X = make_data(rng, n=200)
    y = np.abs(X[:, 0]) + 0.1 if y is None else y
    if cat:
        frame = pd.DataFrame({"x": X[:, 0], "city": rng.choice(list("abcdefghij"), 200)})
        return cb.CatBoost({**SMALL, "iterations": 5, **params}).fit(frame, y, cat_features=["city"])
    return cb.CatBoost({**SMALL, "iterations": 3, **params}).fit(X, y)


BINARY_Y = (np.arange(200) % 2).astype(float)


@pytest.mark.parametrize(
    "params, y, cat, match",
    [
        ({"loss_function": "Poisson"}, None, False, "Poisson"),  # exp link
        ({"loss_function": "Tweedie:variance_power=1.5"}, None, False, "Tweedie"),  # exp link
        ({"loss_function": "MultiClassOneVsAll"}, np.arange(200) % 3, False, "MultiClassOneVsAll"),
        ({"loss_function": "RMSEWithUncertainty"}, None, False, "RMSEWithUncertainty"),
        ({"grow_policy": "Depthwise"}, None, False, "non-symmetric"),  # asymmetric trees
        ({"loss_function": "Logloss"}, BINARY_Y, True, "CTR.*city"),  # target statistics
    ],
)
def test_unsupported_catboost_models_raise(params, y, cat, match):
    with pytest.raises(InputError, match=match):
        Forest.from_model(_fit(params, y, cat))


def test_unfitted_model_raises():
    with pytest.raises(InputError, match="not fitted"):
        Forest.from_model(cb.CatBoostClassifier())


def test_importing_thrifty_does_not_import_catboost_or_ydf():
    code = (
        "import sys, thrifty, thrifty.forest.importers, numpy as np, lightgbm\n"
        "X = np.random.default_rng(0).normal(size=(50, 2))\n"
        "m = lightgbm.LGBMRegressor(n_estimators=2, verbose=-1).fit(X, X[:, 0])\n"
        "thrifty.Forest.from_model(m)\n"
        "print([m for m in ('catboost', 'ydf') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ----------------------------------------------------------------- shared datasets
@pytest.mark.parametrize("name", ["adult", "higgs_small", "letter"])
def test_shared_datasets_match(data_home, name):
    from thrifty.datasets import load

    dataset = load(name, data_home)
    X, y, _ = dataset.subset("train")
    X_test, _, _ = dataset.subset("test")
    X, y, X_test = X.iloc[:3000], y[:3000], X_test.iloc[:2000]
    cats = [c for c in dataset.categorical]
    categories = {}
    for c in cats:  # CatBoost refuses missing categories: they become a category of their own
        X = X.assign(**{c: X[c].astype(object).fillna("?").astype(str)})
        X_test = X_test.assign(**{c: X_test[c].astype(object).fillna("?").astype(str)})
        categories[c] = sorted(set(X[c]))
    model = cb.CatBoostClassifier(
        iterations=60, depth=6, **QUIET, cat_features=cats, one_hot_max_size=255
    ).fit(X, y)
    forest = from_catboost(model, categories=categories)
    np.testing.assert_array_equal(
        forest.predict_raw(X_test), model.predict(X_test, prediction_type="RawFormulaVal")
    )
    np.testing.assert_array_equal(forest.predict_proba(X_test), model.predict_proba(X_test))


# ----------------------------------------------------------------- methods on an imported model
@pytest.fixture(scope="module")
def binary_problem():
    """A CatBoost classifier, its calibration data and feature costs."""
    from thrifty import CostModel

    rng = np.random.default_rng(21)
    X = make_data(rng, n=500, n_features=5, nan_fraction=0.05)
    y = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) + rng.normal(scale=0.5, size=len(X)) > 0
    model = cb.CatBoostClassifier(iterations=40, depth=3, random_seed=0, **QUIET)
    return model.fit(X, y.astype(int)), X, y.astype(int), CostModel([1.0, 2.0, 3.0, 4.0, 5.0])


def _run(plan: Any, X: np.ndarray, costs: Any) -> tuple[np.ndarray, float]:
    from thrifty import evaluate

    ev = evaluate(plan, X, costs)
    return np.asarray(ev.predictions), float(ev.cost.mean)


def test_qwyc_keeps_catboost_decisions(binary_problem):
    from thrifty import qwyc

    model, X, _, costs = binary_problem
    full = Forest.from_model(model).predict(X)
    predictions, cost = _run(qwyc(model, X, alpha=0.01), X, costs)
    assert np.mean(predictions != full) <= 0.01  # QWYC's guarantee on its calibration rows
    assert cost < _run(Forest.from_model(model), X, costs)[1]


def test_fan_and_margin_exit_run_on_catboost(binary_problem):
    from thrifty.order import fan, margin_early_exit

    model, X, _, costs = binary_problem
    full, full_cost = _run(Forest.from_model(model), X, costs)
    predictions, cost = _run(fan(model, X), X, costs)
    assert np.mean(predictions != full) < 0.05 and cost <= full_cost
    never = margin_early_exit(model, margin=np.inf, every=5)  # no margin is ever wide enough
    np.testing.assert_array_equal(_run(never, X, costs)[0], full)
    predictions, cost = _run(margin_early_exit(model, margin=1.0, every=5), X, costs)
    assert cost < full_cost


def test_cronus_and_adapt_run_on_catboost(binary_problem):
    from thrifty import ADAPTClassifier, cronus

    model, X, y, costs = binary_problem
    full_cost = _run(Forest.from_model(model), X, costs)[1]
    cascade = cronus(Forest.from_model(model), X, y, costs, n_stages=3)
    assert _run(cascade, X, costs)[1] < full_cost
    adapt = ADAPTClassifier(hpc=model, costs=costs, budget=0.3 * full_cost).fit(X, y)
    assert np.mean(adapt.predict(X) == y) > 0.6
    assert _run(adapt, X, costs)[1] < full_cost


def test_qwyc_regression_on_a_model_with_a_bias():
    """QWYC's exits on a forest that adds its bias last compare the score a row stops with: its
    early predictions stay within the tolerance of CatBoost's on all but alpha of the rows."""
    import thrifty
    from thrifty import evaluate
    from thrifty.order import default_tolerance, qwyc_regression

    rng = np.random.default_rng(4)
    X = make_data(rng, n=400, n_features=5)
    model = cb.CatBoostRegressor(iterations=40, depth=3, random_seed=0, **QUIET)
    model.fit(X, np.nan_to_num(X[:, 0]) * 3 + 10)
    assert Forest.from_model(model).base_last
    plan = qwyc_regression(model, X, alpha=0.05, ordering="given")
    ev = evaluate(plan, X)
    full = model.predict(X, prediction_type="RawFormulaVal")
    assert np.mean(np.abs(ev.raw - full) > default_tolerance(full)) <= 0.05
    assert ev.exit.mean() < model.tree_count_
    # Compiled, the same exits and scores bit for bit.
    compiled = thrifty.compile(plan).evaluate(X)
    np.testing.assert_array_equal(compiled.raw, ev.raw)
    np.testing.assert_array_equal(compiled.exit, ev.exit)


def test_shared_regression_with_a_bias_matches(data_home):
    """Diamonds' prices: an RMSE model's bias (boost_from_average) added after its 60 trees, as
    CatBoost adds it: raw scores bit for bit on 2,000 test rows."""
    from thrifty.datasets import load

    dataset = load("diamonds", data_home)
    X, y, _ = dataset.subset("train")
    X_test, _, _ = dataset.subset("test")
    X, y, X_test = X.iloc[:3000], y[:3000], X_test.iloc[:2000]
    cats = list(dataset.categorical)
    categories = {c: sorted(set(X[c].astype(str))) for c in cats}
    X = X.assign(**{c: X[c].astype(str) for c in cats})
    X_test = X_test.assign(**{c: X_test[c].astype(str) for c in cats})
    model = cb.CatBoostRegressor(iterations=60, depth=6, **QUIET, cat_features=cats, one_hot_max_size=255)
    forest = from_catboost(model.fit(X, y), categories=categories)
    assert forest.base_last and forest.base_score[0] != 0.0
    np.testing.assert_array_equal(
        forest.predict_raw(X_test), model.predict(X_test, prediction_type="RawFormulaVal")
    )


@pytest.mark.parametrize("blocks", ["vector", "scalar"])
def test_margin_exits_on_a_multiclass_model_with_a_bias(blocks, monkeypatch):
    """A MultiClass model given a scale and a bias per class (vector leaves, ``base_last``):
    margin exits compare the leading class's ``scale * sum + bias`` over the runner-up's after
    each tree, computed here tree by tree; interpreter and compiled code exit those rows."""
    import thrifty
    from thrifty.runtime.compiled.choice import BLOCKS_ENV

    monkeypatch.setenv(BLOCKS_ENV, blocks)
    rng = np.random.default_rng(21)
    X = make_data(rng, n=400, nan_fraction=0.05)
    model = cb.CatBoostClassifier(loss_function="MultiClass", **SMALL).fit(X, _labels(X, rng, 3))
    model.set_scale_and_bias(0.7, [0.4, -0.3, 0.05])
    forest = from_catboost(model)
    assert forest.base_last and np.all(forest.tree_class == -1)
    T = forest.n_trees
    plan = thrifty.Sequential(forest, rng.permutation(T), np.full(T, 0.25))
    acc = np.zeros((len(X), 3))
    expected = np.full(len(X), T)
    leaves = forest.apply(X)
    for r, t in enumerate(plan.order):
        acc = acc + forest.value[leaves[:, t]]
        g = np.sort(0.7 * acc + forest.base_score, axis=1)
        out = (expected == T) & (g[:, -1] - g[:, -2] > 0.25)
        expected[out] = r + 1
    assert 0 < np.sum(expected < T) < len(X)
    costs = thrifty.CostModel(np.ones(forest.n_features))
    compiled = thrifty.compile(plan, costs)
    assert compiled.native
    for ev in (thrifty.evaluate(plan, X, costs), compiled.evaluate(X)):
        np.testing.assert_array_equal(ev.exit, expected)
    # Rows that never exit: all trees summed in the plan's order, then scaled and biased.
    raw, full = compiled.evaluate(X).raw.reshape(len(X), 3), expected == T
    np.testing.assert_array_equal(raw[full], (0.7 * acc + forest.base_score)[full])
