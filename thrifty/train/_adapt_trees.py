"""Cost-aware regression trees of ADAPT-GBRT (impurities (1) and (2) of Nan & Saligrama 2017).

Private. Features are binned once (``Binner``); ``grow_tree`` fits one depth-limited CART tree
to a negative gradient with the impurity ``1/2 sum_i (r_i - h(x_i))^2 + gamma sum_a u_a c_a V_a``
where ``u_a = 1`` until some tree of the gate or of the low-cost model has used feature ``a``.
Splits are chosen greedily, breadth first; a split on a feature not yet acquired pays the cost
of every unit (feature group) the feature needs and not yet paid, so groups and dependencies
are priced exactly as the runtime will charge them. Leaves take a Newton step
``-sum(grad) / (sum(hess) + lam)`` (Friedman's TreeBoost leaf values for the logistic loss).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from thrifty.forest import Forest
from thrifty.forest.builder import ForestBuilder

MAX_BINS = 255


class Binner:
    """Quantile bins per feature: bin 0 holds NaN, bin ``j >= 1`` holds ``(edges[j-2], edges[j-1]]``.

    A split "bin <= j" is the forest split ``x <= edges[j-1]`` with NaN going left.
    """

    def __init__(self, X: np.ndarray, max_bins: int = MAX_BINS, weight: np.ndarray | None = None) -> None:
        self.edges: list[np.ndarray] = []
        weight = np.ones(X.shape[0]) if weight is None else weight
        levels = np.linspace(0, 1, max_bins + 1)[1:]
        for j in range(X.shape[1]):
            col = X[:, j]
            seen = ~np.isnan(col)
            values, inverse = np.unique(col[seen], return_inverse=True)
            if len(values) > max_bins:
                # weighted inverted-CDF quantiles: the smallest value whose cumulative weight
                # reaches each level (a row of weight k counts as k rows)
                cum = np.cumsum(np.bincount(inverse, weights=weight[seen], minlength=len(values)))
                pos = np.searchsorted(cum, levels * cum[-1], side="left")
                values = np.unique(values[np.minimum(pos, len(values) - 1)])
            self.edges.append(values.astype(np.float64))
        self.n_bins = np.asarray([len(e) + 1 for e in self.edges], dtype=np.int64)

    def transform(self, X: np.ndarray) -> np.ndarray:
        out = np.zeros(X.shape, dtype=np.uint8)
        for j, e in enumerate(self.edges):
            col = X[:, j]
            b = np.searchsorted(e, col, side="left") + 1
            b = np.minimum(b, len(e))  # values above the largest edge share the last bin
            b[np.isnan(col)] = 0
            out[:, j] = b
        return out

    def threshold(self, feature: int, bin_: int) -> float:
        return float(self.edges[feature][bin_ - 1]) if bin_ >= 1 else -np.inf


@njit(cache=True)
def _new_cost(f, acquired, closure_ptr, closure_units, unit_cost):
    """Cost of the units feature ``f`` needs that are not acquired yet."""
    c = 0.0
    for k in range(closure_ptr[f], closure_ptr[f + 1]):
        u = closure_units[k]
        if not acquired[u]:
            c += unit_cost[u]
    return c


@njit(cache=True)
def _fill_hist(hs, hw, hc, slot, binned, n_bins, resid, weight, idx, lo, hi):
    """Histograms (weighted sum of residuals, sum of weights, rows) per feature and bin of rows
    ``idx[lo:hi]``."""
    F = binned.shape[1]
    for f in range(F):
        for b in range(n_bins[f]):
            hs[slot, f, b] = 0.0
            hw[slot, f, b] = 0.0
            hc[slot, f, b] = 0
    # rows outer, features inner: one contiguous pass over each row's bins
    for k in range(lo, hi):
        i = idx[k]
        wi = weight[i]
        r = wi * resid[i]
        for f in range(F):
            b = binned[i, f]
            hs[slot, f, b] += r
            hw[slot, f, b] += wi
            hc[slot, f, b] += 1


@njit(cache=True)
def grow_tree(
    binned,
    n_bins,
    resid,
    weight,
    grad,
    hess,
    acquired,
    costs,
    gamma,
    limits,
    w_total,
):
    """One tree fitted to ``resid`` by weighted least squares (breadth first), with the
    cost-aware impurity.

    Row ``i`` counts ``weight[i]`` times: in the squared error, in ``min_leaf`` (a leaf needs
    that much weight) and in the leaf's Newton step ``-sum(grad) / (sum(hess) + lam)``, whose
    ``grad`` and ``hess`` come already weighted. ``acquired`` (bool per cost unit) is updated in
    place with the units the tree uses. The squared-error reduction is divided by
    ``2 * w_total`` so that ``gamma`` trades cost against the mean (not the summed) squared
    error. Returns node arrays (local indices) and each row's leaf: ``feature, bin, left,
    right, value, leaf_of_row``. ``costs`` is the record ``(closure_ptr, closure_units,
    unit_cost)`` of the cost model's closures and unit prices, ``limits`` ``(max_depth,
    min_leaf, lam)``.
    """
    closure_ptr, closure_units, unit_cost = costs
    max_depth, min_leaf, lam = limits
    n, F = binned.shape
    max_nodes = 2 ** (max_depth + 1) - 1
    feature = np.full(max_nodes, -1, dtype=np.int64)
    split_bin = np.zeros(max_nodes, dtype=np.int64)
    left = np.full(max_nodes, -1, dtype=np.int64)
    right = np.full(max_nodes, -1, dtype=np.int64)
    value = np.zeros(max_nodes)
    idx = np.arange(n)
    start = np.zeros(max_nodes, dtype=np.int64)
    stop = np.zeros(max_nodes, dtype=np.int64)
    depth = np.zeros(max_nodes, dtype=np.int64)
    leaf_of_row = np.zeros(n, dtype=np.int64)
    stop[0] = n
    n_nodes = 1
    # Histograms of the nodes that may split (depth < max_depth have BFS ids below n_inner):
    # a node's is computed directly for the root and the smaller child, by subtraction from
    # the parent's for the larger one.
    n_inner = 2**max_depth - 1
    hs = np.empty((n_inner, F, MAX_BINS + 1))
    hw = np.empty((n_inner, F, MAX_BINS + 1))
    hc = np.empty((n_inner, F, MAX_BINS + 1), dtype=np.int64)
    queue_pos = 0
    while queue_pos < n_nodes:
        node = queue_pos
        queue_pos += 1
        lo, hi = start[node], stop[node]
        m = 0.0
        S = 0.0
        G = 0.0
        H = 0.0
        for k in range(lo, hi):
            i = idx[k]
            m += weight[i]
            S += weight[i] * resid[i]
            G += grad[i]
            H += hess[i]
        value[node] = -G / (H + lam)
        best_score = 1e-12
        best_f = -1
        best_b = -1
        if depth[node] < max_depth and m >= 2 * min_leaf:
            base = S * S / m
            # Gains within rounding of each other are ties, kept by the first split found: the
            # same split wins whatever order the sums were taken in (a weighted row or its copies).
            tie = 1e-10 * base / (2.0 * w_total)
            if node == 0:
                _fill_hist(hs, hw, hc, 0, binned, n_bins, resid, weight, idx, lo, hi)
            for f in range(F):
                nb = n_bins[f]
                pen = gamma * _new_cost(f, acquired, closure_ptr, closure_units, unit_cost)
                sl = 0.0
                nl = 0.0
                for b in range(nb - 1):
                    sl += hs[node, f, b]
                    nl += hw[node, f, b]
                    nr = m - nl
                    if nl < min_leaf:
                        continue
                    if nr < min_leaf:
                        break
                    if hc[node, f, b] == 0:
                        continue
                    sr = S - sl
                    gain = (sl * sl / nl + sr * sr / nr - base) / (2.0 * w_total)
                    score = gain - pen
                    if score > best_score + tie:
                        best_score = score
                        best_f = f
                        best_b = b
        if best_f < 0:
            for k in range(lo, hi):
                leaf_of_row[idx[k]] = node
            continue
        # partition rows of the node: bin <= best_b to the left
        a = lo
        z = hi - 1
        while a <= z:
            if binned[idx[a], best_f] <= best_b:
                a += 1
            else:
                t = idx[a]
                idx[a] = idx[z]
                idx[z] = t
                z -= 1
        feature[node] = best_f
        split_bin[node] = best_b
        for k in range(closure_ptr[best_f], closure_ptr[best_f + 1]):
            acquired[closure_units[k]] = True
        for side in range(2):
            c = n_nodes
            n_nodes += 1
            depth[c] = depth[node] + 1
            if side == 0:
                start[c], stop[c] = lo, a
                left[node] = c
            else:
                start[c], stop[c] = a, hi
                right[node] = c
        if depth[node] + 1 < max_depth:
            small, large = left[node], right[node]
            if stop[small] - start[small] > stop[large] - start[large]:
                small, large = large, small
            _fill_hist(hs, hw, hc, small, binned, n_bins, resid, weight, idx, start[small], stop[small])
            for f in range(F):
                for b in range(n_bins[f]):
                    hs[large, f, b] = hs[node, f, b] - hs[small, f, b]
                    hw[large, f, b] = hw[node, f, b] - hw[small, f, b]
                    hc[large, f, b] = hc[node, f, b] - hc[small, f, b]
    return (
        feature[:n_nodes],
        split_bin[:n_nodes],
        left[:n_nodes],
        right[:n_nodes],
        value[:n_nodes],
        leaf_of_row,
    )


class TreeList:
    """Trees grown so far for one model (one output each), turned into a Forest at the end."""

    def __init__(self) -> None:
        self.trees: list[tuple[np.ndarray, ...]] = []
        self.outputs: list[int] = []

    def add(self, tree: tuple[np.ndarray, ...], output: int) -> None:
        self.trees.append(tree[:5])
        self.outputs.append(output)

    def used_features(self) -> set[int]:
        return {int(f) for t in self.trees for f in t[0] if f >= 0}

    def to_forest(
        self,
        binner: Binner,
        *,
        base_score: np.ndarray,
        learning_rate: float,
        n_features: int,
        width: int,
        link: str,
        task: str,
        classes: np.ndarray | None,
        feature_names: list[str] | None,
        categories: dict[int, list] | None = None,
    ) -> Forest:
        builder = ForestBuilder(1)
        for (feat, bins, left, right, value), k in zip(self.trees, self.outputs):
            thr = np.array([binner.threshold(int(f), int(b)) if f >= 0 else 0.0 for f, b in zip(feat, bins)])
            builder.add_tree(
                feat, thr, left, right, value, missing_left=True, weight=learning_rate, tree_class=k
            )
        return builder.build(
            base_score=np.asarray(base_score, dtype=np.float64).reshape(width),
            n_features=n_features,
            link=link,
            task=task,
            classes=classes,
            feature_names=feature_names,
            categories=categories or {},
            source="thrifty:adapt",
        )
