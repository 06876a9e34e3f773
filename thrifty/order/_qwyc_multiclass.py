"""QWYC for multiclass ensembles (beyond the paper): rounds ordered greedily, margin exits.

A base model is a boosting round (the trees that add to each class once). After the ``r``-th
round of the order an undecided example exits, predicting its leading class, when that class's
partial score exceeds the runner-up's by more than ``eps[r]``; an exit *disagrees* when the
leading class is not the full ensemble's. As in the binary case (Algorithms 1 and 2 of the
paper), each position takes the base model with the smallest ``J_r = c |C_{r-1}| / n_exits``,
its threshold being the smallest margin whose exits keep the disagreements made so far within
``floor(alpha n)``. With sample weights every count is a sum of weights (as in the binary case).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit, prange

from thrifty.exceptions import InputError
from thrifty.forest.scores import tree_scores
from thrifty.runtime.plans import Sequential


@njit(cache=True)
def _margin(g):
    top = -np.inf
    second = -np.inf
    arg = 0
    for j in range(g.shape[0]):
        if g[j] > top:
            second = top
            top = g[j]
            arg = j
        elif g[j] > second:
            second = g[j]
    return top - second, arg


@njit(cache=True)
def _after_round(G, F, tree_class, trees, i, acc32, out):
    for j in range(G.shape[1]):
        out[j] = G[i, j]
    for t in trees:
        v = out[tree_class[t]] + F[i, t]
        out[tree_class[t]] = np.float64(np.float32(v)) if acc32 else v


@njit(cache=True)
def _threshold(margins, wrong, weight, budget):
    """Most exits with wrong ones weighing at most ``budget``: ``(n_exit, w_exit, w_wrong, eps)``.

    ``wrong[a]`` is the weight of row ``a`` if its leading class is not the full ensemble's,
    else 0; ``weight[a]`` its weight. Examples exit when their margin is ``> eps``; equal
    margins exit together, so the scan stops only between distinct margins. A margin of 0 (a
    tie for the lead) never exits.
    """
    m = margins.shape[0]
    idx = np.argsort(-margins)
    best_k, best_e, best_w, eps = 0, 0.0, 0.0, np.inf
    k, e, w = 0, 0.0, 0.0
    while k < m:
        v = margins[idx[k]]
        if v <= 0.0:
            break
        k2, e2, w2 = k, e, w
        while k2 < m and margins[idx[k2]] == v:
            w2 += wrong[idx[k2]]
            e2 += weight[idx[k2]]
            k2 += 1
        if w2 > budget:
            break
        k, e, w = k2, e2, w2
        best_k, best_e, best_w = k, e, w
        nxt = margins[idx[k]] if k < m else 0.0
        eps = 0.5 * (v + max(nxt, 0.0))
    return best_k, best_e, best_w, eps


@njit(parallel=True, cache=True)
def _scan(G, F, tree_class, rounds, cand, rows, w, full_cls, budget, acc32, n_exit, out):
    # Per candidate: exits (count, then weight), weight exiting wrong, and its threshold; the
    # rounds' trees are the CSR record ``(round_ptr, round_trees)``.
    round_ptr, round_trees = rounds
    w_exit = out[0]
    w_wrong = out[1]
    eps = out[2]
    K = G.shape[1]
    for c in prange(cand.shape[0]):
        trees = round_trees[round_ptr[cand[c]] : round_ptr[cand[c] + 1]]
        margins = np.empty(rows.shape[0])
        wrong = np.empty(rows.shape[0])
        weight = np.empty(rows.shape[0])
        g = np.empty(K)
        for a in range(rows.shape[0]):
            _after_round(G, F, tree_class, trees, rows[a], acc32, g)
            mg, arg = _margin(g)
            margins[a] = mg
            weight[a] = w[rows[a]]
            wrong[a] = weight[a] if arg != full_cls[rows[a]] else 0.0
        n_exit[c], w_exit[c], w_wrong[c], eps[c] = _threshold(margins, wrong, weight, budget)


@njit(cache=True)
def _apply_round(G, F, tree_class, trees, rows, w, eps, full_cls, acc32):
    """Add the chosen round to the undecided rows; which of them stay, and the weight of the
    new disagreements."""
    keep = np.ones(rows.shape[0], dtype=np.bool_)
    g = np.empty(G.shape[1])
    wrong = 0.0
    for a in range(rows.shape[0]):
        i = rows[a]
        _after_round(G, F, tree_class, trees, i, acc32, g)
        G[i, :] = g
        mg, arg = _margin(g)
        if mg > eps:
            keep[a] = False
            if arg != full_cls[i]:
                wrong += w[i]
    return keep, wrong


def fit_rounds(
    F: np.ndarray,
    tree_class: np.ndarray,
    rounds: list[np.ndarray],
    base: np.ndarray,
    cost: np.ndarray,
    alpha: float,
    optimize: bool,
    acc32: bool,
    progress=None,
    weight: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Greedy order of ``rounds`` and their margin thresholds.

    Parameters
    ----------
    F : ndarray of shape (n, T)
        Contribution of each tree to its class (``tree_weight * leaf value``).
    tree_class : ndarray of shape (T,)
    rounds : list of arrays of tree indices
        The base models, in the ensemble's order.
    base : ndarray of shape (K,)
        The base score.
    cost : ndarray of shape (len(rounds),)
    alpha : float
    optimize : bool
        Algorithm 1's greedy order; otherwise the rounds' own order with optimal thresholds.
    acc32 : bool
        Partial scores are summed in float32 (XGBoost), as the runtime does.
    weight : ndarray of shape (n,), optional
        Weights (> 0) of the rows: counts become sums of weights.

    Returns
    -------
    order : ndarray of round indices, eps : ndarray of thresholds per round position,
    mean_cost : float, n_disagree : float (the weight of the disagreeing rows)
    """
    n = F.shape[0]
    w = np.ones(n) if weight is None else np.ascontiguousarray(weight, dtype=np.float64)
    W = float(w.sum())
    round_ptr = np.zeros(len(rounds) + 1, dtype=np.int64)
    round_ptr[1:] = np.cumsum([len(r) for r in rounds])
    round_trees = np.concatenate(rounds).astype(np.int64)
    full = np.tile(base, (n, 1))
    for t in range(F.shape[1]):  # natural order, as Forest.predict sums
        full[:, tree_class[t]] += F[:, t]
        if acc32:
            full = full.astype(np.float32).astype(np.float64)
    full_cls = np.argmax(full, axis=1)
    G = np.tile(base, (n, 1)).astype(np.float64)
    rows = np.arange(n, dtype=np.int64)
    budget = float(alpha) * W + 1e-9
    remaining = list(range(len(rounds)))
    order, eps_out = [], []
    total_cost, spent = 0.0, 0.0
    for _ in range(len(rounds)):
        if progress is not None:
            progress()
        cand = np.asarray(remaining if optimize else remaining[:1], dtype=np.int64)
        n_exit = np.zeros(len(cand), dtype=np.int64)
        out = np.zeros((3, len(cand)))
        w_exit, w_wrong, eps = out
        eps[:] = np.inf
        if len(rows):
            _scan(
                G,
                F,
                tree_class,
                (round_ptr, round_trees),
                cand,
                rows,
                w,
                full_cls,
                budget - spent,
                acc32,
                n_exit,
                out,
            )
        reached = float(len(rows)) if weight is None else float(w[rows].sum())
        with np.errstate(divide="ignore"):
            J = np.where(n_exit > 0, cost[cand] * reached / np.where(n_exit > 0, w_exit, 1.0), np.inf)
        c = int(np.argmin(J)) if np.isfinite(J).any() else 0
        r = int(cand[c])
        total_cost += cost[r] * reached
        remaining.remove(r)
        order.append(r)
        eps_out.append(float(eps[c]) if n_exit[c] > 0 else np.inf)
        keep, wrong = _apply_round(
            G,
            F,
            tree_class,
            round_trees[round_ptr[r] : round_ptr[r + 1]],
            rows,
            w,
            eps_out[-1],
            full_cls,
            acc32,
        )
        spent += wrong
        rows = rows[keep]
    return np.asarray(order, dtype=np.int64), np.asarray(eps_out), total_cost / W, spent


