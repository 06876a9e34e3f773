"""Group-sparse linear gate and low-cost model of ADAPT-LIN (problem (OPT2), Nan & Saligrama 2017).

Private. Parameters are one matrix ``P`` of shape ``(n_features + 1, n_cols)``: row ``a`` holds
feature ``a``'s coefficients in every column (the gate's, when there is a gate, in column 0,
then one column per output of the low-cost model), the last row the intercepts. The penalty
``gamma * sum_a c_a * ||P[a, :]||_2`` makes a feature's coefficients vanish in the gate and the
model *together*, so an unused feature is exactly zero in both; accelerated proximal gradient
(FISTA with backtracking and adaptive restart) reaches those exact zeros through the group
soft-threshold. A small ridge ``l2`` keeps separable problems bounded. Example weights ``sw``
multiply each example's loss terms; the mean over examples becomes ``sum_i sw_i (...) / sum_i sw_i``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_softmax, softmax


class Standardizer:
    """Centre and scale features (weighted mean and standard deviation); coefficients fitted on
    the scaled data map back exactly."""

    def __init__(self, X: np.ndarray, weight: np.ndarray | None = None) -> None:
        self.mean = np.average(X, axis=0, weights=weight)
        scale = np.sqrt(np.average((X - self.mean) ** 2, axis=0, weights=weight))
        self.scale = np.where(scale > 0, scale, 1.0)

    def transform(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean) / self.scale

    def unscale(self, coef: np.ndarray, intercept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Coefficients on the raw features giving the same scores (zeros stay zeros)."""
        raw = coef / self.scale[:, None]
        return raw, intercept - self.mean @ raw


def smooth_loss(
    P: np.ndarray,
    Z: np.ndarray,
    Y: np.ndarray,
    q: np.ndarray | None,
    l2: float,
    sw: np.ndarray | None = None,
    loss: str = "logistic",
) -> tuple[float, np.ndarray]:
    """Weighted mean loss of (OPT2) without the group penalty, and its gradient in ``P``.

    ``loss="logistic"``: ``Y`` holds 0/1 targets, one column for a binary model, one-hot columns
    for a multiclass one. ``loss="squared"``: ``Y`` is one column of (scaled) regression targets
    and ``l(f1) = (f1 - y)^2 / 2``. With ``q`` (probability of the expensive model per example)
    column 0 of ``P`` is the gate: ``(1 - q) [l(f1) + log(1 + e^g)] + q log(1 + e^-g)``; without
    it, plain ``l(f1)``. ``sw`` weighs the examples (default 1 each).
    """
    sw = np.ones(Z.shape[0]) if sw is None else sw
    n = float(sw.sum())
    A = Z @ P[:-1] + P[-1]
    F = A[:, 1:] if q is not None else A
    w = sw * (1.0 - q) if q is not None else sw
    if loss == "squared":
        dF = F - Y
        loss_f = 0.5 * dF[:, 0] ** 2
    elif F.shape[1] == 1:
        f = F[:, 0]
        loss_f = np.logaddexp(0.0, f) - Y[:, 0] * f
        dF = (expit(f) - Y[:, 0])[:, None]
    else:
        logp = log_softmax(F, axis=1)
        loss_f = -np.sum(Y * logp, axis=1)
        dF = softmax(F, axis=1) - Y
    total = float(np.dot(w, loss_f)) / n
    dA = np.empty_like(A)
    if q is not None:
        g = A[:, 0]
        total += float(np.dot(w, np.logaddexp(0.0, g)) + np.dot(sw * q, np.logaddexp(0.0, -g))) / n
        # d/dg of (1-q) log(1+e^g) + q log(1+e^-g) is sigma(g) - q
        dA[:, 0] = sw * (expit(g) - q) / n
        dA[:, 1:] = dF * (w / n)[:, None]
    else:
        dA[:] = dF * (w / n)[:, None]
    grad = np.empty_like(P)
    grad[:-1] = Z.T @ dA + l2 * P[:-1]
    grad[-1] = dA.sum(axis=0)
    total += 0.5 * l2 * float(np.sum(P[:-1] ** 2))
    return total, grad


