"""JSON round trips of imported forests, and clear errors for broken documents."""

from __future__ import annotations

import dataclasses
import json
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import (
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier

from tests._helpers.importers import make_data, split_values
from tests._helpers.plain_json import loads_plain_json
from thrifty.forest import Forest
from thrifty.forest.io import FORMAT, VERSION, decode_array, encode_array


def _frame(rng: np.random.Generator, n: int = 300) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "x": rng.normal(size=n),
            "color": pd.Categorical(rng.choice(["red", "green", "blue", "plum"], n)),
            "grade": pd.Categorical(rng.choice([10, 20, 30], n), categories=[30, 10, 20]),
            "z": rng.normal(size=n),
        }
    )


def _frame_labels(frame: pd.DataFrame) -> np.ndarray:
    return ((frame.color.isin(["red", "plum"])) ^ (frame.x > 0) ^ (frame.grade == 10)).astype(int)


def _array_labels(X: np.ndarray, k: int = 2) -> np.ndarray:
    score = np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1])
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))


# Each library is imported by its own kinds only: one that is missing skips its kinds, not the others'.
def _lgb() -> Any:
    return pytest.importorskip("lightgbm")


def _xgb() -> Any:
    return pytest.importorskip("xgboost")


def _lightgbm_pandas(rng):  # binary, NaN defaults, pandas categories (strings, integers)
    frame = _frame(rng)
    model = _lgb().LGBMClassifier(n_estimators=10, verbose=-1, min_data_per_group=5, cat_smooth=1)
    return model.fit(frame, _frame_labels(frame)), frame


def _lightgbm_rf_multiclass(rng):  # averaged trees, 3 classes
    X = make_data(rng, nan_fraction=0.1)
    model = _lgb().LGBMClassifier(
        boosting_type="rf", bagging_fraction=0.7, bagging_freq=1, n_estimators=10, verbose=-1
    )
    return model.fit(X, _array_labels(X, 3)), X


def _lightgbm_ranker(rng):  # ranking task
    X = make_data(rng)
    model = _lgb().LGBMRanker(n_estimators=10, verbose=-1)
    return model.fit(X, _array_labels(X, 3), group=[100, 100, 100]), X


def _xgboost_multiclass(rng):  # softmax, float32 thresholds
    X = make_data(rng, nan_fraction=0.1)
    return _xgb().XGBClassifier(n_estimators=10).fit(X, _array_labels(X, 3)), X


def _xgboost_pandas(rng):  # categories stored from the model's category encoder
    frame = _frame(rng)
    model = _xgb().XGBClassifier(n_estimators=10, enable_categorical=True, max_cat_to_onehot=1)
    return model.fit(frame, _frame_labels(frame)), frame


def _sklearn_tree(rng):  # string classes, vector leaves of class fractions
    X = make_data(rng, nan_fraction=0.1)
    y = np.array(["a", "b", "c"])[_array_labels(X, 3)]
    return DecisionTreeClassifier(max_depth=5).fit(X, y), X


def _sklearn_rf_binary(rng):  # "proba" link with one output
    X = make_data(rng)
    return RandomForestClassifier(10, max_depth=5).fit(X, _array_labels(X)), X


def _sklearn_rf_regressor(rng):
    X = make_data(rng)
    return RandomForestRegressor(10, max_depth=5).fit(X, X[:, 0]), X


def _sklearn_gb(rng):  # a prior base score
    X = make_data(rng)
    return GradientBoostingClassifier(n_estimators=10).fit(X, _array_labels(X)), X


def _sklearn_hgb_pandas(rng):  # categorical columns moved back to their positions
    frame = _frame(rng)
    return HistGradientBoostingClassifier(max_iter=10).fit(frame, _frame_labels(frame)), frame


# Every kind of forest the importers produce: links, tasks, vector leaves, categories, float32.
KINDS: dict[str, Callable[[np.random.Generator], tuple[Any, Any]]] = {
    "lightgbm_pandas": _lightgbm_pandas,
    "lightgbm_rf_multiclass": _lightgbm_rf_multiclass,
    "lightgbm_ranker": _lightgbm_ranker,
    "xgboost_multiclass": _xgboost_multiclass,
    "xgboost_pandas": _xgboost_pandas,
    "sklearn_tree": _sklearn_tree,
    "sklearn_rf_binary": _sklearn_rf_binary,
    "sklearn_rf_regressor": _sklearn_rf_regressor,
    "sklearn_gb": _sklearn_gb,
    "sklearn_hgb_pandas": _sklearn_hgb_pandas,
}


