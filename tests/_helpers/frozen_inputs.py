"""Today's (before the category cache) conversion of inputs, frozen: the reference the faster
conversion in ``thrifty.forest._inputs`` is checked against, matrix and errors alike."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest.names import align, check_unique, is_generic


def to_matrix(
    X: Any,
    n_features: int,
    feature_names: list[str] | None = None,
    categories: dict[int, list] | None = None,
    input_dtype: str = "float64",
) -> np.ndarray:
    categories = categories or {}
    if isinstance(X, (str, os.PathLike)) or (np.ndim(X) == 0 and isinstance(np.asarray(X).item(), str)):
        # np.asarray of a path is a 0-d array of text: callers would fail on its shape.
        raise InputError(
            f"X is a file name ({str(X)!r}), not rows; read the file first "
            f"(X = pandas.read_csv({str(X)!r}), without its label column)"
        )
    if _is_dataframe(X):
        M = _frame_to_matrix(X, n_features, feature_names, categories)
    else:
        M = np.asarray(X)
        if M.dtype == object or M.dtype.kind in "USO":
            try:
                M = M.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise InputError(
                    "X holds non-numeric values; pass a pandas DataFrame with categorical "
                    "columns, or encode categories as integer codes"
                ) from exc
        if M.ndim == 1:
            raise InputError(
                "X must be 2-dimensional (n_rows, n_features); got a 1-d array. "
                "Use X.reshape(1, -1) for a single row"
            )
        if M.ndim != 2:
            raise InputError(f"X must be 2-dimensional, got {M.ndim} dimensions")
        if M.shape[1] != n_features:
            raise InputError(f"X has {M.shape[1]} features, but the model expects {n_features}")
        M = M.astype(np.float64, copy=False)
    if input_dtype == "float32":
        with np.errstate(over="ignore"):
            M = M.astype(np.float32).astype(np.float64)
    return np.ascontiguousarray(M, dtype=np.float64)


def _is_dataframe(X: Any) -> bool:
    return hasattr(X, "columns") and hasattr(X, "iloc")


def _frame_to_matrix(
    df: Any, n_features: int, feature_names: list[str] | None, categories: dict[int, list]
) -> np.ndarray:
    # Not at the top: the runtime reads arrays through this module, and evaluating arrays
    # (a service's requests) need not load pandas (0.2 s).
    import pandas as pd

    columns = [str(c) for c in df.columns]
    check_unique(columns)
    order = None if feature_names is None else align(feature_names, columns)
    if order is not None:
        df = df.iloc[:, order]
    elif feature_names is not None and not is_generic(feature_names):
        # Named, whatever the column count: "X has 7 columns, but the model expects 8" leaves
        # the user to find which one is gone.
        missing = [n for n in feature_names if align([n], columns) is None]
        if missing or len(columns) == n_features:
            raise InputError(
                f"X lacks the model's feature(s) {missing[:5]}{'...' if len(missing) > 5 else ''}; "
                f"its columns are {columns[:5]}{'...' if len(columns) > 5 else ''}; "
                "add the missing column(s) (blank cells are missing values)"
            )
    if df.shape[1] != n_features:
        raise InputError(
            f"X has {df.shape[1]} columns, but the model expects {n_features}"
            + (f" ({feature_names[:5]}...)" if feature_names else "")
        )
    out = np.empty((df.shape[0], n_features), dtype=np.float64)
    # items() hands the columns over without iloc's checks, which cost more than the copy on
    # the few rows a service or a budget search evaluates at a time.
    for j, (_, col) in enumerate(df.items()):
        if j in categories:
            # Position of each value among the stored categories, -1 when unseen (building a
            # Categorical from unseen values is deprecated in pandas and will raise).
            stored = pd.Index(categories[j])
            if isinstance(col.dtype, pd.CategoricalDtype):
                # A row's value is its category: look each category up once, not each row. The
                # last entry answers the missing values (code -1): a category is never NaN.
                lookup = np.append(stored.get_indexer(col.cat.categories), -1)
                codes = lookup[col.cat.codes.to_numpy()].astype(np.float64)
            else:
                codes = stored.get_indexer(col).astype(np.float64)
            codes[codes < 0] = np.nan
            out[:, j] = codes
        elif isinstance(col.dtype, pd.CategoricalDtype):
            codes = col.cat.codes.to_numpy().astype(np.float64)
            codes[codes < 0] = np.nan
            out[:, j] = codes
        elif pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
            out[:, j] = col.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            raise InputError(
                f"column {df.columns[j]!r} is not numeric and the model has no "
                "categories for it; give it a pandas 'category' dtype or encode it"
            )
    return out
