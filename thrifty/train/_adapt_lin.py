"""ADAPT-LIN (Algorithm 1 of Nan & Saligrama 2017), its support cut, and the paper's L1 baseline.

The gate and the low-cost model are linear: group-sparse in ADAPT-LIN (``_adapt_group_sparse``
solves (OPT2)), chosen by an L1 selection in the baseline of section 5.
"""

from __future__ import annotations

import math

import numpy as np

from thrifty.exceptions import InputError
from thrifty.runtime.models import Linear
from thrifty.train._adapt_group_sparse import Standardizer, fit_group_sparse
from thrifty.train._adapt_problem import ADAPTFit, ADAPTProblem, onehot, progress_bar, q_step

__all__ = ["adapt_lin", "l1_baseline", "lin_objective", "truncate_lin"]


def adapt_lin(
    prob: ADAPTProblem,
    *,
    p_full: float,
    gamma: float,
    n_iter: int = 10,
    l2: float = 1e-4,
    max_iter: int = 200,
    tol: float = 1e-3,
    init: np.ndarray | None = None,
    support: np.ndarray | None = None,
    progress: bool = False,
) -> ADAPTFit:
    """ADAPT-LIN (Algorithm 1): linear gate and low-cost model with a group-sparse penalty.

    Alternates (OPT1) and (OPT2): ``min (1/N) sum_i (1 - q_i)[l(f1(x_i), y_i) + log(1 + e^{g^T x_i})]
    + q_i log(1 + e^{-g^T x_i}) + gamma sum_a c_a sqrt(g_a^2 + ||f1_a||^2)`` (``f1_a``: feature
    ``a``'s coefficients in every output of ``f1``), solved by proximal gradient so unused
    features are exactly zero in both. Example weights ``prob.w`` multiply example ``i``'s term
    (``N`` becomes their sum). Features are standardized (weighted) for the fit and the
    coefficients mapped back to raw features. Initialisation: ``g = 0`` and ``f1`` the
    group-sparse logistic model of the labels (``q = 0``), or ``init`` (a previous ``state``).

    Parameters
    ----------
    prob : ADAPTProblem
    p_full, gamma : float
        As in :func:`adapt_gbrt`; each feature's penalty weight is its acquisition cost
        (with what it requires) over the mean positive feature price.
    n_iter : int
        Outer iterations; stops early when ``mean |q - q_previous| < tol``.
    l2 : float
        Ridge on the standardized coefficients.
    max_iter : int
        Proximal-gradient iterations per model step.
    support : ndarray of bool, shape (n_features,), optional
        Features the gate and ``f1`` may use; the others stay exactly zero in both (see
        :func:`truncate_lin`).

    Returns
    -------
    ADAPTFit
        ``gate`` and ``low`` as ``Linear`` plans; ``state`` holds the standardized parameters.
    """
    X, sw = prob.X, prob.w
    _check_complete(X)
    std = Standardizer(X, sw)
    Z = std.transform(X)
    if support is not None:
        # an excluded feature's column is zero: its gradient is zero and its coefficients,
        # started at zero, stay exactly zero through every proximal step
        Z = Z * support
        if init is not None:
            init = init.copy()
            init[:-1][~support] = 0.0
    Y = prob.targets()
    prices = prob.feature_prices()
    history: list[dict[str, float]] = []
    bar = progress_bar(n_iter, "ADAPT-LIN", progress)
    try:
        if init is None:
            P_f = fit_group_sparse(
                Z, Y, weights=prices, gamma=gamma, l2=l2, max_iter=max_iter, sample_weight=sw, loss=prob.loss
            )
            P = np.column_stack([np.zeros(Z.shape[1] + 1), P_f])
        else:
            P = init.copy()
        q, beta, q_old = np.zeros(len(sw)), 0.0, None
        for _ in range(n_iter):
            S = Z @ P[:-1] + P[-1]
            A, B = prob.losses(S[:, 0], S[:, 1:])
            q, beta = q_step(A, B, p_full, sw)
            P = fit_group_sparse(
                Z,
                Y,
                q=q,
                weights=prices,
                gamma=gamma,
                l2=l2,
                init=P,
                max_iter=max_iter,
                sample_weight=sw,
                loss=prob.loss,
            )
            S = Z @ P[:-1] + P[-1]
            A, B = prob.losses(S[:, 0], S[:, 1:])
            change = prob.q_change(q, q_old)
            history.append(prob.history_row(q, beta, A, B, change))
            bar.update(1)
            if change < tol:
                break
            q_old = q
    finally:
        bar.close()
    if not history:  # n_iter == 0: a gate that never routes to f0
        P[-1, 0] = -1.0
    coef, intercept = std.unscale(P[:-1], P[-1])
    gate = Linear(
        coef[:, 0], intercept[0], link="identity", task="regression", feature_names=prob.feature_names
    )
    low = Linear(
        coef[:, 1:] * prob.output_scale,  # f1 was fitted to targets divided by it
        intercept[1:] * prob.output_scale,
        link=prob.link,
        task=prob.task,
        classes=prob.classes,
        feature_names=prob.feature_names,
    )
    return ADAPTFit(gate=gate, low=low, q=q, beta=beta, history=history, state=P)


