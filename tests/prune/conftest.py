"""Fixtures giving independent references for BudgetPrune's (IP3), written from the paper on
scikit-learn's trees: its LP relaxation solved by HiGHS, and brute force over every pruning of a
small forest."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog


@pytest.fixture
def ip3_lp():
    """:func:`_ip3_lp`: (IP3)'s LP relaxation solved by HiGHS."""
    return _ip3_lp


@pytest.fixture
def ip3_regression_brute_force():
    """:func:`_ip3_regression_brute_force`: the least (IP3) objective of a regression forest."""
    return _ip3_regression_brute_force


def _ip3_lp(trees, X, costs, lam, node_error):
    """LP relaxation of (IP3) written from the paper, solved by HiGHS; sklearn gives the paths.

    Variables: z_h (every node of every tree), w^(t)_{k,i} (feature k used by example i in
    tree t), w_{k,i}. ``node_error(tree_, h, rows)`` is ``e_h`` of node ``h`` of a tree whose
    examples are the boolean ``rows``. Returns (optimal value, solution, number of z and w^(t)
    variables).
    """
    N, T = X.shape[0], len(trees)
    offsets = np.cumsum([0] + [e.tree_.node_count for e in trees])
    n_z = offsets[-1]
    w_index = {}  # (k, i) -> column of w_{k,i}
    wt_cols = []  # (t, k, i, u) for each w^(t)_{k,i}, u = first node using k on i's path
    e = np.zeros(n_z)
    parents = []
    for t, est in enumerate(trees):
        tr = est.tree_
        parent = np.full(tr.node_count, -1)
        for h in range(tr.node_count):
            if tr.children_left[h] >= 0:
                parent[tr.children_left[h]] = h
                parent[tr.children_right[h]] = h
        parents.append(parent)
        paths = est.decision_path(X.astype(np.float32)).toarray().astype(bool)
        for h in range(tr.node_count):
            e[offsets[t] + h] = node_error(tr, h, paths[:, h])
        for i in range(N):
            seen = set()
            for h in np.flatnonzero(paths[i]):  # node ids increase along a path (preorder)
                k = tr.feature[h]
                if tr.children_left[h] < 0 or k in seen:
                    continue
                seen.add(k)
                wt_cols.append((t, k, i, h))
                w_index.setdefault((k, i), len(w_index))

    def ancestors(t, h):
        out = []
        while parents[t][h] >= 0:
            h = parents[t][h]
            out.append(h)
        return out

    n_wt, n_w = len(wt_cols), len(w_index)
    n_var = n_z + n_wt + n_w
    cost = np.zeros(n_var)
    cost[:n_z] = e / (N * T)
    for (k, _), col in w_index.items():
        cost[n_z + n_wt + col] = lam * costs[k] / N
    rows, cols, b_eq = [], [], []
    r = 0
    for t, est in enumerate(trees):
        tr = est.tree_
        for h in range(tr.node_count):
            if tr.children_left[h] < 0:  # z_h + sum_{p(h)} z = 1 for every leaf
                for g in [h] + ancestors(t, h):
                    rows.append(r)
                    cols.append(offsets[t] + g)
                b_eq.append(1.0)
                r += 1
    for j, (t, _, _, u) in enumerate(wt_cols):  # w^(t) + z_u + sum_{p(u)} z = 1
        rows.append(r)
        cols.append(n_z + j)
        for g in [u] + ancestors(t, u):
            rows.append(r)
            cols.append(offsets[t] + g)
        b_eq.append(1.0)
        r += 1
    A_eq = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(r, n_var))
    ub_rows, ub_cols, ub_vals = [], [], []
    for j, (_, k, i, _) in enumerate(wt_cols):  # w^(t)_{k,i} <= w_{k,i}
        ub_rows += [j, j]
        ub_cols += [n_z + j, n_z + n_wt + w_index[(k, i)]]
        ub_vals += [1.0, -1.0]
    A_ub = sp.csr_matrix((ub_vals, (ub_rows, ub_cols)), shape=(n_wt, n_var))
    res = linprog(cost, A_ub=A_ub, b_ub=np.zeros(n_wt), A_eq=A_eq, b_eq=b_eq, bounds=(0, 1), method="highs")
    assert res.status == 0, res.message
    return res.fun, res.x, n_z + n_wt


def _prunings(tree):
    """Every pruning of a scikit-learn tree, as the set of its split nodes kept (closed upwards)."""

    def below(h):
        if tree.children_left[h] < 0:
            return [frozenset()]
        out = [frozenset()]
        for left, right in itertools.product(below(tree.children_left[h]), below(tree.children_right[h])):
            out.append(frozenset({h}) | left | right)
        return out

    return below(0)


def _ip3_regression_brute_force(trees, X, y, weight, costs, lam):
    """The least (IP3) objective over every pruning of every tree, from the definitions alone.

    Regression: a leaf of a pruned tree predicts the weighted mean target of the examples
    reaching it; the error term is the weighted mean over examples and trees of the squared
    error, the cost term ``lam`` times the weighted mean over examples of the summed price of
    the features any kept split on its paths tests.
    """
    Xf = X.astype(np.float32)
    W, T = weight.sum(), len(trees)
    per_tree = []
    for est in trees:
        tr = est.tree_
        paths = est.decision_path(Xf).toarray().astype(bool)
        options = []
        for kept in _prunings(tr):
            leaf = np.zeros(len(y), dtype=np.int64)
            used = np.zeros((len(y), len(costs)), dtype=bool)
            for h in range(tr.node_count):  # preorder: a path's deepest kept node comes last
                on = paths[:, h]
                if h == 0 or _parent(tr, h) in kept:  # kept splits are closed upwards
                    leaf[on] = h
                if h in kept:
                    used[on, tr.feature[h]] = True
            sse = 0.0
            for h in np.unique(leaf):
                rows = leaf == h
                mean = np.average(y[rows], weights=weight[rows])
                sse += np.sum(weight[rows] * (y[rows] - mean) ** 2)
            options.append((sse, used))
        per_tree.append(options)
    best = np.inf
    for combo in itertools.product(*per_tree):
        error = sum(sse for sse, _ in combo) / (W * T)
        used = np.logical_or.reduce([u for _, u in combo])
        cost = np.sum(weight * (used @ np.asarray(costs))) / W
        best = min(best, error + lam * cost)
    return best


def _parent(tree, h):
    return int(np.flatnonzero((tree.children_left == h) | (tree.children_right == h))[0])