def rounds_of(tree_class: np.ndarray, n_outputs: int) -> list[np.ndarray]:
    """Boosting rounds (trees ``rK .. rK+K-1`` adding to classes ``0..K-1``), or single trees
    when the forest does not have that layout."""
    T = len(tree_class)
    if T % n_outputs == 0 and np.array_equal(tree_class, np.tile(np.arange(n_outputs), T // n_outputs)):
        return [np.arange(r * n_outputs, (r + 1) * n_outputs) for r in range(T // n_outputs)]
    return [np.array([t]) for t in range(T)]


def qwyc_multiclass(
    forest,
    X,
    *,
    alpha: float,
    cost_per_tree: np.ndarray,
    optimize: bool,
    progress=None,
    weight: np.ndarray | None = None,
    rows: Any = slice(None),
):
    """A multiclass ``Sequential`` plan: rounds in QWYC order, a margin exit after each round.

    Fitted on the ``rows`` of ``X`` (with their ``weight``). Returns ``(plan, order_of_rounds,
    eps, mean_cost, n_disagree)``; the cost of a round is the sum of its trees' costs,
    ``mean_cost`` is in those units on ``X``.
    """

    if np.any(forest.tree_class < 0):
        raise InputError(
            "multiclass QWYC needs trees that each add to one class (boosting); "
            "this forest has vector leaves (a random forest)"
        )
    F = tree_scores(forest, X)[rows]
    rounds = rounds_of(forest.tree_class, forest.n_outputs)
    cost = np.array([cost_per_tree[r].sum() for r in rounds])
    order, eps, mean_cost, n_disagree = fit_rounds(
        F,
        forest.tree_class,
        rounds,
        forest.base_score.astype(np.float64),
        cost,
        alpha,
        optimize,
        forest.accumulate == "float32",
        progress,
        weight,
    )
    tree_order = np.concatenate([rounds[r] for r in order])
    eps_pos = np.full(len(tree_order), np.inf)
    ends = np.cumsum([len(rounds[r]) for r in order]) - 1
    eps_pos[ends] = eps
    return Sequential(forest, tree_order, eps_pos), order, eps, mean_cost, n_disagree