def group_prox(P: np.ndarray, thresh: np.ndarray) -> np.ndarray:
    """Group soft-threshold of each feature row by ``thresh[a]`` (exact zeros below it)."""
    out = P.copy()
    norms = np.sqrt(np.sum(P[:-1] ** 2, axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        shrink = np.where(norms > thresh, 1.0 - thresh / norms, 0.0)
    out[:-1] = P[:-1] * shrink[:, None]
    return out


def penalty(P: np.ndarray, weights: np.ndarray, gamma: float) -> float:
    return gamma * float(np.dot(weights, np.sqrt(np.sum(P[:-1] ** 2, axis=1))))


def fit_group_sparse(
    Z: np.ndarray,
    Y: np.ndarray,
    *,
    q: np.ndarray | None = None,
    weights: np.ndarray | None = None,
    gamma: float = 0.0,
    l2: float = 1e-4,
    init: np.ndarray | None = None,
    max_iter: int = 500,
    tol: float = 1e-6,
    sample_weight: np.ndarray | None = None,
    loss: str = "logistic",
) -> np.ndarray:
    """Minimise ``smooth_loss + gamma * sum_a weights[a] ||P[a]||`` by FISTA; returns ``P``.

    Parameters
    ----------
    Z : ndarray (n, n_features)
        Standardized features.
    Y : ndarray (n, n_out)
        0/1 targets of the low-cost model (binary: one column).
    q : ndarray (n,), optional
        Probability of the expensive model per example; adds the gate (column 0 of ``P``).
    weights : ndarray (n_features,)
        Per-feature price in the penalty (default 1).
    sample_weight : ndarray (n,), optional
        Per-example weight of the loss (default 1).
    loss : {"logistic", "squared"}
        The low-cost model's loss (see :func:`smooth_loss`).
    """
    from threadpoolctl import threadpool_limits

    # The products are small (n x n_features x a few columns): several BLAS threads only
    # contend (10x slower on a busy 2-core machine).
    with threadpool_limits(1):
        return _fista(Z, Y, q, weights, gamma, l2, init, max_iter, tol, sample_weight, loss)


def _fista(
    Z: np.ndarray,
    Y: np.ndarray,
    q: np.ndarray | None,
    weights: np.ndarray | None,
    gamma: float,
    l2: float,
    init: np.ndarray | None,
    max_iter: int,
    tol: float,
    sw: np.ndarray | None,
    loss: str,
) -> np.ndarray:
    n_feat = Z.shape[1]
    n_cols = Y.shape[1] + (1 if q is not None else 0)
    weights = np.ones(n_feat) if weights is None else weights
    x = np.zeros((n_feat + 1, n_cols)) if init is None else init.copy()
    y = x.copy()
    t = 1.0
    L = 1.0
    obj_x = smooth_loss(x, Z, Y, q, l2, sw, loss)[0] + penalty(x, weights, gamma)
    for _ in range(max_iter):
        fy, gy = smooth_loss(y, Z, Y, q, l2, sw, loss)
        while True:
            cand = group_prox(y - gy / L, gamma * weights / L)
            d = cand - y
            fc = smooth_loss(cand, Z, Y, q, l2, sw, loss)[0]
            if fc <= fy + float(np.sum(gy * d)) + 0.5 * L * float(np.sum(d * d)) + 1e-12:
                break
            L *= 2.0
        obj_c = fc + penalty(cand, weights, gamma)
        if obj_c > obj_x:
            # adaptive restart: momentum overshot, restart from the last iterate
            y, t = x.copy(), 1.0
            continue
        step = float(np.sqrt(np.sum((cand - x) ** 2)))
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        y = cand + ((t - 1.0) / t_new) * (cand - x)
        x, t, obj_x = cand, t_new, obj_c
        L = max(L / 1.5, 1e-8)
        if step <= tol * max(1.0, float(np.sqrt(np.sum(x * x)))):
            break
    return x
