"""Input checks shared by the estimators: labels, frames, and X's width against costs and models."""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty.exceptions import InputError


def class_labels(y: Any, who: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, classes, codes)`` of classification labels, with scikit-learn's errors.

    NaN (or None) among the labels is "Input y contains NaN." whatever the labels' dtype; a
    single class is an error naming it and ``who`` (the estimator).
    """
    import pandas as pd
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import column_or_1d

    y = column_or_1d(np.asarray(y), warn=True)
    if len(y) == 0:
        raise InputError("y is empty (0 samples); fit needs at least 2 examples")
    if pd.isna(y).any():
        raise InputError("Input y contains NaN.")
    check_classification_targets(y)
    classes, codes = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        only = classes[0].item() if isinstance(classes[0], np.generic) else classes[0]
        raise InputError(f"y has one class only ({only!r}); {who} needs examples of at least 2 classes")
    return y, classes, codes


def check_width(n_columns: int, n_features: int, what: str) -> None:
    """ValueError blaming X when it has not the ``n_features`` columns ``what`` is for."""
    if n_columns != n_features:
        raise InputError(
            f"X has {n_columns} features, but {what} {n_features}; pass X with "
            f"those {n_features} columns, in the same order"
        )


def costs_for_X(costs: Any, names: list[str] | None, n_features: int) -> Any:
    """An estimator's ``costs`` as a CostModel aligned to the columns of ``X``.

    ``None`` prices every feature at 1; a sequence gives one price per column; a CostModel is
    matched by name when it and ``X`` both have names, else by position.
    """
    from thrifty.costs import CostModel

    if costs is None:
        return CostModel.uniform(n_features, feature_names=names)
    if isinstance(costs, CostModel):
        if names is None or costs.feature_names is None:
            check_width(n_features, costs.n_features, "the cost model prices")
        return costs.for_features(names, n_features)
    values = np.asarray(costs, dtype=object)
    if values.ndim != 1:
        raise InputError(f"costs must be a CostModel or one cost per feature, got shape {values.shape}")
    check_width(n_features, len(values), "costs= prices")
    return CostModel(values, feature_names=names)


def validate_frame(est: Any, X: Any, y: Any = "no_validation") -> Any:
    """scikit-learn's input checks, letting DataFrames through unconverted.

    A DataFrame keeps its categorical columns (the forest codes them by its stored categories);
    its column names and count are recorded (``fit``: ``y`` given) or checked (``y`` omitted)
    like any other input. Arrays are validated to float64, NaN allowed (trees route it).
    """
    from sklearn.utils.validation import validate_data

    reset = not isinstance(y, str)
    frame = hasattr(X, "columns") and hasattr(X, "iloc")
    out = validate_data(
        est,
        X,
        y,
        reset=reset,
        skip_check_array=frame,
        ensure_all_finite="allow-nan",
        dtype=None if frame else np.float64,
    )
    if frame and reset:
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1 or len(y) != X.shape[0]:
            raise InputError(f"y must be 1-d with one label per row of X ({X.shape[0]}), got shape {y.shape}")
        return X, y
    return out


def check_sample_weight(sample_weight: Any, n: int) -> np.ndarray | None:
    """``sample_weight`` as float64 of shape (n,), finite, >= 0 and not all zero (or None)."""
    if sample_weight is None:
        return None
    from sklearn.utils.validation import column_or_1d

    w = column_or_1d(np.asarray(sample_weight, dtype=np.float64))
    if w.shape[0] != n:
        raise InputError(f"sample_weight has {w.shape[0]} values for {n} rows of X")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InputError("sample_weight must be finite and >= 0")
    if not np.any(w > 0):
        raise InputError("sample_weight is zero for every row; give at least one row a positive weight")
    return w
