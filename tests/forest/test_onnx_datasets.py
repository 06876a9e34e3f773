"""ONNX on shared datasets (THRIFTY_DATA): LightGBM, XGBoost and scikit-learn models of adult
(binary, categorical), letter (26 classes) and diamonds (regression) converted to ONNX import with
raw scores equal to onnxruntime's, export back exactly, and serve the post-hoc methods."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from tests._helpers.onnx_models import ort_raw, run
from thrifty import evaluate, export_onnx
from thrifty.forest import Forest

pytest.importorskip("onnxruntime")
onnxmltools = pytest.importorskip("onnxmltools")
skl2onnx = pytest.importorskip("skl2onnx")
warnings.filterwarnings("ignore", category=DeprecationWarning)

ROWS = 3000  # of each split (the first ones), to keep the run short


def _matrix(frame: Any) -> tuple[np.ndarray, list[int]]:
    """Category codes (NaN when missing) and numbers as one float matrix, and the categorical columns."""
    import pandas as pd

    columns, categorical = [], []
    for j, name in enumerate(frame.columns):
        col = frame[name]
        if isinstance(col.dtype, pd.CategoricalDtype) or not pd.api.types.is_numeric_dtype(col.dtype):
            codes = col.astype("category").cat.codes.to_numpy().astype(np.float64)
            codes[codes < 0] = np.nan
            columns.append(codes)
            categorical.append(j)
        else:
            columns.append(col.to_numpy(dtype=np.float64))
    return np.column_stack(columns), categorical


def _data(name: str, data_home: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    from thrifty.datasets import load

    data = load(name, data_home=data_home)
    frame_tr, y_tr, _ = data.subset("train")
    frame_te, _, _ = data.subset("test")
    import pandas as pd

    both, categorical = _matrix(pd.concat([frame_tr, frame_te]))
    X_tr, X_te = both[: len(frame_tr)][:ROWS], both[len(frame_tr) :][:ROWS]
    y = (np.unique(y_tr, return_inverse=True)[1] if y_tr.dtype.kind in "OUS" else y_tr)[:ROWS]
    return X_tr, y, X_te, categorical


def _convert(library: str, X: np.ndarray, y: np.ndarray, categorical: list[int], task: str) -> Any:
    from onnxmltools.convert.common.data_types import FloatTensorType

    types = [("X", FloatTensorType([None, X.shape[1]]))]
    if library == "lightgbm":
        import lightgbm as lgb

        cls = lgb.LGBMRegressor if task == "regression" else lgb.LGBMClassifier
        model = cls(n_estimators=20, num_leaves=15, verbose=-1).fit(X, y, categorical_feature=categorical)
        return onnxmltools.convert_lightgbm(model, initial_types=types, zipmap=False), model
    if library == "xgboost":
        import xgboost as xgb

        cls = xgb.XGBRegressor if task == "regression" else xgb.XGBClassifier
        model = cls(n_estimators=20, max_depth=4).fit(X, y)
        return onnxmltools.convert_xgboost(model, initial_types=types), model
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestRegressor if task == "regression" else RandomForestClassifier
    model = cls(n_estimators=10, max_depth=8, random_state=0).fit(X.astype(np.float32), y)
    return skl2onnx.to_onnx(
        model, X[:1].astype(np.float32), options={"zipmap": False} if task != "regression" else None
    ), model


@pytest.mark.parametrize("library", ["lightgbm", "xgboost", "sklearn"])
@pytest.mark.parametrize(
    ("name", "task"), [("adult", "binary"), ("letter", "multiclass"), ("diamonds", "regression")]
)
def test_shared_datasets_import_and_export_exactly(data_home, library: str, name: str, task: str) -> None:
    X_tr, y, X_te, categorical = _data(name, data_home)
    if library == "sklearn":  # scikit-learn's forests take no NaN codes here
        X_tr, X_te = np.nan_to_num(X_tr, nan=-1.0), np.nan_to_num(X_te, nan=-1.0)
    model, _ = _convert(library, X_tr, y, categorical, task)
    forest = Forest.from_model(model)
    raw = forest.predict_raw(X_te).reshape(len(X_te), forest.n_outputs)
    assert np.max(np.abs(raw - ort_raw(model, X_te, forest.n_outputs))) == 0.0
    if forest.is_classifier:
        np.testing.assert_array_equal(forest.predict(X_te), run(model, X_te)[0].reshape(-1))
    back = export_onnx(forest)
    assert np.max(np.abs(run(back, X_te, forest.n_outputs)[0] - raw)) == 0.0


def test_post_hoc_methods_on_an_imported_model(data_home) -> None:
    """QWYC and the margin early exit order and cut an ONNX model's trees like any forest's."""
    from thrifty import qwyc
    from thrifty.order.margin import margin_early_exit

    X_tr, y, X_te, categorical = _data("adult", data_home)
    model, _ = _convert("lightgbm", X_tr, y, categorical, "binary")
    forest = Forest.from_model(model)
    full = forest.predict(X_te)
    plan = qwyc(forest, X_te, alpha=0.01, ordering="given")
    result = evaluate(plan, X_te)
    assert np.mean(result.labels != full) <= 0.01
    assert result.cost.n_trees.mean() < forest.n_trees
    never = evaluate(margin_early_exit(forest, margin=np.inf, every=5), X_te)
    np.testing.assert_array_equal(never.labels, full)
    some = evaluate(margin_early_exit(forest, margin=2.0, every=5), X_te)
    assert some.cost.n_trees.mean() < forest.n_trees
