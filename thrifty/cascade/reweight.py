"""Single-stage re-weighting of an ensemble's trees (Cronus, Section 3.1, eq. 7)."""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty._param_validation import validate_params
from thrifty._validation import as_forest
from thrifty.cascade._cronus_init import default_lam, solve_stage, stage_gram
from thrifty.cascade._problem import build_problem
from thrifty.cascade.cronus import OPTIONS
from thrifty.costs import CostModel
from thrifty.runtime.plans import Cascade

__all__ = ["reweight"]


def reweight(
    forest: Any,
    X: Any,
    y: Any,
    costs: CostModel | None = None,
    *,
    lam: float | None = None,
    rho: float = 1e-3,
    class_weight: Any = 3.5,
    max_iter: int = 500,
    n_threads: int | None = 1,
    sample_weight: Any = None,
) -> Cascade:
    """Re-weight the trees of ``forest`` to trade accuracy for cost, eq. (7).

    Minimises ``1/2 sum_i omega_i (beta^T h(x_i) - y_i)^2 + rho |beta|_1 + lam (sum_t e_t |beta_t|
    + sum_a c_a ||(F_at beta_t)_t||_2)`` over the tree weights and a constant, with ``y`` in
    {-1, +1}, by the closed-form reweighting of eqs. (11)-(14) with one stage (it converges to
    the global minimum of this convex problem). Trees whose weight ends at zero are never
    evaluated.

    Parameters
    ----------
    forest : Forest or fitted single-output tree ensemble
    X : array-like of shape (n, n_features)
    y : array-like of shape (n,)
        Binary targets.
    costs : CostModel, optional
        Feature costs ``c`` and tree cost ``e_t`` (see :func:`thrifty.cascade.cronus`).
    lam : float, optional
        Cost trade-off (default: ``lambda_max(..., exact=False) / 16``, see
        :func:`thrifty.cascade.lambda_max`).
    rho : float
        l1 trade-off (``lam = rho = 0`` is weighted least squares on the trees).
    class_weight : float, dict or None, default=3.5
        Loss weight of positives.
    max_iter : int
        Reweighting steps at most.
    n_threads : int or None, default=1
        BLAS threads during the fit (None: the library's own setting).
    sample_weight : array-like of shape (n,), optional
        Weights of the examples in the loss (``omega_i`` times the example's share of the total
        weight), as in :func:`thrifty.cascade.cronus`.

    Returns
    -------
    Cascade
        One stage; its decision threshold is 0.
    """
    validate_params(
        {"lam": OPTIONS["lam"], "rho": OPTIONS["rho"][:1], "max_iter": OPTIONS["max_cycles"]},
        {"lam": lam, "rho": rho, "max_iter": max_iter},
        "reweight",
    )
    from threadpoolctl import threadpool_limits

    forest = as_forest(forest, who="reweight")
    prob, _ = build_problem(forest, X, y, costs, class_weight, sample_weight)
    if lam is None:
        lam = default_lam(prob)
    with threadpool_limits(n_threads):
        G, r, c0 = stage_gram(prob, prob.omega)
        beta, _ = solve_stage(
            prob,
            G,
            r,
            c0,
            np.zeros((0, prob.n_trees + 1)),
            np.zeros(0),
            1.0,
            lam=float(lam),
            rho=float(rho),
            max_iter=max_iter,
        )
    return Cascade(forest, beta[None, :-1], [0.0], [beta[-1]])
