"""ADAPT: a cheap gate and a cheap model that take over from an expensive model where they do as well.

Nan & Saligrama, "Adaptive Classification for Prediction Under a Budget" (NIPS 2017). A gate
``g`` sends each example either to a low-prediction-cost model ``f1`` or to the given
high-prediction-cost model ``f0`` (the "hpc"); ``g`` and ``f1`` are learned jointly by
alternating minimisation of (OPT):

* the q-step (OPT1) solves for the oracle routing ``q_i`` (probability that example ``i`` goes to
  ``f0``) in closed form, ``q_i = 1 / (1 + exp(B_i - A_i + beta))``, with ``beta >= 0`` such that
  ``mean(q) <= p_full`` (:func:`q_step`);
* the (g, f1)-step fits the gate to ``q`` (a KL projection: logistic loss with soft targets ``q``)
  and ``f1`` to the labels weighted by ``1 - q``, under a feature-cost penalty shared by both:
  boosted cost-aware trees (ADAPT-GBRT, Algorithm 2, :func:`adapt_gbrt`) or linear models with
  a group-sparse penalty (ADAPT-LIN, Algorithm 1, :func:`adapt_lin`).

The L1 baseline of the paper's section 5 is :func:`l1_baseline`. :class:`ADAPTClassifier` wraps
them as a scikit-learn estimator whose fitted ``plan_`` is a thrifty ``Gated(gate, low, high)``
plan: ``thrifty.evaluate`` runs it and reports exact per-example costs (features acquired by the
gate are free for the model it picks).

Conventions: the gate's raw score ``g(x) > 0`` routes to ``f0`` (``sigma(g)`` is the paper's
``q(z=0|x)``), which is the runtime's ``Gated`` rule "gate raw score > 0 -> high".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

from thrifty._validation import class_labels, costs_for_X
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.runtime.plans import Gated, Linear, Plan, as_plan
from thrifty.train._adapt_linear import Standardizer, fit_group_sparse
from thrifty.train._adapt_trees import Binner, TreeList, grow_tree

__all__ = [
    "ADAPTClassifier",
    "ADAPTFit",
    "ADAPTProblem",
    "adapt_gbrt",
    "adapt_lin",
    "hpc_plan",
    "l1_baseline",
    "lin_objective",
    "q_step",
    "truncate_lin",
]

METHODS = ("gbrt", "lin", "l1")
# Default gamma per method when gamma=None, in units of the mean positive feature price: the
# GBRT penalty is compared with a split's reduction of the mean squared gradient (around
# 1e-3..1e-2 for a useful split), the linear ones with the mean logistic loss.
DEFAULT_GAMMA = {"gbrt": 1e-3, "lin": 1e-2, "l1": 1e-2}
# Sweep grids of budget= (gamma again in units of the mean positive feature price).
# (the benchmark's letter systems within 1 point of f0 need p_full around 0.5-0.65)
P_FULL_GRID = (0.1, 0.2, 0.35, 0.5, 0.65, 0.8)
GAMMA_GRID = {"gbrt": (1e-2, 1e-3, 3e-4, 1e-4), "lin": (0.1, 0.03, 0.01, 3e-3), "l1": (0.1, 0.03, 0.01, 3e-3)}


# ----------------------------------------------------------------------------------- q-step
def q_step(A: np.ndarray, B: np.ndarray, p_full: float) -> tuple[np.ndarray, float]:
    """Solve (OPT1) in closed form: the oracle probability of sending each example to ``f0``.

    Minimises ``(1/N) sum_i [(1 - q_i) A_i + q_i B_i - H(q_i)]`` subject to
    ``(1/N) sum_i q_i <= p_full``, where ``A_i`` is the loss of sending example ``i`` to the
    low-cost model (``l(f1(x_i), y_i) + log(1 + e^{g(x_i)})``) and ``B_i`` that of sending it to
    ``f0`` (``-log p(y_i | x_i; f0) + log(1 + e^{-g(x_i)})``). Stationarity gives
    ``q_i = 1 / (1 + exp(B_i - A_i + beta))`` (section 4, ADAPT-LIN); ``beta >= 0`` is the
    constraint's multiplier: 0 when ``mean(q) <= p_full`` already, else found by root finding.

    Parameters
    ----------
    A, B : ndarray of shape (n,)
    p_full : float in [0, 1]

    Returns
    -------
    q : ndarray of shape (n,)
    beta : float
        ``inf`` when ``p_full == 0`` (then ``q == 0``).
    """
    A = np.asarray(A, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
    d = A - B
    q = expit(d)
    if q.size == 0 or q.mean() <= p_full:
        return q, 0.0
    if p_full <= 0.0:
        return np.zeros_like(q), math.inf

    def excess(beta: float) -> float:
        return float(expit(d - beta).mean()) - p_full

    hi = 1.0
    while excess(hi) > 0.0:
        hi *= 2.0
    beta = brentq(excess, 0.0, hi, xtol=1e-12, rtol=1e-12, maxiter=500)
    q = expit(d - beta)
    # brentq stops within xtol of the root, possibly on its infeasible side
    while q.mean() > p_full:  # a step of brentq's tolerance crosses it in one or two tries
        beta += max(1e-12, abs(beta) * 1e-12)
        q = expit(d - beta)
    return q, float(beta)


def _low_loss(F: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``-log p(y | x; f1)`` per example: sigmoid of one raw column, or softmax of several."""
    if F.shape[1] == 1:
        f = F[:, 0]
        return np.logaddexp(0.0, f) - (y == 1) * f
    return -log_softmax(F, axis=1)[np.arange(len(y)), y]