def truncate_lin(
    prob: ADAPTProblem,
    fit: ADAPTFit,
    n_features: int,
    *,
    p_full: float,
    gamma: float,
    n_iter: int = 10,
    progress: bool = False,
) -> ADAPTFit:
    """ADAPT-LIN kept to its ``n_features`` strongest features, then refitted on them.

    Features are ranked by the norm of their standardized coefficients in the gate and
    ``f1`` together, ``sqrt(g_a^2 + ||f1_a||^2)``, per unit of their price ``c_a`` (the
    group penalty's own weight); the others are set to zero and the alternating minimisation
    runs again on the kept ones, from the truncated parameters. The authors' evaluation
    sweeps this support size over every fit (their ``em_adaptive_sparse_eval``): a weakly
    penalised fit ranks the features by what the gate and ``f1`` *jointly* need, which the
    exact zeros of a strong penalty can miss (on Synthetic-2 a strong penalty keeps the
    feature L1 would pick, a weak one plus truncation finds the paper's cost-1.5 system).

    Parameters
    ----------
    prob : ADAPTProblem
    fit : ADAPTFit
        An :func:`adapt_lin` result (its ``state``).
    n_features : int >= 1
        Features to keep; a fit already using no more is returned unchanged.
    p_full, gamma, n_iter :
        As in :func:`adapt_lin`, for the refit.

    Returns
    -------
    ADAPTFit
    """
    P = fit.state
    if P is None:
        raise InputError("truncate_lin needs an adapt_lin result (it has a state); this fit has none")
    norms = np.sqrt(np.sum(P[:-1] ** 2, axis=1))
    if int(np.count_nonzero(norms)) <= n_features:
        return fit
    prices = prob.feature_prices()
    with np.errstate(divide="ignore"):
        score = np.where(prices > 0, norms / np.where(prices > 0, prices, 1.0), np.inf)
    score[norms == 0] = -np.inf  # a free but unused feature is not worth a kept slot
    keep = np.zeros(len(norms), dtype=bool)
    keep[np.argsort(-score, kind="stable")[:n_features]] = True
    # The truncated parameters can sit in a poor basin (a gate that leaned on a dropped
    # feature), so the refit also starts cold on the kept features; (OPT) picks the better.
    fits = [
        adapt_lin(
            prob, p_full=p_full, gamma=gamma, n_iter=n_iter, init=start, support=keep, progress=progress
        )
        for start in (P, None)
    ]
    return min(fits, key=lambda f: lin_objective(prob, f.state, p_full, gamma))  # type: ignore[arg-type]


def lin_objective(prob: ADAPTProblem, P: np.ndarray, p_full: float, gamma: float) -> float:
    """Value of (OPT) for ADAPT-LIN's standardized parameters ``P``, with ``q`` at its optimum.

    ``(1/N) sum_i [(1 - q_i) A_i + q_i B_i - H(q_i)] + gamma sum_a c_a ||P_a||`` (the paper's
    (OPT) with the linear models' group penalty; the mean weighted by ``prob.w``), ``q`` from
    the closed-form q-step.
    """
    Z = Standardizer(prob.X, prob.w).transform(prob.X)
    S = Z @ P[:-1] + P[-1]
    A, B = prob.losses(S[:, 0], S[:, 1:])
    q, _ = q_step(A, B, p_full, prob.w)
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -(np.where(q > 0, q * np.log(q), 0.0) + np.where(q < 1, (1 - q) * np.log1p(-q), 0.0))
    penalty = gamma * float(np.sum(prob.feature_prices() * np.sqrt(np.sum(P[:-1] ** 2, axis=1))))
    return float(np.average((1 - q) * A + q * B - H, weights=prob.w)) + penalty


