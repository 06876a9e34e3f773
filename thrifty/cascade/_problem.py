"""The Cronus optimization problem: data, soft exits and the cost-sensitive loss of eq. (8).

Notation follows Chen, Xu, Weinberger, Chapelle and Kedem, "Classifier Cascade for Minimizing
Feature Evaluation Cost" (AISTATS 2012): ``H`` holds the base hypotheses' outputs ``h_t(x_i)``
(the trees' contributions, plus a constant column last), ``B[k]`` is stage ``k``'s weight
vector ``beta^k`` (its last entry the constant's weight, i.e. the stage bias), ``theta[k]`` its
reject threshold, ``e`` the per-tree evaluation costs and ``F`` (cost units x trees) says which
priced feature units each tree needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from thrifty._validation import check_sample_weight
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.scores import tree_scores

# A tree whose weighted output has a root-mean-square below this (targets are -1/+1) gets weight
# exactly zero: the reweighting of Lemma 1 only approaches zero geometrically, and a tree with a
# tiny but non-zero weight would still be paid for at test time.
ZERO_TOL = 1e-4


@dataclass
class Problem:
    """Everything eq. (8) needs, precomputed once per fit.

    Attributes
    ----------
    H : ndarray of shape (n, n_trees + 1)
        ``h_t(x_i)``; the last column is the constant hypothesis 1.
    y : ndarray of shape (n,)
        Targets in {-1, +1}.
    omega : ndarray of shape (n,)
        Loss weight of each example (its class weight times its share ``pi``).
    pi : ndarray of shape (n,)
        Each example's share of the data (``1 / n``, or its sample weight over their sum):
        the reach ``d_k`` of a stage is ``sum_i pi_i p_i^k``.
    e : ndarray of shape (n_trees,)
        Evaluation cost of each tree.
    c : ndarray of shape (n_units,)
        Acquisition cost of each cost unit (a feature, or a group of features bought together).
    F : ndarray of bool, shape (n_units, n_trees)
        ``F[u, t]``: tree ``t`` needs unit ``u`` (its features and their dependencies).
    scale : ndarray of shape (n_trees + 1,)
        Root-mean-square of each column of ``H`` (what a unit weight adds to a score).
    """

    H: np.ndarray
    y: np.ndarray
    omega: np.ndarray
    pi: np.ndarray
    e: np.ndarray
    c: np.ndarray
    F: np.ndarray
    scale: np.ndarray

    @property
    def n(self) -> int:
        return int(self.H.shape[0])

    @property
    def n_trees(self) -> int:
        return int(self.H.shape[1] - 1)

    def tree_price(self, eta: np.ndarray, kappa: np.ndarray) -> np.ndarray:
        """``w_t = e_t / kappa_t + sum_u c_u F_ut / eta_u``: the bracket of Lambda in eq. (13)."""
        paid = self.c > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            feat = np.where(paid & (eta > 0), self.c / eta, 0.0) @ self.F
            tree = np.where(self.e > 0, self.e / kappa, 0.0)
        # A tree needing a priced unit no stage uses yet has an infinite price (Lemma 1 at 0).
        blocked = (paid & (eta == 0)).astype(np.float64) @ self.F > 0
        return np.where(blocked, np.inf, tree + feat)


def tree_units(forest: Forest, costs: CostModel) -> np.ndarray:
    """``F[u, t]``: cost unit ``u`` is paid by an example that evaluates tree ``t``."""
    F = np.zeros((len(costs.unit_cost), forest.n_trees), dtype=bool)
    for t in range(forest.n_trees):
        for f in forest.tree_features(t):
            units = costs.closure_units[costs.closure_ptr[f] : costs.closure_ptr[f + 1]]
            F[units, t] = True
    return F


def tree_eval_costs(forest: Forest, costs: CostModel, leaves: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """``e_t``: the tree cost plus the split cost times the mean number of splits visited (each
    example counted by its share ``pi``)."""
    e = np.full(forest.n_trees, costs.tree_cost)
    if costs.split_cost > 0 and leaves.size:
        depth = np.zeros(forest.n_nodes, dtype=np.int64)
        for t in range(forest.n_trees):
            stack = [int(forest.roots[t])]
            while stack:
                node = stack.pop()
                if forest.feature[node] >= 0:
                    for child in (forest.children_left[node], forest.children_right[node]):
                        depth[child] = depth[node] + 1
                        stack.append(int(child))
        e = e + costs.split_cost * (pi @ depth[leaves])
    return e


def class_weights(y: np.ndarray, class_weight: Any, pi: np.ndarray) -> np.ndarray:
    """Per-example loss weights ``omega_i``: eq. (2)'s ``omega^+ / omega^-`` times the example's
    share ``pi_i`` (``1 / n`` unweighted)."""
    n = len(y)
    if class_weight is None:
        w = np.ones(n)
    elif isinstance(class_weight, (int, float, np.floating, np.integer)) and not isinstance(
        class_weight, bool
    ):
        if not np.isfinite(class_weight) or class_weight <= 0:
            raise InputError(
                f"class_weight must be a positive number (the positives' weight), got {class_weight!r}"
            )
        w = np.where(y > 0, float(class_weight), 1.0)
    elif isinstance(class_weight, dict):
        bad = {k: v for k, v in class_weight.items() if k not in (-1, 1) or not v > 0}
        if bad or not class_weight:
            raise InputError(
                f"class_weight as a dict maps -1 and/or +1 to positive weights, got {class_weight!r}"
            )
        w = np.where(y > 0, float(class_weight.get(1, 1.0)), float(class_weight.get(-1, 1.0)))
    else:
        raise TypeError(
            f"class_weight must be None, a number or a dict {{-1: w, +1: w}}, got {class_weight!r}"
        )
    return w * pi


def soft_flow(Z: np.ndarray, theta: np.ndarray, gamma: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Soft exits of Section 3.2: pass probabilities ``I``, reach ``p`` and exit ``q`` per stage.

    ``I_i^k = sigma_gamma(Z_ik - theta_k)``, ``p_i^k = prod_{j<k} I_i^j``, ``q_i^k = p_i^k (1 -
    I_i^k)`` and ``q_i^K = p_i^K``. Returns ``(I, p, q)`` of shape (n, K) (``I[:, K-1]`` is 1).
    """
    n, K = Z.shape
    gate = np.ones((n, K))
    if K > 1:
        gate[:, :-1] = sigmoid(gamma * (Z[:, :-1] - theta[None, : K - 1]))
    p = np.ones((n, K))
    if K > 1:
        p[:, 1:] = np.cumprod(gate[:, :-1], axis=1)
    q = p * (1.0 - gate)
    q[:, -1] = p[:, -1]
    return gate, p, q