def _losses(g: np.ndarray, F: np.ndarray, y: np.ndarray, nll0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A_i`` (route to f1) and ``B_i`` (route to f0) of (OPT1)."""
    A = _low_loss(F, y) + np.logaddexp(0.0, g)
    B = nll0 + np.logaddexp(0.0, -g)
    return A, B


def _onehot(y: np.ndarray, n_classes: int) -> np.ndarray:
    if n_classes == 2:
        return (y == 1).astype(np.float64)[:, None]
    Y = np.zeros((len(y), n_classes))
    Y[np.arange(len(y)), y] = 1.0
    return Y


# ---------------------------------------------------------------------------- the results
@dataclass
class ADAPTFit:
    """What one ADAPT training produced.

    Attributes
    ----------
    gate : Forest or Linear
        ``g``: raw score > 0 sends an example to the expensive model.
    low : Forest or Linear
        ``f1``, the low-cost model.
    q : ndarray of shape (n,)
        The last oracle routing of the training examples (probability of ``f0``).
    beta : float
        Its multiplier.
    history : list of dict
        Per outer iteration: ``mean_q``, ``beta``, ``loss`` (the q-weighted losses
        ``mean((1 - q) A + q B)`` of (OPT1) after the model step; entropy and feature penalty
        excluded), ``q_change`` (mean absolute change of ``q``).
    """

    gate: Forest | Linear
    low: Forest | Linear
    q: np.ndarray
    beta: float
    history: list[dict[str, float]] = field(default_factory=list)


@dataclass
class ADAPTProblem:
    """The training data of :func:`adapt_gbrt`, :func:`adapt_lin` and :func:`l1_baseline`.

    Build it with :meth:`build` from the expensive model's class probabilities.

    Attributes
    ----------
    X : ndarray of shape (n, n_features)
    y : ndarray of int, shape (n,)
        Class codes ``0..K-1`` (positions in ``classes``).
    nll0 : ndarray of shape (n,)
        ``-log p(y_i | x_i; f0)``, the expensive model's loss on each example.
    costs : CostModel
    classes : ndarray of shape (K,)
    feature_names : list of str or None
    """

    X: np.ndarray
    y: np.ndarray
    nll0: np.ndarray
    costs: CostModel
    classes: np.ndarray
    feature_names: list[str] | None = None

    @classmethod
    def build(
        cls,
        X: Any,
        y: Any,
        proba0: Any,
        costs: CostModel | None = None,
        feature_names: list[str] | None = None,
    ) -> ADAPTProblem:
        """From labels and the expensive model's ``predict_proba`` on the same rows.

        ``proba0`` has one column per class of ``np.unique(y)``, in that order; probabilities
        are clipped at 1e-6 so that a confidently wrong ``f0`` has a finite loss.
        """
        X = np.asarray(X, dtype=np.float64)
        classes, codes = np.unique(np.asarray(y), return_inverse=True)
        P = np.asarray(proba0, dtype=np.float64)
        if P.shape != (X.shape[0], len(classes)):
            raise InputError(
                f"proba0 has shape {P.shape}; it needs ({X.shape[0]}, {len(classes)}): one "
                "column per class of y, in sorted order"
            )
        costs = CostModel.uniform(X.shape[1]) if costs is None else costs
        if costs.n_features != X.shape[1]:
            raise InputError(f"the cost model prices {costs.n_features} features but X has {X.shape[1]}")
        p_true = np.clip(P[np.arange(len(codes)), codes], 1e-6, 1.0)
        return cls(
            X=X, y=codes, nll0=-np.log(p_true), costs=costs, classes=classes, feature_names=feature_names
        )

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def width(self) -> int:
        return 1 if self.n_classes == 2 else self.n_classes

    @property
    def link(self) -> str:
        return "sigmoid" if self.n_classes == 2 else "softmax"

    @property
    def task(self) -> str:
        return "binary" if self.n_classes == 2 else "multiclass"

    def unit_prices(self) -> np.ndarray:
        """Unit (group) costs divided by the mean positive feature price (gamma is unit-free)."""
        return self.costs.unit_cost / _price_scale(self.costs)

    def feature_prices(self) -> np.ndarray:
        """Each feature's own acquisition cost (with what it requires), same scale."""
        c = np.array([self.costs.acquisition_cost([a]) for a in range(self.costs.n_features)])
        return c / _price_scale(self.costs)

    def log_prior(self, w: np.ndarray | None = None) -> np.ndarray:
        counts = np.bincount(self.y, weights=w, minlength=self.n_classes) + 1e-3
        p = counts / counts.sum()
        if self.n_classes == 2:
            return np.array([math.log(p[1] / p[0])])
        return np.log(p)


def _price_scale(costs: CostModel) -> float:
    pos = costs.feature_costs[costs.feature_costs > 0]
    if pos.size:
        return float(pos.mean())
    pos = costs.unit_cost[costs.unit_cost > 0]
    return float(pos.mean()) if pos.size else 1.0


def _progress(total: int, desc: str, progress: bool) -> Any:
    from tqdm.auto import tqdm

    # disable=None: tqdm shows the bar only when stderr is a TTY
    return tqdm(total=total, desc=desc, unit="it", leave=False, disable=None if progress else True)


# ------------------------------------------------------------------------------ ADAPT-GBRT
def adapt_gbrt(
    prob: ADAPTProblem,
    *,
    p_full: float,
    gamma: float,
    n_estimators: int = 100,
    max_depth: int = 3,
    learning_rate: float = 0.1,
    n_iter: int = 10,
    min_samples_leaf: int = 5,
    reg_lambda: float = 1.0,
    tol: float = 1e-3,
    init: tuple[np.ndarray, np.ndarray] | None = None,
    progress: bool = False,
) -> ADAPTFit:
    """ADAPT-GBRT (Algorithm 2): boosted cost-aware trees for the gate and the low-cost model.

    Each outer iteration solves (OPT1) for ``q`` and then grows ``n_estimators`` rounds from
    the constant models, one gate tree then one tree per output of ``f1`` per round, each
    minimising impurity (2) resp. (1): the squared fit of the negative gradient of
    ``l(f1, g) = (1/N) sum_i (1 - q_i)[l(f1(x_i), y_i) + log(1 + e^g)] + q_i log(1 + e^-g)``
    plus ``gamma * sum_a u_a c_a V_a``; ``u_a`` is shared by both models (a feature either
    used becomes free for the other). As in the authors' code, the models restart from the
    constants at every outer iteration and feature costs with them, so the final pair is
    consistent with the final ``q``.

    Initialisation: ``g = 0`` and ``f1`` a cost-aware boosted model of the labels (GreedyMiser,
    the case ``p_full = 0``), or ``init = (g, F)`` raw scores on the training rows (warm start).

    Parameters
    ----------
    prob : ADAPTProblem
    p_full : float in [0, 1]
        Bound on the mean of ``q`` (OPT's constraint).
    gamma : float
        Price of a new feature, per unit of the mean positive feature price.
    n_estimators, max_depth, learning_rate, min_samples_leaf, reg_lambda
        Rounds per outer iteration and the trees' shape; leaves are
        ``-sum(grad) / (sum(hess) + reg_lambda)``.
    n_iter : int
        Outer iterations; stops early when ``mean |q - q_previous| < tol``.
    progress : bool
        tqdm bar over the rounds (only when stderr is a TTY).

    Returns
    -------
    ADAPTFit
        ``gate`` and ``low`` as Forests.
    """
    X, y, n = prob.X, prob.y, prob.X.shape[0]
    K = prob.width
    binner = Binner(X)
    binned = binner.transform(X)
    c = prob.costs
    unit_prices = prob.unit_prices()
    Y = _onehot(y, prob.n_classes)
    history: list[dict[str, float]] = []
    total = (n_iter + (init is None)) * n_estimators
    bar = _progress(total, "ADAPT-GBRT", progress)

    def boost(
        q: np.ndarray | None,
    ) -> tuple[TreeList, TreeList, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One (g, f1)-step from constant models; ``q=None`` fits f1 alone (all weights 1)."""
        w = np.ones(n) if q is None else 1.0 - q
        f_base = prob.log_prior(w)
        g_base = 0.0 if q is None else float(np.log((q.mean() + 1e-6) / (1.0 - q.mean() + 1e-6)))
        F = np.tile(f_base, (n, 1))
        g = np.full(n, g_base)
        acquired = np.zeros(len(c.unit_cost), dtype=np.bool_)
        gate_trees, low_trees = TreeList(), TreeList()
        for _ in range(n_estimators):
            if q is not None:
                s = expit(g)
                grad = s - q
                tree = grow_tree(
                    binned,
                    binner.n_bins,
                    -grad,
                    grad,
                    s * (1.0 - s),
                    acquired,
                    c.closure_ptr,
                    c.closure_units,
                    unit_prices,
                    gamma,
                    max_depth,
                    min_samples_leaf,
                    reg_lambda,
                    n,
                )
                gate_trees.add(tree, 0)
                g += learning_rate * tree[4][tree[5]]
            if K == 1:
                p = expit(F)
            else:
                p = softmax(F, axis=1)
            for k in range(K):
                grad = w * (p[:, k] - Y[:, k])
                hess = w * p[:, k] * (1.0 - p[:, k])
                tree = grow_tree(
                    binned,
                    binner.n_bins,
                    -grad,
                    grad,
                    hess,
                    acquired,
                    c.closure_ptr,
                    c.closure_units,
                    unit_prices,
                    gamma,
                    max_depth,
                    min_samples_leaf,
                    reg_lambda,
                    n,
                )
                low_trees.add(tree, k)
                F[:, k] += learning_rate * tree[4][tree[5]]
            bar.update(1)
        return gate_trees, low_trees, g, F, np.array([g_base]), f_base

    try:
        if init is None:
            _, low_trees, _, F, _, f_base = boost(None)
            g = np.zeros(n)
        else:
            g, F = init
            low_trees, f_base = TreeList(), prob.log_prior()
        q_old = None
        q, beta = np.zeros(n), 0.0
        gate_trees = TreeList()
        g_base = np.zeros(1)
        for _ in range(n_iter):
            A, B = _losses(g, F, y, prob.nll0)
            q, beta = q_step(A, B, p_full)
            gate_trees, low_trees, g, F, g_base, f_base = boost(q)
            A, B = _losses(g, F, y, prob.nll0)
            change = math.inf if q_old is None else float(np.mean(np.abs(q - q_old)))
            history.append(
                {
                    "mean_q": float(q.mean()),
                    "beta": beta,
                    "loss": float(np.mean((1 - q) * A + q * B)),
                    "q_change": change,
                }
            )
            if change < tol:
                break
            q_old = q
    finally:
        bar.close()
    if not gate_trees.trees:  # n_iter == 0: a constant gate that never routes to f0
        g_base = np.array([-1.0])
    common = {"n_features": X.shape[1], "feature_names": prob.feature_names}
    gate = gate_trees.to_forest(
        binner,
        base_score=g_base,
        learning_rate=learning_rate,
        width=1,
        link="identity",
        task="regression",
        classes=None,
        **common,
    )
    low = low_trees.to_forest(
        binner,
        base_score=f_base,
        learning_rate=learning_rate,
        width=K,
        link=prob.link,
        task=prob.task,
        classes=prob.classes,
        **common,
    )
    return ADAPTFit(gate=gate, low=low, q=q, beta=beta, history=history)


# ------------------------------------------------------------------------------- ADAPT-LIN
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
    features are exactly zero in both. Features are standardized for the fit and the
    coefficients mapped back to raw features. Initialisation: ``g = 0`` and ``f1`` the
    group-sparse logistic model of the labels (``q = 0``), or ``init`` (a previous ``P``).

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
    X, y = prob.X, prob.y
    if np.isnan(X).any():
        raise InputError(
            "ADAPT-LIN and the L1 baseline need complete data: X has NaN values; "
            "impute them first or use method='gbrt'"
        )
    std = Standardizer(X)
    Z = std.transform(X)
    if support is not None:
        # an excluded feature's column is zero: its gradient is zero and its coefficients,
        # started at zero, stay exactly zero through every proximal step
        Z = Z * support
        if init is not None:
            init = init.copy()
            init[:-1][~support] = 0.0
    Y = _onehot(y, prob.n_classes)
    prices = prob.feature_prices()
    history: list[dict[str, float]] = []
    bar = _progress(n_iter, "ADAPT-LIN", progress)
    try:
        if init is None:
            P_f = fit_group_sparse(Z, Y, weights=prices, gamma=gamma, l2=l2, max_iter=max_iter)
            P = np.column_stack([np.zeros(Z.shape[1] + 1), P_f])
        else:
            P = init.copy()
        q, beta, q_old = np.zeros(len(y)), 0.0, None
        for _ in range(n_iter):
            S = Z @ P[:-1] + P[-1]
            A, B = _losses(S[:, 0], S[:, 1:], y, prob.nll0)
            q, beta = q_step(A, B, p_full)
            P = fit_group_sparse(Z, Y, q=q, weights=prices, gamma=gamma, l2=l2, init=P, max_iter=max_iter)
            S = Z @ P[:-1] + P[-1]
            A, B = _losses(S[:, 0], S[:, 1:], y, prob.nll0)
            change = math.inf if q_old is None else float(np.mean(np.abs(q - q_old)))
            history.append(
                {
                    "mean_q": float(q.mean()),
                    "beta": beta,
                    "loss": float(np.mean((1 - q) * A + q * B)),
                    "q_change": change,
                }
            )
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
        coef[:, 1:],
        intercept[1:],
        link=prob.link,
        task=prob.task,
        classes=prob.classes,
        feature_names=prob.feature_names,
    )
    fit = ADAPTFit(gate=gate, low=low, q=q, beta=beta, history=history)
    fit.state = P  # type: ignore[attr-defined]  # standardized parameters, for warm starts
    return fit


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
    P = fit.state  # type: ignore[attr-defined]
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
    return min(fits, key=lambda f: lin_objective(prob, f.state, p_full, gamma))  # type: ignore[attr-defined]


def lin_objective(prob: ADAPTProblem, P: np.ndarray, p_full: float, gamma: float) -> float:
    """Value of (OPT) for ADAPT-LIN's standardized parameters ``P``, with ``q`` at its optimum.

    ``(1/N) sum_i [(1 - q_i) A_i + q_i B_i - H(q_i)] + gamma sum_a c_a ||P_a||`` (the paper's
    (OPT) with the linear models' group penalty), ``q`` from the closed-form q-step.
    """
    Z = Standardizer(prob.X).transform(prob.X)
    S = Z @ P[:-1] + P[-1]
    A, B = _losses(S[:, 0], S[:, 1:], prob.y, prob.nll0)
    q, _ = q_step(A, B, p_full)
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -(np.where(q > 0, q * np.log(q), 0.0) + np.where(q < 1, (1 - q) * np.log1p(-q), 0.0))
    penalty = gamma * float(np.sum(prob.feature_prices() * np.sqrt(np.sum(P[:-1] ** 2, axis=1))))
    return float(np.mean((1 - q) * A + q * B - H)) + penalty


# ----------------------------------------------------------------------------- L1 baseline
def l1_baseline(
    prob: ADAPTProblem,
    *,
    p_full: float,
    gamma: float,
    l2: float | None = None,
    max_iter: int = 500,
    memo: dict | None = None,
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

    Steps 1-3 do not depend on ``p_full``: ``memo`` (a dict, for one training set) keeps them
    per ``gamma`` so a sweep over ``p_full`` only shifts the gate.

    Returns
    -------
    ADAPTFit
        ``gate`` and ``low`` as ``Linear`` plans; ``q`` is the training routing (0/1).
    """
    X, y = prob.X, prob.y
    if np.isnan(X).any():
        raise InputError(
            "ADAPT-LIN and the L1 baseline need complete data: X has NaN values; "
            "impute them first or use method='gbrt'"
        )
    n, n_feat = X.shape
    l2 = 1.0 / n if l2 is None else l2
    pieces = None if memo is None else memo.get(float(gamma))
    if pieces is None:
        std = Standardizer(X)
        Z = std.transform(X)
        Y = _onehot(y, prob.n_classes)
        P_sel = fit_group_sparse(Z, Y, weights=prob.feature_prices(), gamma=gamma, l2=0.0, max_iter=max_iter)
        support = np.flatnonzero(np.any(P_sel[:-1] != 0, axis=1))
        Zs = Z[:, support]
        P_f = fit_group_sparse(Zs, Y, l2=l2, max_iter=max_iter)
        F = Zs @ P_f[:-1] + P_f[-1]
        pred = (F[:, 0] > 0).astype(np.int64) if prob.n_classes == 2 else np.argmax(F, axis=1)
        wrong = (pred != y).astype(np.float64)[:, None]
        P_g = fit_group_sparse(Zs, wrong, l2=l2, max_iter=max_iter)
        score = Zs @ P_g[:-1, 0] + P_g[-1, 0]
        pieces = (std, support, P_f, P_g, score)
        if memo is not None:
            memo[float(gamma)] = pieces
    std, support, P_f, P_g, score = pieces
    P_g = P_g.copy()
    P_g[-1, 0] -= _route_shift(score, p_full)
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
    q = (score - _route_shift(score, p_full) > 0).astype(np.float64)
    return ADAPTFit(
        gate=gate,
        low=low,
        q=q,
        beta=0.0,
        history=[{"mean_q": float(q.mean()), "n_selected": float(len(support))}],
    )


def _route_shift(score: np.ndarray, p_full: float) -> float:
    """Shift making ``score - shift > 0`` for (at most) a fraction ``p_full`` of the scores."""
    if p_full <= 0.0 or len(score) == 0:
        return float(score.max(initial=0.0)) + 1.0
    if p_full >= 1.0:
        return float(score.min(initial=0.0)) - 1.0
    k = int(math.floor(p_full * len(score)))
    s = np.sort(score)[::-1]
    if k == 0:
        return float(s[0]) + 1.0
    # everything strictly above the (k+1)-th largest score goes to f0
    return float(s[k]) if k < len(s) else float(s[-1]) - 1.0


# ------------------------------------------------------------------------------ the hpc
def hpc_plan(hpc: Any, n_features: int, classes: np.ndarray, hpc_features: Any = None) -> tuple[Plan, bool]:
    """The plan that evaluates (or stands in for) the expensive model, and whether it is exact.

    A thrifty Forest or plan is used as is; tree models that ``Forest.from_model`` imports
    (LightGBM, XGBoost, scikit-learn trees and forests) become ``Full`` plans, so their
    per-example cost is what the runtime measures on each example's paths. Any other model
    with ``predict_proba`` (an SVM, a neural network, ...) is a black box: it is charged the
    features ``hpc_features`` (default: all), every one of them, on every example it
    predicts, through a stand-in ``Linear`` plan whose coefficients touch exactly those
    features; its predictions come from the model itself (``exact`` is False).
    """
    if isinstance(hpc, (Forest, Plan)):
        return as_plan(hpc), True
    try:
        return as_plan(Forest.from_model(hpc)), True
    except TypeError:
        pass
    if not hasattr(hpc, "predict_proba"):
        raise TypeError(
            f"the hpc {type(hpc).__name__} has no predict_proba; ADAPT needs the expensive "
            "model's class probabilities (pass a classifier, a thrifty Forest or a plan)"
        )
    used = np.ones(n_features, dtype=bool)
    if hpc_features is not None:
        hf = np.asarray(hpc_features)
        if hf.dtype == bool:
            if hf.shape != (n_features,):
                raise InputError(f"hpc_features as a mask needs {n_features} entries, got {hf.shape}")
            used = hf
        else:
            used = np.zeros(n_features, dtype=bool)
            used[hf.astype(np.int64)] = True
    classes = np.asarray(classes)
    width = 1 if len(classes) == 2 else len(classes)
    coef = np.zeros((n_features, width))
    # Any non-zero coefficient makes the runtime acquire (and charge) the feature.
    coef[used] = 1e-300
    return Linear(
        coef,
        0.0,
        link="sigmoid" if width == 1 else "softmax",
        task="binary" if width == 1 else "multiclass",
        classes=classes,
    ), False


def _is_fitted(model: Any) -> bool:
    if isinstance(model, (Forest, Plan)) or not hasattr(model, "fit"):
        return True
    try:
        check_is_fitted(model)
    except NotFittedError:
        return False
    except TypeError:
        return True
    return True


# ------------------------------------------------------------------------------ estimator
class ADAPTClassifier(ClassifierMixin, BaseEstimator):
    """A cheap gate and a cheap model that take over from an expensive classifier (ADAPT).

    At prediction time the gate ``g`` looks at a few cheap features and either answers with
    the low-cost model ``f1`` (which reuses the gate's features for free) or hands the example
    to the expensive model ``hpc`` (``f0``). ``fit`` learns ``g`` and ``f1`` by the alternating
    minimisation of Nan & Saligrama (2017): fewer examples reach ``f0`` when ``p_full`` is
    smaller, fewer features are used by ``g`` and ``f1`` when ``gamma`` is larger.

    Parameters
    ----------
    hpc : classifier, Forest or plan, optional
        The expensive model ``f0``. Fitted: used as is. Unfitted (a scikit-learn style
        estimator): a clone is fitted on the training data first. None: a 100-tree random
        forest is fitted. Tree models are evaluated by thrifty's runtime (exact per-example
        cost); other classifiers are charged ``hpc_features`` (see :func:`hpc_plan`).
    costs : CostModel or array-like of shape (n_features,), optional
        Feature prices (default: 1 per feature).
    method : {"gbrt", "lin", "l1"}, default="gbrt"
        ADAPT-GBRT, ADAPT-LIN or the paper's L1 baseline.
    p_full : float in [0, 1], default=0.3
        Largest mean probability of sending a training example to ``f0`` (OPT's constraint;
        for ``"l1"``: the fraction of training examples the gate sends to ``f0``).
    gamma : float, optional
        Feature-cost penalty, per unit of the mean positive feature price (so that it means the
        same for prices in dollars or in milliseconds). Default: 1e-3 for ``"gbrt"``, 1e-2 for
        ``"lin"`` and ``"l1"``.
    n_estimators : int, default=100
        Boosting rounds of the gate and of ``f1`` per outer iteration (``"gbrt"``).
    max_depth : int, default=3
    learning_rate : float, default=0.1
    n_iter : int, default=10
        Outer (q-step, model-step) iterations (stops earlier once ``q`` settles).
    min_samples_leaf : int, default=5
    budget : float, optional
        Target mean cost per example. ``fit`` then sweeps ``p_full`` over ``p_full_grid`` and
        ``gamma`` over ``gamma_grid``, measures each system's accuracy and mean cost on
        calibration data with ``thrifty.evaluate`` and keeps the most accurate within budget.
    p_full_grid, gamma_grid : sequence of float, optional
        Grids of the budget sweep (defaults: ``P_FULL_GRID``, ``GAMMA_GRID[method]``).
    validation_fraction : float, default=0.25
        Calibration share of the training data held out by ``budget=`` when ``fit`` gets no
        ``calibration`` set.
    hpc_features : array-like of int or bool, optional
        Features a non-tree ``hpc`` reads (default: all).
    warm_start : bool, default=False
        Start from the previous fit's gate and ``f1`` (same method).
    max_features : int, optional
        ``"lin"`` only: keep the gate and ``f1`` to their ``max_features`` strongest features
        and refit on them (:func:`truncate_lin`, the support sweep of the authors' code). Pair
        it with a small ``gamma`` and enough ``n_iter`` (the authors ran 50): a weak penalty
        lets the gate and ``f1`` agree on which features they need before the cut.
    random_state : int or None
        Seed of the random forest default ``hpc`` and of the calibration split.
    progress : bool, default=True
        Progress bar over iterations (only when stderr is a TTY).

    Attributes
    ----------
    plan_ : Gated
        ``Gated(gate, low, high)``: ``thrifty.evaluate(plan_, X, costs)`` gives predictions
        and exact costs (for a black-box ``hpc`` the ``high`` branch is a cost stand-in and
        predictions must come from this estimator).
    gate_, low_ : Forest or Linear
    hpc_ : object
        The fitted expensive model.
    hpc_exact_ : bool
        False when ``hpc_`` is a black box evaluated outside the plan.
    costs_ : CostModel
    classes_ : ndarray
    n_features_in_ : int
    fit_ : ADAPTFit
        ``q`` and the iteration history.
    sweep_ : list of dict
        With ``budget=``: every ``(p_full, gamma)`` tried with its calibration accuracy, mean
        cost and fraction sent to ``f0``.
    best_params_ : dict
        With ``budget=``: the chosen ``p_full`` and ``gamma``.
    """

    def __init__(
        self,
        hpc: Any = None,
        costs: Any = None,
        *,
        method: str = "gbrt",
        p_full: float = 0.3,
        gamma: float | None = None,
        n_estimators: int = 100,
        max_depth: int = 3,
        learning_rate: float = 0.1,
        n_iter: int = 10,
        min_samples_leaf: int = 5,
        budget: float | None = None,
        p_full_grid: Any = None,
        gamma_grid: Any = None,
        validation_fraction: float = 0.25,
        hpc_features: Any = None,
        warm_start: bool = False,
        max_features: int | None = None,
        random_state: Any = None,
        progress: bool = True,
    ) -> None:
        self.hpc = hpc
        self.costs = costs
        self.method = method
        self.p_full = p_full
        self.gamma = gamma
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.n_iter = n_iter
        self.min_samples_leaf = min_samples_leaf
        self.budget = budget
        self.p_full_grid = p_full_grid
        self.gamma_grid = gamma_grid
        self.validation_fraction = validation_fraction
        self.hpc_features = hpc_features
        self.warm_start = warm_start
        self.max_features = max_features
        self.random_state = random_state
        self.progress = progress

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = self.method == "gbrt"
        return tags

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, calibration: tuple[Any, Any] | None = None) -> ADAPTClassifier:
        """Learn the gate and the low-cost model (and the hpc, when it is not fitted).

        Parameters
        ----------
        X : array-like of shape (n, n_features)
        y : array-like of shape (n,)
        calibration : (X_cal, y_cal), optional
            Data on which ``budget=`` measures accuracy and cost (default: a stratified
            ``validation_fraction`` of ``X`` held out from training).

        Returns
        -------
        self
        """
        self._check_params()
        y, classes, codes = class_labels(y, type(self).__name__)
        X, y = validate_data(
            self, X, y, ensure_all_finite="allow-nan" if self.method == "gbrt" else True, dtype=np.float64
        )
        self.classes_ = classes
        names = list(self.feature_names_in_) if hasattr(self, "feature_names_in_") else None
        costs = costs_for_X(self.costs, names, X.shape[1])
        self.costs_ = costs
        if self.budget is None:
            self._fit_one(X, codes, self.p_full, self._gamma(), warm=self.warm_start)
            return self
        if calibration is None:
            from sklearn.model_selection import train_test_split

            idx = np.arange(len(y))
            stratify = codes if np.bincount(codes).min() >= 2 else None
            tr, cal = train_test_split(
                idx, test_size=self.validation_fraction, stratify=stratify, random_state=self.random_state
            )
            X_fit, c_fit, X_cal, y_cal = X[tr], codes[tr], X[cal], y[cal]
        else:
            X_fit, c_fit = X, codes
            X_cal = np.asarray(calibration[0], dtype=np.float64)
            y_cal = np.asarray(calibration[1])
            if X_cal.ndim != 2 or X_cal.shape[1] != X.shape[1]:
                raise InputError(f"calibration X has shape {X_cal.shape}; it needs {X.shape[1]} features")
        self._sweep(X_fit, c_fit, X_cal, y_cal)
        return self

    def _check_params(self) -> None:
        if self.method not in METHODS:
            raise InputError(f"method must be one of {METHODS}, got {self.method!r}")
        if not (isinstance(self.p_full, (int, float)) and 0.0 <= self.p_full <= 1.0):
            raise InputError(f"p_full must be a number in [0, 1], got {self.p_full!r}")
        if self.gamma is not None and not (
            isinstance(self.gamma, (int, float)) and self.gamma >= 0 and math.isfinite(self.gamma)
        ):
            raise InputError(f"gamma must be a finite number >= 0 (or None), got {self.gamma!r}")
        for name in ("n_estimators", "max_depth", "min_samples_leaf"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise InputError(f"{name} must be an integer >= 1, got {v!r}")
        if not isinstance(self.n_iter, (int, np.integer)) or self.n_iter < 0:
            raise InputError(f"n_iter must be an integer >= 0, got {self.n_iter!r}")
        if self.max_depth > 12:
            raise InputError(f"max_depth={self.max_depth} is too deep for ADAPT's trees; use at most 12")
        if not (isinstance(self.learning_rate, (int, float)) and self.learning_rate > 0):
            raise InputError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if self.budget is not None and not (isinstance(self.budget, (int, float)) and self.budget >= 0):
            raise InputError(f"budget must be a mean cost >= 0 (or None), got {self.budget!r}")
        if self.max_features is not None:
            if self.method != "lin":
                raise InputError(
                    f"max_features applies to method='lin' only (got method={self.method!r}); "
                    "for 'gbrt' and 'l1' raise gamma to use fewer features"
                )
            if not isinstance(self.max_features, (int, np.integer)) or self.max_features < 1:
                raise InputError(f"max_features must be an integer >= 1 (or None), got {self.max_features!r}")
        if not 0.0 < self.validation_fraction < 1.0:
            raise InputError(f"validation_fraction must be in (0, 1), got {self.validation_fraction!r}")

    def _gamma(self) -> float:
        return DEFAULT_GAMMA[self.method] if self.gamma is None else float(self.gamma)

    def _hpc(self, X: np.ndarray, codes: np.ndarray) -> None:
        """Fit (if needed) and import the expensive model; set hpc_, high_, hpc_exact_."""
        hpc = self.hpc
        if hpc is None:
            from sklearn.ensemble import RandomForestClassifier

            hpc = RandomForestClassifier(n_estimators=100, random_state=self.random_state, n_jobs=1)
        if not _is_fitted(hpc):
            hpc = clone(hpc).fit(X, self.classes_[codes])
        n_classes = len(self.classes_)
        cached = getattr(self, "_hpc_cache", None)
        if cached is not None and cached[0] is hpc and cached[1] == (X.shape[1], n_classes):
            # a refit (warm start, sweeps) with the same fitted hpc: skip re-importing it
            high, exact = cached[2], cached[3]
        else:
            high, exact = hpc_plan(hpc, X.shape[1], self.classes_, self.hpc_features)
            self._hpc_cache = (hpc, (X.shape[1], n_classes), high, exact)
        if high.n_features != X.shape[1]:
            raise InputError(f"the hpc reads {high.n_features} features but X has {X.shape[1]}")
        if exact:
            if not high.is_classifier:
                raise InputError(f"the hpc must be a classifier; its task is {high.task!r}")
            hc = high.classes
            if hc is not None and (len(hc) != n_classes or not np.array_equal(np.asarray(hc), self.classes_)):
                raise InputError(
                    f"the hpc predicts classes {list(hc)[:10]} but y has classes "
                    f"{list(self.classes_)[:10]}; fit both on the same labels"
                )
            if hc is None and not np.array_equal(self.classes_, np.arange(max(2, high.n_outputs))):
                raise InputError(
                    f"the hpc has no class labels (it predicts 0..{max(2, high.n_outputs) - 1}) "
                    f"but y has classes {list(self.classes_)[:10]}; encode y as 0..K-1"
                )
        else:
            hc = getattr(hpc, "classes_", None)
            if hc is not None and not np.array_equal(np.asarray(hc), self.classes_):
                raise InputError(
                    f"the hpc predicts classes {list(hc)[:10]} but y has classes "
                    f"{list(self.classes_)[:10]}; fit both on the same labels"
                )
        self.hpc_, self.high_, self.hpc_exact_ = hpc, high, exact

    def _hpc_proba(self, X: np.ndarray) -> np.ndarray:
        if self.hpc_exact_:
            from thrifty.runtime.evaluate import evaluate

            proba = evaluate(self.high_, X).proba
            assert proba is not None  # the hpc is a classifier
            return proba
        return np.asarray(self.hpc_.predict_proba(X), dtype=np.float64)

    def _problem(self, X: np.ndarray, codes: np.ndarray) -> ADAPTProblem:
        names = list(self.feature_names_in_) if hasattr(self, "feature_names_in_") else None
        return ADAPTProblem.build(X, self.classes_[codes], self._hpc_proba(X), self.costs_, names)

    def _train(self, prob: ADAPTProblem, p_full: float, gamma: float, init: Any = None) -> ADAPTFit:
        progress = bool(self.progress)
        if self.method == "gbrt":
            return adapt_gbrt(
                prob,
                p_full=p_full,
                gamma=gamma,
                n_estimators=int(self.n_estimators),
                max_depth=int(self.max_depth),
                learning_rate=float(self.learning_rate),
                n_iter=int(self.n_iter),
                min_samples_leaf=int(self.min_samples_leaf),
                init=init,
                progress=progress,
            )
        if self.method == "lin":
            fit = adapt_lin(
                prob, p_full=p_full, gamma=gamma, n_iter=int(self.n_iter), init=init, progress=progress
            )
            if self.max_features is not None:
                fit = truncate_lin(
                    prob,
                    fit,
                    int(self.max_features),
                    p_full=p_full,
                    gamma=gamma,
                    n_iter=int(self.n_iter),
                    progress=progress,
                )
            return fit
        # the L1 steps depend on gamma and the data only: sweeps over p_full reuse them
        key = (prob.X.shape, hash(prob.X.tobytes()), hash(prob.y.tobytes()))
        memo = getattr(self, "_l1_memo", None)
        if memo is None or memo.get("key") != key:
            memo = self._l1_memo = {"key": key}
        return l1_baseline(prob, p_full=p_full, gamma=gamma, memo=memo)

    def _warm_init(self, prob: ADAPTProblem) -> Any:
        prev = getattr(self, "fit_", None)
        if prev is None or getattr(self, "_fitted_method", None) != self.method or self.method == "l1":
            return None
        if self.method == "lin":
            state = getattr(prev, "state", None)
            return state if state is not None and state.shape[0] == prob.X.shape[1] + 1 else None
        if prev.gate.n_features != prob.X.shape[1]:
            return None
        g = np.asarray(prev.gate.predict_raw(prob.X)).reshape(-1)
        F = np.asarray(prev.low.predict_raw(prob.X)).reshape(len(prob.y), -1)
        return g, F

    def _fit_one(self, X: np.ndarray, codes: np.ndarray, p_full: float, gamma: float, warm: bool) -> None:
        self._hpc(X, codes)
        prob = self._problem(X, codes)
        init = self._warm_init(prob) if warm else None
        self._set_fit(self._train(prob, p_full, gamma, init))

    def _set_fit(self, fit: ADAPTFit) -> None:
        self.fit_ = fit
        self._fitted_method = self.method
        self.gate_, self.low_ = fit.gate, fit.low
        self.plan_ = Gated(fit.gate, fit.low, self.high_)

    def _sweep(self, X: np.ndarray, codes: np.ndarray, X_cal: np.ndarray, y_cal: np.ndarray) -> None:
        """budget=: every (p_full, gamma) of the grids, scored on calibration data."""
        from thrifty.runtime.evaluate import evaluate

        self._hpc(X, codes)
        prob = self._problem(X, codes)
        assert self.budget is not None  # fit sweeps only when given a budget
        p_grid = tuple(P_FULL_GRID if self.p_full_grid is None else self.p_full_grid)
        g_grid = tuple(GAMMA_GRID[self.method] if self.gamma_grid is None else self.gamma_grid)
        rows: list[dict[str, float]] = []
        best: tuple[float, float] | None = None
        best_fit: ADAPTFit | None = None
        for p_full in p_grid:
            init = None
            # gamma from large to small: each fit starts from the sparser previous one
            for gamma in sorted(g_grid, reverse=True):
                fit = self._train(prob, float(p_full), float(gamma), init)
                if self.method == "lin":
                    init = getattr(fit, "state", None)
                self._set_fit(fit)
                ev = evaluate(self.plan_, X_cal, self.costs_)
                labels = self._labels(ev, X_cal)
                acc = float(np.mean(labels == y_cal))
                cost = ev.cost.mean
                rows.append(
                    {
                        "p_full": float(p_full),
                        "gamma": float(gamma),
                        "accuracy": acc,
                        "mean_cost": cost,
                        "to_hpc": float(np.mean(ev.exit == 1)),
                    }
                )
                if cost <= self.budget + 1e-12:
                    key = (acc, -cost)
                    if best is None or key > best:
                        best, best_fit = key, fit
                        self.best_params_ = {"p_full": float(p_full), "gamma": float(gamma)}
        self.sweep_ = rows
        if best_fit is None:
            cheapest = min(r["mean_cost"] for r in rows)
            raise InputError(
                f"budget={self.budget:g} is below the cheapest system the sweep found "
                f"(mean cost {cheapest:.4g} on the calibration data); raise the budget, or "
                "add larger gamma / smaller p_full values to gamma_grid / p_full_grid"
            )
        self._set_fit(best_fit)

    # ------------------------------------------------------------------ prediction
    def _labels(self, ev: Any, X: np.ndarray) -> np.ndarray:
        labels = ev.labels
        if self.hpc_exact_:
            return labels
        labels = labels.copy()
        high = np.flatnonzero(ev.exit == 1)
        if len(high):
            labels[high] = self.classes_[np.argmax(self.hpc_.predict_proba(X[high]), axis=1)]
        return labels

    def _evaluate(self, X: Any, costs: Any = None) -> tuple[Any, np.ndarray]:
        from thrifty.runtime.evaluate import evaluate

        check_is_fitted(self, "plan_")
        X = validate_data(
            self,
            X,
            reset=False,
            dtype=np.float64,
            ensure_all_finite="allow-nan" if self.method == "gbrt" else True,
        )
        return evaluate(self.plan_, X, self.costs_ if costs is None else costs), X

    def predict(self, X: Any) -> np.ndarray:
        """Labels from ``f1`` where the gate keeps the example, from the hpc elsewhere."""
        ev, X = self._evaluate(X)
        return self._labels(ev, X)

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities of the model each example is routed to, shape (n, n_classes)."""
        ev, X = self._evaluate(X)
        proba = ev.proba
        if not self.hpc_exact_:
            proba = proba.copy()
            high = np.flatnonzero(ev.exit == 1)
            if len(high):
                proba[high] = self.hpc_.predict_proba(X[high])
        return proba

    def route(self, X: Any) -> np.ndarray:
        """1 where the gate sends the example to the hpc, 0 where ``f1`` answers."""
        return self._evaluate(X)[0].exit

    def cost_report(self, X: Any, costs: Any = None) -> Any:
        """The per-example ``CostReport`` (default prices: ``costs_``)."""
        return self._evaluate(X, costs)[0].cost
