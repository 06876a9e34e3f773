"""Small data and LightGBM settings for the tests of ``compare``'s schedule."""

from __future__ import annotations

import numpy as np

#: A plain model fitted in a fraction of a second.
FAST = {"n_estimators": 20, "num_leaves": 8, "n_jobs": 1}


def binary_data(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` rows of 5 normal features and a label from the first two, with noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y
