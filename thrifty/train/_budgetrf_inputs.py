"""What BudgetRF's estimators make of their inputs before growing trees: the random generator
and the float matrix (with the categories of its categorical columns) the kernel reads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from thrifty.exceptions import InputError
from thrifty.forest import is_dataframe, to_matrix


def generator(random_state: Any) -> np.random.Generator:
    """A numpy Generator from any scikit-learn ``random_state`` (a RandomState seeds a new one)."""
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(0, 2**31 - 1))
    return np.random.default_rng(random_state)


def coded(X: Any) -> tuple[np.ndarray, dict[int, list]]:
    """``X`` as the float64 matrix the kernel reads, and the categories of its categorical
    columns: a DataFrame's ``category`` columns become their codes (missing -> NaN), which the
    fitted Forest records so that a DataFrame at prediction is coded the same way."""
    if not is_dataframe(X):
        return X, {}
    M = to_matrix(X, X.shape[1])
    if np.isinf(M).any():
        raise InputError("X contains infinity; replace it (NaN is allowed: it is treated as missing)")
    categories = {
        j: list(X.iloc[:, j].cat.categories)
        for j in range(X.shape[1])
        if isinstance(X.iloc[:, j].dtype, pd.CategoricalDtype)
    }
    return M, categories
