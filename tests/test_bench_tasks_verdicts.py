"""``benchmarks/_tasks_verdicts.py``'s tally: a budget where no side has a model is no comparison."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "_tasks_verdicts.py"


@pytest.fixture(scope="module")
def verdicts():
    spec = importlib.util.spec_from_file_location("_tasks_verdicts", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_budget_without_any_model_is_no_comparison(verdicts):
    """letter's smallest budget had no model on either side: it counted as "not beaten" and
    pulled both shares down; it now takes no part in them and is counted apart."""
    rows = [
        {"budget": 0.8, "beats": False, "ties": False, "verdict": "no comparison"},
        {"budget": 1.6, "beats": True, "ties": False, "verdict": "above"},
        {"budget": 3.2, "beats": True, "ties": False, "verdict": "indistinguishable"},
        {"budget": 16.0, "beats": False, "ties": True, "verdict": "indistinguishable"},
    ]
    got = verdicts.tally(rows)
    assert got["budgets_above_baselines_frac"] == pytest.approx(2 / 3, abs=1e-3)
    assert got["budgets_above_baselines_frac_where_differ"] == 1.0
    assert got["budgets_no_comparison"] == 1
    assert got["budgets_significantly"] == {"above": 1, "indistinguishable": 2, "below": 0}


def test_a_budget_where_only_a_baseline_has_a_model_is_below(verdicts):
    rows = [{"budget": 1.0, "beats": False, "ties": False, "verdict": "below"}]
    got = verdicts.tally(rows)
    assert got["budgets_above_baselines_frac"] == 0.0 and got["budgets_no_comparison"] == 0


def test_no_budget_compared_gives_no_share(verdicts):
    got = verdicts.tally([{"budget": 1.0, "beats": False, "ties": False, "verdict": "no comparison"}])
    assert got["budgets_above_baselines_frac"] is None
    assert got["budgets_above_baselines_frac_where_differ"] is None


def test_the_last_budget_is_the_plain_models_validation_cost(verdicts):
    """The figures are read at compare's budgets and at the plain model's own cost as the
    choices see it (validation cost), not at the final fit's calibration cost: on rank_small
    that was 4,416 against a validation cost of 4,450, so the plain model was never a choice
    at the last budget."""
    from types import SimpleNamespace

    import pandas as pd

    table = pd.DataFrame(
        {
            "method": ["LightGBM, first k trees", "LightGBM, first k trees", "CEGB"],
            "k": [200.0, 10.0, float("nan")],
            "mean_cost": [4450.0, 300.0, 200.0],
        }
    )
    cmp = SimpleNamespace(table=table, budgets=[220.8, 441.6], full_cost=4416.0)
    assert verdicts._budgets(cmp) == [220.8, 441.6, 4450.0]
    # Without the plain model's row, the final fit's cost stands in.
    cmp = SimpleNamespace(table=table.iloc[2:], budgets=[220.8], full_cost=4416.0)
    assert verdicts._budgets(cmp) == [220.8, 4416.0]
