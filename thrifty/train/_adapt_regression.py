"""ADAPT for regression: (OPT1) and the model steps with squared losses in place of log-losses.

Nan & Saligrama (2017) state (OPT) for classification: routing example ``i`` to the low-cost
model costs ``A_i = l(f1(x_i), y_i) + log(1 + e^{g(x_i)})``, routing it to the expensive model
``B_i = -log p(y_i | x_i; f0) + log(1 + e^{-g(x_i)})``. For a regression target each
log-loss becomes a Gaussian negative log-likelihood at the expensive model's noise level
``s`` (the root mean squared error of ``f0`` on the training rows), constants dropped:
``l(f, y) = (f - y)^2 / (2 s^2)``. Scaling by ``s`` keeps the losses in the units of the
gate's log-loss and of the entropy ``H(q)`` in (OPT1), as the log-losses of the paper are:
``f0`` loses 1/2 on average, and ``f1`` is as good as ``f0`` where it is as close to ``y``.
The q-step is then unchanged (:func:`~thrifty.train.q_step`), and the model steps fit ``f1`` to
``y / s`` by weighted least squares (ADAPT-LIN's (OPT2) with ``(1 - q_i) (f1 - y_i / s)^2 / 2``,
ADAPT-GBRT's impurity (1) with gradient ``f1 - y_i / s`` and hessian 1); ``f1``'s outputs are
multiplied by ``s`` at the end. With ``target="hpc"`` both models are measured against ``f0``'s
predictions instead of ``y`` (``f1`` learns to agree with ``f0``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.train._adapt_problem import ADAPTProblem

__all__ = ["ADAPTRegressionProblem"]

# s is floored at this share of the target's spread: an expensive model that interpolates its
# training rows (a deep forest) would otherwise make every error of f1 infinitely costly.
MIN_SCALE = 1e-3


@dataclass
class ADAPTRegressionProblem(ADAPTProblem):
    """The training data of :func:`adapt_lin` and :func:`adapt_gbrt` for a regression target.

    Build it with :meth:`build` from the expensive model's predictions. ``y`` holds the targets
    (``y``, or ``f0``'s predictions with ``target="hpc"``), ``nll0`` the expensive model's loss
    ``(f0(x_i) - y_i)^2 / (2 s^2)`` and ``scale`` ``s`` (see the module docstring); ``classes``
    is None.
    """

    scale: float = 1.0

    loss = "squared"

    @classmethod
    def build(
        cls,
        X: Any,
        y: Any,
        pred0: Any,
        costs: CostModel | None = None,
        feature_names: list[str] | None = None,
        sample_weight: Any = None,
        categories: dict[int, list] | None = None,
        scale: float | None = None,
        target: str = "y",
    ) -> ADAPTRegressionProblem:
        """From targets and the expensive model's predictions on the same rows.

        ``scale`` defaults to the expensive model's weighted root mean squared error there,
        floored at ``MIN_SCALE`` times the targets' standard deviation (1 for a constant
        target). Rows of ``sample_weight`` 0 are left out: they weigh nothing in (OPT).
        ``target="hpc"`` measures both models against the expensive model's predictions
        instead of ``y``: ``f1`` is fitted to ``f0``, ``f0``'s own loss is 0, and the gate keeps
        the examples on which ``f1`` agrees with ``f0`` to within about ``s``.
        """
        if target not in ("y", "hpc"):
            raise InputError(f"target must be 'y' or 'hpc', got {target!r}")
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        f0 = np.asarray(pred0, dtype=np.float64).reshape(-1)
        if len(y) != X.shape[0] or len(f0) != X.shape[0]:
            raise InputError(f"y ({len(y)}) and pred0 ({len(f0)}) need one value per row of X ({X.shape[0]})")
        costs = CostModel.uniform(X.shape[1]) if costs is None else costs
        if costs.n_features != X.shape[1]:
            raise InputError(f"the cost model prices {costs.n_features} features but X has {X.shape[1]}")
        w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (X.shape[0],):
            raise InputError(f"sample_weight has shape {w.shape}; it needs one weight per row ({X.shape[0]})")
        keep = w > 0
        y, f0, w = y[keep], f0[keep], w[keep]
        if scale is None:
            spread = math.sqrt(float(np.average((y - np.average(y, weights=w)) ** 2, weights=w)))
            rmse = math.sqrt(float(np.average((y - f0) ** 2, weights=w)))
            scale = max(rmse, MIN_SCALE * spread) if spread > 0 else 1.0
        if target == "hpc":
            y = f0
        return cls(
            X=X[keep],
            y=y,
            nll0=0.5 * ((f0 - y) / scale) ** 2,
            costs=costs,
            classes=None,  # type: ignore[arg-type]
            feature_names=feature_names,
            w=w,
            categories=dict(categories or {}),
            scale=float(scale),
        )

    @property
    def n_classes(self) -> int:
        return 1

    @property
    def width(self) -> int:
        return 1

    @property
    def link(self) -> str:
        return "identity"

    @property
    def task(self) -> str:
        return "regression"

    @property
    def output_scale(self) -> float:
        return self.scale

    def targets(self) -> np.ndarray:
        """``y / s``, one column: ``f1`` is fitted in units of ``s``."""
        return (self.y / self.scale)[:, None]

    def losses(self, g: np.ndarray, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``A_i = (f1(x_i) - y_i / s)^2 / 2 + log(1 + e^g)``, ``B_i = nll0_i + log(1 + e^-g)``
        (the regression (OPT1), ``F`` in units of ``s``)."""
        A = 0.5 * (F[:, 0] - self.y / self.scale) ** 2 + np.logaddexp(0.0, g)
        B = self.nll0 + np.logaddexp(0.0, -g)
        return A, B

    def low_grad_hess(self, F: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Gradient ``f1 - y / s`` and hessian 1 of the squared loss."""
        return F - Y, np.ones_like(F)

    def log_prior(self, w: np.ndarray | None = None) -> np.ndarray:
        """The constant ``f1`` starts from: the weighted mean of ``y / s``."""
        weights = self.w if w is None else self.w * w
        if weights.sum() <= 0:
            weights = self.w
        return np.array([float(np.average(self.y / self.scale, weights=weights))])
