"""Turning user inputs (NumPy arrays, pandas DataFrames) into the matrix the kernels read."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest.names import align, check_unique, is_dataframe, is_generic

if TYPE_CHECKING:
    from thrifty.forest._forest import Forest


def as_matrix(X: Any, forest: Forest) -> np.ndarray:
    """Float64 C-contiguous ``(n, n_features)`` matrix of ``X`` for ``forest``.

    DataFrames are matched to ``forest.feature_names`` by column name when the forest has
    names (a LightGBM name such as ``blood_pressure`` matches the column ``blood pressure``
    it was stored for; duplicated column names are an error); categorical columns are coded
    with the forest's stored categories (an unseen category becomes NaN, as LightGBM does).
    Values are rounded to ``forest.input_dtype``.
    """
    return to_matrix(X, forest.n_features, forest.feature_names, forest.categories, forest.input_dtype)


def to_matrix(
    X: Any,
    n_features: int,
    feature_names: list[str] | None = None,
    categories: dict[int, list] | None = None,
    input_dtype: str = "float64",
) -> np.ndarray:
    categories = categories or {}
    if is_dataframe(X):  # first: a frame is no file name, and os.PathLike's check is slow
        M = _frame_to_matrix(X, n_features, feature_names, categories)
    elif isinstance(X, (str, os.PathLike)) or (np.ndim(X) == 0 and isinstance(np.asarray(X).item(), str)):
        # np.asarray of a path is a 0-d array of text: callers would fail on its shape.
        raise InputError(
            f"X is a file name ({str(X)!r}), not rows; read the file first "
            f"(X = pandas.read_csv({str(X)!r}), without its label column)"
        )
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


# Caches of what a frame's conversion looks up by name or category (a one-row DataFrame of
# Adult spent 5 ms building a pd.Index and calling get_indexer per categorical column per call).
# Each entry holds the objects it was computed from and is used only when they are the same
# objects or equal element by element, in order: a frame with other columns or categories
# under the same names misses and is looked up afresh. Bounded: cleared past _CACHE_SIZE.
_CACHE_SIZE = 256
_ORDERS: dict[tuple[int, int], list[tuple[Any, Any, list[int] | None]]] = {}
_LOOKUPS: dict[tuple[int, int], tuple[list, Any, np.ndarray]] = {}
_BY_CATEGORIES: dict[tuple[int, int], list[tuple[list, Any, np.ndarray]]] = {}
_INDEXES: dict[int, tuple[list, Any]] = {}


def _remember(cache: dict, key: Any, entry: Any) -> None:
    if len(cache) >= _CACHE_SIZE:
        cache.clear()
    entries = cache.setdefault(key, [])  # held: another thread may clear the cache meanwhile
    entries.append(entry)
    del entries[:-4]  # a few variants per key: the newest


def _same_names(a: Any, b: Any) -> bool:
    """True when the column Index ``a`` is ``b``, or both hold the same strings in the same
    order (an Index of numbers may equal one of other numbers whose ``str`` differs: 1, 1.0)."""
    if a is b:
        return True
    # A frame alike may hold its names in a list: it is looked up afresh each call.
    strings = getattr(a, "inferred_type", None) == "string" == getattr(b, "inferred_type", None)
    return strings and a.equals(b)


def _column_order(df: Any, n_features: int, feature_names: list[str] | None) -> list[int] | None:
    """Position in ``df``'s columns of each of the model's features (None: as they stand),
    checked as :func:`_check_columns` does; remembered per column Index and feature names."""
    cols = df.columns
    key = (id(feature_names), n_features)
    for names, seen, order in _ORDERS.get(key, ()):
        if names is feature_names and _same_names(seen, cols):
            return order
    order = _check_columns([str(c) for c in cols], n_features, feature_names)
    _remember(_ORDERS, key, (feature_names, cols, order))
    return order


def _check_columns(columns: list[str], n_features: int, feature_names: list[str] | None) -> list[int] | None:
    check_unique(columns)
    order = None if feature_names is None else align(feature_names, columns)
    if order is None and feature_names is not None and not is_generic(feature_names):
        # Named, whatever the column count: "X has 7 columns, but the model expects 8" leaves
        # the user to find which one is gone.
        missing = [n for n in feature_names if align([n], columns) is None]
        if missing or len(columns) == n_features:
            raise InputError(
                f"X lacks the model's feature(s) {missing[:5]}{'...' if len(missing) > 5 else ''}; "
                f"its columns are {columns[:5]}{'...' if len(columns) > 5 else ''}; "
                "add the missing column(s) (blank cells are missing values)"
            )
    width = len(columns) if order is None else len(order)
    if width != n_features:
        raise InputError(
            f"X has {width} columns, but the model expects {n_features}"
            + (f" ({feature_names[:5]}...)" if feature_names else "")
        )
    return order


def _stored_index(stored: list) -> Any:
    """``pd.Index(stored)``, built once per stored category list."""
    import pandas as pd

    hit = _INDEXES.get(id(stored))
    if hit is not None and hit[0] is stored:
        return hit[1]
    index = pd.Index(stored)
    if len(_INDEXES) >= _CACHE_SIZE:
        _INDEXES.clear()
    _INDEXES[id(stored)] = (stored, index)
    return index


def _category_lookup(stored: list, dtype: Any) -> np.ndarray:
    """Float64 code among ``stored`` of each of ``dtype``'s categories (NaN when unseen), then
    NaN for the missing values (code -1): a Categorical's codes index it. Remembered per
    stored list and dtype object, and per stored list and categories in order (a frame built
    per request brings a new dtype; an unordered dtype even equals one of the same categories
    in another order, whose codes differ)."""
    hit = _LOOKUPS.get((id(stored), id(dtype)))
    if hit is not None and hit[0] is stored and hit[1] is dtype:
        return hit[2]
    cats = dtype.categories
    key = (id(stored), len(cats))
    entries = _BY_CATEGORIES.get(key, ())
    same = (e[2] for e in entries if e[0] is stored and e[1].dtype == cats.dtype and e[1].equals(cats))
    lookup = next(same, None)
    if lookup is None:
        # A row's value is its category: look each category up once, not each row.
        lookup = np.append(_stored_index(stored).get_indexer(cats), -1).astype(np.float64)
        lookup[lookup < 0] = np.nan
        _remember(_BY_CATEGORIES, key, (stored, cats, lookup))
    if len(_LOOKUPS) >= _CACHE_SIZE:
        _LOOKUPS.clear()
    # The entry holds the dtype: its id is not reused while the entry lives.
    _LOOKUPS[(id(stored), id(dtype))] = (stored, dtype, lookup)
    return lookup


def _frame_to_matrix(
    df: Any, n_features: int, feature_names: list[str] | None, categories: dict[int, list]
) -> np.ndarray:
    # Not at the top: the runtime reads arrays through this module, and evaluating arrays
    # (a service's requests) need not load pandas (0.2 s).
    import pandas as pd

    order = _column_order(df, n_features, feature_names)
    out = np.empty((df.shape[0], n_features), dtype=np.float64)
    # A column's array as stored, without a Series around it: a Series costs about 20 µs,
    # ten one-row calls of the trees. Older or other frames take the public items().
    column = getattr(df, "_get_column_array", None)
    if column is None:
        items = [col.array for _, col in df.items()]
    categorical = pd.CategoricalDtype
    for j in range(n_features):
        at = j if order is None else order[j]
        values = items[at] if column is None else column(at)
        dtype = values.dtype
        if type(dtype) is categorical or isinstance(dtype, categorical):
            codes = values.codes
            if j in categories:
                out[:, j] = _category_lookup(categories[j], dtype)[codes]
            else:
                plain = codes.astype(np.float64)
                plain[codes < 0] = np.nan
                out[:, j] = plain
        elif j in categories:
            # Position of each value among the stored categories, -1 when unseen (building a
            # Categorical from unseen values is deprecated in pandas and will raise).
            codes = _stored_index(categories[j]).get_indexer(values).astype(np.float64)
            codes[codes < 0] = np.nan
            out[:, j] = codes
        elif type(values) is np.ndarray and dtype.kind in "fiub":
            out[:, j] = values
        elif pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
            out[:, j] = pd.Series(values, copy=False).to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            raise InputError(
                f"column {df.columns[at]!r} is not numeric and the model has no "
                "categories for it; give it a pandas 'category' dtype or encode it"
            )
    return out
