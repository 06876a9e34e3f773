"""``thrifty.compare(model=...)`` and ``thrifty compare --model FILE``: the user's own model is
the plain model (the reference, the baseline, the start of the post-hoc methods), never refitted,
and checked against the data first."""

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest

from thrifty import CostModel, evaluate, metrics
from thrifty.cli import main
from thrifty.comparison import compare
from thrifty.comparison.methods import REFERENCE, reference_name
from thrifty.comparison.user_model import OVERLAP_NOTE
from thrifty.exceptions import InputError

#: CatBoost writes a catboost_info folder in the working directory unless told not to.
CATBOOST = {"verbose": False, "thread_count": 1, "allow_writing_files": False}
COSTS = {"c0": 1.0, "c1": 2.0, "c2": 4.0, "c3": 8.0, "c4": 16.0, "c5": 32.0}
QUICK = {"quick": True, "progress": False, "n_jobs": 1, "cv": 0}


def data(n=400, seed=0, task="binary"):
    """(X, y, X_test, y_test): six named columns; the last 100 rows are the test rows."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 6)), columns=list(COSTS))
    signal = X["c0"] + 0.5 * X["c1"] - 0.3 * X["c4"]
    y = signal + 0.3 * rng.normal(size=n) if task == "regression" else (signal > 0).astype(int)
    y = np.asarray(y)
    return X.iloc[:-100], y[:-100], X.iloc[-100:].reset_index(drop=True), y[-100:]


def baseline_row(result):
    """The reference row with every tree (the report's baseline), its series named after the
    model's library."""
    ref = result.table[result.table["method"] == reference_name(result.baseline.source)]
    assert len(ref)
    return ref.loc[ref["name"].str[2:].astype(int).idxmax()]


def check_baseline_is_the_users_model(result, raw, X_test, y_test, task):
    """The baseline is the user's model: its raw scores are the library's own (``raw``, not a
    refit), and its test figures are those of evaluating it directly on the test rows."""
    forest = result.baseline
    np.testing.assert_allclose(forest.predict_raw(X_test).reshape(raw.shape), raw, rtol=1e-6, atol=1e-6)
    costs = CostModel.from_dict(COSTS, list(COSTS))
    ev = evaluate(forest, X_test, costs)
    row = baseline_row(result)
    assert row["test_mean_cost"] == pytest.approx(ev.cost.mean)
    if task == "regression":
        assert row["test_value"] == pytest.approx(metrics.score(task, y_test, ev)[1])
    else:  # accuracy, counted here by hand
        assert row["test_value"] == pytest.approx(np.mean(forest.predict(X_test) == y_test))
    assert result.full_cost > 0 and result.user_model.startswith("your ")


def test_a_lightgbm_classifier_is_the_baseline_and_the_start_of_qwyc_and_margin():
    import lightgbm

    X, y, X_test, y_test = data()
    model = lightgbm.LGBMClassifier(n_estimators=25, num_leaves=8, verbose=-1).fit(X, y)
    methods = ["lightgbm", "qwyc", "margin"]
    result = compare(X, y, COSTS, model=model, X_test=X_test, y_test=y_test, methods=methods, **QUICK)
    raw = model.predict(X_test, raw_score=True)
    check_baseline_is_the_users_model(result, raw, X_test, y_test, "binary")
    assert result.baseline.n_trees == 25  # the model's trees, not compare's 200
    assert {"QWYC", "margin early exit"} <= set(result.table["method"])
    # QWYC's orders are of the user's 25 trees.
    qwyc = [m for (meth, _), m in result.models.items() if meth == "QWYC"]
    assert all(p.forest.n_trees == 25 for p in qwyc)
    text = result.summary()
    assert "your LightGBM model (25 trees)" in text and OVERLAP_NOTE in text
    assert "than your model" in text or "your model itself" in text


def test_an_xgboost_regressor_is_the_baseline():
    import xgboost

    X, y, X_test, y_test = data(task="regression")
    model = xgboost.XGBRegressor(n_estimators=20, max_depth=3, n_jobs=1).fit(X, y)
    # Under cross-validation too: every fold starts from the model, none refits it.
    kw = {**QUICK, "cv": 2, "methods": ["lightgbm", "qwyc"]}
    result = compare(X, y, COSTS, model=model, X_test=X_test, y_test=y_test, **kw)
    assert result.task == "regression" and result.selection.startswith("2-fold")
    check_baseline_is_the_users_model(result, model.predict(X_test), X_test, y_test, "regression")


def test_a_random_forest_is_what_budgetprune_prunes():
    from sklearn.ensemble import RandomForestClassifier

    X, y, X_test, y_test = data()
    model = RandomForestClassifier(n_estimators=15, max_depth=5, random_state=0).fit(X, y)
    result = compare(
        X, y, COSTS, model=model, X_test=X_test, y_test=y_test, methods=["lightgbm", "budgetprune"], **QUICK
    )
    check_baseline_is_the_users_model(result, model.predict_proba(X_test)[:, 1], X_test, y_test, "binary")
    # BudgetPrune's unpruned forest is the user's: the same figures on the same rows.
    unpruned = result.table[(result.table["method"] == "BudgetPrune (random forest)")]
    unpruned = unpruned[unpruned["name"] == "unpruned"].iloc[0]
    base = baseline_row(result)
    assert (unpruned["value"], unpruned["mean_cost"]) == (base["value"], base["mean_cost"])
    assert (result.table["method"] == "BudgetPrune (random forest)").sum() > 1  # prunings too


def test_a_method_that_does_not_apply_to_the_model_is_skipped_with_the_reason():
    from sklearn.ensemble import RandomForestClassifier

    X, y, _, _ = data()
    model = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    result = compare(X, y, COSTS, model=model, methods=["lightgbm", "margin"], **QUICK)
    assert any(m == "margin early exit" and "link is 'proba'" in why for m, _, why in result.skipped)


@pytest.mark.parametrize("task", ["multiclass", "ranking"])
def test_multiclass_and_ranking_models_start_qwyc(task):
    import lightgbm

    X, y, X_test, y_test = data(task="regression")
    kw = {"methods": ["lightgbm", "qwyc"], **QUICK}
    if task == "multiclass":
        y, y_test = np.digitize(y, [-0.5, 0.5]), np.digitize(y_test, [-0.5, 0.5])
        model = lightgbm.LGBMClassifier(n_estimators=6, verbose=-1).fit(X, y)
    else:
        y, y_test = np.digitize(y, [-1, 0, 1]), np.digitize(y_test, [-1, 0, 1])
        kw.update(qid=np.repeat(np.arange(30), 10), qid_test=np.repeat(np.arange(10), 10))
        model = lightgbm.LGBMRanker(n_estimators=6, verbose=-1).fit(X, y, group=[10] * 30)
    result = compare(X, y, model=model, X_test=X_test, y_test=y_test, **kw)
    assert result.task == task and result.baseline.n_trees == model.booster_.num_trees()
    assert (result.table["method"] == "QWYC").any()
    raw = model.predict(X_test, raw_score=True)
    np.testing.assert_allclose(result.baseline.predict_raw(X_test).reshape(raw.shape), raw, atol=1e-9)


def test_a_catboost_model_is_the_baseline():
    catboost = pytest.importorskip("catboost")
    X, y, X_test, y_test = data()
    model = catboost.CatBoostClassifier(iterations=20, depth=3, **CATBOOST).fit(X, y)
    result = compare(
        X, y, COSTS, model=model, X_test=X_test, y_test=y_test, methods=["lightgbm", "qwyc"], **QUICK
    )
    raw = model.predict(X_test, prediction_type="RawFormulaVal")
    check_baseline_is_the_users_model(result, raw, X_test, y_test, "binary")
    assert "your CatBoost model (20 trees)" in result.summary()
    # Its first k trees are CatBoost's series, in the table, the front's models and the report.
    methods = set(result.table["method"])
    assert "CatBoost, first k trees" in methods and REFERENCE not in methods
    assert any(m == "CatBoost, first k trees" for m, _ in result.models)
    assert "the series 'CatBoost, first k trees' is its first k trees" in result.summary()


@pytest.mark.parametrize(
    ("source", "name"),
    [
        ("lightgbm", REFERENCE),
        ("xgboost:dart", "XGBoost, first k trees"),
        ("catboost", "CatBoost, first k trees"),
        ("ydf:gbt", "YDF, first k trees"),
        ("onnx:TreeEnsembleRegressor", "ONNX, first k trees"),
        ("sklearn:RandomForestClassifier", "scikit-learn, first k trees"),
        ("", "Your model, first k trees"),
    ],
)
def test_the_reference_series_is_named_after_the_models_library(source, name):
    assert reference_name(source) == name


def test_a_model_saved_as_thrifty_json_is_the_baseline(tmp_path):
    from sklearn.ensemble import ExtraTreesClassifier

    import thrifty

    X, y, X_test, y_test = data()
    model = ExtraTreesClassifier(n_estimators=8, max_depth=4, random_state=0).fit(X, y)
    path = thrifty.save(model, tmp_path / "trees.json")  # a Full plan of the forest
    result = compare(X, y, COSTS, model=path, X_test=X_test, y_test=y_test, methods=["lightgbm"], **QUICK)
    check_baseline_is_the_users_model(result, model.predict_proba(X_test)[:, 1], X_test, y_test, "binary")
    assert "your scikit-learn model (8 trees, from trees.json)" in result.summary()


def test_the_models_columns_are_matched_by_name_in_any_order():
    import lightgbm

    X, y, X_test, y_test = data()
    model = lightgbm.LGBMClassifier(n_estimators=10, verbose=-1).fit(X[["c3", "c0", "c1"]], y)
    result = compare(X, y, COSTS, model=model, X_test=X_test, y_test=y_test, methods=["lightgbm"], **QUICK)
    raw = model.predict(X_test[["c3", "c0", "c1"]], raw_score=True)
    check_baseline_is_the_users_model(result, raw, X_test, y_test, "binary")


def test_a_model_trained_without_names_reads_the_columns_by_position():
    import xgboost

    X, y, X_test, y_test = data()
    model = xgboost.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(X.to_numpy(), y)
    result = compare(X, y, COSTS, model=model, X_test=X_test, y_test=y_test, methods=["lightgbm"], **QUICK)
    raw = model.predict(X_test.to_numpy(), output_margin=True)
    check_baseline_is_the_users_model(result, raw, X_test, y_test, "binary")


def run_cli(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def csv_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cmp_model")
    X, y, X_test, y_test = data()
    pd.concat([X, X_test]).assign(target=np.r_[y, y_test]).to_csv(folder / "data.csv", index=False)
    (folder / "costs.json").write_text(json.dumps(COSTS))
    return folder, X, y


@pytest.mark.parametrize("library", ["lightgbm", "catboost"])
def test_the_command_takes_a_saved_model_file(csv_files, library):
    folder, X, y = csv_files
    if library == "lightgbm":
        import lightgbm

        path = folder / "model.txt"
        lightgbm.LGBMClassifier(n_estimators=15, verbose=-1).fit(X, y).booster_.save_model(path)
        name = "your LightGBM model (15 trees, from model.txt)"
    else:
        catboost = pytest.importorskip("catboost")
        path = folder / "model.cbm"
        catboost.CatBoostClassifier(iterations=15, depth=3, **CATBOOST).fit(X, y).save_model(str(path))
        name = "your CatBoost model (15 trees, from model.cbm)"
    out = folder / f"out-{library}"
    args = ["compare", str(folder / "data.csv"), "--costs", str(folder / "costs.json"), "--model", str(path)]
    code, stdout, _ = run_cli([*args, "--methods", "lightgbm,qwyc", "--quick", "--out", str(out)])
    assert code == 0
    report = (out / "report.md").read_text()
    assert name in report and OVERLAP_NOTE in report and "Your model costs" in report
    assert name in stdout


def test_the_command_refuses_a_pickle_without_trust_pickle(csv_files, capsys):
    import joblib
    from sklearn.ensemble import RandomForestClassifier

    folder, X, y = csv_files
    path = folder / "rf.joblib"
    joblib.dump(RandomForestClassifier(n_estimators=3, max_depth=3).fit(X, y), path)
    args = ["compare", str(folder / "data.csv"), "--model", str(path), "--out", str(folder / "o")]
    assert main(args) == 2
    assert "--trust-pickle" in capsys.readouterr().err


# ---------------------------------------------------------------------- errors
def _fitted(kind):
    import lightgbm

    X, y, _, _ = data()
    if kind == "extra column":
        return lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X.assign(c6=X["c0"]), y)
    if kind == "unnamed, 5 features":
        return lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X.to_numpy()[:, :5], y)
    if kind == "regressor":
        return lightgbm.LGBMRegressor(n_estimators=3, verbose=-1).fit(X, y)
    if kind == "binary":
        return lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, y)
    if kind == "other labels":
        return lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, np.where(y == 1, "yes", "no"))
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression().fit(X, y)


