"""Links and labels: the one place raw scores become probabilities and class labels."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import njit

from thrifty.exceptions import InputError
from thrifty.forest.catboost_softmax import catboost_softmax

LINKS = ("identity", "sigmoid", "softmax", "catboost_softmax", "proba")
# Links that are a softmax of several raw scores: with NumPy's exp (LightGBM's, XGBoost's), or
# with CatBoost's own (``catboost_softmax``: CatBoost's probabilities exactly, a few ulps from
# the other on moderate scores).
SOFTMAX_LINKS = ("softmax", "catboost_softmax")
TASKS = ("regression", "binary", "multiclass", "ranking")


def decision_threshold(link: str) -> float:
    """Raw score above which a single-output classifier predicts the positive class."""
    return 0.5 if link == "proba" else 0.0


def raw_to_proba(raw: np.ndarray, link: str) -> np.ndarray:
    """Probabilities of raw scores under ``link`` (binary models get two columns)."""
    if link == "sigmoid":
        p = _sigmoid(raw if raw.ndim == 1 else raw[:, 0])
        out = np.empty((len(p), 2))
        out[:, 0] = 1.0 - p
        out[:, 1] = p
        return out
    if link == "softmax":
        z = raw - raw.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)
    if link == "catboost_softmax":
        return catboost_softmax(raw)
    if link == "proba":
        # Averages of leaf distributions summed in float32 (YDF) can pass 1 by a few ulps;
        # a probability cannot, and YDF clamps them to [0, 1] as well.
        raw = np.clip(raw, 0.0, 1.0)
        if raw.ndim == 1 or raw.shape[1] == 1:
            r = raw.reshape(-1)
            return np.column_stack([1.0 - r, r])
        return raw
    raise InputError(f"raw scores with link {link!r} are not probabilities")


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return _sigmoid_kernel(np.ascontiguousarray(z, dtype=np.float64))


@njit(cache=True)
def _sigmoid_kernel(z):
    # ``1 / (1 + exp(-z))`` with the C library's exp (numba calls it; NumPy's own exp can differ
    # by an ulp): LightGBM's and CatBoost's probabilities bit for bit. exp(-z) overflowing to
    # inf gives 0.0, as theirs.
    out = np.empty_like(z)
    for i in range(z.shape[0]):
        out[i] = 1.0 / (1.0 + math.exp(-z[i]))
    return out


def labels_from(
    raw: np.ndarray, decision: np.ndarray | None, link: str, classes: Any, n_outputs: int
) -> np.ndarray:
    """Class labels of raw scores of shape (n,) or (n, n_outputs): forced decisions (+1/-1)
    where ``decision`` is non-zero, else ``raw > decision_threshold(link)`` (one output) or the
    argmax (several)."""
    classes = np.asarray(classes) if classes is not None else np.arange(max(2, n_outputs))
    if n_outputs > 1:
        return classes[np.argmax(raw, axis=1)]
    r = raw[:, 0] if raw.ndim == 2 else raw
    positive = r > decision_threshold(link)
    if decision is not None:
        positive = np.where(decision != 0, decision > 0, positive)
    return classes[positive.astype(np.intp)]
