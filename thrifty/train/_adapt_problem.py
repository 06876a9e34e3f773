"""ADAPT's training data, its results, and the q-step (OPT1) of Nan & Saligrama (2017).

Every ADAPT algorithm (``_adapt_gbrt``, ``_adapt_lin``) alternates the closed-form q-step of
this module with its own model step on an :class:`ADAPTProblem`, and returns an
:class:`ADAPTFit`. Sample weights ``w_i`` multiply example ``i``'s terms of (OPT): its losses and
entropy in (OPT1), its share of the constraint ``E_Sn[q(0|x)] <= P_full`` (a weighted mean), and
its terms in (OPT2) and impurities (1)/(2); integer weights are repeated rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import brentq
from scipy.special import expit, log_softmax, softmax

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.runtime.models import Linear

__all__ = ["ADAPTFit", "ADAPTProblem", "q_step"]


def q_step(
    A: np.ndarray, B: np.ndarray, p_full: float, w: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Solve (OPT1) in closed form: the oracle probability of sending each example to ``f0``.

    Minimises ``sum_i w_i [(1 - q_i) A_i + q_i B_i - H(q_i)] / sum_i w_i`` subject to
    ``sum_i w_i q_i / sum_i w_i <= p_full``, where ``A_i`` is the loss of sending example ``i``
    to the low-cost model (``l(f1(x_i), y_i) + log(1 + e^{g(x_i)})``) and ``B_i`` that of sending
    it to ``f0`` (``-log p(y_i | x_i; f0) + log(1 + e^{-g(x_i)})``). Stationarity gives
    ``q_i = 1 / (1 + exp(B_i - A_i + beta))`` (section 4, ADAPT-LIN; the weight ``w_i`` divides
    out of example ``i``'s own condition); ``beta >= 0`` is the constraint's multiplier: 0 when
    the constraint holds already, else found by root finding.

    Parameters
    ----------
    A, B : ndarray of shape (n,)
    p_full : float in [0, 1]
    w : ndarray of shape (n,), optional
        Example weights (default: 1 each).

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
    if q.size == 0 or np.average(q, weights=w) <= p_full:
        return q, 0.0
    if p_full <= 0.0:
        return np.zeros_like(q), math.inf

    def excess(beta: float) -> float:
        return float(np.average(expit(d - beta), weights=w)) - p_full

    hi = 1.0
    while excess(hi) > 0.0:
        hi *= 2.0
    beta = brentq(excess, 0.0, hi, xtol=1e-12, rtol=1e-12, maxiter=500)
    q = expit(d - beta)
    # brentq stops within xtol of the root, possibly on its infeasible side
    while np.average(q, weights=w) > p_full:  # a step of brentq's tolerance crosses it in one or two tries
        beta += max(1e-12, abs(beta) * 1e-12)
        q = expit(d - beta)
    return q, float(beta)


def low_loss(F: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``-log p(y | x; f1)`` per example: sigmoid of one raw column, or softmax of several."""
    if F.shape[1] == 1:
        f = F[:, 0]
        return np.logaddexp(0.0, f) - (y == 1) * f
    return -log_softmax(F, axis=1)[np.arange(len(y)), y]


