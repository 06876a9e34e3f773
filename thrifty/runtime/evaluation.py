"""What evaluation returns (``Evaluation``), and the cost model it is settled with."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from thrifty.costs import CostModel, CostReport
from thrifty.runtime.plans import Plan


@dataclass
class Evaluation:
    """The result of evaluating a plan on a set of examples.

    Attributes
    ----------
    raw : ndarray, shape (n,) or (n, n_outputs)
        Raw scores (for early exits: the partial score at exit).
    proba : ndarray of shape (n, n_classes) or None
        Class probabilities, for classifiers.
    labels : ndarray of shape (n,) or None
        Predicted classes, for classifiers (early exits decide by their exit side).
    exit : ndarray of int, shape (n,)
        Trees evaluated before stopping (Full/Sequential), stage reached (Cascade), or route
        (Gated: 0 low-cost model, 1 expensive model).
    cost : CostReport
        What each example cost.
    """

    raw: np.ndarray
    proba: np.ndarray | None
    labels: np.ndarray | None
    exit: np.ndarray
    cost: CostReport

    @property
    def predictions(self) -> np.ndarray:
        """Labels for classifiers, raw scores otherwise."""
        return self.labels if self.labels is not None else self.raw


def costs_for(plan: Plan, costs: CostModel | None) -> CostModel:
    """``costs`` aligned to the plan's features (the plan's default when None)."""
    if costs is None:
        return plan.default_costs
    if not isinstance(costs, CostModel):
        raise TypeError(
            f"costs must be a thrifty CostModel, got {type(costs).__name__}; "
            "build one with CostModel(...) or CostModel.from_file(path)"
        )
    return costs.for_features(plan.feature_names, plan.n_features)
