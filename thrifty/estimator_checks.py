"""thrifty's own estimator checks: what every budgeted estimator promises, checked the same way.

scikit-learn's ``parametrize_with_checks`` checks the scikit-learn contract; these check the
budget contract on top of it, for any estimator built on thrifty's base (the model is
imbalanced-learn's ``utils/estimator_checks.py``)::

    from thrifty.estimator_checks import BudgetCase, parametrize_with_budget_checks

    @parametrize_with_budget_checks([BudgetCase(CEGBClassifier(n_estimators=20), X, y, budgets=[2, 4])])
    def test_budget_contract(check):
        check()

Every check fits with ``calibration=(X, y)``, so the rows the budget is measured on are known
and each promise is confirmed independently with :func:`thrifty.evaluate` of the fitted plan.
"""

from __future__ import annotations

import pickle
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from thrifty.io import load, save
from thrifty.runtime import evaluate

__all__ = [
    "BudgetCase",
    "budget_checks",
    "check_budget_met",
    "check_budget_monotone",
    "check_budget_search_table",
    "check_cost_report_matches_evaluate",
    "check_round_trips",
    "parametrize_with_budget_checks",
]

# Relative slack on "cost <= budget" and on equal costs: costs are float means of sums.
_RTOL = 1e-9


@dataclass
class BudgetCase:
    """An estimator with the data and budgets to check it on.

    ``budgets`` are increasing and each must be reachable (at least the cheapest model's cost
    on ``X``); ``costs`` (if given) is set as the estimator's ``costs=``; ``id`` names the
    case in test ids (default: the estimator's class).
    """

    estimator: Any
    X: Any
    y: Any
    budgets: Sequence[float]
    costs: Any = None
    id: str | None = None
    fit_params: dict[str, Any] = field(default_factory=dict)


def _fitted(case: BudgetCase, budget: float | None) -> Any:
    params: dict[str, Any] = {"budget": budget}
    if case.costs is not None:
        params["costs"] = case.costs
    est = clone(case.estimator).set_params(**params)
    return est.fit(case.X, case.y, calibration=(case.X, case.y), **case.fit_params)


def _calibration_cost(est: Any, X: Any) -> float:
    return float(evaluate(est.plan_, X, est.costs_).cost.mean)


def _outputs(est: Any, X: Any) -> dict[str, np.ndarray]:
    out = {"predict": np.asarray(est.predict(X))}
    for method in ("predict_proba", "decision_function"):
        if hasattr(est, method):
            out[method] = np.asarray(getattr(est, method)(X))
    out["cost"] = np.asarray(est.cost_report(X).total)
    return out


def _assert_same_outputs(a: dict[str, np.ndarray], b: dict[str, np.ndarray], what: str) -> None:
    assert a.keys() == b.keys(), f"{what}: outputs {sorted(a)} != {sorted(b)}"
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=f"{what}: {key} differs")


def check_budget_met(case: BudgetCase) -> None:
    """Every budget is met on the calibration rows, as :func:`thrifty.evaluate` measures."""
    for budget in case.budgets:
        est = _fitted(case, budget)
        cost = _calibration_cost(est, case.X)
        assert cost <= budget * (1 + _RTOL), (
            f"budget={budget}: the fitted plan costs {cost} on the calibration rows"
        )


def check_budget_monotone(case: BudgetCase) -> None:
    """A larger budget never gives a cheaper model on the calibration rows (nor a smaller one a
    dearer model): the selection rule only ever gains candidates as the budget grows."""
    budgets = sorted(case.budgets)
    costs = [_calibration_cost(_fitted(case, b), case.X) for b in budgets]
    for (b0, c0), (b1, c1) in zip(zip(budgets, costs), zip(budgets[1:], costs[1:]), strict=False):
        assert c1 >= c0 - _RTOL * max(1.0, abs(c0)), (
            f"budget {b1} gave a model costing {c1}, cheaper than budget {b0}'s {c0}"
        )


def check_cost_report_matches_evaluate(case: BudgetCase) -> None:
    """``cost_report(X)`` is exactly ``thrifty.evaluate(plan_, X, costs_).cost``, per example."""
    est = _fitted(case, case.budgets[-1])
    report = est.cost_report(case.X)
    reference = evaluate(est.plan_, case.X, est.costs_).cost
    for part in ("total", "feature", "evaluation", "n_trees", "acquired"):
        np.testing.assert_array_equal(getattr(report, part), getattr(reference, part), err_msg=part)


def check_round_trips(case: BudgetCase) -> None:
    """Pickle and ``clone`` + refit predict identically; the plan's JSON (``thrifty.save`` /
    ``load``) evaluates identically."""
    est = _fitted(case, case.budgets[-1])
    before = _outputs(est, case.X)
    _assert_same_outputs(before, _outputs(pickle.loads(pickle.dumps(est)), case.X), "pickle round trip")
    _assert_same_outputs(before, _outputs(_fitted(case, case.budgets[-1]), case.X), "clone and refit")
    ev = evaluate(est.plan_, case.X, est.costs_)
    with tempfile.TemporaryDirectory() as tmp:
        again = evaluate(load(save(est.plan_, Path(tmp) / "plan.json")), case.X, est.costs_)
    np.testing.assert_array_equal(ev.raw, again.raw, err_msg="JSON round trip: raw scores differ")
    np.testing.assert_array_equal(ev.cost.total, again.cost.total, err_msg="JSON round trip: costs differ")


def check_budget_search_table(case: BudgetCase) -> None:
    """``budget_search_`` is a table with one chosen row, whose cost is the fitted plan's."""
    for budget in (None, case.budgets[-1]):
        est = _fitted(case, budget)
        table = est.budget_search_
        assert isinstance(table, pd.DataFrame), f"budget_search_ is a {type(table).__name__}"
        for column in ("candidate", "cost", "metric", "chosen"):
            assert column in table.columns, f"budget_search_ has no {column!r} column"
        assert table["chosen"].sum() == 1, "budget_search_ must mark exactly one chosen row"
        if budget is None:
            assert len(table) == 1, "without a budget there is one candidate"
        chosen = float(table.loc[table["chosen"], "cost"].iloc[0])
        cost = _calibration_cost(est, case.X)
        assert np.isclose(chosen, cost, rtol=1e-9, atol=1e-12), (
            f"budget={budget}: the chosen row says {chosen}, the fitted plan costs {cost}"
        )


CHECKS: tuple[Callable[[BudgetCase], None], ...] = (
    check_budget_met,
    check_budget_monotone,
    check_cost_report_matches_evaluate,
    check_round_trips,
    check_budget_search_table,
)


def budget_checks(case: BudgetCase) -> Iterator[Callable[[], None]]:
    """Each check bound to ``case``, ready to call."""
    for check in CHECKS:
        yield partial(check, case)


def parametrize_with_budget_checks(cases: Sequence[BudgetCase]) -> Any:
    """A ``pytest.mark.parametrize`` decorator over every check of every case (argument ``check``)."""
    import pytest  # a test-time dependency only: the library itself never needs pytest

    params: list[Any] = []
    for case in cases:
        name = case.id or type(case.estimator).__name__
        params.extend(pytest.param(partial(check, case), id=f"{name}-{check.__name__}") for check in CHECKS)
    return pytest.mark.parametrize("check", params)
