"""Input checks shared by the meta-estimators that wrap a forest (BudgetPrune, Cronus)."""

from __future__ import annotations

from typing import Any

import numpy as np


def validate_frame(est: Any, X: Any, y: Any = "no_validation") -> Any:
    """scikit-learn's input checks, letting DataFrames through unconverted.

    A DataFrame keeps its categorical columns (the forest codes them by its stored categories);
    its column names and count are recorded (``fit``: ``y`` given) or checked (``y`` omitted)
    like any other input. Arrays are validated to float64, NaN allowed (trees route it).
    """
    from sklearn.utils.validation import validate_data

    reset = not isinstance(y, str)
    frame = hasattr(X, "columns") and hasattr(X, "iloc")
    out = validate_data(est, X, y, reset=reset, skip_check_array=frame, ensure_all_finite="allow-nan",
                        dtype=None if frame else np.float64)
    if frame and reset:
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1 or len(y) != X.shape[0]:
            raise ValueError(f"y must be 1-d with one label per row of X ({X.shape[0]}), got shape {y.shape}")
        return X, y
    return out
