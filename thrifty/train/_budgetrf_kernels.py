"""Njitted routines growing one BudgetRF tree: admissible impurities and the cost-weighted split,
for classification (class counts) and regression (sums of weights, targets and squares).

The split rule of Nan, Wang & Saligrama, "Feature-budgeted random forest" (ICML 2015), Alg. 1:
at a node with impurity ``F(G)``, for each candidate feature ``f`` take the threshold minimising
the children's impurity -- ``max(F(G_l), F(G_r))`` (``minmax``, the worst case the paper's
guarantee is about) or ``(|G_l| F(G_l) + |G_r| F(G_r)) / |G|`` (``expected``) -- then pick the
feature minimising ``c_f / (F(G) - that impurity)``. A node whose impurity is 0 is a leaf.

Sample weights enter through the class counts: ``n_i`` is the total weight of the node's
class-``i`` examples and ``|G|`` the node's total weight, so every impurity is the paper's
with each example counted ``w`` times. A regressor's node keeps ``(W, S1, S2)`` instead and is
judged by the squared-pairs impurity (``impurity``), weighted the same way. Missing values (NaN;
also the code of a missing pandas category) are not in the paper: they follow one learned
direction per node, the one giving the lower criterion, as LightGBM and scikit-learn's trees
route them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

IMPURITY_CODES = {"pairs": 0, "entropy": 1, "powers": 2}
# A regressor's impurity: pairs of examples weighted by their squared target difference.
SQUARED_PAIRS = 3
SPLIT_CODES = {"minmax": 0, "expected": 1}

# Impurity reductions below this are rounding noise, not a split worth paying for: relative to
# the node's impurity plus one for class counts (an impure node's Pairs is at least 1), relative
# to the impurity alone for squared pairs (which can be any small positive number).
_MIN_REDUCTION = 1e-7
# Relative size of W S2 - S1^2 under which squared pairs are rounding of a constant target.
_ROUNDING = 1e-12


@njit(cache=True)
def impurity(counts, kind, alpha, power):
    """Admissible impurity of a node with class ``counts`` (Nan et al. 2015, Section 3.2), or
    for a regressor (``kind == SQUARED_PAIRS``) with the sums ``counts = (W, S1, S2)`` of its
    weights ``w_i``, ``w_i y_i`` and ``w_i y_i^2``.

    * ``pairs`` (threshold-Pairs): ``sum_{i<j} [[n_i - alpha]_+ [n_j - alpha]_+ - alpha^2]_+``;
      with ``alpha = 0`` the number of pairs of differently labelled examples.
    * ``entropy``: ``-sum_i p_i log p_i`` of the class frequencies, 0 when below ``alpha``.
    * ``powers``: ``(sum_i m_i)^power - sum_i m_i^power`` with ``m_i = [n_i - alpha]_+``
      (twice ``pairs`` for ``power=2, alpha=0``).
    * squared pairs (regression): ``[sum_{i<j} w_i w_j (y_i - y_j)^2 - alpha]_+``, which is
      ``[W S2 - S1^2 - alpha]_+``. It is the regression analogue of Pairs (a pair of differently
      labelled examples counts 1, a pair of targets ``d`` apart counts ``d^2``) and keeps the
      properties the paper's guarantee rests on: it is 0 exactly on nodes of one target value
      (with ``alpha = 0``); it is monotone (a subset has a sub-sum of non-negative pair terms);
      and it is supermodular, since adding example ``j`` to ``G`` adds ``sum_{i in G} w_i w_j
      (y_i - y_j)^2``, which only grows with ``G``. ``[. - alpha]_+`` is convex and
      non-decreasing, and such a function of a monotone supermodular function is again
      monotone supermodular, so the threshold keeps admissibility as in threshold-Pairs. (The
      node's squared error ``S2 - S1^2 / W``, CART's criterion, is monotone but not
      supermodular: adding a far target to a singleton can add more than adding it to a larger
      set.) The ``O(log n)`` factor of the bound becomes ``log(F(root) / F_min)``, ``F_min``
      the least non-zero impurity of a node, which targets on a grid make bounded.
    """
    if kind == SQUARED_PAIRS:
        v = counts[0] * counts[2] - counts[1] * counts[1]
        # what is left of W S2 - S1^2 on a constant target is rounding, not impurity
        if v <= _ROUNDING * counts[0] * counts[2]:
            return 0.0
        v -= alpha
        return v if v > 0.0 else 0.0
    n_classes = counts.shape[0]
    if kind == 0:
        out = 0.0
        for i in range(n_classes - 1):
            a = counts[i] - alpha
            if a <= 0.0:
                continue
            for j in range(i + 1, n_classes):
                b = counts[j] - alpha
                if b > 0.0:
                    v = a * b - alpha * alpha
                    if v > 0.0:
                        out += v
        return out
    if kind == 1:
        total = 0.0
        for i in range(n_classes):
            total += counts[i]
        if total <= 0.0:
            return 0.0
        h = 0.0
        for i in range(n_classes):
            if counts[i] > 0.0:
                p = counts[i] / total
                h -= p * np.log(p)
        return h if h >= alpha else 0.0
    s = 0.0
    sp = 0.0
    for i in range(n_classes):
        m = counts[i] - alpha
        if m > 0.0:
            s += m
            sp += m**power
    v = s**power - sp
    return v if v > 0.0 else 0.0


@njit(cache=True)
def _criterion(c_l, c_r, w_l, w_r, kind, alpha, power, split_rule):
    """The children's impurity a split is judged by: their maximum (minmax) or their
    weight-averaged mean (expected)."""
    il = impurity(c_l, kind, alpha, power)
    ir = impurity(c_r, kind, alpha, power)
    if split_rule == 0:
        return il if il > ir else ir
    return (w_l * il + w_r * ir) / (w_l + w_r)


@njit(cache=True)
def _weight(sums, kind):
    """The total weight of a node's (or a side's) sums: the class counts' sum, or ``W``."""
    if kind == SQUARED_PAIRS:
        return sums[0]
    return sums.sum()


