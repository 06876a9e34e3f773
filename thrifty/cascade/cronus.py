"""Cronus: re-weight and re-order the trees of a boosted ensemble into a cascade of early rejects.

Chen, Xu, Weinberger, Chapelle and Kedem, "Classifier Cascade for Minimizing Feature Evaluation
Cost" (AISTATS 2012). Stage ``k`` scores ``h(x)^T beta^k`` over the shared pool of trees plus a
constant and rejects an input when the score is below ``theta^k``; a tree is evaluated at most
once per input and a feature acquired at most once. The weights and thresholds minimise eq. (8):
a class-weighted squared loss of each input's exit stage, an l1 penalty per stage, and
lambda times the tree and feature costs as mixed norms across stages, each stage weighted by the
expected fraction ``d_k`` of inputs reaching it (soft sigmoid exits of steepness gamma during
training, hard thresholds at test time). Algorithm 2 initializes it in closed form, Algorithm 1
optimizes it cyclically, stage by stage.

One deviation: every threshold is bounded by 0 (``theta^k <= 0``). Eq. (8) scores a rejected
input by its stage's score while the test-time prediction of a rejected input is -1; a stage free
to reject inputs it scores positive exploits that gap (on balanced data it learnt to reject
everything). With the bound a stage rejects only inputs it predicts negative.

The result is a :class:`thrifty.Cascade` plan: ``stage_weights[k] = beta^k`` (trees),
``stage_bias[k]`` = the constant's weight, ``stage_thresholds[k] = theta^k`` and the last
stage's threshold 0 (targets are -1/+1). Evaluate it with ``thrifty.evaluate`` to get exact costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.optimize import minimize

from thrifty._param_validation import Interval, validate_params
from thrifty._validation import as_forest
from thrifty.cascade._cronus_init import default_lam, initialize
from thrifty.cascade._cronus_init import lambda_max as _lambda_max
from thrifty.cascade._problem import Problem, build_problem, cost_norms, objective, prune, sigmoid, soft_flow
from thrifty.costs import CostModel
from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.plans import Cascade

__all__ = ["CronusResult", "cascade_scores", "cronus", "lambda_max"]

_REACH_TOL = 1e-12


@dataclass
class CronusResult:
    """What :func:`cronus` found on its training data.

    Attributes
    ----------
    plan : Cascade
    weights : ndarray of shape (K, n_trees + 1)
        ``beta^k``; the last column is the constant's weight (the stage bias).
    thresholds : ndarray of shape (K,)
        ``theta^k`` (the last is the decision threshold 0).
    init_weights, init_thresholds : ndarray
        The same after Algorithm 2 (before the cyclic optimization).
    init_objective, objective : float
        Eq. (8) after initialization and at the end.
    history : list of float
        Eq. (8) after every stage update of Algorithm 1.
    reach : ndarray of shape (K,)
        ``d_k``, the soft fraction of training inputs reaching each stage.
    cycles : int
        Cycles of Algorithm 1 run.
    lam : float
        The trade-off used.
    """

    plan: Cascade
    weights: np.ndarray
    thresholds: np.ndarray
    init_weights: np.ndarray
    init_thresholds: np.ndarray
    init_objective: float
    objective: float
    reach: np.ndarray
    cycles: int
    lam: float = 0.0
    history: list[float] = field(default_factory=list)

    @property
    def init_plan(self) -> Cascade:
        """The cascade after Algorithm 2 alone (as ``cronus(..., init_only=True)`` returns it)."""
        theta = self.init_thresholds.copy()
        theta[-1] = 0.0
        return Cascade(self.plan.forest, self.init_weights[:, :-1], theta, self.init_weights[:, -1])


# The options of eq. (8) and of the optimisation, as the estimator declares them too.
OPTIONS: dict[str, list[Any]] = {
    "n_stages": [Interval(Integral, 1, None, closed="left")],
    "lam": [None, Interval(Real, 0, math.inf, closed="left")],
    "rho": [Interval(Real, 0, math.inf, closed="left"), "array-like"],
    "delta": [Interval(Real, 1, math.inf, closed="left")],
    "eps": [Interval(Real, 0, 1, closed="neither")],
    "gamma": [Interval(Real, 0, math.inf, closed="neither")],
    "init_only": ["boolean"],
    "max_cycles": [Interval(Integral, 0, None, closed="left")],
    "n_threads": [None, Interval(Integral, 1, None, closed="left")],
}


def stage_rho(rho: Any, n_stages: int) -> np.ndarray:
    """``rho^k`` per stage from one value, a pair ``(rho_first, rho_last)`` or one per stage."""
    r = np.asarray(rho, dtype=np.float64).reshape(-1)
    if len(r) == 2 and n_stages != 2:
        # (rho_first, rho_last): Section 3.4 sets every stage but the last to rho_1.
        r = np.r_[np.full(n_stages - 1, r[0]), r[1]]
    r = np.broadcast_to(r, (int(n_stages),)) if len(r) == 1 else r
    if len(r) != n_stages or not np.all(np.isfinite(r)) or np.any(r < 0):
        raise InvalidParameterError(
            f"rho must be a number >= 0, a pair (rho_first, rho_last) or one value per "
            f"stage ({n_stages}), got {rho!r}"
        )
    return np.array(r, dtype=np.float64)


def cronus(
    forest: Any,
    X: Any,
    y: Any,
    costs: CostModel | None = None,
    *,
    n_stages: int = 10,
    lam: float | None = None,
    rho: Any = 1e-3,
    delta: float = 1.3,
    eps: float = 0.15,
    gamma: float = 50.0,
    class_weight: Any = 3.5,
    init_only: bool = False,
    max_cycles: int = 5,
    tol: float = 1e-4,
    max_iter: int = 50,
    progress: bool = False,
    n_threads: int | None = 1,
    return_result: bool = False,
    sample_weight: Any = None,
) -> Cascade | CronusResult:
    """Build a Cronus cascade over the trees of ``forest`` (eq. 8, Algorithms 1 and 2).

    Parameters
    ----------
    forest : Forest or fitted single-output tree ensemble
        The base hypotheses ``h_t`` (its trees) of any additive ensemble: LightGBM, XGBoost,
        scikit-learn gradient boosting, a CEGB model.
    X : array-like of shape (n, n_features)
    y : array-like of shape (n,)
        Binary targets (the forest's classes, 0/1 or -1/+1; for ranking binarize relevance).
    costs : CostModel, optional
        Per-feature acquisition costs ``c`` (paid once per input), per-tree cost ``e_t =
        tree_cost + split_cost * mean splits visited``. Default: 1 per feature, trees free.
    n_stages : int, default=10
        ``K``. Stages the optimization empties cost nothing and pass every input.
    lam : float, optional
        ``lambda``, the cost / loss trade-off (the loss is a class-weighted mean over inputs).
        Its scale depends on the costs and the data: see :func:`lambda_max`. Default:
        ``lambda_max(..., exact=False) / 16``.
    rho : float, pair or sequence, default=1e-3
        l1 penalty ``rho^k``: one value, ``(rho_1, rho_K)`` (stages before the last use
        ``rho_1``, Section 3.4), or one per stage.
    delta : float, default=1.3
        Initialization inflates ``lambda`` to ``lambda delta^(K-k)`` at stage ``k``.
    eps : float, default=0.15
        At initialization each stage rejects this fraction of the inputs it receives.
    gamma : float, default=50
        Steepness of the soft exits ``sigma_gamma(h^T beta - theta)`` used in training.
    class_weight : float, dict or None, default=3.5
        Loss weight of positives (the paper's ``omega^+ = 3.5``), or ``{-1: w, 1: w}``.
    init_only : bool, default=False
        Stop after Algorithm 2 (the closed-form initialization).
    max_cycles : int, default=5
        Cycles of Algorithm 1 at most (it stops earlier when eq. (8) improves by less than
        ``tol`` relative).
    tol : float, default=1e-4
    max_iter : int, default=50
        L-BFGS iterations per stage update.
    progress : bool, default=False
        tqdm progress bar over stage updates (shown only when stderr is a TTY).
    n_threads : int or None, default=1
        BLAS threads during the fit (None: the library's own setting). The solves are small
        (one Cholesky per step over the stage's trees, L-BFGS over them), so threads mostly
        contend; more only pay off for the ``H^T Omega H`` products on very large ``n``.
    return_result : bool, default=False
        Return a :class:`CronusResult` instead of the plan alone.
    sample_weight : array-like of shape (n,), optional
        Weights of the inputs: eq. (8)'s loss sums ``omega_i`` times the input's share of the
        total weight (instead of ``1 / n``) and each stage's reach ``d_k`` is the weighted mean
        of ``p_i^k``, so integer weights act as repeated rows and zero weights as dropped rows.

    Returns
    -------
    Cascade or CronusResult
    """
    from threadpoolctl import threadpool_limits
    from tqdm.auto import tqdm

    options = dict(
        n_stages=n_stages,
        lam=lam,
        rho=rho,
        delta=delta,
        eps=eps,
        gamma=gamma,
        init_only=init_only,
        max_cycles=max_cycles,
        n_threads=n_threads,
        max_iter=max_iter,
    )
    validate_params({**OPTIONS, "max_iter": OPTIONS["max_cycles"]}, options, "cronus")
    rho_k = stage_rho(rho, n_stages)
    forest = as_forest(forest, who="cronus")
    prob, _ = build_problem(forest, X, y, costs, class_weight, sample_weight)
    if lam is None:
        lam = default_lam(prob)
    K = int(n_stages)
    total = K * (1 if init_only else 1 + max_cycles)
    bar = tqdm(total=total, desc="Cronus stages", unit="stage", disable=None if progress else True)
    with threadpool_limits(n_threads), bar:
        B, theta = initialize(
            prob,
            K,
            lam=float(lam),
            rho=rho_k,
            delta=float(delta),
            eps=float(eps),
            gamma=float(gamma),
            bar=bar,
        )
        init_B, init_theta = B.copy(), theta.copy()
        J0 = objective(prob, B, theta, lam=float(lam), rho=rho_k, gamma=float(gamma))
        history = [J0]
        cycles = 0
        if not init_only:
            for _ in range(max_cycles):
                start = history[-1]
                for k in range(K):
                    B, theta, J = _optimize_stage(
                        prob,
                        B,
                        theta,
                        k,
                        lam=float(lam),
                        rho=rho_k,
                        gamma=float(gamma),
                        max_iter=max_iter,
                        tol=tol,
                        current=history[-1],
                    )
                    history.append(J)
                    bar.update(1)
                cycles += 1
                if start - history[-1] <= tol * max(abs(history[-1]), 1e-12):
                    break
    theta[-1] = 0.0
    plan = Cascade(forest, B[:, :-1], theta, B[:, -1])
    if not return_result:
        return plan
    _, p, _ = soft_flow(prob.H @ B.T, theta, float(gamma))
    return CronusResult(
        plan=plan,
        weights=B,
        thresholds=theta,
        init_weights=init_B,
        init_thresholds=init_theta,
        init_objective=J0,
        objective=history[-1],
        reach=prob.pi @ p,
        cycles=cycles,
        lam=float(lam),
        history=history,
    )


def _optimize_stage(
    prob: Problem,
    B: np.ndarray,
    theta: np.ndarray,
    k: int,
    *,
    lam: float,
    rho: np.ndarray,
    gamma: float,
    max_iter: int,
    tol: float,
    current: float,
    max_rounds: int = 5,
) -> tuple[np.ndarray, np.ndarray, float]:
    """Algorithm 1, lines 4-8: stage ``k``'s weights and threshold, the others fixed.

    Alternates the auxiliary variables of eq. (11) in closed form and an L-BFGS minimisation
    of the substituted eq. (8) over ``(beta^k, theta^k)``. The substituted objective bounds
    eq. (8) from above and touches it at the current point (Lemma 1), so each round decreases
    eq. (8); a round that does not (after pruning negligible weights) is discarded.
    """
    K = B.shape[0]
    J = current
    for _ in range(max_rounds):
        active = np.flatnonzero(np.r_[B[k, :-1] != 0, True])
        fun, x0 = _stage_function(prob, B, theta, k, active, lam=lam, rho=float(rho[k]), gamma=gamma)
        # theta^k <= 0: a stage rejects only inputs it scores negative, as the test-time
        # prediction of a rejected input (-1) says; eq. (8) scores a rejected input by its
        # stage's score and would otherwise let a stage reject inputs it scores positive.
        bounds = [(None, None)] * len(active) + ([(None, 0.0)] if k < K - 1 else [])
        res = minimize(fun, x0, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": max_iter})
        B_new, theta_new = B.copy(), theta.copy()
        B_new[k] = 0.0
        B_new[k, active] = res.x[: len(active)]
        B_new[k] = prune(B_new[k], prob.scale)
        if k < K - 1:
            theta_new[k] = res.x[-1]
        J_new = objective(prob, B_new, theta_new, lam=lam, rho=rho, gamma=gamma)
        if not J_new < J:
            break
        improved = J - J_new
        B, theta, J = B_new, theta_new, J_new
        if improved <= tol * max(abs(J), 1e-12):
            break
    return B, theta, J


def _stage_function(
    prob: Problem,
    B: np.ndarray,
    theta: np.ndarray,
    k: int,
    active: np.ndarray,
    *,
    lam: float,
    rho: float,
    gamma: float,
):
    """The substituted eq. (8) as a function of ``x = (beta^k[active], theta^k)`` with its
    gradient; everything that does not depend on stage ``k`` is precomputed.

    With ``I_i = sigma_gamma(z_i - theta)`` the pass probability at stage ``k``, inputs reach
    later stages ``j`` with ``p_i^j = I_i r_i^j`` (``r^j = p^k prod_{k<l<j} I^l``) and exit there
    with ``q_i^j = I_i qt_i^j``
    (eq. 9); ``d_j = mean_i I_i r_i^j`` enters the cost terms, which after eq. (11) read
    ``lam / 2 sum_j d_j^2 sum_t w_t (beta_t^j)^2`` with ``w_t = e_t / kappa_t + sum_u c_u F_ut /
    eta_u`` (constants dropped).
    """
    K = B.shape[0]
    last = k == K - 1
    Z = prob.H @ B.T
    I_all, p_all, _ = soft_flow(Z, theta, gamma)
    d = prob.pi @ p_all
    rows = np.flatnonzero(p_all[:, k] > _REACH_TOL)
    H = prob.H[np.ix_(rows, active)]
    y, om, pk, pi = prob.y[rows], prob.omega[rows], p_all[rows, k], prob.pi[rows]
    kappa, eta = cost_norms(B, d, prob.F)
    w_tree = np.zeros(prob.n_trees + 1)
    w_tree[:-1] = np.where(B[k, :-1] != 0, prob.tree_price(eta, kappa), 0.0)
    wa = w_tree[active]
    with np.errstate(divide="ignore", invalid="ignore"):
        inv_sigma = np.where(B[k, active] != 0, 1.0 / np.abs(B[k, active]), 0.0)
    inv_sigma[-1] = 0.0  # the constant is not penalised
    quad = rho * inv_sigma + lam * d[k] ** 2 * wa
    if not last:
        # Later stages j > k: r^j = p^k prod_{k<l<j} I^l, qt^j = r^j (1 - I^j) (qt^K = r^K).
        later = np.arange(k + 1, K)
        R = np.repeat(pk[:, None], len(later), axis=1)
        if len(later) > 1:
            R[:, 1:] *= np.cumprod(I_all[np.ix_(rows, later[:-1])], axis=1)
        Qt = R * (1.0 - I_all[np.ix_(rows, later)])
        Qt[:, -1] = R[:, -1]
        L_after = np.sum(Qt * (y[:, None] - Z[np.ix_(rows, later)]) ** 2, axis=1)
        S = np.array([np.sum(w_tree[:-1] * B[j, :-1] ** 2) for j in later])

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        beta = x[: len(active)]
        z = H @ beta
        res = y - z
        penalty = 0.5 * np.sum(quad * beta**2)
        g_beta = quad * beta
        if last:
            value = 0.5 * np.sum(om * pk * res**2) + penalty
            dz = -om * pk * res
            return value, np.r_[H.T @ dz + g_beta]
        th = x[-1]
        gate = sigmoid(gamma * (z - th))
        dgate = gamma * gate * (1.0 - gate)
        res2 = res**2
        d_after = (pi * gate) @ R
        value = (
            0.5 * np.sum(om * (pk * (1.0 - gate) * res2 + gate * L_after))
            + penalty
            + 0.5 * lam * float(np.sum(d_after**2 * S))
        )
        a = 0.5 * om * (L_after - pk * res2) + lam * pi * (R @ (d_after * S))
        dz = -om * pk * (1.0 - gate) * res + a * dgate
        return value, np.r_[H.T @ dz + g_beta, -np.sum(a * dgate)]

    x0 = B[k, active].copy()
    if not last:
        x0 = np.r_[x0, theta[k]]
    return fun, x0


def cascade_scores(evaluation: Any) -> np.ndarray:
    """Ranking scores of a cascade's ``thrifty.evaluate`` result: an input rejected at a later
    stage ranks above one rejected earlier, inputs passing every stage rank above all rejected
    ones, and ties within a stage are broken by the stage score (a monotone map of it)."""
    raw = np.asarray(evaluation.raw, dtype=np.float64).reshape(-1)
    return np.asarray(evaluation.exit, dtype=np.float64) + 0.5 + np.arctan(raw) / np.pi


def lambda_max(
    forest: Any,
    X: Any,
    y: Any,
    costs: CostModel | None = None,
    *,
    rho: float = 0.0,
    class_weight: Any = 3.5,
    exact: bool = True,
    sample_weight: Any = None,
) -> float:
    """The smallest ``lam`` (within 5%) at which single-stage re-weighting (eq. 7) keeps no tree.

    Useful to scale a sweep: interesting trade-offs lie between about ``lambda_max / 1000``
    and ``lambda_max / 2`` (a cascade's first stage sees ``lam delta^(K-1)`` at initialization).
    It is found by bisection on the closed-form solution; ``exact=False`` returns instead, in
    closed form, the ``lam`` above which no tree would pay for itself alone (a lower bound:
    trees sharing features share their cost and can enter together at a larger ``lam``).
    Infinite when a tree that helps costs nothing (no priced feature and no tree cost).
    ``sample_weight`` weights the loss as in :func:`cronus`.
    """
    prob, _ = build_problem(as_forest(forest, who="lambda_max"), X, y, costs, class_weight, sample_weight)
    return _lambda_max(prob, float(rho), exact=bool(exact))
