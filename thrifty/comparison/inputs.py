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

from thrifty.exceptions import InputError

__all__ = [
    "MAX_CLASSES",
    "MAX_CODED_CLASSES",
    "MIN_CLASS_ROWS",
    "SHIFT_SHARE",
    "TASKS",
    "check_data",
    "infer_task",
    "out_of_range",
]

#: Rows a class needs: some held out for testing, some in every fold's fitting rows (with
#: fewer, a fold can lack the class and LightGBM's multiclass objective fails).
MIN_CLASS_ROWS = 5
#: More distinct whole numbers than this in a numeric target read as a quantity (regression);
#: three up to this many are ambiguous (classes coded as numbers, or a count?) and need the task.
MAX_CLASSES = 50
#: Whole numbers 0..K-1 or 1..K, K up to this, are classes coded as numbers (iris's 0, 1, 2).
MAX_CODED_CLASSES = 20
TASKS = ("binary", "multiclass", "ranking", "regression")
#: A feature is named in compare's report when at least this share of the test rows take values
#: its training rows never have (``out_of_range``).
SHIFT_SHARE = 0.01


def infer_task(y: Any, qid: Any = None, task: str | None = None) -> str:
    """The task of ``y``: ``task`` when given (checked against the labels), else inferred.

    Text or boolean labels are classes; numbers that are not all whole are a quantity
    (regression); whole numbers are two classes (binary), classes when they are the codes
    0..K-1 or 1..K (K up to ``MAX_CODED_CLASSES``), a quantity beyond ``MAX_CLASSES``
    distinct values, and ambiguous otherwise (ages from 20 to 61: classes or a quantity?).
    ``qid`` makes it ranking.

    Raises
    ------
    InputError
        An unknown task; an ambiguous target without ``task``; a ``task`` the labels contradict
        (binary on other than two classes, classes on a target of thousands of distinct
        numbers, ranking without query ids).
    """
    if task is not None and task not in TASKS:
        raise InputError(f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
    labels = np.asarray(y)
    values = pd.unique(labels.ravel())
    numeric = pd.api.types.is_numeric_dtype(labels.dtype) and not pd.api.types.is_bool_dtype(labels.dtype)
    whole = numeric and bool(np.all(np.equal(np.mod(values.astype(np.float64), 1.0), 0.0)))
    shown = ", ".join(str(v) for v in np.sort(values)[:6]) + (", ..." if len(values) > 6 else "")
    if task is None:
        if qid is not None:
            return "ranking"
        if not numeric or len(values) <= 2:
            return "binary" if len(values) <= 2 else "multiclass"
        if not whole or len(values) > MAX_CLASSES:
            return "regression"
        codes = np.sort(values.astype(np.int64))
        if len(codes) <= MAX_CODED_CLASSES and codes[0] in (0, 1) and np.all(np.diff(codes) == 1):
            return "multiclass"  # classes coded 0..K-1 or 1..K, as scikit-learn's datasets are
        raise InputError(
            f"y holds {len(values)} distinct whole numbers ({shown}): classes coded as numbers, "
            "or a quantity? Say which: --task multiclass or --task regression (task= in Python)"
        )
    if task == "ranking" and qid is None:
        raise InputError("a ranking needs query ids: give qid= (--qid COLUMN on the command line)")
    if task == "binary" and len(values) > 2:  # one class: compare says so in its own words
        raise InputError(
            f"task binary, but y has {len(values)} distinct label(s) ({shown}); give two classes, "
            "or the task they are (multiclass, regression)"
        )
    if task in ("binary", "multiclass") and numeric and (not whole or len(values) > 20 * MAX_CLASSES):
        raise InputError(
            f"task {task}, but y holds {len(values):,} distinct numbers ({shown}): a quantity, not "
            "classes; use --task regression (task='regression')"
        )
    return task


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
    if infer_task(labels, qid, task) in ("binary", "multiclass"):
        values, counts = np.unique(labels, return_counts=True)
        rare = [(v, c) for v, c in zip(values.tolist(), counts.tolist()) if c < MIN_CLASS_ROWS]
        if rare and len(values) > 1:
            shown = ", ".join(f"{v!r} has {c} row{'s' if c > 1 else ''}" for v, c in rare[:5])
            raise InputError(
                f"class {shown}; compare needs at least {MIN_CLASS_ROWS} rows of each class "
                "(some to test on, some in every fold); drop those rows, merge the class into "
                "another, or give more rows"
            )


def out_of_range(X: pd.DataFrame, X_test: pd.DataFrame, *, share: float = SHIFT_SHARE) -> list[str]:
    """One line per feature whose test values leave what the rows a model learns from hold:
    numbers outside the range of ``X`` (trees read them as its nearest edge), categories
    ``X`` never has (trees send them down one default side), for at least ``share`` of the
    test rows and at least ten times the share rows drawn like ``X`` would have (``2 / (n +
    1)`` of them fall outside the range of ``n``). Missing values are not counted. Said in
    :func:`thrifty.compare`'s report: a plan calibrated on rows like ``X`` (an early exit) may
    not carry to such test rows."""
    lines = []
    share = max(share, 20.0 / (len(X) + 1))
    for c in X.columns:
        if c not in X_test.columns:
            continue
        seen, test = X[c], X_test[c]
        known = test.notna().to_numpy()
        if not known.any():
            continue
        if isinstance(seen.dtype, pd.CategoricalDtype) or not pd.api.types.is_numeric_dtype(seen):
            values = set(seen.dropna().astype(str))
            new = known & ~test.astype(str).isin(values).to_numpy()
            what = "take categories the training rows never have"
            example = ", ".join(sorted(set(test[new].astype(str)))[:3])
        else:
            low, high = seen.min(), seen.max()
            t = pd.to_numeric(test, errors="coerce").to_numpy(dtype=np.float64)
            new = known & ((t < low) | (t > high))
            what = f"lie outside the training range [{low:g}, {high:g}]"
            example = f"{np.nanmin(t[new]):g} to {np.nanmax(t[new]):g}" if new.any() else ""
        frac = float(new.sum()) / len(test)
        if frac >= share and new.any():
            lines.append(f"feature {c!r}: {frac:.0%} of the test rows {what} ({example})")
    return lines


def labels_of(y: Any, name: str) -> np.ndarray:
    """``y`` as an array, refusing missing labels."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise InputError(f"{name} must be 1-dimensional (one label per row), got shape {y.shape}")
    missing = pd.isna(y)
    if missing.any():
        rows = np.flatnonzero(missing)
        raise InputError(
            f"{name} has {len(rows)} missing label(s) (NaN/None), e.g. in row(s) "
            f"{rows[:5].tolist()}; drop those rows or fill in their labels"
        )
    return y


def check_classes(y: np.ndarray, task: str) -> None:
    """Refuse a classification task whose labels hold a single class."""
    if task in ("binary", "multiclass") and len(np.unique(y)) < 2:
        raise InputError(
            f"y has a single class ({np.unique(y)[:1].tolist()}); classification "
            "needs at least two classes - check the label column (--target), or "
            "pass task='regression' for a numeric target"
        )


def stack_frames(X: pd.DataFrame, X_val: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``X`` then ``X_val`` (categories united, so neither loses its codes)."""
    if list(X.columns) != list(X_val.columns):
        raise InputError("X_val must have the columns of X, in the same order")
    both = pd.concat([X, X_val], ignore_index=True)
    for c in X.columns:
        if isinstance(X[c].dtype, pd.CategoricalDtype) and not isinstance(both[c].dtype, pd.CategoricalDtype):
            cats = list(
                dict.fromkeys([*X[c].cat.categories, *pd.Series(X_val[c]).astype("category").cat.categories])
            )
            both[c] = pd.Categorical(both[c], categories=cats)
    return both


def as_frame(X: Any) -> pd.DataFrame:
    """``X`` as a DataFrame (columns ``f0, f1, ...`` for an array), refusing other than 2-D input."""
    if isinstance(X, pd.DataFrame):
        return X
    A = np.asarray(X)
    if A.ndim != 2:
        raise InputError(f"X must be 2-dimensional (n_rows, n_features), got shape {A.shape}")
    return pd.DataFrame(A, columns=[f"f{i}" for i in range(A.shape[1])])
