"""The report a buyer reads (``thrifty/comparison/report.py``) and the degenerate models kept off
the front (``thrifty.comparison.selection.degenerate``), on hand-made tables."""

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thrifty.comparison import compare
from thrifty.comparison.report import (
    headline,
    left_off,
    markdown_report,
    money,
    plain_words,
    recommendations,
)
from thrifty.comparison.result import Comparison
from thrifty.comparison.selection import degenerate, eligible_front, majority_share

PLAIN = "LightGBM, first k trees"
FAST = {"n_estimators": 30, "num_leaves": 8, "n_jobs": 1}


def table():
    """The plain model, a cheaper good model, and three degenerate ones that a front would hold."""
    rows = [
        # method, name, mean_cost, value, auc, single_class, test figures (cost, value, low, high)
        (PLAIN, "k=100", 600.57, 0.82, 0.88, 0.0, (600.57, 0.789, 0.69, 0.86)),
        ("margin early exit", "d=0", 438.09, 0.814, 0.87, 0.0, (557.37, 0.779, 0.68, 0.85)),
        ("Cronus", "lam=1", 0.0, 0.535, 0.5, 0.0, (None,) * 4),  # constant scores
        ("BudgetPrune", "b=20", 1.0, 0.60, 0.61, 0.6, (None,) * 4),  # one class on 3 of 5 folds
        ("QWYC", "e=9", 2.0, 0.62, 0.58, 0.0, (None,) * 4),  # below the majority class
    ]
    return pd.DataFrame(
        [
            {
                "method": m,
                "name": n,
                "metric": "accuracy",
                "mean_cost": c,
                "value": v,
                "auc": a,
                "single_class": s,
                "folds": 5,
                "k": 100 if m == PLAIN else None,
                "test_mean_cost": t[0],
                "test_value": t[1],
                "test_low": t[2],
                "test_high": t[3],
                "test_rows": 91 if t[0] is not None else None,
            }
            for m, n, c, v, a, s, t in rows
        ]
    )


def comparison(front):
    t = table()
    return Comparison(
        table=t,
        front=t.loc[front],
        models={},
        task="binary",
        full_cost=600.57,
        budgets=[60.06, 150.14],
        selection="5-fold cross-validation of 212 rows",
        n_test=91,
        class_counts={"selection": {0: 138, 1: 74}, "test": {0: 49, 1: 42}},
        baseline_value=0.82,
    )


def test_degenerate_models_are_named_with_their_reason():
    reasons = degenerate(table(), majority=138 / 212)
    assert list(reasons[:2]) == ["", ""]
    assert reasons[2] == "gives every row the same score (AUC 0.5)"
    assert reasons[3] == "predicts a single class on 60% of its validation folds"
    assert reasons[4] == "below the majority class on validation (62.0% < 65.1%)"
    confirmed = table().assign(test_single_class=[False, True, None, None, None])
    assert degenerate(confirmed)[1] == "predicts a single class on the test rows"


def test_degenerate_models_stay_off_the_front():
    t = table()
    assert list(eligible_front(t, 0.82, majority=138 / 212).index) == [1, 0]
    # Without the majority share, the model below it would be the cheapest buy.
    assert 4 in eligible_front(t, 0.82).index
    # Once confirmed, a model giving every test row one label leaves the front.
    confirmed = t.loc[[1]].assign(test_single_class=[True])
    assert eligible_front(confirmed, 0.9).empty
    assert majority_share(t["single_class"].to_numpy() > 0, "binary") == pytest.approx(0.8)
    assert majority_share(t["value"].to_numpy(), "regression") is None


def test_one_model_returned_for_several_settings_is_on_the_front_once():
    t = table()
    # GreedyMiser's one model at every budget: the same cost and figure, three settings.
    copies = pd.DataFrame(
        [t.loc[1].to_dict() | {"method": "GreedyMiser", "name": f"b={b}"} for b in (3, 9, 20)]
    )
    both = pd.concat([t, copies], ignore_index=True)
    front = eligible_front(both, 0.82, majority=138 / 212)
    assert list(front["name"]) == ["d=0", "b=3", "k=100"]  # another method's tie stays


def test_report_lists_the_degenerate_models_apart_with_the_reason():
    cmp = comparison(front=[1, 0])
    off = left_off(cmp)
    assert set(off["method"]) == {"Cronus", "BudgetPrune", "QWYC"}
    text = markdown_report(cmp, cmp.recommend(), {}, cost_unit="$")
    assert "## Left off the front" in text and "gives every row the same score (AUC 0.5)" in text


