"""Orders of base models with early exits: QWYC, Fan et al.'s dynamic scheduling, margin exits."""

from thrifty.order.estimator import QWYCClassifier, QWYCRegressor
from thrifty.order.fan import fan
from thrifty.order.margin import calibrate_margin, margin_early_exit, margin_frontier
from thrifty.order.orderings import fixed_order
from thrifty.order.qwyc import QWYCResult, qwyc, qwyc_scores
from thrifty.order.ranker import QWYCRanker
from thrifty.order.ranking import qwyc_ranking, qwyc_ranking_scores, topk_changed
from thrifty.order.regression import default_tolerance, qwyc_regression

__all__ = [
    "QWYCClassifier",
    "QWYCRanker",
    "QWYCRegressor",
    "QWYCResult",
    "calibrate_margin",
    "default_tolerance",
    "fan",
    "fixed_order",
    "margin_early_exit",
    "margin_frontier",
    "qwyc",
    "qwyc_ranking",
    "qwyc_ranking_scores",
    "qwyc_regression",
    "qwyc_scores",
    "topk_changed",
]
