"""CatBoost's multiclass probabilities bit for bit: its softmax and the fast exponential it takes.

CatBoost (1.x) turns a row's raw scores ``r`` into probabilities in ``CalcSoftmax``: ``z = r -
max(r)``, ``e = exp(z)`` by its ``FastExpWithInfInplace``, ``s`` the sum of ``e`` in class order
from 0, then ``e / s``. On x86 that exponential is not the C library's: it is the table method
of herumi's fmath (``expd_v``, vectorised), which CatBoost picks at run time by the CPU: AVX2
(with AVX) takes four values at a time, else SSE2 two, and the values past the last whole
group (the row's last ``n_classes mod 4`` or ``mod 2``) go through fmath's scalar ``expd``,
which differs from the vector code below ``-708.39641853226408`` (0.0 instead of the clamped
value) and at NaN. Other CPUs take the C library's ``exp``. Each group's arithmetic is the
same double-precision operations in the same order, so one NumPy implementation of it
reproduces CatBoost's probabilities exactly; it was checked against ``predict_proba`` of
catboost 1.2.10 on an AVX2 machine (``tests/forest/test_catboost.py``).

The exponential (fmath's ``expd``, with 2**11 table entries): ``n = round(x * 2048 / ln 2)``
is read off the low bits of ``d = x * a + 3 * 2**51`` (round to nearest), ``t = (d - 3 *
2**51) / a - x`` (the part of ``x`` below one table step, negated, with ``1 / a`` as a
multiplication), and ``exp(x) = 2**(n / 2048) * (1 - t + t**2 / 2 - t**3 / 6)`` with the
polynomial as ``((3 - t) * t**2) * C2 - t + 1``, ``2**(n / 2048)`` built from the table's
mantissa of ``2**(i / 2048)`` (``i = n mod 2048``) and the exponent ``floor(n / 2048)``.
"""

from __future__ import annotations

import math
import platform
from functools import cache

import numpy as np
from numba import njit

# fmath's constants (ExpdVar with sbit = 11): a table of 2**11 entries, the cubic's
# coefficients as fmath writes them, and the bounds of the vector code's clamp and of the
# scalar code's early returns.
_BITS = 11
_SIZE = 1 << _BITS
_A = _SIZE / math.log(2.0)
_RA = 1.0 / _A
_ROUND = float(3 << 51)
_ADJ = np.uint64((1 << (_BITS + 10)) - (1 << _BITS))
_C1, _C2, _C3 = 1.0, 0.16666666685227835064, 3.0000000027955394
_VECTOR_MAX, _VECTOR_MIN = 709.78272569338397, -708.39641853226408
_SCALAR_INF, _SCALAR_ZERO = 709.78271289338397, -708.39641853226408
_MANTISSA = np.uint64((1 << 52) - 1)


@cache
def _table() -> np.ndarray:
    """Mantissas of ``2**(i / 2048)``. fmath takes the C library's ``pow``, which glibc rounds
    correctly; Python's ``math.pow`` is that ``pow``. (NumPy's ``power`` is not: on AVX-512
    machines it takes its own vector code, 99 of these entries an ulp away.)"""
    values = np.array([math.pow(2.0, i * (1.0 / _SIZE)) for i in range(_SIZE)])
    return values.view(np.uint64) & _MANTISSA


def _expd(x: np.ndarray) -> np.ndarray:
    """fmath's exponential of ``x`` already inside the vector code's clamp (no NaN)."""
    d = x * _A + _ROUND
    bits = d.view(np.uint64)
    t = (d - _ROUND) * _RA - x
    # The exponent: bits 11.. of n + 1023 * 2048 - 2048 (n in the low bits of d), shifted
    # into place (the shift drops d's own exponent bits); the mantissa from the table.
    power = ((bits + _ADJ) >> np.uint64(_BITS)) << np.uint64(52)
    power |= _table()[(bits & np.uint64(_SIZE - 1)).astype(np.intp)]
    y = (_C3 - t) * (t * t)
    y = y * _C2
    y = (y - t) + _C1
    return y * power.view(np.float64)


def fast_exp(z: np.ndarray, group: int) -> np.ndarray:
    """CatBoost's ``FastExpWithInfInplace`` on each row of ``z`` (shape (n, k)): the vector
    code on the first ``k - k % group`` columns, fmath's scalar ``expd`` on the rest.
    ``group`` is 4 (AVX2), 2 (SSE2) or 0 (the C library's ``exp`` throughout)."""
    z = np.ascontiguousarray(z, dtype=np.float64)
    if group == 0:
        return _c_exp(z.reshape(-1)).reshape(z.shape)
    # The vector code clamps with minpd/maxpd, which return their second operand when the
    # first is NaN: NaN becomes the upper bound.
    clamped = np.where(z < _VECTOR_MAX, z, _VECTOR_MAX)
    clamped = np.where(clamped > _VECTOR_MIN, clamped, _VECTOR_MIN)
    with np.errstate(over="ignore", invalid="ignore"):
        out = _expd(clamped)
    tail = z.shape[1] - z.shape[1] % group
    if tail < z.shape[1]:
        last = z[:, tail:]
        # The scalar code returns 0 and inf before computing, and carries NaN through.
        out[:, tail:] = np.where(
            last <= _SCALAR_ZERO,
            0.0,
            np.where(last >= _SCALAR_INF, np.inf, np.where(np.isnan(last), np.nan, out[:, tail:])),
        )
    return out


def catboost_softmax(raw: np.ndarray, group: int | None = None) -> np.ndarray:
    """CatBoost's multiclass probabilities of raw scores of shape (n, k) (``CalcSoftmax``):
    ``exp(r - max r)`` by ``fast_exp``, divided by their sum taken in class order.
    ``group`` defaults to this CPU's path (``cpu_group``)."""
    raw = np.asarray(raw, dtype=np.float64)
    if raw.ndim != 2 or raw.shape[1] == 0 or len(raw) == 0:
        return np.empty((len(raw), raw.shape[1] if raw.ndim == 2 else 0))
    # MaxElement keeps the first of equal maxima and skips nothing: the row's largest value
    # (NaN cannot arise from a forest's finite leaves).
    with np.errstate(invalid="ignore"):
        z = raw - raw.max(axis=1, keepdims=True)
    e = fast_exp(z, cpu_group() if group is None else group)
    total = e[:, 0] + 0.0
    for j in range(1, e.shape[1]):
        total = total + e[:, j]
    with np.errstate(invalid="ignore", divide="ignore"):
        return e / total[:, None]


@cache
def cpu_group() -> int:
    """How many values CatBoost's exponential takes at a time on this CPU: 4 with AVX2 and
    AVX, 2 with SSE2, 0 (the C library's ``exp``) off x86 — CatBoost's own run-time test,
    read from NumPy's record of the CPU's features."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686", "x86"):
        return 0
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # NumPy 1.x
        from numpy.core._multiarray_umath import __cpu_features__ as features  # type: ignore[no-redef]
    if features.get("AVX2") and features.get("AVX"):
        return 4
    return 2 if features.get("SSE2") else 0


@njit(cache=True)
def _c_exp(z):
    # The C library's exp (numba calls it), as CatBoost off x86.
    out = np.empty_like(z)
    for i in range(z.shape[0]):
        out[i] = math.exp(z[i])
    return out
