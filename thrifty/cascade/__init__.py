"""Cascades of early-reject stages over an ensemble's trees (Cronus, early-exit baselines) and
margin cascades of a cheap model into an expensive one."""

from thrifty.cascade.cronus import CronusResult, cascade_scores, cronus, lambda_max
from thrifty.cascade.early_exit import EarlyExitRanker, RankingEarlyExit, ranking_early_exit, truncate
from thrifty.cascade.estimator import CronusClassifier
from thrifty.cascade.margin import margin_band, margin_cascade
from thrifty.cascade.ranker import CronusRanker
from thrifty.cascade.reweight import reweight

__all__ = [
    "CronusClassifier",
    "CronusRanker",
    "CronusResult",
    "EarlyExitRanker",
    "RankingEarlyExit",
    "cascade_scores",
    "cronus",
    "lambda_max",
    "margin_band",
    "margin_cascade",
    "ranking_early_exit",
    "reweight",
    "truncate",
]
