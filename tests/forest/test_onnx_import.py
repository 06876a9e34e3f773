"""ONNX import of converted models (skl2onnx, onnxmltools): raw scores equal onnxruntime's bit for
bit on one thread, probabilities to float32, labels alike; refusals name what is wrong."""

from __future__ import annotations

import subprocess
import sys
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._helpers.importers import SETTINGS, make_data, matrices
from tests._helpers.onnx_models import ort_raw, run
from thrifty.exceptions import InputError
from thrifty.forest import Forest

pytest.importorskip("onnxruntime")
skl2onnx = pytest.importorskip("skl2onnx")
onnxmltools = pytest.importorskip("onnxmltools")
warnings.filterwarnings("ignore", category=DeprecationWarning)


class Case:
    def __init__(self, model: Any, n_features: int, classifier: bool):
        self.model, self.n_features, self.classifier = model, n_features, classifier
        self.forest: Forest | None = None
        self.thresholds: dict = {}

    def __repr__(self) -> str:
        return f"Case({self.model.graph.node[0].op_type})"


def _labels(X: np.ndarray, rng: np.random.Generator, k: int) -> np.ndarray:
    score = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 2]) + rng.normal(scale=0.3, size=len(X))
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))


def _sklearn(kind: str, k: int, nan: float, **options: Any):
    def build(rng):
        from sklearn import ensemble

        X = make_data(rng, 400, 5, nan_fraction=nan).astype(np.float32)
        y = _labels(X, rng, k) if k else np.nan_to_num(X[:, 0]) * 2 + rng.normal(size=len(X))
        model = getattr(ensemble, kind)(n_estimators=8, max_depth=4, random_state=0).fit(X, y)
        return Case(skl2onnx.to_onnx(model, X[:1], options=options or None), 5, bool(k))

    return build


def _onnxmltools(library: str, kind: str, k: int, cat: bool = False):
    def build(rng):
        from onnxmltools.convert.common.data_types import FloatTensorType

        X = make_data(rng, 500, 5, nan_fraction=0.1, cat_levels={3: 9} if cat else None)
        y = _labels(X, rng, k) if k else np.nan_to_num(X[:, 0]) * 2 + rng.normal(size=len(X))
        if cat:  # categories 2, 5 and 7 matter
            y = y + 3 * np.isin(X[:, 3], [2, 5, 7])
        types = [("X", FloatTensorType([None, 5]))]
        if library == "lightgbm":
            import lightgbm as lgb

            params = {"n_estimators": 12, "num_leaves": 8, "verbose": -1}
            params.update(min_data_per_group=5, cat_smooth=1)
            fit = {"categorical_feature": [3]} if cat else {}
            model = getattr(lgb, kind)(**params).fit(X, y, **fit)
            onnx_model = onnxmltools.convert_lightgbm(model, initial_types=types, zipmap=False)
        else:
            import xgboost as xgb

            model = getattr(xgb, kind)(n_estimators=12, max_depth=3).fit(X, y)
            onnx_model = onnxmltools.convert_xgboost(model, initial_types=types)
        return Case(onnx_model, 5, bool(k))

    return build


BUILDERS = {
    "sklearn_forest_binary": _sklearn("RandomForestClassifier", 2, 0.1),  # ZipMap output
    "sklearn_forest_multiclass": _sklearn("RandomForestClassifier", 3, 0.1, zipmap=False),
    "sklearn_forest_regressor": _sklearn("RandomForestRegressor", 0, 0.1),
    "sklearn_boosting_binary": _sklearn("GradientBoostingClassifier", 2, 0.0),  # LOGISTIC, base
    "sklearn_boosting_multiclass": _sklearn("GradientBoostingClassifier", 3, 0.0, zipmap=False),
    "sklearn_boosting_regressor": _sklearn("GradientBoostingRegressor", 0, 0.0),
    "lightgbm_binary": _onnxmltools("lightgbm", "LGBMClassifier", 2),  # missing tracks, Mul by one
    "lightgbm_multiclass": _onnxmltools("lightgbm", "LGBMClassifier", 3),
    "lightgbm_regressor": _onnxmltools("lightgbm", "LGBMRegressor", 0),
    "lightgbm_categorical": _onnxmltools("lightgbm", "LGBMRegressor", 0, cat=True),  # BRANCH_EQ chains
    "xgboost_binary": _onnxmltools("xgboost", "XGBClassifier", 2),  # BRANCH_LT, base_values
    "xgboost_multiclass": _onnxmltools("xgboost", "XGBClassifier", 3),
    "xgboost_regressor": _onnxmltools("xgboost", "XGBRegressor", 0),
}