@pytest.fixture(scope="module", params=list(KINDS))
def imported(request) -> tuple[Forest, Any]:
    model, data = KINDS[request.param](np.random.default_rng(zlib.crc32(request.param.encode())))
    return Forest.from_model(model), data


def _probe(forest: Forest, data: Any) -> Any:
    """Inputs on the thresholds, with NaN and infinities, in the form the model was fitted on."""
    rng = np.random.default_rng(0)
    if isinstance(data, pd.DataFrame):
        probe = data.iloc[:60].copy()
        probe.loc[probe.index[:5], "x"] = np.nan
        probe.loc[probe.index[5:8], "z"] = np.inf
        return probe
    X = data[:60].copy()
    for j, values in split_values(forest).items():
        values = values[np.abs(values) < 1e30]  # not scikit-learn's +inf of NaN-only splits
        if len(values):
            X[:, j] = rng.choice(values, len(X))
    X[::7, 2] = np.nan
    return X


def _same_forest(a: Forest, b: Forest) -> None:
    for name in (
        "feature",
        "threshold",
        "children_left",
        "children_right",
        "missing_left",
        "missing_type",
        "cat_start",
        "cat_size",
        "cat_bitsets",
        "value",
        "roots",
        "tree_weight",
        "tree_class",
        "base_score",
    ):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        np.testing.assert_array_equal(x, y, err_msg=name)
    for name in (
        "n_features",
        "link",
        "task",
        "feature_names",
        "categories",
        "input_dtype",
        "aggregation",
        "source",
    ):
        assert getattr(a, name) == getattr(b, name), name
    if a.classes is None:
        assert b.classes is None
    else:
        assert a.classes.tolist() == b.classes.tolist()


def test_round_trip_gives_identical_predictions(imported):
    forest, data = imported
    text = forest.to_json()
    again = Forest.from_json(text)
    _same_forest(forest, again)
    X = _probe(forest, data)
    np.testing.assert_array_equal(again.predict_raw(X), forest.predict_raw(X))
    np.testing.assert_array_equal(again.apply(X), forest.apply(X))
    if forest.is_classifier:
        np.testing.assert_array_equal(again.predict_proba(X), forest.predict_proba(X))
        np.testing.assert_array_equal(again.predict(X), forest.predict(X))
    # A second round trip is byte-identical: the format has one spelling per forest.
    assert again.to_json() == text


def test_document_is_plain_versioned_json(imported):
    forest, _ = imported
    doc = loads_plain_json(forest.to_json())  # raises on NaN or Infinity
    assert doc["format"] == FORMAT and doc["version"] == VERSION
    assert doc["source"] == forest.source


# ----------------------------------------------------------------- broken documents
@pytest.fixture(scope="module")
def document() -> dict:
    rng = np.random.default_rng(1)
    X = make_data(rng, n=100)
    model = DecisionTreeClassifier(max_depth=3).fit(X, _array_labels(X, 3))
    return json.loads(Forest.from_model(model).to_json())


def _broken(document: dict, edit: Callable[[dict], None]) -> str:
    doc = json.loads(json.dumps(document))
    edit(doc)
    return json.dumps(doc)


def _cycle(doc: dict) -> None:
    """Point an inner node back at the root, so that traversal would loop forever."""
    arrays = doc["arrays"]
    feature = decode_array(arrays["feature"])
    left = decode_array(arrays["children_left"])
    inner = np.flatnonzero(feature >= 0)
    left[inner[inner > 0][0]] = 0
    arrays["children_left"] = encode_array(left)


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda d: d.update(format="something.else"), "not a thrifty forest"),  # another document
        (lambda d: d.update(version=VERSION + 1), "newer"),  # written by a newer thrifty
        (lambda d: d.update(link="exp"), "unknown link"),  # a link this version does not know
        (lambda d: d.update(task="survival"), "unknown task"),
        (lambda d: d["arrays"]["threshold"].update(shape=[1]), "reshape|shape"),  # wrong length
        (lambda d: d["arrays"]["threshold"].update(data="AAAA"), "buffer size"),  # truncated data
        (lambda d: d.update(n_features=0), "feature"),  # nodes test features that do not exist
        (_cycle, "do not form trees"),  # a cycle would make prediction loop forever
        (lambda d: d.update(base_last="yes"), "base_last must be true or false"),
        (lambda d: d.update(scale=float("inf")), "scale must be a finite number"),
        (lambda d: d.update(scale=2.0), "1.0 unless base_last"),  # a scale needs base_last
    ],
)
def test_broken_documents_raise_clear_errors(document, edit, match):
    with pytest.raises(ValueError, match=match):
        Forest.from_json(_broken(document, edit))


