"""Tests of ``thrifty.comparison.splits`` (rows held out at random or by time) and of compare's
warning on features whose test values its training rows never have."""

import warnings

import numpy as np
import pandas as pd
import pytest

from thrifty import CostModel, Forest, evaluate
from thrifty.comparison import compare
from thrifty.comparison.inputs import out_of_range
from thrifty.comparison.settings import Settings
from thrifty.comparison.splits import check_split, holdout_indices, split_rank, split_rows
from thrifty.comparison.sweep import fitting_context
from thrifty.exceptions import InputError

FAST = {"n_estimators": 20, "num_leaves": 8, "n_jobs": 1}


def dated(days=40, per_day=20, seed=0):
    """Rows in time order: ``day`` (free) then a costly feature ``x`` the label follows."""
    rng = np.random.default_rng(seed)
    day = np.repeat(np.arange(days), per_day).astype(float)
    x = rng.normal(size=len(day))
    y = (x + 0.3 * rng.normal(size=len(day)) > 0).astype(int)
    return pd.DataFrame({"day": day, "hour": rng.uniform(0, 24, len(day)), "x": x}), y


@pytest.mark.parametrize(
    "split, order",
    [
        ("ordered", lambda X: np.arange(len(X))),  # rows as given
        ("time=day,hour", lambda X: np.lexsort((X["hour"], X["day"]))),  # day first, then hour
    ],
)
def test_a_time_split_holds_out_the_latest_rows(split, order):
    X, y = dated()
    X = X.sample(frac=1.0, random_state=1) if split != "ordered" else X  # shuffled: order by columns
    rank = split_rank(X, check_split(split, X))
    keep, held = holdout_indices(y, None, "binary", 0.2, 0, rank=rank)
    assert len(held) == int(np.ceil(0.2 * len(y))) and len(keep) + len(held) == len(y)
    latest = np.sort(order(X)[len(y) - len(held) :])
    np.testing.assert_array_equal(held, latest)


