"""The njitted decision rule of one split node, shared by prediction and the cost runtime."""

from __future__ import annotations

import numpy as np
from numba import njit

# LightGBM's kZeroThreshold (1e-35f): values this close to zero count as zero.
ZERO = float(np.float32(1e-35))


def fast_thresholds(threshold: np.ndarray, missing_type: np.ndarray, cat_start: np.ndarray) -> np.ndarray:
    """Thresholds for the fast path: NaN where a plain comparison cannot decide the split.

    Categorical nodes and nodes where zero counts as missing get NaN, so both comparisons in
    ``next_node`` fail and the full rule decides; every other split is ``v <= t`` / ``v > t``.
    """
    fast = threshold.copy()
    fast[(cat_start >= 0) | (missing_type == 2)] = np.nan
    return fast


@njit(inline="always", cache=True)
def next_node(
    node,
    v,
    fast_threshold,
    threshold,
    children_left,
    children_right,
    missing_left,
    missing_type,
    cat_start,
    cat_size,
    cat_bitsets,
):
    """Child of split ``node`` that an example with feature value ``v`` goes to."""
    t = fast_threshold[node]
    if v <= t or v > t:
        # The outcome selects the child arithmetically: one predictable branch per node.
        left = children_left[node]
        return left + (children_right[node] - left) * (v > t)
    return _full_rule(
        node,
        v,
        threshold,
        children_left,
        children_right,
        missing_left,
        missing_type,
        cat_start,
        cat_size,
        cat_bitsets,
    )


@njit(inline="always", cache=True)
def child(nodes, node, v):
    """``next_node`` of the node record ``nodes`` (``Forest.nodes``)."""
    _, fast, thr, left, right, mleft, mtype, cstart, csize, cbits = nodes
    return next_node(node, v, fast, thr, left, right, mleft, mtype, cstart, csize, cbits)


@njit(inline="always", cache=True)
def _full_rule(
    node,
    v,
    threshold,
    children_left,
    children_right,
    missing_left,
    missing_type,
    cat_start,
    cat_size,
    cat_bitsets,
):
    """The complete split rule: categories, NaN handling and LightGBM's missing types."""
    cs = cat_start[node]
    if cs >= 0:
        if np.isnan(v):
            return children_left[node] if missing_left[node] else children_right[node]
        # C++ int conversion truncates toward zero: -0.5 reads as category 0.
        if v > -1.0 and v < 32.0 * cat_size[node]:
            c = int(v)
            if (cat_bitsets[cs + (c >> 5)] >> np.uint32(c & 31)) & np.uint32(1):
                return children_left[node]
        return children_right[node]
    mt = missing_type[node]
    if np.isnan(v):
        if mt == 1:
            v = 0.0
        else:
            return children_left[node] if missing_left[node] else children_right[node]
    elif mt == 2 and v >= -ZERO and v <= ZERO:
        return children_left[node] if missing_left[node] else children_right[node]
    if v <= threshold[node]:
        return children_left[node]
    return children_right[node]


@njit(inline="always", cache=True)
def add_leaf(acc, w, leaf, acc32):
    """``acc + w * leaf``, or XGBoost's float32 ``acc + float32(w * leaf)`` when ``acc32``."""
    if acc32:
        return np.float64(np.float32(acc + np.float64(np.float32(w * leaf))))
    return acc + w * leaf


@njit(inline="always", cache=True)
def add_tree(out, i, leaf, k, w, value, width, acc32):
    """Add a tree's leaf to row ``i``'s raw scores: output ``k``, or every output when ``k < 0``."""
    if k >= 0:
        out[i, k] = add_leaf(out[i, k], w, value[leaf, 0], acc32)
    else:
        for j in range(width):
            out[i, j] = add_leaf(out[i, j], w, value[leaf, j], acc32)


@njit(inline="always", cache=True)
def walk_pair(
    X,
    i,
    j,
    root,
    nodes,
    record,
    touched,
    n_nodes,
):
    """Leaves reached by rows ``i`` and ``j`` from ``root``, walked in lockstep so their
    independent chains of loads overlap in the CPU; with ``record``, marks the features each
    row tests and counts its splits."""
    feature = nodes[0]
    a = root
    c = root
    va = 0
    vc = 0
    while True:
        fa = feature[a]
        fc = feature[c]
        if fa < 0 and fc < 0:
            break
        if fa >= 0:
            if record:
                touched[i, fa] = True
                va += 1
            a = child(nodes, a, X[i, fa])
        if fc >= 0:
            if record:
                touched[j, fc] = True
                vc += 1
            c = child(nodes, c, X[j, fc])
    if record:
        n_nodes[i] += va
        n_nodes[j] += vc
    return a, c


@njit(inline="always", cache=True)
def walk_one(
    X,
    i,
    root,
    nodes,
    record,
    touched,
    n_nodes,
):
    """Leaf reached by row ``i`` from ``root`` (``walk_pair`` for a lone row)."""
    feature = nodes[0]
    node = root
    while feature[node] >= 0:
        f = feature[node]
        if record:
            touched[i, f] = True
            n_nodes[i] += 1
        node = child(nodes, node, X[i, f])
    return node