def l1_baseline(
    prob: ADAPTProblem,
    *,
    p_full: float,
    gamma: float,
    l2: float | None = None,
    max_iter: int = 500,
    memo: dict[float, tuple] | None = None,
) -> ADAPTFit:
    """The L1 baseline of section 5: select features, fit ``f1`` on them, gate on its mistakes.

    1. An L1-regularized logistic regression of the labels (multinomial for several classes;
       ``gamma * sum_a c_a ||w_a||``, standardized features, each feature's penalty its price)
       selects the features with a non-zero coefficient;
    2. ``f1`` is a logistic regression on those features only (ridge ``l2``, default ``1/N``,
       i.e. scikit-learn's ``C=1``);
    3. the gate is a logistic regression, on the same features, of the pseudo-label "f1 is
       wrong"; its intercept is then shifted so that a fraction ``p_full`` of the training
       examples go to ``f0`` (the paper sweeps the gate's class weight instead).

    Example weights ``prob.w`` weigh each example's loss in 1-3 and its share of ``p_full``
    (``N`` is their sum). Steps 1-3 do not depend on ``p_full``: ``memo`` (a dict the caller
    keeps for one ``prob``, e.g. through one budget sweep) holds them per ``gamma``, so a
    sweep over ``p_full`` only shifts the gate.

    Returns
    -------
    ADAPTFit
        ``gate`` and ``low`` as ``Linear`` plans; ``q`` is the training routing (0/1).
    """
    X, y, sw = prob.X, prob.y, prob.w
    _check_complete(X)
    n_feat = X.shape[1]
    l2 = 1.0 / float(sw.sum()) if l2 is None else l2
    pieces = None if memo is None else memo.get(float(gamma))
    if pieces is None:
        std = Standardizer(X, sw)
        Z = std.transform(X)
        Y = onehot(y, prob.n_classes)
        P_sel = fit_group_sparse(
            Z, Y, weights=prob.feature_prices(), gamma=gamma, l2=0.0, max_iter=max_iter, sample_weight=sw
        )
        support = np.flatnonzero(np.any(P_sel[:-1] != 0, axis=1))
        Zs = Z[:, support]
        P_f = fit_group_sparse(Zs, Y, l2=l2, max_iter=max_iter, sample_weight=sw)
        F = Zs @ P_f[:-1] + P_f[-1]
        pred = (F[:, 0] > 0).astype(np.int64) if prob.n_classes == 2 else np.argmax(F, axis=1)
        wrong = (pred != y).astype(np.float64)[:, None]
        P_g = fit_group_sparse(Zs, wrong, l2=l2, max_iter=max_iter, sample_weight=sw)
        score = Zs @ P_g[:-1, 0] + P_g[-1, 0]
        pieces = (std, support, P_f, P_g, score)
        if memo is not None:
            memo[float(gamma)] = pieces
    std, support, P_f, P_g, score = pieces
    shift = _route_shift(score, p_full, sw)
    P_g = P_g.copy()
    P_g[-1, 0] -= shift
    full_f = np.zeros((n_feat + 1, prob.width))
    full_f[support] = P_f[:-1]
    full_f[-1] = P_f[-1]
    full_g = np.zeros(n_feat + 1)
    full_g[support] = P_g[:-1, 0]
    full_g[-1] = P_g[-1, 0]
    coef_f, int_f = std.unscale(full_f[:-1], full_f[-1])
    coef_g, int_g = std.unscale(full_g[:-1, None], full_g[-1:])
    gate = Linear(
        coef_g[:, 0], int_g[0], link="identity", task="regression", feature_names=prob.feature_names
    )
    low = Linear(
        coef_f, int_f, link=prob.link, task=prob.task, classes=prob.classes, feature_names=prob.feature_names
    )
    q = (score - shift > 0).astype(np.float64)
    return ADAPTFit(
        gate=gate,
        low=low,
        q=q,
        beta=0.0,
        history=[{"mean_q": float(np.average(q, weights=sw)), "n_selected": float(len(support))}],
    )


def _route_shift(score: np.ndarray, p_full: float, w: np.ndarray) -> float:
    """Shift making ``score - shift > 0`` for (at most) a fraction ``p_full`` of the weight.

    With integer weights, as on the repeated rows: ``k = floor(p_full * sum(w))`` rows are
    allowed, and the shift is the ``(k+1)``-th largest repeated score.
    """
    if p_full <= 0.0 or len(score) == 0:
        return float(score.max(initial=0.0)) + 1.0
    if p_full >= 1.0:
        return float(score.min(initial=0.0)) - 1.0
    order = np.argsort(-score, kind="stable")
    cum = np.cumsum(w[order])
    k = math.floor(p_full * float(cum[-1]))
    # everything strictly above the first score whose cumulative weight passes k goes to f0
    return float(score[order[np.searchsorted(cum, k, side="right")]])


def _check_complete(X: np.ndarray) -> None:
    if np.isnan(X).any():
        raise InputError(
            "ADAPT-LIN and the L1 baseline need complete data: X has NaN values; "
            "impute them first or use method='gbrt'"
        )
