"""Training-time methods: models that meet a feature budget from the start (CEGB, GreedyMiser,
BudgetRF, ADAPT)."""

from typing import TYPE_CHECKING

from thrifty._lazy import attach

if TYPE_CHECKING:
    from thrifty.exceptions import BudgetError
    from thrifty.train.adapt import (
        ADAPTClassifier,
        ADAPTFit,
        ADAPTProblem,
        ADAPTRegressionProblem,
        ADAPTRegressor,
        adapt_gbrt,
        adapt_lin,
        l1_baseline,
        q_step,
        truncate_lin,
    )
    from thrifty.train.budgetrf import BudgetRFClassifier, BudgetRFRegressor
    from thrifty.train.cegb import (
        CEGBClassifier,
        CEGBRanker,
        CEGBRegressor,
        cegb_frontier,
        cegb_params,
        cegb_penalties,
    )
    from thrifty.train.greedymiser import GreedyMiserClassifier, GreedyMiserRegressor, greedymiser_frontier

__all__ = [
    "ADAPTClassifier",
    "ADAPTFit",
    "ADAPTProblem",
    "ADAPTRegressionProblem",
    "ADAPTRegressor",
    "BudgetError",
    "BudgetRFClassifier",
    "BudgetRFRegressor",
    "CEGBClassifier",
    "CEGBRanker",
    "CEGBRegressor",
    "GreedyMiserClassifier",
    "GreedyMiserRegressor",
    "adapt_gbrt",
    "adapt_lin",
    "cegb_frontier",
    "cegb_params",
    "cegb_penalties",
    "greedymiser_frontier",
    "l1_baseline",
    "q_step",
    "truncate_lin",
]

__getattr__, __dir__ = attach(__name__, __file__)