@pytest.mark.parametrize(
    ("kind", "labels", "message"),
    [
        ("extra column", "binary", r"feature\(s\) \['c6'\] are not columns of the data"),
        ("unnamed, 5 features", "binary", "the model has 5 features .* the data has 6"),
        ("regressor", "binary", "the model is a regressor but the task is binary"),
        ("binary", "four classes", "the model is a binary classifier but y holds 4 classes"),
        ("binary", "regression", "binary classifier but the task is regression"),
        ("other labels", "binary", r"label\(s\) \[0, 1\] of y are not classes of the model"),
        ("not a tree model", "binary", "model must be a fitted tree model"),
    ],
)
def test_a_model_that_does_not_fit_the_data_is_refused_with_the_fix(kind, labels, message):
    X, y, _, _ = data()
    if labels == "four classes":
        y = np.arange(len(y)) % 4
    elif labels == "regression":
        y = X["c0"].to_numpy() * 1.5
    with pytest.raises(InputError, match=message):
        compare(X, y, model=_fitted(kind), methods=["lightgbm"], **QUICK)


def test_a_plan_is_refused_as_the_plain_model():
    from thrifty.order import margin_early_exit

    X, y, _, _ = data()
    plan = margin_early_exit(_fitted("binary"), margin=1.0)
    with pytest.raises(InputError, match="a thrifty plan .* give the forest it was built from"):
        compare(X, y, model=plan, methods=["lightgbm"], **QUICK)
