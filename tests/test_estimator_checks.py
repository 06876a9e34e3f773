"""thrifty's own estimator checks (thrifty.estimator_checks), over every estimator.

Each family appends its estimators to CASES. The checks are first shown to pass on a small
reference estimator built on the shared base and to fail on estimators that break a promise.
"""

from __future__ import annotations

from numbers import Integral, Real

import lightgbm
import numpy as np
import pytest
from sklearn.base import ClassifierMixin, clone
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier
from sklearn.frozen import FrozenEstimator
from sklearn.tree import DecisionTreeClassifier

from thrifty._estimator import Candidate, ThriftyEstimator
from thrifty._param_validation import Interval
from thrifty._validation import class_labels, validate_frame
from thrifty.cascade import CronusClassifier
from thrifty.estimator_checks import (
    BudgetCase,
    check_budget_met,
    check_budget_monotone,
    check_budget_search_table,
    check_cost_report_matches_evaluate,
    parametrize_with_budget_checks,
)
from thrifty.forest import Forest
from thrifty.order import QWYCClassifier
from thrifty.prune import BudgetPrunedClassifier
from thrifty.runtime import Full, evaluate
from thrifty.train import (
    ADAPTClassifier,
    BudgetRFClassifier,
    CEGBClassifier,
    CEGBRanker,
    CEGBRegressor,
    GreedyMiserClassifier,
    GreedyMiserRegressor,
)

X, y = make_classification(n_samples=200, n_features=6, n_informative=4, random_state=0)
PRICES = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


class PrefixForest(ClassifierMixin, ThriftyEstimator):
    """Reference estimator: a random forest whose candidates are its tree prefixes."""

    _parameter_constraints = {
        "n_estimators": [Interval(Integral, 1, None, closed="left")],
        "costs": [None, "cost-model"],
        "budget": [None, Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, n_estimators: int = 8, *, costs=None, budget=None):
        self.n_estimators = n_estimators
        self.costs = costs
        self.budget = budget

    def fit(self, X, y, sample_weight=None, *, calibration=None):
        self._validate_params()
        X, y = validate_frame(self, X, y)
        y, self.classes_, codes = class_labels(y, "PrefixForest")
        costs = self._fit_costs(X)
        split = self._calibration(X, codes, sample_weight, calibration)
        rf = RandomForestClassifier(self.n_estimators, max_depth=3, random_state=0).fit(split.X, split.y)
        forest = Forest.from_model(rf)
        ks = [self.n_estimators] if self.budget is None else range(1, self.n_estimators + 1)

        def candidate(k):
            plan = Full(forest.subset(range(k)))
            ev = evaluate(plan, split.X_cal, costs)
            return Candidate({"n_trees": k}, ev.cost.mean, float(np.mean(ev.labels == split.y_cal)), plan)

        self.plan_ = self._select(candidate(k) for k in ks).model
        return self

    def predict(self, X):
        return self.classes_[self.evaluate(X).labels]


class AlwaysFull(PrefixForest):
    """Broken: ignores the budget."""

    def fit(self, X, y, sample_weight=None, *, calibration=None):
        budget, self.budget = self.budget, None
        try:
            return super().fit(X, y, calibration=calibration)
        finally:
            self.budget = budget


class Cheapest(PrefixForest):
    """Broken: a larger budget gives a cheaper model (the selection reversed)."""

    def _select(self, candidates):
        cands = list(candidates)
        if self.budget is not None and self.budget > 20:
            cands = cands[:1]
        return super()._select(cands)


class WrongPlan(PrefixForest):
    """Broken: the plan fitted is not the table's chosen row (always the first candidate)."""

    def _select(self, candidates):
        cands = list(candidates)
        super()._select(cands)
        return cands[0]


class WrongReport(PrefixForest):
    """Broken: cost_report prices with uniform costs."""

    def cost_report(self, X, costs=None):
        return evaluate(self.plan_, X).cost


def case(est, budgets=(8.0, 14.0, 30.0)):
    return BudgetCase(est, X, y, budgets=list(budgets), costs=PRICES)


CASES = [
    case(PrefixForest()),
    # ADAPT: a gate and a low-cost model in front of a tree fitted on the training rows
    case(
        ADAPTClassifier(
            DecisionTreeClassifier(max_depth=3, random_state=0),
            n_estimators=5,
            n_iter=1,
            p_full_grid=(0.1, 0.5),
            gamma_grid=(1.0, 1e-3),
            progress=False,
        ),
        budgets=(5.0, 12.0, 30.0),
    ),
    # BudgetPrune: every pruning on the lambda path of a random forest
    case(
        BudgetPrunedClassifier(
            RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0), progress=False
        ),
        budgets=(4.0, 8.0, 30.0),
    ),
]

# order + cascade: QWYC on a frozen fitted LightGBM (no labels needed), Cronus fitting its own
_GBT = lightgbm.LGBMClassifier(n_estimators=12, num_leaves=4, verbose=-1, n_jobs=1)
CASES += [
    case(QWYCClassifier(FrozenEstimator(clone(_GBT).fit(X, y)), progress=False), budgets=(8.5, 10.0, 13.0)),
    case(
        CronusClassifier(_GBT, n_stages=2, max_cycles=1, n_lams=4, progress=False), budgets=(5.0, 14.0, 20.0)
    ),
]

# train family: CEGB, GreedyMiser (trade-off search) and BudgetRF (tree prefixes)
_BOOST = {"n_estimators": 10, "max_fits": 6, "n_jobs": 1, "progress": False}
CASES += [
    case(CEGBClassifier(**_BOOST), budgets=(4.0, 8.0, 14.0)),
    case(CEGBRegressor(**_BOOST), budgets=(4.0, 8.0, 14.0)),
    BudgetCase(
        CEGBRanker(min_child_samples=5, **_BOOST),
        X,
        y,
        budgets=[4.0, 8.0, 14.0],
        costs=PRICES,
        fit_params={"qid": np.repeat(np.arange(20), 10)},
    ),
    case(GreedyMiserClassifier(**_BOOST), budgets=(4.0, 8.0, 14.0)),
    case(GreedyMiserRegressor(**_BOOST), budgets=(4.0, 8.0, 14.0)),
    case(BudgetRFClassifier(8, max_depth=4, random_state=0, progress=False), budgets=(7.0, 11.0, 20.0)),
]


@parametrize_with_budget_checks(CASES)
def test_budget_contract(check):
    check()


@pytest.mark.parametrize(
    "broken, check",
    [
        (AlwaysFull(), check_budget_met),
        (Cheapest(), check_budget_monotone),
        (WrongReport(), check_cost_report_matches_evaluate),
        (WrongPlan(), check_budget_search_table),
    ],
)
def test_checks_catch_broken_estimators(broken, check):
    with pytest.raises(AssertionError):
        check(case(broken))