def losses(g: np.ndarray, F: np.ndarray, y: np.ndarray, nll0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A_i`` (route to f1) and ``B_i`` (route to f0) of (OPT1)."""
    A = low_loss(F, y) + np.logaddexp(0.0, g)
    B = nll0 + np.logaddexp(0.0, -g)
    return A, B


def onehot(y: np.ndarray, n_classes: int) -> np.ndarray:
    """0/1 targets of the low-cost model: one column for two classes, one per class otherwise."""
    if n_classes == 2:
        return (y == 1).astype(np.float64)[:, None]
    Y = np.zeros((len(y), n_classes))
    Y[np.arange(len(y)), y] = 1.0
    return Y


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
        excluded), ``q_change`` (mean absolute change of ``q``); means weighted by the
        example weights.
    state : ndarray or None
        ADAPT-LIN's standardized parameters ``P`` (row per feature, then the intercepts;
        column 0 the gate), from which a warm start or :func:`truncate_lin` continues; None
        for the other methods.
    """

    gate: Forest | Linear
    low: Forest | Linear
    q: np.ndarray
    beta: float
    history: list[dict[str, float]] = field(default_factory=list)
    state: np.ndarray | None = None


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
    w : ndarray of shape (n,)
        Example weights, all positive (1 each unless given).
    categories : dict
        Category lists of the categorical columns of ``X`` (coded as positions in them), for the
        Forests of ADAPT-GBRT.
    """

    X: np.ndarray
    y: np.ndarray
    nll0: np.ndarray
    costs: CostModel
    classes: np.ndarray
    feature_names: list[str] | None = None
    w: np.ndarray = field(default_factory=lambda: np.ones(0))
    categories: dict[int, list] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.w.size == 0:  # not given: every example weighs 1
            self.w = np.ones(self.X.shape[0])
        if self.w.shape != (self.X.shape[0],):
            raise InputError(f"w has shape {self.w.shape}; it needs one weight per row ({self.X.shape[0]})")

    @classmethod
    def build(
        cls,
        X: Any,
        y: Any,
        proba0: Any,
        costs: CostModel | None = None,
        feature_names: list[str] | None = None,
        sample_weight: Any = None,
        categories: dict[int, list] | None = None,
    ) -> ADAPTProblem:
        """From labels and the expensive model's ``predict_proba`` on the same rows.

        ``proba0`` has one column per class of ``np.unique(y)``, in that order; probabilities
        are clipped at 1e-6 so that a confidently wrong ``f0`` has a finite loss. Rows of
        ``sample_weight`` 0 are left out: they weigh nothing in (OPT).
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
        w = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        if w.shape != (X.shape[0],):
            raise InputError(f"sample_weight has shape {w.shape}; it needs one weight per row ({X.shape[0]})")
        keep = w > 0
        return cls(
            X=X[keep],
            y=codes[keep],
            nll0=-np.log(p_true[keep]),
            costs=costs,
            classes=classes,
            feature_names=feature_names,
            w=w[keep],
            categories=dict(categories or {}),
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

    # The low-cost model's loss, as the model steps see it (a regression problem overrides these).
    loss = "logistic"

    @property
    def output_scale(self) -> float:
        """Factor from the model steps' raw outputs of ``f1`` to its predictions."""
        return 1.0

    def targets(self) -> np.ndarray:
        """The model steps' targets of ``f1``: one 0/1 column (binary) or one-hot columns."""
        return onehot(self.y, self.n_classes)

    def losses(self, g: np.ndarray, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``A_i`` and ``B_i`` of (OPT1) at the gate's raw scores ``g`` and ``f1``'s ``F``."""
        return losses(g, F, self.y, self.nll0)

    def low_grad_hess(self, F: np.ndarray, Y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-example gradient and hessian of ``l(f1(x_i), y_i)`` in each raw output of ``F``."""
        p = expit(F) if F.shape[1] == 1 else softmax(F, axis=1)
        return p - Y, p * (1.0 - p)

    def unit_prices(self) -> np.ndarray:
        """Unit (group) costs divided by the mean positive feature price (gamma is unit-free)."""
        return self.costs.unit_cost / _price_scale(self.costs)

    def feature_prices(self) -> np.ndarray:
        """Each feature's own acquisition cost (with what it requires), same scale."""
        c = np.array([self.costs.acquisition_cost([a]) for a in range(self.costs.n_features)])
        return c / _price_scale(self.costs)

    def log_prior(self, w: np.ndarray | None = None) -> np.ndarray:
        """Log class odds (binary) or log class frequencies of the labels, weighted by ``self.w * w``."""
        weights = self.w if w is None else self.w * w
        counts = np.bincount(self.y, weights=weights, minlength=self.n_classes) + 1e-3
        p = counts / counts.sum()
        if self.n_classes == 2:
            return np.array([math.log(p[1] / p[0])])
        return np.log(p)

    def history_row(self, q: np.ndarray, beta: float, A: np.ndarray, B: np.ndarray, change: float) -> dict:
        """One entry of :attr:`ADAPTFit.history` (means weighted by the example weights)."""
        return {
            "mean_q": float(np.average(q, weights=self.w)),
            "beta": beta,
            "loss": float(np.average((1 - q) * A + q * B, weights=self.w)),
            "q_change": change,
        }

    def q_change(self, q: np.ndarray, q_old: np.ndarray | None) -> float:
        """Weighted mean absolute change of ``q`` (``inf`` on the first iteration)."""
        return math.inf if q_old is None else float(np.average(np.abs(q - q_old), weights=self.w))


def _price_scale(costs: CostModel) -> float:
    pos = costs.feature_costs[costs.feature_costs > 0]
    if pos.size:
        return float(pos.mean())
    pos = costs.unit_cost[costs.unit_cost > 0]
    return float(pos.mean()) if pos.size else 1.0


def progress_bar(total: int, desc: str, progress: bool) -> Any:
    """A tqdm bar shown only when ``progress`` and stderr is a TTY."""
    from tqdm.auto import tqdm

    # disable=None: tqdm shows the bar only when stderr is a TTY
    return tqdm(total=total, desc=desc, unit="it", leave=False, disable=None if progress else True)