def test_one_plain_sentence_per_distinct_model_with_its_budgets():
    cmp = comparison(front=[1, 0])
    rec = cmp.recommend([450.0, 500.0, 600.57])
    lines = recommendations(cmp, rec, "$", noun="patient")
    assert len(lines) == 2  # margin early exit for 450 and 500, the plain model for 600.57
    assert lines[0].startswith("margin early exit (d=0), best within budgets $450.00, $500.00: ")
    assert (
        "7% cheaper than the plain model ($43.20 less per patient), 1.0 point less accurate "
        "(77.9% vs 78.9%; 95% interval 68.0% to 85.0%), confirmed on 91 test patients" in lines[0]
    )
    assert (
        "selected on 5-fold cross-validation of 212 patients (accuracy 81.4% at $438.09 per patient)"
        in lines[0]
    )
    assert "the plain model itself: $600.57 per patient, accuracy 78.9%" in lines[1]
    assert plain_words(rec.iloc[0], cmp).endswith("confirmed on 91 test rows")


@pytest.mark.parametrize(
    "x, unit, text",
    [
        (1234.5, "$", "$1,234.50"),  # thousands separated, to the cent
        (3, None, "3.00"),  # no more "3" beside "4.101"
        (4.1012, None, "4.10"),
        (0.0012, None, "0.0012"),  # a small price does not read 0.00
        (0, None, "0.00"),
        (1.2e-5, None, "0.000012"),  # never 1.2e-05
        (2.5e9, "$", "$2,500,000,000.00"),
    ],
)
def test_one_number_format(x, unit, text):
    assert money(x, unit) == text


@settings(max_examples=300, deadline=None)
@given(st.floats(-1e18, 1e18, allow_nan=False).filter(lambda x: x == 0 or abs(x) > 1e-30))
def test_no_number_is_written_in_scientific_notation(x):
    from thrifty.comparison.numbers import quantity, shown

    for text in (
        money(x, "$"),
        money(x, None),
        quantity(x, "$"),
        shown(x, "rmse", "kg"),
        shown(x, "ndcg@10"),
    ):
        assert not SCIENTIFIC.search(text), text
    # An error in the target's units keeps three significant digits, whatever its size.
    back = float(quantity(x, "$").replace("$", "").replace(",", ""))
    assert back == pytest.approx(x, rel=5e-3, abs=0 if x else 1e-300)


# ----------------------------------------------------------------------------- regression, ranking
def regression_comparison(rows):
    """A hand-made regression comparison: the plain model first; RMSE in dollars."""
    table = pd.DataFrame(
        [
            {
                "method": m,
                "name": n,
                "metric": "rmse",
                "mean_cost": c,
                "value": v,
                "mae": v / 2,
                "r2": r2,
                "constant": const,
                "folds": 1,
                "k": 200 if m == PLAIN else None,
                "test_mean_cost": t[0],
                "test_value": t[1],
                "test_low": t[2],
                "test_high": t[3],
                "test_mae": None if t[1] is None else t[1] / 2,
                "test_mae_low": None if t[1] is None else t[2] / 2,
                "test_mae_high": None if t[1] is None else t[3] / 2,
                "test_r2": None if t[1] is None else 0.977,
                "test_r2_low": None if t[1] is None else 0.975,
                "test_r2_high": None if t[1] is None else 0.979,
                "test_rows": 10788 if t[0] is not None else None,
            }
            for m, n, c, v, r2, const, t in rows
        ]
    )
    return Comparison(
        table=table,
        front=eligible_front(table, table.loc[0, "value"]),
        models={},
        task="regression",
        full_cost=68.0,
        budgets=[6.8, 20.4],
        selection="a validation split of 8,630 rows",
        n_test=10788,
        baseline_value=float(table.loc[0, "value"]),
    )


REGRESSION = [
    # method, name, mean_cost, RMSE, R², constant share, test figures (cost, RMSE, low, high)
    (PLAIN, "k=200", 68.0, 600.0, 0.977, 0.0, (68.0, 612.4, 590.2, 634.9)),
    ("CEGB", "budget=41", 41.2, 628.0, 0.975, 0.0, (41.5, 640.3, 618.1, 662.6)),
    ("CEGB", "budget=7", 7.0, 3850.0, -0.0004, 0.0, (None,) * 4),  # no better than the mean
    ("GreedyMiser", "budget=1", 1.0, 3890.0, 0.001, 1.0, (None,) * 4),  # one value for every row
    ("QWYC", "alpha=0.1", 50.0, 700.0, 0.96, 0.0, (None,) * 4),  # dominated: a higher RMSE, dearer
]


