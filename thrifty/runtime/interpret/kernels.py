"""This module contains the njitted, resumable kernels that evaluate plans and account cost.

Every kernel advances the given rows until each one finishes or *blocks* on a feature whose
value is not known yet (lazy mode); it records the blocking feature and where it stopped, so
the next call resumes exactly there. Dense mode is the same kernel with every value known,
hence dense and lazy evaluation agree by construction. Kernels mark the features each example
tests; ``settle_costs`` then prices that set exactly (closures, each unit paid once).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from thrifty.forest.kernels import Twin, add_leaf, add_tree, child, walk_one, walk_pair

# Arguments travel in records: tuples of what a kernel only reads (``inputs``, ``trees``,
# ``exits``, ``stages``), and 2-D arrays of what it writes, one row per field (``tally``,
# ``place``, ``flags``; their rows are named below), each row bound in its own statement.
# numba 0.68 silently drops a prange loop's writes to an array bound by unpacking four or more
# values (``a, b, c, d = ...``), a tuple argument's or not; ``tests/test_structure.py`` keeps
# every written array out of such an assignment.

# Rows of ``tally`` (int64, a context's per-row counters): splits visited, trees evaluated, the
# feature the row waits for (-1 when none).
NODES, TREES, BLOCKED = 0, 1, 2
# Rows of ``place`` (int64, where a row is): position in the order (the cascade's stage and
# position in it), and the node it stopped at (-1 when at a tree's root).
POS, CUR = 0, 1
STAGE, JPOS, STAGE_NODE = 0, 1, 2
# Rows of ``flags`` (bool): finished, and frozen by a bin table (no further exits).
DONE, FROZEN = 0, 1


@njit(parallel=True, cache=True)
def settle_costs(touched, closure_ptr, closure_units, unit_ptr, unit_feat, unit_cost, acquired, feat_cost):
    """Acquired features and feature cost of each row from the features its trees tested.

    The cost of an example depends only on the *set* of features tested (the union of their
    closures, each unit paid once), so it is settled after traversal instead of in the hot loop.
    """
    n, n_features = touched.shape
    n_units = unit_cost.shape[0]
    for i in prange(n):
        paid = np.zeros(n_units, dtype=np.bool_)
        total = 0.0
        for f in range(n_features):
            if touched[i, f]:
                for k in range(closure_ptr[f], closure_ptr[f + 1]):
                    u = closure_units[k]
                    if not paid[u]:
                        paid[u] = True
                        total += unit_cost[u]
                        for m in range(unit_ptr[u], unit_ptr[u + 1]):
                            acquired[i, unit_feat[m]] = True
        feat_cost[i] = total


@njit(inline="always", cache=True)
def _read(X, i, f, round32):
    v = X[i, f]
    if round32:
        v = np.float64(np.float32(v))
    return v


@njit(inline="always", cache=True)
def _find_bin(keys, start, end, key):
    """Index of ``key`` in the sorted ``keys[start:end]``, or -1 (binary search)."""
    if not np.isfinite(key):
        return -1
    lo = start
    hi = end
    while lo < hi:
        mid = (lo + hi) // 2
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and keys[lo] == key:
        return lo
    return -1


# Rows per block: a block sweeps one tree at a time, so the tree's nodes stay in cache.
_BLOCK = 128


@njit(parallel=True, cache=True)
def run_sequential(rows, inputs, trees, order, exits, touched, tally, place, raw, flags, decision):
    """Trees in ``order``; after position r exit when raw > eps_pos[r] (+1) or < eps_neg[r] (-1);
    with several outputs, when the leading class's margin over the runner-up is > eps_pos[r].

    Where ``bin_width[r] > 0`` the partial score ``g`` also falls in bin ``floor(g / width)``;
    a bin listed in ``bin_key[bin_ptr[r]:bin_ptr[r+1]]`` (sorted) exits positive above its
    ``bin_pos`` and negative below its ``bin_neg`` (Fan et al.'s dynamic scheduling); a bin not
    listed freezes the row: it is evaluated in full, with no further exits.

    Read: ``inputs`` ``(X, known, all_known)``, ``trees`` ``(nodes, value, roots,
    tree_weight, tree_class, round32, acc32)`` (``Forest.nodes``; inputs rounded to float32,
    sums in float32), ``order``, ``exits`` (``Schedule.exits``). Written, per row: ``touched``
    (features tested), ``tally``, ``place``, ``raw``, ``flags`` and ``decision`` (+1/-1 exit
    side, 0 when the score decides).
    """
    X, known, all_known = inputs
    nodes, value, roots, tree_weight, tree_class, round32, acc32 = trees
    n_nodes = tally[NODES]
    n_trees = tally[TREES]
    blocked = tally[BLOCKED]
    pos = place[POS]
    cur = place[CUR]
    done = flags[DONE]
    frozen = flags[FROZEN]
    feature = nodes[0]
    n_order = order.shape[0]
    width = value.shape[1]
    n_blocks = (rows.shape[0] + _BLOCK - 1) // _BLOCK
    for b in prange(n_blocks):
        lo = b * _BLOCK
        hi = min(rows.shape[0], lo + _BLOCK)
        p_min = n_order
        for r in range(lo, hi):
            i = rows[r]
            if not done[i]:
                blocked[i] = -1
                p_min = min(p_min, pos[i])
        for p in range(p_min, n_order):
            t = order[p]
            root = roots[t]
            k = tree_class[t]
            w = tree_weight[t]
            active = 0
            for r in range(lo, hi):
                i = rows[r]
                if done[i] or blocked[i] >= 0:
                    continue
                active += 1
                if pos[i] != p:
                    continue
                node = cur[i]
                if node < 0:
                    node = root
                visited = 0
                while feature[node] >= 0:
                    f = feature[node]
                    if not all_known and not known[i, f]:
                        blocked[i] = f
                        break
                    touched[i, f] = True
                    visited += 1
                    node = child(nodes, node, _read(X, i, f, round32))
                n_nodes[i] += visited
                if blocked[i] >= 0:
                    cur[i] = node
                    continue
                add_tree(raw, i, node, k, w, value, width, acc32)
                n_trees[i] += 1
                cur[i] = -1
                pos[i] = p + 1
                if _exit_after(i, p, _exit_score(raw, i, exits[7]), exits, decision, frozen):
                    done[i] = True
            if active == 0:
                break
        for r in range(lo, hi):
            i = rows[r]
            if not done[i] and blocked[i] < 0:
                done[i] = True


@njit(inline="always", cache=True)
def _exit_score(raw, i, finish):
    """The score exits compare: the raw score, or with several outputs the margin of the
    leading class over the runner-up. With ``finish`` (``Schedule.finish``) not empty, the
    scores are ``finish[0] * sum + finish[1 + k]`` (``Forest.finish``: the raw score of a
    ``base_last`` forest's partial sums, one rounding after the product, one after the sum)."""
    if raw.shape[1] == 1:
        if finish.shape[0] > 0:
            return finish[0] * raw[i, 0] + finish[1]
        return raw[i, 0]
    top = -np.inf
    second = -np.inf
    for j in range(raw.shape[1]):
        v = raw[i, j]
        if finish.shape[0] > 0:
            v = finish[0] * v + finish[1 + j]
        if v > top:
            second = top
            top = v
        elif v > second:
            second = v
    return top - second


@njit(inline="always", cache=True)
def _exit_after(i, p, g, exits, exit_dir, frozen):
    """Apply position ``p``'s exit rules (``Schedule.exits``) to row ``i`` with partial score
    ``g``; True if it exits."""
    eps_pos = exits[0]
    eps_neg = exits[1]
    bin_width = exits[2]
    bin_ptr = exits[3]
    bin_key = exits[4]
    bin_pos = exits[5]
    bin_neg = exits[6]
    if frozen[i]:
        return False
    if g > eps_pos[p]:
        exit_dir[i] = 1
        return True
    if g < eps_neg[p]:
        exit_dir[i] = -1
        return True
    if bin_width[p] > 0.0:
        j = _find_bin(bin_key, bin_ptr[p], bin_ptr[p + 1], np.floor(g / bin_width[p]))
        if j < 0:
            frozen[i] = True
        elif g > bin_pos[j]:
            exit_dir[i] = 1
            return True
        elif g < bin_neg[j]:
            exit_dir[i] = -1
            return True
    return False


@njit(parallel=True, cache=True)
def run_sequential_dense(X, trees, order, exits, touched, tally, place, raw, flags, decision, block):
    """``run_sequential`` for the dense case, built for speed: each block keeps a compact list
    of its rows still running, so positions after most rows exited cost only the rows left,
    and walks them two at a time (``walk_pair``). Single-output forests; rows start at 0.
    Large blocks keep late positions cheap (a tree's nodes are fetched once per block however
    few of its rows remain), so ``block`` is as large as keeping every thread busy allows.
    Arguments as ``run_sequential``'s, ``X`` already rounded (``round32`` is not read)."""
    nodes, value, roots, tree_weight, _, _, acc32 = trees
    n_nodes = tally[NODES]
    n_trees = tally[TREES]
    pos = place[POS]
    done = flags[DONE]
    frozen = flags[FROZEN]
    n = X.shape[0]
    n_order = order.shape[0]
    n_blocks = (n + block - 1) // block
    for b in prange(n_blocks):
        lo = b * block
        hi = min(n, lo + block)
        active = np.arange(lo, hi)
        m = hi - lo
        for p in range(n_order):
            if m == 0:
                break
            t = order[p]
            root = roots[t]
            w = tree_weight[t]
            for a in range(0, m - 1, 2):
                i = active[a]
                j = active[a + 1]
                li, lj = walk_pair(
                    X,
                    i,
                    j,
                    root,
                    nodes,
                    True,
                    touched,
                    n_nodes,
                )
                raw[i, 0] = add_leaf(raw[i, 0], w, value[li, 0], acc32)
                raw[j, 0] = add_leaf(raw[j, 0], w, value[lj, 0], acc32)
            if m % 2:
                i = active[m - 1]
                li = walk_one(
                    X,
                    i,
                    root,
                    nodes,
                    True,
                    touched,
                    n_nodes,
                )
                raw[i, 0] = add_leaf(raw[i, 0], w, value[li, 0], acc32)
            kept = 0
            for a in range(m):
                i = active[a]
                n_trees[i] += 1
                pos[i] = p + 1
                if _exit_after(i, p, _exit_score(raw, i, exits[7]), exits, decision, frozen):
                    done[i] = True
                else:
                    active[kept] = i
                    kept += 1
            m = kept
        for a in range(m):
            done[active[a]] = True


@njit(parallel=True, cache=True)
def run_cascade(
    rows, inputs, trees, stages, touched, tally, place, score, tree_out, tree_done, done, decision
):
    """Stages ``k`` score ``bias[k] + sum_t w[k,t] h_t(x)``; reject below ``thr[k]`` (k < K-1).

    ``h_t(x) = tree_weight[t] * leaf value``; each tree is evaluated at most once per example
    and its output reused by later stages. Arguments as ``run_sequential``'s, with ``stages``
    ``(stage_ptr, stage_trees, stage_w, stage_bias, stage_thr)`` (``Cascade``'s CSR of stages),
    ``place``'s rows ``STAGE``, ``JPOS`` and ``STAGE_NODE``, each row's ``score``, and each row's
    tree outputs computed so far (``tree_out``, ``tree_done``).
    """
    X, known, all_known = inputs
    nodes, value, roots, tree_weight, _, round32, _ = trees
    stage_ptr, stage_trees, stage_w, stage_bias, stage_thr = stages
    n_nodes = tally[NODES]
    n_trees = tally[TREES]
    blocked = tally[BLOCKED]
    stage = place[STAGE]
    jpos = place[JPOS]
    cur = place[STAGE_NODE]
    feature = nodes[0]
    n_stages = stage_ptr.shape[0] - 1
    for r in prange(rows.shape[0]):
        i = rows[r]
        if done[i]:
            continue
        blocked[i] = -1
        k = stage[i]
        j = jpos[i]
        node = cur[i]
        s = score[i]
        stopped = False
        while k < n_stages:
            lo = stage_ptr[k]
            while lo + j < stage_ptr[k + 1]:
                t = stage_trees[lo + j]
                if not tree_done[i, t]:
                    if node < 0:
                        node = roots[t]
                    while feature[node] >= 0:
                        f = feature[node]
                        if not all_known and not known[i, f]:
                            blocked[i] = f
                            stopped = True
                            break
                        touched[i, f] = True
                        n_nodes[i] += 1
                        node = child(nodes, node, _read(X, i, f, round32))
                    if stopped:
                        break
                    tree_out[i, t] = tree_weight[t] * value[node, 0]
                    tree_done[i, t] = True
                    n_trees[i] += 1
                    node = -1
                s += stage_w[lo + j] * tree_out[i, t]
                j += 1
            if stopped:
                break
            if k == n_stages - 1:
                break
            if s < stage_thr[k]:
                decision[i] = -1
                break
            k += 1
            j = 0
            s = stage_bias[k]
        stage[i] = k
        jpos[i] = j
        cur[i] = node
        score[i] = s
        if not stopped:
            done[i] = True


@njit(parallel=True, cache=True)
def run_linear(rows, inputs, model, touched, tally, raw, done):
    """A linear model ``model`` ``(features, coef, intercept)``: tests every feature with a
    non-zero coefficient. Arguments as ``run_sequential``'s."""
    X, known, all_known = inputs
    features, coef, intercept = model
    blocked = tally[BLOCKED]
    n_out = coef.shape[1]
    for r in prange(rows.shape[0]):
        i = rows[r]
        if done[i]:
            continue
        blocked[i] = -1
        for a in range(features.shape[0]):
            f = features[a]
            if not all_known and not known[i, f]:
                blocked[i] = f
                break
        if blocked[i] >= 0:
            continue
        for k in range(n_out):
            raw[i, k] = intercept[k]
        for a in range(features.shape[0]):
            f = features[a]
            touched[i, f] = True
            for k in range(n_out):
                raw[i, k] += coef[f, k] * X[i, f]
        done[i] = True


@njit(cache=True)
def look_ahead(rows, inputs, trees, order, last, pos, cur, want):
    """The features the trees from each row's position up to ``last[pos]`` wait for.

    Row ``rows[r]`` stopped at node ``cur`` (-1: the root) of the tree at position ``pos``;
    each tree at positions ``pos .. last[pos]`` is walked on the known values from there (the
    first) or from its root (the others) until it reaches a leaf or a feature not known yet,
    which is marked in ``want[r]``. Nothing is counted or marked as tested: this only finds
    what the row's evaluation will ask for before its next exit (``lazy.policies``).
    """
    X, known, _ = inputs
    nodes, _, roots, _, _, round32, _ = trees
    feature = nodes[0]
    for r in range(rows.shape[0]):
        i = rows[r]
        p0 = pos[i]
        for p in range(p0, last[p0] + 1):
            node = cur[i] if p == p0 and cur[i] >= 0 else roots[order[p]]
            while feature[node] >= 0:
                f = feature[node]
                if not known[i, f]:
                    want[r, f] = True
                    break
                node = child(nodes, node, _read(X, i, f, round32))


SETTLE_COSTS = Twin(settle_costs, nrt=True)
RUN_SEQUENTIAL = Twin(run_sequential)
RUN_CASCADE = Twin(run_cascade)
RUN_LINEAR = Twin(run_linear)