@njit(cache=True, inline="always")
def _add(sums, c, row, sign):
    for j in range(row.shape[0]):
        sums[c + j] += sign * row[j]


@njit(cache=True)
def grow_tree(
    X,
    col,
    stats,
    n_columns,
    sample,
    feature_cost,
    criterion,
    limits,
    seed,
):
    """Grow one tree on the rows ``sample`` (with repeats, e.g. a bootstrap).

    Row ``i`` adds ``stats[i]`` into columns ``col[i]:col[i] + stats.shape[1]`` of the sums of
    every node it reaches (``n_columns`` of them): its weight ``stats[i, 0]`` in its class's
    column for a classifier, ``(w, w y, w y^2)`` for a regressor. It does so each time it
    appears in ``sample`` (hence in the impurities, the ``expected`` rule's child sizes and
    ``min_samples_split``), so an integer weight is the same as repeating the row. NaN is
    routed to the child (``missing_left``) that gives the lower criterion; at a node where the
    chosen feature had no NaN it goes to the heavier child.

    Returns node arrays (root 0) ``feature`` (-1 at leaves), ``threshold``, ``left``,
    ``right``, ``missing_left`` and ``counts`` (each node's sums).
    ``criterion`` is the record ``(kind, alpha, power, split_rule)``, ``limits``
    ``(max_depth, min_samples_split, max_features)``.
    """
    kind, alpha, power, split_rule = criterion
    max_depth, min_samples_split, max_features = limits
    np.random.seed(seed)
    n = sample.shape[0]
    n_features = X.shape[1]
    cap = 2 * n + 1
    feature = np.full(cap, -1, dtype=np.int64)
    threshold = np.zeros(cap)
    left = np.full(cap, -1, dtype=np.int64)
    right = np.full(cap, -1, dtype=np.int64)
    missing_left = np.zeros(cap, dtype=np.bool_)
    counts = np.zeros((cap, n_columns))
    idx = sample.copy()
    # work stack of (node, start, end, depth)
    st_node = np.empty(cap, dtype=np.int64)
    st_start = np.empty(cap, dtype=np.int64)
    st_end = np.empty(cap, dtype=np.int64)
    st_depth = np.empty(cap, dtype=np.int64)
    st_node[0] = 0
    st_start[0] = 0
    st_end[0] = n
    st_depth[0] = 0
    top = 1
    n_nodes = 1
    features = np.arange(n_features)
    c_l = np.zeros(n_columns)
    c_r = np.zeros(n_columns)
    c_nan = np.zeros(n_columns)
    c_l2 = np.zeros(n_columns)
    c_r2 = np.zeros(n_columns)
    tmp = np.empty(n, dtype=np.int64)
    while top > 0:
        top -= 1
        node = st_node[top]
        start = st_start[top]
        end = st_end[top]
        depth = st_depth[top]
        m = end - start
        for k in range(start, end):
            _add(counts[node], col[idx[k]], stats[idx[k]], 1.0)
        total = _weight(counts[node], kind)
        imp = impurity(counts[node], kind, alpha, power)
        if imp <= 0.0 or depth >= max_depth or total < min_samples_split:
            continue
        # random candidate features: a partial Fisher-Yates shuffle
        for k in range(max_features):
            j = k + np.random.randint(n_features - k)
            features[k], features[j] = features[j], features[k]
        best_score = np.inf
        best_red = 0.0
        best_f = -1
        best_t = 0.0
        best_nan_left = False
        for kf in range(max_features):
            f = features[kf]
            vals = np.empty(m)
            for k in range(m):
                vals[k] = X[idx[start + k], f]
            order = np.argsort(vals)  # NaN sorts last
            m_valid = m
            while m_valid > 0 and np.isnan(vals[order[m_valid - 1]]):
                m_valid -= 1
            c_nan[:] = 0.0
            for k in range(m_valid, m):
                r = idx[start + order[k]]
                _add(c_nan, col[r], stats[r], 1.0)
            w_nan = _weight(c_nan, kind)
            c_l[:] = 0.0
            c_r[:] = counts[node] - c_nan
            w_l = 0.0
            w_r = total - w_nan
            best_crit = np.inf
            t_f = 0.0
            nan_left_f = False
            # with NaN present, the last boundary (every value left, NaN right) splits on
            # missingness alone
            last = m_valid if w_nan > 0.0 else m_valid - 1
            for k in range(last):
                r = idx[start + order[k]]
                _add(c_l, col[r], stats[r], 1.0)
                _add(c_r, col[r], stats[r], -1.0)
                w_l += stats[r, 0]
                w_r -= stats[r, 0]
                a = vals[order[k]]
                if k + 1 < m_valid:
                    b = vals[order[k + 1]]
                    if a == b:
                        continue
                    t = 0.5 * (a + b)
                    # the midpoint of two adjacent doubles can round up to b
                    t = t if t < b else a
                else:
                    t = a
                if w_nan > 0.0:
                    for c in range(n_columns):
                        c_r2[c] = c_r[c] + c_nan[c]
                    crit = _criterion(c_l, c_r2, w_l, w_r + w_nan, kind, alpha, power, split_rule)
                else:
                    crit = _criterion(c_l, c_r, w_l, w_r, kind, alpha, power, split_rule)
                if crit < best_crit:
                    # no NaN seen here: at prediction NaN follows the heavier child
                    best_crit, t_f, nan_left_f = crit, t, w_nan == 0.0 and w_l >= w_r
                if w_nan > 0.0 and k + 1 < m_valid:
                    for c in range(n_columns):
                        c_l2[c] = c_l[c] + c_nan[c]
                    crit = _criterion(c_l2, c_r, w_l + w_nan, w_r, kind, alpha, power, split_rule)
                    if crit < best_crit:
                        best_crit, t_f, nan_left_f = crit, t, True
            red = imp - best_crit
            if red <= _MIN_REDUCTION * (imp if kind == SQUARED_PAIRS else 1.0 + imp):
                continue
            score = feature_cost[f] / red
            if score < best_score or (score == best_score and red > best_red):
                best_score = score
                best_red = red
                best_f = f
                best_t = t_f
                best_nan_left = nan_left_f
        if best_f < 0:
            continue
        # stable partition of idx[start:end] by the chosen split
        n_left = 0
        n_right = 0
        for k in range(start, end):
            x = X[idx[k], best_f]
            if x <= best_t or (best_nan_left and np.isnan(x)):
                idx[start + n_left] = idx[k]
                n_left += 1
            else:
                tmp[n_right] = idx[k]
                n_right += 1
        for k in range(n_right):
            idx[start + n_left + k] = tmp[k]
        feature[node] = best_f
        threshold[node] = best_t
        missing_left[node] = best_nan_left
        lnode = n_nodes
        rnode = n_nodes + 1
        n_nodes += 2
        left[node] = lnode
        right[node] = rnode
        # right pushed first so the left subtree is grown (and numbered) first
        st_node[top] = rnode
        st_start[top] = start + n_left
        st_end[top] = end
        st_depth[top] = depth + 1
        top += 1
        st_node[top] = lnode
        st_start[top] = start
        st_end[top] = start + n_left
        st_depth[top] = depth + 1
        top += 1
    return (
        feature[:n_nodes].copy(),
        threshold[:n_nodes].copy(),
        left[:n_nodes].copy(),
        right[:n_nodes].copy(),
        missing_left[:n_nodes].copy(),
        counts[:n_nodes].copy(),
    )