@SETTINGS
@given(data=st.data())
def test_raw_scores_equal_onnxruntime(case: Case, data: st.DataObject) -> None:
    X = data.draw(matrices(case.n_features, case.thresholds, categorical={3: 9}, min_rows=0))
    raw = case.forest.predict_raw(X).reshape(len(X), case.forest.n_outputs)
    np.testing.assert_array_equal(raw, ort_raw(case.model, X, case.forest.n_outputs))


@SETTINGS
@given(data=st.data())
def test_probabilities_and_labels_match_onnxruntime(case: Case, data: st.DataObject) -> None:
    if not case.classifier:
        return
    X = data.draw(matrices(case.n_features, case.thresholds, min_rows=1))
    labels, proba = run(case.model, X)[:2]
    # onnxruntime's logistic and softmax run in float32.
    np.testing.assert_allclose(case.forest.predict_proba(X), proba, rtol=0, atol=2e-7)
    np.testing.assert_array_equal(case.forest.predict(X), labels.reshape(-1))


def test_category_sets_are_chains_of_equalities() -> None:
    """onnxmltools writes a LightGBM category set as a chain of BRANCH_EQ whose true branches
    share one subtree, so the hypothesis tests of ``lightgbm_categorical`` cover EQ nodes and
    shared subtrees (unrolled, the shared subtree is copied once per category)."""
    model = BUILDERS["lightgbm_categorical"](np.random.default_rng(5)).model
    node = model.graph.node[0]
    modes = next(a.strings for a in node.attribute if a.name == "nodes_modes")
    true_ids = next(a.ints for a in node.attribute if a.name == "nodes_truenodeids")
    trees = next(a.ints for a in node.attribute if a.name == "nodes_treeids")
    targets = [(t, n) for t, n, m in zip(trees, true_ids, modes) if m == b"BRANCH_EQ"]
    assert len(targets) > len(set(targets)) > 0  # several equalities lead to the same node


def test_single_rows_and_files(tmp_path) -> None:
    """A ``.onnx`` path imports like the model; one row scores like onnxruntime."""
    import onnx

    case = BUILDERS["xgboost_binary"](np.random.default_rng(3))
    path = tmp_path / "model.onnx"
    onnx.save(case.model, str(path))
    forest = Forest.from_model(str(path))
    X = make_data(np.random.default_rng(4), 1, 5, nan_fraction=0.3)
    np.testing.assert_array_equal(forest.predict_raw(X).reshape(1, -1), ort_raw(case.model, X, 1))


def test_import_thrifty_does_not_import_onnx() -> None:
    code = (
        "import sys, numpy as np, lightgbm as lgb, thrifty\n"
        "X = np.random.default_rng(0).normal(size=(50, 3))\n"
        "thrifty.Forest.from_model(lgb.LGBMRegressor(n_estimators=2, verbose=-1).fit(X, X[:, 0]))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('onnx', 'onnxruntime')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_preprocessing_before_the_trees_is_refused() -> None:
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = np.random.default_rng(0).normal(size=(100, 3)).astype(np.float32)
    pipe = make_pipeline(StandardScaler(), RandomForestRegressor(n_estimators=2)).fit(X, X[:, 0])
    with pytest.raises(InputError, match=r"reads the output of node .*\(Scaler\).*preprocessing"):
        Forest.from_model(skl2onnx.to_onnx(pipe, X[:1]))


def test_missing_model_file_and_other_types() -> None:
    with pytest.raises(FileNotFoundError):
        Forest.from_model("no-such-model.onnx")
    with pytest.raises(TypeError, match="onnx: a ModelProto"):
        Forest.from_model(object())
