"""ADAPT-GBRT (Algorithm 2 of Nan & Saligrama 2017): a boosted gate and low-cost model of cost-aware trees."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from thrifty.train._adapt_problem import ADAPTFit, ADAPTProblem, progress_bar, q_step
from thrifty.train._adapt_trees import Binner, TreeList, grow_tree

__all__ = ["adapt_gbrt"]


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
    consistent with the final ``q``. The example weights ``prob.w`` multiply each example's
    term of ``l(f1, g)`` (``1/N`` becomes ``1 / sum_i w_i``), hence its gradient, hessian and
    squared error in (1)/(2), and its count in ``min_samples_leaf``.

    Initialisation: ``g = 0`` and ``f1`` a cost-aware boosted model of the labels (GreedyMiser,
    the case ``p_full = 0``), or ``init = (g, F)`` raw scores on the training rows (warm start).

    Parameters
    ----------
    prob : ADAPTProblem
    p_full : float in [0, 1]
        Bound on the (weighted) mean of ``q`` (OPT's constraint).
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
    X, sw, n = prob.X, prob.w, prob.X.shape[0]
    K = prob.width
    binner = Binner(X, weight=sw)
    binned = binner.transform(X)
    c = prob.costs
    unit_prices = prob.unit_prices()
    Y = prob.targets()
    w_total = float(sw.sum())
    history: list[dict[str, float]] = []
    bar = progress_bar((n_iter + (init is None)) * n_estimators, "ADAPT-GBRT", progress)

    def tree(grad: np.ndarray, hess: np.ndarray, acquired: np.ndarray) -> tuple[np.ndarray, ...]:
        """One cost-aware tree fitted to ``-grad`` (per-example gradients, weighted by ``sw``)."""
        return grow_tree(
            binned,
            binner.n_bins,
            -grad,
            sw,
            sw * grad,
            sw * hess,
            acquired,
            (c.closure_ptr, c.closure_units, unit_prices),
            gamma,
            (max_depth, min_samples_leaf, reg_lambda),
            w_total,
        )

    def boost(
        q: np.ndarray | None,
    ) -> tuple[TreeList, TreeList, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One (g, f1)-step from constant models; ``q=None`` fits f1 alone (all weights 1)."""
        w = np.ones(n) if q is None else 1.0 - q
        f_base = prob.log_prior(w)
        if q is None:
            g_base = 0.0
        else:
            mean_q = float(np.average(q, weights=sw))
            g_base = float(np.log((mean_q + 1e-6) / (1.0 - mean_q + 1e-6)))
        F = np.tile(f_base, (n, 1))
        g = np.full(n, g_base)
        acquired = np.zeros(len(c.unit_cost), dtype=np.bool_)
        gate_trees, low_trees = TreeList(), TreeList()
        for _ in range(n_estimators):
            if q is not None:
                s = expit(g)
                t = tree(s - q, s * (1.0 - s), acquired)
                gate_trees.add(t, 0)
                g += learning_rate * t[4][t[5]]
            G, Hs = prob.low_grad_hess(F, Y)
            for k in range(K):
                t = tree(w * G[:, k], w * Hs[:, k], acquired)
                low_trees.add(t, k)
                F[:, k] += learning_rate * t[4][t[5]]
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
            A, B = prob.losses(g, F)
            q, beta = q_step(A, B, p_full, sw)
            gate_trees, low_trees, g, F, g_base, f_base = boost(q)
            A, B = prob.losses(g, F)
            change = prob.q_change(q, q_old)
            history.append(prob.history_row(q, beta, A, B, change))
            if change < tol:
                break
            q_old = q
    finally:
        bar.close()
    if not gate_trees.trees:  # n_iter == 0: a constant gate that never routes to f0
        g_base = np.array([-1.0])
    common = {
        "n_features": X.shape[1],
        "feature_names": prob.feature_names,
        "categories": prob.categories,
        "learning_rate": learning_rate,
    }
    gate = gate_trees.to_forest(
        binner, base_score=g_base, width=1, link="identity", task="regression", classes=None, **common
    )
    scale = prob.output_scale  # f1 was fitted to targets divided by it
    low = low_trees.to_forest(
        binner,
        base_score=f_base * scale,
        width=K,
        link=prob.link,
        task=prob.task,
        classes=prob.classes,
        **{**common, "learning_rate": learning_rate * scale},
    )
    return ADAPTFit(gate=gate, low=low, q=q, beta=beta, history=history)