def test_regression_speaks_in_rmse_in_the_targets_units():
    cmp = regression_comparison(REGRESSION)
    # Lower RMSE is better: the front is the plain model and the cheaper CEGB, nothing degenerate.
    assert list(cmp.front.index) == [1, 0]
    assert list(cmp.recommend([45.0, 70.0])["name"]) == ["budget=41", "k=200"]
    reasons = degenerate(cmp.table)
    assert reasons[2] == "no better than predicting the mean on validation (R² -0.000 <= 0)"
    assert reasons[3] == "predicts one value for every row on 100% of its validation folds"
    assert list(left_off(cmp)["name"]) == ["budget=1", "budget=7"]
    lines = recommendations(cmp, cmp.recommend([45.0, 70.0]), None, noun="diamond", target_unit="$")
    assert (
        "39% cheaper than the plain model (26.50 less per diamond), RMSE $640 vs $612 (+4.6%; "
        "95% interval $618 to $663), confirmed on 10,788 test diamonds" in lines[0]
    )
    assert "selected on a validation split of 8,630 diamonds (RMSE $628 at 41.20 per diamond)" in lines[0]
    assert (
        "the plain model itself: 68.00 per diamond, RMSE $612 (95% interval $590 to $635), "
        "MAE $306 (95% interval $295 to $317), R² 0.977 (95% interval 0.975 to 0.979), "
        "confirmed on 10,788 test diamonds" in lines[1]
    )
    text = markdown_report(cmp, cmp.recommend(), {}, target_unit="$", noun="diamond")
    assert "metric: RMSE (lower is better, in the target's units ($)); also MAE, R²" in text
    assert "| method | name | mean_cost | rmse | mae | r2 | constant | test_mean_cost | test_rmse |" in text


def test_ranking_speaks_in_ndcg_over_queries():
    rows = [
        (PLAIN, "k=200", 10.0, 0.731, (10.0, 0.725, 0.69, 0.76)),
        ("Cronus", "lam=1", 4.0, 0.720, (4.2, 0.712, 0.680, 0.741)),
        ("CEGB", "b=1", 0.5, 0.50, (None,) * 4),  # every document of a query tied
    ]
    table = pd.DataFrame(
        [
            {
                "method": m,
                "name": n,
                "metric": "ndcg@10",
                "mean_cost": c,
                "value": v,
                "precision@5": v - 0.1,
                "constant": 1.0 if n == "b=1" else 0.0,
                "folds": 5,
                "k": 200 if m == PLAIN else None,
                "test_mean_cost": t[0],
                "test_value": t[1],
                "test_low": t[2],
                "test_high": t[3],
                "test_rows": 1500 if t[0] else None,
                "test_queries": 120 if t[0] else None,
            }
            for m, n, c, v, t in rows
        ]
    )
    cmp = Comparison(
        table=table,
        front=eligible_front(table, 0.731),
        models={},
        task="ranking",
        full_cost=10.0,
        budgets=[1.0],
        selection="5-fold cross-validation of 4,000 rows",
        n_test=1500,
        baseline_value=0.731,
    )
    assert list(cmp.front.index) == [1, 0]
    assert (
        degenerate(table)[2]
        == "gives every document of a query the same score on 100% of its validation folds"
    )
    sentence = plain_words(cmp.front.loc[1], cmp)
    assert sentence == (
        "58% cheaper than the plain model (5.80 less per document), NDCG@10 0.712 vs 0.725 "
        "(-1.3 points; 95% interval 0.680 to 0.741), confirmed on 120 test queries"
    )
    assert "confirmed once on 1,500 test rows (120 queries)" in headline(cmp)[0]
    assert "the same score for every document of a query" in headline(cmp)[1]


SCIENTIFIC = re.compile(r"\d[eE][+-]?\d")


