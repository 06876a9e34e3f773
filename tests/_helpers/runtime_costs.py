"""The runtime tests' six features and their prices (a priced panel of two features, a derived
feature), the reference runtime's pricing of them, and an in-memory provider that logs its fetches."""

from __future__ import annotations

import numpy as np

from tests._helpers.reference import RefCost
from thrifty import CostModel

N_FEATURES = 6
# Features 1 and 2 form a panel priced 5 as a whole; feature 4 is derived from 0 and 3.
GROUPS = {"panel": [1, 2]}
DEPS = {4: [0, 3]}
PRICES = np.array([1.0, 2.0, 4.0, 8.0, 0.5, 16.0])


def cost_model(tree_cost: float = 0.0, split_cost: float = 0.0) -> CostModel:
    names = [f"x{i}" for i in range(N_FEATURES)]
    spec = {n: float(c) for n, c in zip(names, PRICES) if n not in ("x1", "x2")}
    spec["panel"] = 5.0
    return CostModel(
        spec,
        feature_names=names,
        groups={"panel": ["x1", "x2"]},
        dependencies={"x4": ["x0", "x3"]},
        tree_cost=tree_cost,
        split_cost=split_cost,
    )


REF = RefCost(PRICES, GROUPS, DEPS, {"panel": 5.0})


def lazy_provider(X: np.ndarray):
    """An in-memory provider that logs every (row, feature) it is asked for."""
    calls: list[tuple[int, int]] = []

    def provider(features: np.ndarray, rows: np.ndarray) -> np.ndarray:
        calls.extend((int(r), int(f)) for f in features for r in rows)
        return X[np.ix_(rows, features)]

    return provider, calls
