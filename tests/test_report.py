"""The report a buyer reads (``thrifty/comparison/report.py``) and the degenerate models kept off
the front (``thrifty.comparison.selection.degenerate``), on hand-made tables."""

import pandas as pd
import pytest

from thrifty.comparison.report import left_off, markdown_report, money, plain_words, recommendations
from thrifty.comparison.result import Comparison
from thrifty.comparison.selection import degenerate, eligible_front, majority_share

PLAIN = "LightGBM, first k trees"


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
    ],
)
def test_one_number_format(x, unit, text):
    assert money(x, unit) == text