@pytest.mark.parametrize(
    "task, scale",
    [("regression", 1e4), ("regression", 1e-4), ("ranking", 1.0)],
    ids=["prices", "tiny targets", "ranking"],
)
def test_no_figure_of_a_report_is_in_scientific_notation(task, scale, tmp_path, monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    qid = None
    if task == "regression":
        y = scale * (3.0 + X[:, 0] + X[:, 1] ** 2 + 0.1 * rng.normal(size=300))
    else:
        qid = np.repeat(np.arange(30), 10)
        y = np.clip(np.round(X[:, 0] + 1.5), 0, 4).astype(int)
    # Tiny prices too: costs are written without 1e-05 as well.
    costs = [1e-5, 2.0, 3e4, 4.0]
    cmp = compare(
        X, y, costs, qid=qid, methods=["lightgbm"], progress=False, lightgbm_params=FAST, cv=2, n_jobs=1
    )
    unit = "$" if scale > 1 else None
    cmp.write(tmp_path, cost_unit="$", target_unit=unit)
    text = (tmp_path / "report.md").read_text() + cmp.summary("$", target_unit=unit)
    assert not SCIENTIFIC.findall(text), SCIENTIFIC.findall(text)[:5]
    metric = "RMSE" if task == "regression" else "NDCG@10"
    assert f"metric: {metric}" in text and "95% interval" in text
    # The test figure lies inside its interval, in the target's units.
    plain = cmp.table.loc[cmp.table["test_value"].notna()].iloc[0]
    assert plain["test_low"] <= plain["test_value"] <= plain["test_high"]
    ax = cmp.plot(target_unit=unit)
    ax.figure.canvas.draw()
    assert ax.get_ylabel().startswith(metric + (f" ({unit})" if unit else ""))
    ticks = [t.get_text() for t in ax.get_yticklabels()] + [ax.yaxis.get_offset_text().get_text()]
    assert not any(SCIENTIFIC.search(t) or "×" in t for t in ticks), ticks


# ----------------------------------------------------------------------------- the shared data
def test_diamonds_report_speaks_in_dollars_of_diamonds(data_home, tmp_path, monkeypatch):
    from sklearn.metrics import mean_squared_error

    from thrifty import datasets, evaluate
    from thrifty.comparison.numbers import units

    monkeypatch.setenv("MPLBACKEND", "Agg")
    ds = datasets.load("diamonds", data_home)
    X, y, _ = ds.subset("train")
    X_test, y_test, _ = ds.subset("test")
    cmp = compare(
        X.iloc[:1500],
        y[:1500],
        ds.costs,
        X_test=X_test.iloc[:800],
        y_test=y_test[:800],
        methods=["lightgbm"],
        progress=False,
        lightgbm_params=FAST,
        cv=2,
        n_jobs=1,
    )
    how = units(ds.meta)
    assert how == {"cost_unit": None, "target_unit": "$", "noun": "diamond"}
    text = cmp.summary(**how)
    assert "RMSE $" in text and "confirmed on 800 test diamonds" in text and not SCIENTIFIC.search(text)
    # The plain model's test RMSE is scikit-learn's on its own predictions, in dollars.
    plain = cmp.table.loc[cmp.table["test_value"].notna()].iloc[0]
    raw = evaluate(cmp.model(plain["method"], plain["name"]), X_test.iloc[:800], ds.costs).raw
    assert plain["test_value"] == pytest.approx(np.sqrt(mean_squared_error(y_test[:800], raw)))
    assert 100 < plain["test_value"] < 5000  # dollars, not squared dollars
    cmp.write(tmp_path, **how)
    assert not SCIENTIFIC.search((tmp_path / "report.md").read_text())


def test_rank_small_report_speaks_in_ndcg_over_its_test_queries(data_home):
    from sklearn.metrics import ndcg_score

    from thrifty import datasets, evaluate

    ds = datasets.load("rank_small", data_home)
    X, y, qid = ds.subset("train")
    X_test, y_test, qid_test = ds.subset("test")
    cmp = compare(
        X,
        y,
        None,
        qid=qid,
        X_test=X_test,
        y_test=y_test,
        qid_test=qid_test,
        methods=["lightgbm"],
        progress=False,
        lightgbm_params=FAST,
        cv=2,
        n_jobs=1,
    )
    assert "confirmed on 50 test queries" in cmp.summary() and not SCIENTIFIC.search(cmp.summary())
    plain = cmp.table.loc[cmp.table["test_value"].notna()].iloc[0]
    assert plain["metric"] == "ndcg@10" and plain["test_queries"] == 50
    # NDCG@10 of each test query by brute force (gain 2**grade - 1; tied scores in input order;
    # a query without a relevant document counts 1, as LightGBM's), averaged over the queries;
    # scikit-learn agrees on the queries whose scores have no ties (it averages over ties).
    score = evaluate(cmp.model(plain["method"], plain["name"]), X_test).raw
    per_query = []
    for q in np.unique(qid_test):
        grades, s = y_test[qid_test == q], score[qid_test == q]
        ranked = sorted(range(len(s)), key=lambda i: (-s[i], i))[:10]
        dcg = sum((2.0 ** grades[i] - 1) / np.log2(r + 2) for r, i in enumerate(ranked))
        ideal = sum((2.0**g - 1) / np.log2(r + 2) for r, g in enumerate(sorted(grades, reverse=True)[:10]))
        per_query.append(dcg / ideal if ideal else 1.0)
        if ideal and len(np.unique(s)) == len(s):
            assert per_query[-1] == pytest.approx(ndcg_score([2.0**grades - 1], [s], k=10))
    assert plain["test_value"] == pytest.approx(np.mean(per_query))
    assert plain["test_low"] < plain["test_value"] < plain["test_high"]
