"""Confidence intervals of the figures thrifty reports: Wilson's for a proportion, percentile
bootstraps over rows or over groups (the queries of a ranking task)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from thrifty.exceptions import InputError

__all__ = ["bootstrap_interval", "bootstrap_sums", "wilson_interval"]

#: Resamples drawn at once by :func:`bootstrap_sums` (a (chunk, units) matrix of counts).
_CHUNK = 100


def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion (Wilson 1927; Agresti and Coull 1998, eq. 2).

    Parameters
    ----------
    successes : float
        Examples counted (e.g. correct predictions).
    n : int
        Examples in all.
    confidence : float, default=0.95

    Returns
    -------
    (low, high) : tuple of float
        ``(nan, nan)`` when ``n`` is 0.
    """
    from scipy.stats import norm

    if n <= 0:
        return float("nan"), float("nan")
    z = float(norm.ppf(0.5 + confidence / 2))
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def bootstrap_interval(
    statistic: Any,
    n: int,
    *,
    groups: Any = None,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic(rows)`` over resampled rows (or groups).

    Parameters
    ----------
    statistic : callable
        ``statistic(idx) -> float`` on the rows ``idx`` (an int array, repeats allowed).
    n : int
        Rows.
    groups : array-like of shape (n,), optional
        Resample whole groups (queries of a ranking task) instead of rows.
    n_resamples : int, default=1000
    confidence : float, default=0.95
    seed : int, default=0

    Returns
    -------
    (low, high) : tuple of float
        Resamples where the statistic is undefined (NaN, e.g. one class drawn) are left out.

    See Also
    --------
    bootstrap_sums : the same bootstrap, vectorised, for statistics of sums over rows.
    """
    if n <= 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    if groups is None:
        draws = (rng.integers(0, n, n) for _ in range(n_resamples))
    else:
        _, inverse = np.unique(np.asarray(groups), return_inverse=True)
        units = [np.flatnonzero(inverse == k) for k in range(inverse.max() + 1)]
        draws = (
            np.concatenate([units[k] for k in rng.integers(0, len(units), len(units))])
            for _ in range(n_resamples)
        )
    return _percentiles(np.array([statistic(idx) for idx in draws], dtype=np.float64), confidence)


def bootstrap_sums(
    columns: Mapping[str, Any],
    statistics: Mapping[str, Callable[[Mapping[str, np.ndarray], int], np.ndarray]],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Percentile bootstrap intervals of statistics of column sums, over resampled units.

    Each resample draws ``n`` units (rows, or queries) with replacement, as
    :func:`bootstrap_interval` does; a resample is a vector of counts ``w`` and each column's
    resampled sum is ``w @ column``. Every statistic of those sums (a mean squared error, an
    R², a mean NDCG over queries) is computed for 100 resamples at a time with one matrix
    product, instead of one Python call per resample.

    Parameters
    ----------
    columns : mapping of str to array of shape (n,)
        One value per unit (e.g. each row's squared error; each query's NDCG).
    statistics : mapping of str to callable
        ``statistic(sums, n) -> array``: from ``sums`` (each column's resampled sums, one
        array of shape (resamples,) per column) and the number of units, the statistic of
        each resample.
    n_resamples : int, default=1000
    confidence : float, default=0.95
    seed : int, default=0

    Returns
    -------
    dict of str to (low, high)
        One interval per statistic; ``(nan, nan)`` without units. Resamples where a statistic
        is NaN (e.g. an R² of identical targets) are left out of its interval.
    """
    data = {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}
    lengths = {k: v.shape for k, v in data.items()}
    if len(set(lengths.values())) > 1 or any(len(shape) != 1 for shape in lengths.values()):
        raise InputError(f"bootstrap_sums needs one value per unit in every column; got shapes {lengths}")
    n = len(next(iter(data.values()))) if data else 0
    if n == 0:
        return dict.fromkeys(statistics, (float("nan"), float("nan")))
    matrix = np.column_stack(list(data.values()))
    values: dict[str, list[np.ndarray]] = {k: [] for k in statistics}
    for counts in _counts(n, n_resamples, seed):
        sums = dict(zip(data, (counts @ matrix).T))
        for k, fn in statistics.items():
            values[k].append(np.asarray(fn(sums, n), dtype=np.float64))
    return {k: _percentiles(np.concatenate(v), confidence) for k, v in values.items()}


def _counts(n: int, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """How often each of ``n`` units is drawn in each resample, ``_CHUNK`` resamples at a time."""
    rng = np.random.default_rng(seed)
    for start in range(0, n_resamples, _CHUNK):
        size = min(_CHUNK, n_resamples - start)
        draws = rng.integers(0, n, (size, n))
        flat = (draws + n * np.arange(size)[:, None]).ravel()
        yield np.bincount(flat, minlength=size * n).reshape(size, n).astype(np.float64)


def _percentiles(values: np.ndarray, confidence: float) -> tuple[float, float]:
    values = values[~np.isnan(values)]
    if not len(values):
        return float("nan"), float("nan")
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail])
    return float(low), float(high)
