"""What :func:`thrifty.compare` can learn from: rows and labels that agree in number, at least one
feature, labels that fit the task and classes with enough rows to split.

Each check raises :class:`~thrifty.exceptions.InputError` naming the problem and the fix, before
anything is fitted (a fit would fail minutes later with a library's message, or silently run on
fewer rows).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.utils.multiclass import type_of_target

from thrifty.exceptions import InputError

__all__ = ["MIN_CLASS_ROWS", "check_data"]

#: Rows a class needs: some held out for testing, some in every fold's fitting rows (with
#: fewer, a fold can lack the class and LightGBM's multiclass objective fails).
MIN_CLASS_ROWS = 5


def check_data(X: Any, y: Any, qid: Any = None, task: str | None = None, *, what: str = "X") -> None:
    """Refuse data :func:`thrifty.compare` cannot learn from, with the fix.

    Parameters
    ----------
    X : DataFrame or array of shape (n_rows, n_features)
    y : array-like of shape (n_rows,)
    qid : array-like of shape (n_rows,), optional
    task : str, optional
        The task asked for (None: as :func:`thrifty.compare` infers it, the class checks
        apply when ``y`` holds classes).
    what : str, default="X"
        How to name the rows in a message (e.g. ``"'data.csv'"`` on the command line).

    Raises
    ------
    InputError
        ``X`` and ``y`` (or ``qid``) differ in length; no rows; no feature columns; a
        regression on labels that are not numbers; a class with fewer than
        ``MIN_CLASS_ROWS`` rows.
    """
    n_rows, n_features = np.shape(X)[0], (np.shape(X)[1] if np.ndim(X) == 2 else 1)
    labels = np.asarray(y)
    if len(labels) != n_rows:
        raise InputError(
            f"{what} has {n_rows:,} rows but y has {len(labels):,} labels; give one label per row"
        )
    if qid is not None and len(qid) != n_rows:
        raise InputError(f"{what} has {n_rows:,} rows but qid has {len(qid):,}; give one query id per row")
    if n_rows == 0:
        raise InputError(f"{what} has no rows (a header only?); give the rows to learn from")
    if n_features == 0:
        raise InputError(f"{what} has no feature columns, only the label; give the features to learn from")
    numeric = pd.api.types.is_numeric_dtype(labels.dtype) or pd.api.types.is_bool_dtype(labels.dtype)
    if task == "regression" and not numeric:
        text = [repr(str(t)) for t in pd.unique(labels.astype(str))]
        raise InputError(
            f"a regression needs numeric labels, but the labels are text ({', '.join(text[:3])}"
            f"{', ...' if len(text) > 3 else ''}); leave the task out to classify them"
        )
    # Missing labels are refused by compare itself, in its own words.
    if pd.isna(labels).any():
        return
    inferred = None if task is not None or qid is not None else type_of_target(labels)
    if task in ("binary", "multiclass") or inferred in ("binary", "multiclass"):
        values, counts = np.unique(labels, return_counts=True)
        rare = [(v, c) for v, c in zip(values.tolist(), counts.tolist()) if c < MIN_CLASS_ROWS]
        if rare and len(values) > 1:
            shown = ", ".join(f"{v!r} has {c} row{'s' if c > 1 else ''}" for v, c in rare[:5])
            raise InputError(
                f"class {shown}; compare needs at least {MIN_CLASS_ROWS} rows of each class "
                "(some to test on, some in every fold); drop those rows, merge the class into "
                "another, or give more rows"
            )
