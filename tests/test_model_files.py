"""``thrifty.load_model``: every library's model file read by its form, equal to the library's
own predictions; pickles only on trust; unknown forms refused with the list of known ones."""

import pickle

import numpy as np
import pytest

import thrifty
from thrifty.exceptions import InputError
from thrifty.model_files import model_form

#: CatBoost writes a catboost_info folder in the working directory unless told not to.
CATBOOST = {"verbose": False, "thread_count": 1, "allow_writing_files": False}
RNG = np.random.default_rng(0)
X = RNG.normal(size=(200, 4))
X[::17, 1] = np.nan  # missing values take each library's default direction
Y = (np.nan_to_num(X[:, 0]) + X[:, 2] > 0).astype(int)


def check(path, form, raw):
    """``path`` is read as ``form`` and its forest's raw scores are the library's."""
    assert model_form(path) == form
    forest = thrifty.load_model(path)
    np.testing.assert_allclose(forest.predict_raw(X).reshape(raw.shape), raw, rtol=1e-6, atol=1e-6)
    return forest


def test_lightgbm_text_is_sniffed_by_content(tmp_path):
    import lightgbm

    model = lightgbm.LGBMClassifier(n_estimators=10, verbose=-1).fit(X, Y)
    path = tmp_path / "no_suffix"
    model.booster_.save_model(path)
    forest = check(path, "lightgbm", model.predict(X, raw_score=True))
    assert forest.source.startswith("lightgbm")


@pytest.mark.parametrize("suffix", [".json", ".ubj"])
def test_xgboost_json_and_ubj(tmp_path, suffix):
    import xgboost

    model = xgboost.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(X, Y)
    path = tmp_path / f"model{suffix}"
    model.save_model(path)
    check(path, "xgboost", model.predict(X, output_margin=True))


def test_catboost_cbm(tmp_path):
    catboost = pytest.importorskip("catboost")
    model = catboost.CatBoostClassifier(iterations=10, depth=3, **CATBOOST).fit(X, Y)
    path = tmp_path / "model.cbm"
    model.save_model(str(path))
    check(path, "catboost", model.predict(X, prediction_type="RawFormulaVal"))


def test_ydf_directory(tmp_path):
    ydf = pytest.importorskip("ydf")
    data = {f"x{j}": X[:, j] for j in range(X.shape[1])} | {"y": Y}
    model = ydf.GradientBoostedTreesLearner(label="y", num_trees=5, task=ydf.Task.REGRESSION).train(data)
    path = tmp_path / "ydf_model"
    model.save(str(path))
    assert model_form(path) == "ydf"
    forest = thrifty.load_model(path)
    features = {k: v for k, v in data.items() if k != "y"}
    np.testing.assert_allclose(forest.predict_raw(X).ravel(), model.predict(features), rtol=1e-5, atol=1e-5)


def test_thrifty_json_forest_and_plan(tmp_path):
    from sklearn.ensemble import RandomForestClassifier

    forest = thrifty.Forest.from_model(RandomForestClassifier(n_estimators=3, max_depth=3).fit(X, Y))
    path = thrifty.save(forest, tmp_path / "forest.json")
    assert model_form(path) == "thrifty"
    np.testing.assert_array_equal(thrifty.load_model(path).predict_raw(X), forest.predict_raw(X))


def test_onnx_file_imports_as_onnxruntime_predicts(tmp_path):
    pytest.importorskip("onnx")
    skl2onnx = pytest.importorskip("skl2onnx")
    from skl2onnx.common.data_types import FloatTensorType
    from sklearn.tree import DecisionTreeRegressor

    tree = DecisionTreeRegressor(max_depth=3).fit(np.nan_to_num(X), Y)
    onx = skl2onnx.convert_sklearn(tree, initial_types=[("X", FloatTensorType([None, 4]))])
    path = tmp_path / "tree.onnx"
    path.write_bytes(onx.SerializeToString())
    assert model_form(path) == "onnx"
    forest = thrifty.load_model(path)
    Xf = np.nan_to_num(X)
    # The tree was fitted on float64 and converted to float32 thresholds: compare with the
    # scikit-learn tree on float32 input, as onnxruntime reads it.
    np.testing.assert_allclose(forest.predict_raw(Xf).ravel(), tree.predict(Xf.astype(np.float32)))


class _Marker:
    """Unpickling it writes a file: proof that a pickle was (or was not) loaded."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def test_a_pickle_is_refused_unless_trusted_and_then_imported(tmp_path):
    import joblib
    from sklearn.ensemble import RandomForestClassifier

    marker = tmp_path / "unpickled"
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(_Marker(marker)))
    with pytest.raises(InputError, match="is a pickle: .* trust_pickle=True"):
        thrifty.load_model(path)
    assert not marker.exists()
    rf = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(np.nan_to_num(X), Y)
    joblib.dump(rf, tmp_path / "rf.joblib")
    forest = thrifty.load_model(tmp_path / "rf.joblib", trust_pickle=True)
    np.testing.assert_allclose(forest.predict_proba(np.nan_to_num(X)), rf.predict_proba(np.nan_to_num(X)))
    joblib.dump({"not": "a model"}, tmp_path / "dict.joblib")
    with pytest.raises(InputError, match="holds a builtins.dict, which is not a tree model"):
        thrifty.load_model(tmp_path / "dict.joblib", trust_pickle=True)


def test_unknown_forms_are_refused_listing_the_known_ones(tmp_path):
    (tmp_path / "model.bin").write_bytes(b"\x00\x01 not a model")
    with pytest.raises(InputError, match="an unknown form, not a model file thrifty reads; give one of: "):
        thrifty.load_model(tmp_path / "model.bin")
    (tmp_path / "folder").mkdir()
    with pytest.raises(InputError, match="a directory that is not a YDF model"):
        thrifty.load_model(tmp_path / "folder")
    (tmp_path / "broken.json").write_text('{"learner": 1}')
    with pytest.raises(InputError, match="could not be read as a xgboost model"):
        thrifty.load_model(tmp_path / "broken.json")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        thrifty.load_model(tmp_path / "absent.txt")


def test_info_and_evaluate_read_a_library_model_file(tmp_path, capsys):
    import lightgbm

    from thrifty.cli import main

    path = tmp_path / "model.txt"
    lightgbm.LGBMClassifier(n_estimators=4, verbose=-1).fit(X, Y).booster_.save_model(path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "lightgbm" in out and "binary" in out
