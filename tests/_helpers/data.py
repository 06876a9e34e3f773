"""Small synthetic data sets that several test modules fit on."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest


def linear_binary(n: int = 1500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Six Gaussian features; the label is a noisy linear rule of the first three (weights 1, 0.6,
    0.4), so the last three are useless and a budget can drop them."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = (X[:, 0] + 0.6 * X[:, 1] + 0.4 * X[:, 2] + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, y


def categorical_frame(kind: str, n: int = 600, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, Any]:
    """A pandas frame with a categorical column and a name LightGBM stores otherwise, its labels,
    and the same frame as ``kind`` ("pandas", "polars" or "pyarrow") hands it to thrifty.

    Skips the calling test when ``kind`` is a library that is not installed.
    """
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n),
            "colour": pd.Categorical(rng.choice(["red", "green", "blue"], n)),
            "blood pressure": rng.normal(120, 15, n),
        }
    )
    y = ((X["colour"] == "red") ^ (X["age"] > 45)).astype(int).to_numpy()
    if kind == "polars":
        return X, y, pytest.importorskip("polars").from_pandas(X)
    if kind == "pyarrow":
        return X, y, pytest.importorskip("pyarrow").Table.from_pandas(X)
    return X, y, X