def sigmoid(z: np.ndarray) -> np.ndarray:
    out = np.empty_like(z, dtype=np.float64)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    ez = np.exp(z[~pos])
    out[~pos] = ez / (1.0 + ez)
    return out


def cost_norms(B: np.ndarray, d: np.ndarray, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``kappa_t = ||(beta_t^j d_j)_j||`` and ``eta_u = ||(F_ut beta_t^j d_j)_{j,t}||`` (eq. 11)."""
    W2 = (B[:, :-1] * d[:, None]) ** 2
    per_tree = W2.sum(axis=0)
    return np.sqrt(per_tree), np.sqrt(F.astype(np.float64) @ per_tree)


def objective(
    prob: Problem,
    B: np.ndarray,
    theta: np.ndarray,
    *,
    lam: float,
    rho: Any,
    gamma: float,
    Z: np.ndarray | None = None,
) -> float:
    """The cost-sensitive loss of eq. (8) (soft exits, mixed norms, no substitution).

    ``B`` has shape (K, n_trees + 1), ``theta`` (K,) (the last entry is unused), ``rho`` a
    number or one per stage. ``d_k`` is the mean of ``p^k`` over the examples.
    """
    K = B.shape[0]
    rho = np.broadcast_to(np.asarray(rho, dtype=np.float64), (K,))
    Z = prob.H @ B.T if Z is None else Z
    _, p, q = soft_flow(Z, theta, gamma)
    d = prob.pi @ p
    loss = 0.5 * np.sum(prob.omega[:, None] * q * (prob.y[:, None] - Z) ** 2)
    reg = float(np.sum(rho * np.abs(B[:, :-1]).sum(axis=1)))
    kappa, eta = cost_norms(B, d, prob.F)
    return float(loss + reg + lam * (prob.e @ kappa + prob.c @ eta))


def substituted_objective(
    prob: Problem,
    B: np.ndarray,
    theta: np.ndarray,
    sigma: np.ndarray,
    kappa: np.ndarray,
    eta: np.ndarray,
    *,
    lam: float,
    rho: Any,
    gamma: float,
) -> float:
    """Eq. (8) after the substitutions of eq. (11) with auxiliary variables ``sigma`` (K, T),
    ``kappa`` (T,) and ``eta`` (n_units,), all > 0 (Lemma 1: minimising over them gives back
    eq. (8))."""
    K = B.shape[0]
    rho = np.broadcast_to(np.asarray(rho, dtype=np.float64), (K,))
    Z = prob.H @ B.T
    _, p, q = soft_flow(Z, theta, gamma)
    d = prob.pi @ p
    loss = 0.5 * np.sum(prob.omega[:, None] * q * (prob.y[:, None] - Z) ** 2)
    W = B[:, :-1]
    reg = 0.5 * np.sum(rho[:, None] * (W**2 / sigma + sigma))
    per_tree = ((W * d[:, None]) ** 2).sum(axis=0)
    tree = 0.5 * np.sum(prob.e * (per_tree / kappa + kappa))
    feat = 0.5 * np.sum(prob.c * ((prob.F.astype(np.float64) @ per_tree) / eta + eta))
    return float(loss + reg + lam * (tree + feat))


def prune(beta: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Set tree weights (not the bias, last) whose weighted output is negligible to 0."""
    out = beta.copy()
    out[:-1] = np.where(np.abs(beta[:-1]) * scale[:-1] > ZERO_TOL, beta[:-1], 0.0)
    return out


def to_signs(y: Any, forest: Forest) -> np.ndarray:
    """Binary targets as -1/+1: the forest's second class (or the larger of two values) is +1."""
    y = np.asarray(y)
    if y.ndim != 1:
        raise InputError(f"y must be 1-d, got shape {y.shape}")
    values = np.unique(y)
    if forest.classes is not None and len(forest.classes) == 2 and np.all(np.isin(values, forest.classes)):
        return np.where(y == forest.classes[1], 1.0, -1.0)
    if len(values) > 2:
        raise InputError(
            f"Cronus needs binary targets (relevant / not relevant); y has {len(values)} "
            "distinct values: binarize it first, e.g. y = (relevance >= 3)"
        )
    if len(values) == 1 and values[0] not in (-1, 0, 1, False, True):
        raise InputError(f"y holds the single value {values[0]!r}; give binary targets (0/1 or -1/+1)")
    top = values.max() if len(values) == 2 else (1 if values[0] in (1, True) else np.inf)
    return np.where(y == top, 1.0, -1.0)


def build_problem(
    forest: Forest, X: Any, y: Any, costs: CostModel | None, class_weight: Any, sample_weight: Any = None
) -> tuple[Problem, CostModel]:
    """The data of eq. (8) for ``forest`` on ``(X, y)`` under ``costs``.

    With ``sample_weight`` every mean over the examples of eq. (8) (the loss and the reach
    ``d_k`` of each stage) is weighted by it: integer weights act as repeated rows, and rows of
    weight 0 are dropped.
    """

    if forest.n_outputs != 1:
        raise InputError(
            f"Cronus re-weights the trees of a single-output ensemble (binary, "
            f"regression or ranking); this forest has {forest.n_outputs} outputs"
        )
    if costs is None:
        costs = CostModel.uniform(forest.n_features, feature_names=forest.feature_names)
    if not isinstance(costs, CostModel):
        raise TypeError(
            f"costs must be a thrifty CostModel, got {type(costs).__name__}; build one "
            "with CostModel(feature_costs, tree_cost=...)"
        )
    costs = costs.for_features(forest.feature_names, forest.n_features)
    n_cols = np.shape(X)[1] if np.ndim(X) == 2 else None
    if n_cols != forest.n_features:
        raise InputError(
            f"X must have shape (n, {forest.n_features}) (the forest's features), got {np.shape(X)}"
        )
    signs = to_signs(y, forest)
    if len(signs) != np.shape(X)[0]:
        raise InputError(f"X has {np.shape(X)[0]} rows but y has {len(signs)}")
    if len(signs) == 0:
        raise InputError("Cronus needs at least one training example")
    w = check_sample_weight(sample_weight, len(signs))
    keep = slice(None) if w is None else np.flatnonzero(w > 0)
    pi = np.full(len(signs), 1.0 / len(signs)) if w is None else w[keep] / w[keep].sum()
    signs = signs[keep]
    leaves = forest.apply(X)[keep] if costs.split_cost > 0 else np.zeros((0, forest.n_trees), dtype=np.int64)
    H = np.empty((len(signs), forest.n_trees + 1))
    H[:, :-1] = tree_scores(forest, X)[keep]
    H[:, -1] = 1.0
    prob = Problem(
        H=H,
        y=signs,
        omega=class_weights(signs, class_weight, pi),
        pi=pi,
        e=tree_eval_costs(forest, costs, leaves, pi),
        c=costs.unit_cost.copy(),
        F=tree_units(forest, costs),
        scale=np.sqrt(pi @ H**2),
    )
    return prob, costs
