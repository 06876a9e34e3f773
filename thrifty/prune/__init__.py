"""Pruning under feature costs: BudgetPrune's exact (IP3) solve by minimum cut, and its lambda path,
for classification and regression forests."""

from typing import TYPE_CHECKING

from thrifty._lazy import attach

if TYPE_CHECKING:
    from thrifty.prune.budgetprune import PrunePath, budget_prune, budget_prune_path
    from thrifty.prune.estimator import BudgetPrunedClassifier, BudgetPrunedRegressor

__all__ = [
    "BudgetPrunedClassifier",
    "BudgetPrunedRegressor",
    "PrunePath",
    "budget_prune",
    "budget_prune_path",
]

__getattr__, __dir__ = attach(__name__, __file__)
