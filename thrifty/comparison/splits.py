"""How :func:`thrifty.compare` splits rows: at random (stratified, or by query), or by time.

Held-out rows stand for the rows a model will meet. When the rows come in time order (flights
of one year, readings of one sensor) and the test rows are later ones, rows held out at random
share their dates with the rows a model was fitted on: a tree that memorises a day fits them,
and an early exit calibrated on them trusts it. Held out by time (``split="ordered"``, or
``"time=COLUMN[,COLUMN...]"``), the validation and calibration rows are the latest ones, later
than every row a model was fitted on, as the test rows will be.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.model_selection import GroupKFold, GroupShuffleSplit, KFold, StratifiedKFold, train_test_split

from thrifty.exceptions import InputError

__all__ = ["RANDOM", "check_split", "fold_indices", "holdout_indices", "split_rank", "split_rows", "take"]

RANDOM = "random"
ORDERED = "ordered"
_TIME = "time="


def check_split(split: str | None, X: Any) -> str:
    """``split`` checked against the columns of ``X``: ``"random"`` (the default, also for
    None), ``"ordered"`` (rows in time order as given) or ``"time=COLUMN[,COLUMN...]"`` (rows
    ordered by these columns of ``X``, the first the most significant)."""
    if split is None or split == RANDOM or split == ORDERED:
        return RANDOM if split is None else split
    if not isinstance(split, str) or not split.startswith(_TIME) or not split[len(_TIME) :].strip(", "):
        raise InputError(
            f"split must be 'random', 'ordered' or 'time=COLUMN[,COLUMN...]' "
            f"(e.g. 'time=month,day'), got {split!r}"
        )
    columns = _columns(split)
    names = [str(c) for c in getattr(X, "columns", [])]
    missing = [c for c in columns if c not in names]
    if missing:
        raise InputError(
            f"split {split!r}: no column {missing[0]!r} in X; name columns of X, e.g. {names[:3]}"
        )
    for c in columns:
        values = X[c]
        if not (pd.api.types.is_numeric_dtype(values) or pd.api.types.is_datetime64_any_dtype(values)):
            raise InputError(
                f"split {split!r}: column {c!r} is not numbers or dates; order by a numeric column"
            )
        if values.isna().any():
            raise InputError(
                f"split {split!r}: column {c!r} has {int(values.isna().sum())} missing value(s); "
                "fill them in or order by another column"
            )
    return split


def _columns(split: str) -> list[str]:
    return [c.strip() for c in split[len(_TIME) :].split(",") if c.strip()]


def split_rank(X: Any, split: str) -> np.ndarray | None:
    """Each row's place in time under ``split`` (0: earliest; ties keep the rows' order), or
    None for a random split."""
    if split == RANDOM:
        return None
    n = len(X)
    if split == ORDERED:
        return np.arange(n)
    frame = X[_columns(split)].reset_index(drop=True)
    order = frame.sort_values(list(frame.columns), kind="stable").index.to_numpy()
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return rank


def take(X: Any, y: np.ndarray, qid: np.ndarray | None, idx: np.ndarray) -> tuple:
    """Rows ``idx`` of ``X`` (a DataFrame), ``y`` and ``qid``."""
    return X.iloc[idx], y[idx], None if qid is None else qid[idx]


def split_rows(
    X: Any, y: np.ndarray, qid: np.ndarray | None, task: str, fraction: float, seed: int, split: str = RANDOM
) -> tuple[tuple, tuple]:
    """Hold out ``fraction`` of the rows: whole queries for ranking, stratified otherwise; the
    latest rows under a time ``split``."""
    keep, held = holdout_indices(y, qid, task, fraction, seed, rank=split_rank(X, split))
    return take(X, y, qid, keep), take(X, y, qid, held)


def holdout_indices(
    y: np.ndarray,
    qid: np.ndarray | None,
    task: str,
    fraction: float,
    seed: int,
    *,
    rank: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(kept rows, held-out rows) of :func:`split_rows`, sorted. ``rank``: each row's place in
    time (:func:`split_rank`); the held-out rows are then the latest (whole queries, ordered by
    their latest row, for ranking)."""
    n = len(y)
    if n < 8:
        raise InputError(
            f"{n} rows are too few to hold out calibration and test rows; "
            "give more rows, or X_val/y_val and X_test/y_test"
        )
    if task == "ranking" and qid is None:
        raise InputError("a ranking task needs qid")
    if rank is not None:
        return _latest(rank, qid if task == "ranking" else None, fraction)
    if task == "ranking":
        keep, held = next(
            GroupShuffleSplit(1, test_size=fraction, random_state=seed).split(np.zeros((n, 1)), y, qid)
        )
    else:
        keep, held = train_test_split(
            np.arange(n),
            test_size=fraction,
            random_state=seed,
            stratify=y if _stratifiable(y, task, 2) else None,
        )
    return np.sort(keep), np.sort(held)


def _latest(rank: np.ndarray, qid: np.ndarray | None, fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """The latest ``fraction`` of the rows (of the queries, by their latest row) held out."""
    n = len(rank)
    n_held = min(n - 1, max(1, int(np.ceil(fraction * n))))  # as train_test_split counts
    if qid is None:
        held = np.zeros(n, dtype=bool)
        held[np.argsort(rank, kind="stable")[n - n_held :]] = True
    else:
        queries, inverse = np.unique(qid, return_inverse=True)
        last = np.full(len(queries), -1, dtype=np.int64)
        np.maximum.at(last, inverse, rank)
        sizes = np.bincount(inverse)
        by_time = np.argsort(last, kind="stable")[::-1]
        # Whole queries from the latest back, until they hold ``fraction`` of the rows; at
        # least one query is kept and one held out.
        count = int(np.searchsorted(np.cumsum(sizes[by_time]), n_held) + 1)
        taken = by_time[: min(max(1, count), len(queries) - 1)]
        held = np.isin(inverse, taken)
    return np.flatnonzero(~held), np.flatnonzero(held)


def fold_indices(
    y: np.ndarray, qid: np.ndarray | None, task: str, k: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``k`` folds as (fit rows, held-out rows), sorted: by query for ranking, stratified
    for classification when every class has ``k`` rows."""
    rows = np.zeros((len(y), 1))
    if task == "ranking":
        splits = GroupKFold(k).split(rows, y, qid)
    elif _stratifiable(y, task, k):
        splits = StratifiedKFold(k, shuffle=True, random_state=seed).split(rows, y)
    else:
        splits = KFold(k, shuffle=True, random_state=seed).split(rows)
    return [(np.sort(a), np.sort(b)) for a, b in splits]


def _stratifiable(y: np.ndarray, task: str, k: int) -> bool:
    return task in ("binary", "multiclass") and np.unique(y, return_counts=True)[1].min() >= k