def test_truncated_json_raises_value_error(document):
    with pytest.raises(ValueError):  # json.JSONDecodeError is a ValueError
        Forest.from_json(json.dumps(document)[:200])


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.pop("link"),  # a field is missing
        lambda d: d["arrays"].pop("feature"),  # an array is missing
        lambda d: d.update(version="2"),  # a version that is not a number
    ],
)
def test_malformed_documents_raise_value_error(document, edit):
    with pytest.raises(ValueError):
        Forest.from_json(_broken(document, edit))


@pytest.mark.parametrize(
    ("array", "value", "where", "message"),
    [
        ("threshold", np.nan, "internal", "has a NaN threshold"),
        ("value", np.inf, "leaf", "has a NaN or infinite leaf value"),
        ("missing_type", 7, "internal", "has an unknown missing_type"),
        ("tree_weight", np.nan, None, "tree_weight holds NaN or infinity"),
    ],
)
def test_invalid_node_data_is_rejected_naming_the_node(array, value, where, message):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    forest = Forest.from_model(_lgb().LGBMClassifier(n_estimators=3, verbose=-1).fit(X, X[:, 0] > 0))
    d = json.loads(forest.to_json())
    a = decode_array(d["arrays"][array])
    nodes = {"internal": np.flatnonzero(forest.feature >= 0), "leaf": np.flatnonzero(forest.feature < 0)}
    node = int(nodes[where][-1]) if where else 0
    a[node] = value
    d["arrays"][array] = encode_array(a)
    expected = rf"node {node} \(tree {forest.n_trees - 1}\) {message}" if where else message
    with pytest.raises(ValueError, match=expected):
        Forest.from_json(json.dumps(d))


# ----------------------------------------------------------------- older versions
# Rows and the raw scores thrifty 0.x (forest format version 1) gave for them on
# ``data/forest_v1.json``, a scikit-learn GradientBoostingRegressor of 4 trees that it wrote.
_V1_ROWS = [
    [-1.1568301070665343, -1.364879600732452, -0.23122593549221063],
    [2.277500524853034, 0.2775403612334572, 0.7629188335006009],
    [0.21271834626863834, 0.7829821661085862, -1.343088650464953],
    [-0.43051197019258486, 0.2613508456100389, -0.017916816054972758],
    [-0.19199322011209138, -0.6658760797429369, -0.2583831027042033],
]
_V1_RAW = [3.061332836489482, 7.713370539901363, 5.623239026013033, 4.194319910227302, 4.4251226413641165]


def test_version_1_documents_load_as_before():
    """A document without ``base_last`` and ``scale`` adds its base first, as it always did:
    the raw scores version 1 gave, bit for bit; saved again, it is a current document."""
    text = (Path(__file__).parent / "data" / "forest_v1.json").read_text()
    assert json.loads(text)["version"] == 1
    forest = Forest.from_json(text)
    assert not forest.base_last and forest.scale == 1.0
    np.testing.assert_array_equal(forest.predict_raw(np.array(_V1_ROWS)), _V1_RAW)
    doc = json.loads(forest.to_json())
    assert doc["version"] == VERSION == 2 and doc["base_last"] is False and doc["scale"] == 1.0


def test_base_last_and_scale_round_trip():
    forest = Forest.from_json((Path(__file__).parent / "data" / "forest_v1.json").read_text())
    last = dataclasses.replace(forest, base_last=True, scale=0.3, tree_weight=np.ones(forest.n_trees))
    again = Forest.from_json(last.to_json())
    assert again.base_last and again.scale == 0.3
    X = np.array(_V1_ROWS)
    np.testing.assert_array_equal(again.predict_raw(X), last.predict_raw(X))