def test_a_random_split_is_unchanged_and_a_time_split_of_queries_keeps_them_whole():
    X, y = dated()
    assert split_rank(X, "random") is None
    a = holdout_indices(y, None, "binary", 0.2, 0)
    b = holdout_indices(y, None, "binary", 0.2, 0, rank=None)
    np.testing.assert_array_equal(a[1], b[1])
    qid = np.repeat(np.arange(len(y) // 10), 10)
    keep, held = holdout_indices(y, qid, "ranking", 0.25, 0, rank=np.arange(len(y)))
    assert not set(qid[keep]) & set(qid[held])  # whole queries
    assert qid[held].min() > qid[keep].max()  # the latest queries
    assert abs(len(held) - 0.25 * len(y)) <= 10


@pytest.mark.parametrize(
    "split, words",
    [
        ("sorted", "'random', 'ordered' or 'time=COLUMN"),  # an unknown kind
        ("time=", "'random', 'ordered' or 'time=COLUMN"),  # no column
        ("time=date", "no column 'date'"),  # a column X does not have
        ("time=tag", "not numbers or dates"),  # text cannot be ordered in time
        ("time=gap", "missing value"),  # a row without a time
    ],
)
def test_a_bad_split_is_refused_in_one_line(split, words):
    X, _ = dated(days=3)
    X = X.assign(tag="a", gap=np.r_[np.nan, np.ones(len(X) - 1)])
    with pytest.raises(InputError, match=words):
        check_split(split, X)


def test_each_method_calibrates_on_the_latest_of_its_fitting_rows():
    X, y = dated()
    settings = Settings(task="binary", costs=CostModel.uniform(3), split="ordered")
    ctx = fitting_context(settings, X, y, None)
    assert ctx.X_val["day"].min() >= ctx.X_train["day"].max()
    random = fitting_context(Settings(task="binary", costs=CostModel.uniform(3)), X, y, None)
    assert random.X_val["day"].min() < random.X_train["day"].max()  # shuffled rows, as before


def test_compare_chooses_on_the_latest_rows_under_a_time_split():
    """The plain model's validation figure, recomputed by hand: fitted on the earliest 64% of
    the rows (the training part of the fitting rows), scored on the latest 20%."""
    import lightgbm

    from thrifty.comparison.compare import _lightgbm_params

    X, y = dated()
    (Xp, yp, _), (Xt, yt, _) = split_rows(X, y, None, "binary", 0.25, 0, "ordered")
    assert Xt["day"].min() >= Xp["day"].max()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the test days are later: warned, tested below
        cmp = compare(
            Xp, yp, CostModel([0.0, 0.0, 1.0]), X_test=Xt, y_test=yt, methods=["lightgbm"], split="ordered",
            lightgbm_params=FAST, quick=True, progress=False, n_jobs=1,
        )  # fmt: skip
    n = len(yp)
    n_val = int(np.ceil(0.2 * n))
    fit = n - n_val
    n_train = fit - int(np.ceil(0.2 * fit))
    assert cmp.selection.startswith(f"a validation split of {n_val:,} rows (the latest)")
    params = _lightgbm_params(fit, "binary", 1, FAST)
    model = lightgbm.LGBMClassifier(**params).fit(Xp.iloc[:n_train], yp[:n_train])
    ev = evaluate(Forest.from_model(model), Xp.iloc[fit:], CostModel([0.0, 0.0, 1.0]))
    row = cmp.table[cmp.table["name"] == f"k={FAST['n_estimators']}"].iloc[0]
    right = ev.labels == yp[fit:]
    # Weighted so that each class counts as it does among all the rows given (selection.prior_weights).
    share = {c: np.mean(yp == c) / np.mean(yp[fit:] == c) for c in (0, 1)}
    weights = np.array([share[c] for c in yp[fit:]])
    assert not np.allclose(weights, 1.0)  # the latest rows' shares differ (49.2% of 1s, 47.5% in all)
    assert row["unweighted_value"] == pytest.approx(np.mean(right))
    assert row["value"] == pytest.approx(np.sum(weights * right) / np.sum(weights))
    assert "accuracy weighted to the class shares of all" in cmp.selection
    with pytest.raises(InputError, match="cv=0"):
        compare(Xp, yp, methods=["lightgbm"], split="ordered", cv=5, progress=False)


def test_features_whose_test_values_the_training_rows_never_have_are_named():
    X, y = dated()
    early, late = X[X["day"] < 30], X[X["day"] >= 30]
    lines = out_of_range(early, late)
    assert len(lines) == 1 and lines[0].startswith("feature 'day': 100% of the test rows lie outside")
    assert "[0, 29]" in lines[0] and "(30 to 39)" in lines[0]
    shuffled = X.sample(frac=1.0, random_state=0)
    assert out_of_range(shuffled.iloc[:600], shuffled.iloc[600:]) == []  # rows drawn alike
    cats = pd.DataFrame({"c": pd.Categorical(["a", "b"] * 300)})
    new = pd.DataFrame({"c": pd.Categorical(["a", "z"] * 50)})
    said = "feature 'c': 50% of the test rows take categories the training rows never have (z)"
    assert out_of_range(cats, new) == [said]


def test_compare_reports_the_shift_and_suggests_a_time_split():
    X, y = dated()
    early, late = X["day"] < 30, X["day"] >= 30
    with pytest.warns(UserWarning, match="feature 'day'.*split='ordered'"):
        cmp = compare(
            X[early], y[early], X_test=X[late], y_test=y[late], methods=["lightgbm"],
            lightgbm_params=FAST, quick=True, progress=False, n_jobs=1, cv=0,
        )  # fmt: skip
    assert any("feature 'day'" in w for w in cmp.warnings)
    assert "warning: feature 'day'" in cmp.summary()


def test_qwyc_reads_a_fixed_sample_of_many_calibration_rows(monkeypatch):
    """Above QWYC_ROWS calibration rows QWYC's search reads a sample of them (the same for every
    alpha), and compare's plan is the one qwyc fits on that sample."""
    from thrifty.comparison import methods
    from thrifty.order import qwyc

    X, y = dated()
    ctx = fitting_context(
        Settings(task="binary", costs=CostModel([0.0, 0.0, 1.0]), lightgbm_params=FAST), X, y, None
    )
    assert methods._qwyc_rows(ctx) == (ctx.X_val, None)  # 160 rows: all of them, a random split
    monkeypatch.setattr(methods, "QWYC_ROWS", 50)
    ctx._cache.pop("qwyc rows", None)
    rows, _ = methods._qwyc_rows(ctx)
    assert len(rows) == 50 and rows.index.is_monotonic_increasing and set(rows.index) <= set(ctx.X_val.index)
    assert methods._qwyc_rows(ctx)[0].index.equals(rows.index)
    cand = next(c for c in methods.METHODS["qwyc"].run(ctx) if c.params["alpha"] == 0.2)
    plan = qwyc(ctx.lightgbm(), rows, alpha=0.2, costs=ctx.costs, feature_costs=True)
    np.testing.assert_array_equal(cand.model.order, plan.order)
    np.testing.assert_array_equal(cand.model.eps_pos, plan.eps_pos)
    np.testing.assert_array_equal(cand.model.eps_neg, plan.eps_neg)
    assert {0.15, 0.3} <= set(methods.QWYC_ALPHAS)  # the low budgets' bounds


@pytest.mark.parametrize(
    "data, options, split",
    [
        ("csv", ["--split", "time=day"], "time=day"),  # a file: as given
        ("csv", [], None),  # a file without --split: compare's default
        ("flights", [], "time=month,day,sched_dep_time"),  # a shared dataset's own order
        ("flights", ["--split", "random"], "random"),  # --split overrides it
    ],
)
def test_the_command_passes_the_split_on(request, tmp_path, monkeypatch, data, options, split):
    import thrifty.comparison
    from thrifty.cli import main

    seen = {}

    def spy(X, y, *args, **kwargs):
        seen.update(kwargs)
        raise InputError("stop here")

    if data == "flights":
        request.getfixturevalue("data_home")  # skips without the shared datasets
    else:
        X, y = dated(days=5)
        X.assign(target=y).to_csv(tmp_path / "d.csv", index=False)
        data = str(tmp_path / "d.csv")
    monkeypatch.setattr(thrifty.comparison, "compare", spy)
    assert main(["compare", data, *options, "--out", str(tmp_path / "o")]) == 2
    assert seen.get("split") == split
