"""thrifty.export_onnx: onnxruntime evaluates the exported forest to its raw scores bit for bit
(hypothesis input: NaN, infinities, thresholds, categories unseen and negative, 0 and 1 rows),
to its probabilities to float precision; Forest -> ONNX -> Forest is exact; plans with exits and
unrepresentable splits are refused."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._helpers.importers import SETTINGS, make_data, matrices
from tests._helpers.onnx_models import run
from thrifty import export_onnx
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest._traverse import ZERO

pytest.importorskip("onnxruntime")


class Case:
    def __init__(self, model: Any, n_features: int, categorical: dict[int, int] | None = None):
        self.model, self.n_features = model, n_features
        self.categorical = categorical or {}
        self.forest: Forest | None = None
        self.thresholds: dict = {}

    def __repr__(self) -> str:
        return f"Case({type(self.model).__name__})"


def _y(X: np.ndarray, rng: np.random.Generator, k: int) -> np.ndarray:
    score = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 2]) + rng.normal(scale=0.3, size=len(X))
    if k == 0:
        return score
    return np.digitize(score, np.quantile(score, np.linspace(0, 1, k + 1)[1:-1]))


def _lightgbm(kind: str, k: int, **params: Any):
    def build(rng):
        import lightgbm as lgb

        X = make_data(rng, 500, 5, nan_fraction=0.1, cat_levels={3: 12}, zero_fraction=0.1)
        y = _y(X, rng, k)
        if k:  # categories 2, 5 and 7 move the labels
            y = np.where(np.isin(X[:, 3], [2, 5, 7]), (y + 1) % k, y)
        model = getattr(lgb, kind)(n_estimators=10, num_leaves=8, verbose=-1, min_data_per_group=5, **params)
        return Case(model.fit(X, y, categorical_feature=[3]), 5, {3: 12})

    return build


def _xgboost(kind: str, k: int):
    def build(rng):
        import pandas as pd
        import xgboost as xgb

        X = make_data(rng, 500, 5, nan_fraction=0.1, cat_levels={3: 12})
        frame = pd.DataFrame(X).astype({3: "category"})
        frame[3] = frame[3].cat.set_categories(list(range(12)))
        frame.columns = [f"f{i}" for i in range(5)]
        model = getattr(xgb, kind)(n_estimators=10, max_depth=3, enable_categorical=True, tree_method="hist")
        return Case(model.fit(frame, _y(X, rng, k)), 5, {3: 12})

    return build


def _sklearn(kind: str, k: int, **params: Any):
    def build(rng):
        from sklearn import ensemble

        X = make_data(rng, 400, 5, nan_fraction=0.1 if "Random" in kind or "Hist" in kind else 0.0)
        return Case(getattr(ensemble, kind)(random_state=0, **params).fit(X, _y(X, rng, k)), 5)

    return build


def _catboost(kind: str, k: int, scale: float | None = None):
    def build(rng):
        import catboost as cb

        X = make_data(rng, 400, 5, nan_fraction=0.1)
        quiet = {"iterations": 10, "depth": 3, "verbose": 0, "thread_count": 1, "allow_writing_files": False}
        model = getattr(cb, kind)(**quiet).fit(X, _y(X, rng, k) + (10.0 if k == 0 else 0))
        if scale is not None:
            model.set_scale_and_bias(scale, list(np.linspace(-0.3, 0.4, max(1, k if k > 2 else 1))))
        return Case(model, 5)

    return build


BUILDERS = {
    # float64 thresholds, missing types NaN and None (zero_as_missing=False), categorical splits
    "lightgbm_binary": _lightgbm("LGBMClassifier", 2),
    "lightgbm_multiclass": _lightgbm("LGBMClassifier", 3),
    "lightgbm_regressor": _lightgbm("LGBMRegressor", 0, use_missing=False),  # NaN read as zero
    # float32 inputs and sums, categorical splits listing the codes that go right
    "xgboost_binary": _xgboost("XGBClassifier", 2),
    "xgboost_regressor": _xgboost("XGBRegressor", 0),
    # float32 comparisons of float64 thresholds, float64 sums, vector leaves averaged
    "sklearn_forest_multiclass": _sklearn("RandomForestClassifier", 3, n_estimators=6, max_depth=5),
    "sklearn_forest_binary": _sklearn("RandomForestClassifier", 2, n_estimators=6, max_depth=5),
    "sklearn_boosting_regressor": _sklearn("GradientBoostingRegressor", 0, n_estimators=10, max_depth=3),
    "sklearn_hist_binary": _sklearn("HistGradientBoostingClassifier", 2, max_iter=10),
    # the trees summed from zero, then the scale and the bias (base_last)
    "catboost_regressor_bias": _catboost("CatBoostRegressor", 0),
    "catboost_multiclass_scaled": _catboost("CatBoostClassifier", 3, scale=0.7),
}


@pytest.fixture(scope="module")
def exported(case: Case) -> Any:
    return export_onnx(case.forest)


@SETTINGS
@given(data=st.data())
def test_onnxruntime_reproduces_raw_scores(case: Case, exported: Any, data: st.DataObject) -> None:
    X = data.draw(matrices(case.n_features, case.thresholds, categorical=case.categorical))
    raw = case.forest.predict_raw(X).reshape(len(X), case.forest.n_outputs)
    np.testing.assert_array_equal(run(exported, X, case.forest.n_outputs)[0], raw)


@SETTINGS
@given(data=st.data())
def test_probabilities_agree(case: Case, exported: Any, data: st.DataObject) -> None:
    if not case.forest.is_classifier:
        return
    X = data.draw(matrices(case.n_features, case.thresholds, categorical=case.categorical, min_rows=1))
    proba = run(exported, X)[1]
    # float32 models (XGBoost's) apply the link in float32.
    atol = 2e-7 if case.forest.accumulate == "float32" else 1e-12
    np.testing.assert_allclose(proba, case.forest.predict_proba(X), rtol=0, atol=atol)


@SETTINGS
@given(data=st.data())
def test_round_trip_is_exact(case: Case, exported: Any, data: st.DataObject) -> None:
    back = Forest.from_model(exported)
    assert (back.task, back.link, back.feature_names) == (
        case.forest.task,
        case.forest.link,
        case.forest.feature_names,
    )
    assert (
        np.array_equal(back.classes, case.forest.classes)
        if case.forest.classes is not None
        else back.classes is None
    )
    X = data.draw(matrices(case.n_features, case.thresholds, categorical=case.categorical))
    np.testing.assert_array_equal(back.predict_raw(X), case.forest.predict_raw(X))


def test_full_plans_export_and_plans_with_exits_are_refused(tmp_path) -> None:
    import lightgbm as lgb

    from thrifty import Full, qwyc

    X = make_data(np.random.default_rng(0), 400, 4)
    y = (X[:, 0] > 0).astype(int)
    forest = Forest.from_model(lgb.LGBMClassifier(n_estimators=20, num_leaves=4, verbose=-1).fit(X, y))
    path = tmp_path / "full.onnx"
    model = export_onnx(Full(forest), path)
    assert path.stat().st_size > 0
    np.testing.assert_array_equal(run(model, X)[0][:, 0], forest.predict_raw(X))
    with pytest.raises(InputError, match=r"Sequential plan stops early.*ONNX has no early exit"):
        export_onnx(qwyc(forest, X, alpha=0.01))


def test_zero_as_missing_splits_onnx_cannot_express_are_refused() -> None:
    import lightgbm as lgb

    rng = np.random.default_rng(1)
    X = make_data(rng, 500, 3, zero_fraction=0.3)
    model = lgb.LGBMRegressor(n_estimators=5, num_leaves=8, verbose=-1, zero_as_missing=True)
    forest = Forest.from_model(model.fit(X, X[:, 0] + rng.normal(size=len(X))))
    zero = forest.missing_type == 2
    assert zero.any()
    # A split whose default side is where values near zero compare to anyway exports; one that
    # sends them against their comparison cannot.
    t = forest.threshold
    agreeing = dataclasses.replace(
        forest,
        missing_left=np.where(zero, t >= ZERO, forest.missing_left),
        missing_type=np.where(zero & (np.abs(t) < ZERO), 0, forest.missing_type),
    )
    np.testing.assert_array_equal(run(export_onnx(agreeing), X)[0][:, 0], agreeing.predict_raw(X))
    disagreeing = dataclasses.replace(forest, missing_left=np.where(zero, t < 0, forest.missing_left))
    with pytest.raises(InputError, match="zero_as_missing"):
        export_onnx(disagreeing)


@pytest.mark.parametrize("name", ["BudgetRFClassifier", "CEGBClassifier"])
def test_cheap_models_are_served_by_onnxruntime_unchanged(name: str) -> None:
    """A BudgetRF or CEGB model exports as is (the fitted estimator or its Full plan)."""
    import thrifty
    from thrifty import Full

    rng = np.random.default_rng(0)
    X = make_data(rng, 300, 4, nan_fraction=0.05)
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) > 0).astype(int)
    params = {"n_estimators": 5, "random_state": 0} if name == "BudgetRFClassifier" else {"n_estimators": 10}
    model = getattr(thrifty, name)(costs=[1.0, 2.0, 3.0, 4.0], **params).fit(X, y)
    for what in (model, Full(model.forest_)):
        np.testing.assert_array_equal(run(export_onnx(what), X)[0][:, 0], model.forest_.predict_raw(X))
