"""Cronus's closed-form stage solution (eqs. 11, 13, 14) and its initialization (Algorithm 2)."""

from __future__ import annotations

import numpy as np
import scipy.linalg
from scipy.optimize import brentq

from thrifty.cascade._problem import ZERO_TOL, Problem, cost_norms, prune, sigmoid
from thrifty.exceptions import InputError

# Rows whose probability of reaching a stage is below this add nothing to its loss or cost.
_REACH_TOL = 1e-12
# Weights whose weighted output (RMS) is below this are tested for being optimal at zero.
_SCREEN_TOL = 1e-2


def stage_gram(prob: Problem, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """``H^T Omega H``, ``H^T Omega y`` and ``y^T Omega y / 2`` with ``Omega = diag(weight)``.

    Eq. (14) is dominated by this product; it is computed once per stage and reused by every
    reweighting step. Rows of zero weight (inputs that never reach the stage) are skipped.
    """
    rows = np.flatnonzero(weight > _REACH_TOL)
    H = prob.H[rows]
    w = weight[rows]
    G = H.T @ (H * w[:, None])
    r = H.T @ (w * prob.y[rows])
    return G, r, 0.5 * float(w @ prob.y[rows] ** 2)


def stage_objective(
    prob: Problem,
    G: np.ndarray,
    r: np.ndarray,
    c0: float,
    beta: np.ndarray,
    prev_B: np.ndarray,
    prev_d: np.ndarray,
    d_k: float,
    lam: float,
    rho: float,
) -> float:
    """Eq. (8) restricted to stage ``k`` pretending it is the last (``K = k``), non-smooth form:
    ``1/2 sum_i omega_i p_i^k (y_i - h_i^T beta)^2 + rho |beta|_1 + lam (e^T kappa + c^T eta)``."""
    loss = 0.5 * beta @ G @ beta - r @ beta + c0
    kappa, eta = cost_norms(np.vstack([prev_B, beta]), np.r_[prev_d, d_k], prob.F)
    return float(loss + rho * np.abs(beta[:-1]).sum() + lam * (prob.e @ kappa + prob.c @ eta))


def solve_stage(
    prob: Problem,
    G: np.ndarray,
    r: np.ndarray,
    c0: float,
    prev_B: np.ndarray,
    prev_d: np.ndarray,
    d_k: float,
    *,
    lam: float,
    rho: float,
    beta0: np.ndarray | None = None,
    max_iter: int = 500,
    tol: float = 1e-9,
) -> tuple[np.ndarray, list[float]]:
    """Minimise the convex last-stage problem by alternating eq. (11) and eq. (14).

    Given ``beta``, the auxiliary variables are the left-hand sides of eq. (11) (``sigma_t =
    |beta_t|``, ``kappa_t``, ``eta_u``); given them, ``beta = (H^T Omega H + Lambda)^{-1} H^T
    Omega y`` with ``Lambda_tt = rho / sigma_t + lam d_k^2 (e_t / kappa_t + sum_u c_u F_ut /
    eta_u)`` (eq. 13) and no penalty on the constant. By Lemma 2 the alternation is jointly
    convex, so it converges to the stage's global minimum; each step decreases the objective
    (Lemma 1 makes the substituted objective an upper bound, tight at the current point).
    Weights whose weighted output falls below ``ZERO_TOL`` (RMS) are set to zero and stay zero (their
    ``1 / sigma_t`` is infinite), so that a stage pays only for the trees it really uses.

    Returns
    -------
    beta : ndarray of shape (n_trees + 1,)
    history : list of float
        The non-smooth objective after each step.
    """
    T = prob.n_trees
    beta = np.ones(T + 1) if beta0 is None else beta0.astype(np.float64).copy()
    beta[-1] = 0.0 if beta0 is None else beta[-1]
    jitter = 1e-12 * max(1e-300, float(np.mean(np.diag(G))))
    history = [stage_objective(prob, G, r, c0, beta, prev_B, prev_d, d_k, lam, rho)]
    for _ in range(max_iter):
        active = np.flatnonzero(np.r_[beta[:-1] != 0, True])
        kappa, eta = cost_norms(np.vstack([prev_B, beta]), np.r_[prev_d, d_k], prob.F)
        lam_diag = np.zeros(T + 1)
        w = beta[:-1]
        with np.errstate(divide="ignore", invalid="ignore"):
            if rho > 0:
                lam_diag[:-1] += rho / np.abs(w)
            if lam > 0 and d_k > 0:
                lam_diag[:-1] += lam * d_k**2 * prob.tree_price(eta, kappa)
        A = G[np.ix_(active, active)] + np.diag(lam_diag[active] + jitter)
        try:
            x = scipy.linalg.cho_solve(
                scipy.linalg.cho_factor(A, check_finite=False), r[active], check_finite=False
            )
        except (np.linalg.LinAlgError, scipy.linalg.LinAlgError):
            x = np.linalg.lstsq(A, r[active], rcond=None)[0]
        new = np.zeros(T + 1)
        new[active] = x
        new = _screen(prob, G, r, prune(new, prob.scale), prev_B, prev_d, d_k, lam, rho)
        value = stage_objective(prob, G, r, c0, new, prev_B, prev_d, d_k, lam, rho)
        # The objective flattens long before weights heading to zero get there: stop only when
        # the weighted outputs have settled too.
        moved = float(np.max(np.abs(new - beta) * prob.scale))
        beta = new
        history.append(value)
        if history[-2] - value <= tol * max(abs(value), 1e-12) and moved <= ZERO_TOL:
            break
    return beta, history


def _screen(
    prob: Problem,
    G: np.ndarray,
    r: np.ndarray,
    beta: np.ndarray,
    prev_B: np.ndarray,
    prev_d: np.ndarray,
    d_k: float,
    lam: float,
    rho: float,
) -> np.ndarray:
    """Zero the small weights for which zero is optimal given the others (subgradient test).

    The reweighting only shrinks such weights geometrically, at a rate that can be close to 1.
    With the others fixed, ``beta_t = 0`` is optimal when the loss gradient ``|g_t|`` (at
    ``beta_t = 0``) is at most ``rho + lam d_k (e_t [tree t unused by earlier stages] + sum_u
    c_u F_ut [unit u unused by every other weight])``: a norm term that other weights already
    make positive is smooth at 0 and adds nothing.
    """
    w = beta[:-1]
    small = np.flatnonzero((w != 0) & (np.abs(w) * prob.scale[:-1] < _SCREEN_TOL))
    if not len(small):
        return beta
    g = G[small] @ beta - r[small] - G[small, small] * w[small]
    bound = np.full(len(small), rho)
    if lam > 0 and d_k > 0:
        prev_tree = ((prev_B[:, :-1] * prev_d[:, None]) ** 2).sum(axis=0) if len(prev_B) else np.zeros(len(w))
        own = (w * d_k) ** 2
        unit_all = prob.F.astype(np.float64) @ (prev_tree + own)
        Fs = prob.F[:, small]
        # unit u is otherwise unused when its norm comes from tree t alone (this stage)
        alone = Fs & (unit_all[:, None] - own[small][None, :] <= 1e-300 + 1e-12 * unit_all[:, None])
        bound += lam * d_k * (prob.e[small] * (prev_tree[small] == 0) + prob.c @ alone)
    out = beta.copy()
    out[small[np.abs(g) <= bound]] = 0.0
    return out


def pass_threshold(z: np.ndarray, p: np.ndarray, gamma: float, eps: float, pi: np.ndarray) -> float:
    """``theta`` such that ``sum_i pi_i p_i sigma_gamma(z_i - theta) = (1 - eps) sum_i pi_i p_i``
    (Algorithm 2, line 7: ``d_{k+1} = (1 - eps) d_k``; ``pi`` the examples' shares)."""
    mask = p > _REACH_TOL
    z, p = z[mask], p[mask] * pi[mask]
    if not len(z):
        return float("-inf")
    target = (1.0 - eps) * p.sum()

    def gap(theta: float) -> float:
        return float(p @ sigmoid(gamma * (z - theta)) - target)

    span = 60.0 / gamma
    lo, hi = float(z.min()) - span, float(z.max()) + span
    return float(brentq(gap, lo, hi, xtol=1e-12 * max(1.0, abs(hi)), maxiter=200))


def initialize(
    prob: Problem,
    n_stages: int,
    *,
    lam: float,
    rho: np.ndarray,
    delta: float,
    eps: float,
    gamma: float,
    bar=None,
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2: stages solved in order, each in closed form as if it were the last.

    Stage ``k`` (1-based) uses ``lam_k = lam * delta^(K - k)``: inflated on early stages and
    decreasing to ``lam`` at the last (the paper's stated intent; its formula ``lam delta^{-K}``
    would instead deflate it). Each stage's threshold passes a ``1 - eps`` fraction of the
    (soft) inputs it receives, capped at 0 (a stage rejects only inputs it scores negative, see
    :func:`thrifty.cascade.cronus`); the last stage's threshold is the decision threshold 0.

    Returns
    -------
    B : ndarray of shape (K, n_trees + 1)
    theta : ndarray of shape (K,)
    """
    K, T = n_stages, prob.n_trees
    B = np.zeros((K, T + 1))
    theta = np.zeros(K)
    p = np.ones(prob.n)
    d = np.zeros(K)
    for k in range(K):
        d[k] = prob.pi @ p
        G, r, c0 = stage_gram(prob, prob.omega * p)
        lam_k = lam * delta ** (K - 1 - k)
        B[k], _ = solve_stage(prob, G, r, c0, B[:k], d[:k], d[k], lam=lam_k, rho=float(rho[k]))
        if k < K - 1:
            z = prob.H @ B[k]
            theta[k] = min(pass_threshold(z, p, gamma, eps, prob.pi), 0.0)
            p = p * sigmoid(gamma * (z - theta[k]))
        if bar is not None:
            bar.update(1)
    return B, theta


def default_lam(prob: Problem) -> float:
    """The default trade-off: the closed-form lower bound of ``lambda_max`` divided by 16."""
    lam = lambda_max(prob, exact=False) / 16.0
    if not np.isfinite(lam):
        raise InputError(
            "some trees cost nothing (no priced feature, tree_cost 0), so lam has no "
            "scale; pass lam= or give trees a cost (CostModel(..., tree_cost=1))"
        )
    return lam


def lambda_max(prob: Problem, rho: float = 0.0, rel_tol: float = 0.05, exact: bool = True) -> float:
    """The smallest ``lambda`` (within ``rel_tol``) at which one stage (eq. 7) keeps no tree.

    At ``beta = 0`` (bias fitted) a tree alone pays ``(e_t + sum_u c_u F_ut) |beta_t|``, so it
    enters once ``|g_t| > rho + lambda (e_t + sum_u c_u F_ut)`` with ``g`` the loss gradient
    there; trees sharing features pay their mixed norms jointly and can enter together at a
    larger ``lambda``, so that value only brackets a bisection on the stage's solution
    (``exact=False`` returns the bracket: the lone-tree entry point, a lower bound).
    """
    b = float(prob.omega @ prob.y / prob.omega.sum())
    g = prob.H[:, :-1].T @ (prob.omega * (prob.y - b))
    price = prob.e + prob.c @ prob.F
    if np.any((price == 0) & (np.abs(g) > rho)):
        return float("inf")  # a free tree that helps is never dropped
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(price > 0, (np.abs(g) - rho) / price, 0.0)
    lo = float(max(np.max(ratio, initial=0.0), 0.0))
    if lo == 0.0 or not exact:
        return lo
    G, r, c0 = stage_gram(prob, prob.omega)
    none, zero = np.zeros((0, prob.n_trees + 1)), np.zeros(0)

    def empty(lam: float) -> bool:
        beta, _ = solve_stage(prob, G, r, c0, none, zero, 1.0, lam=lam, rho=rho)
        return not np.any(beta[:-1])

    hi = lo
    while not empty(hi):
        lo, hi = hi, hi * 2.0
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if empty(mid) else (mid, hi)
    return hi
