"""Numba kernels of QWYC: Algorithm 2 (thresholds of one position) for many candidates at once.

Private; plain arrays only. Every kernel works on the examples still undecided (``C_{r-1}``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

# Rows of ``scan_candidates``' output, each bound in its own statement: numba 0.68 drops a
# prange loop's writes to arrays bound by unpacking four values (see runtime.interpret.kernels).
W_EXIT = 0
W_DIS = 1
EPS_NEG = 2
EPS_POS = 3
N_EXIT = 4  # a count, exact in float64
# What makes an exit disagree (``scan_candidates``' ``kind``), and the rows of its ``target``.
CLASSIFY = 0
REGRESS = 1
RANK = 2
VALUE = 0
AUX = 1
DW = 2


@njit(inline="always", cache=True)
def _add(g, f, acc32):
    """Partial score ``g + f`` exactly as the runtime accumulates it (see ``add_leaf``)."""
    if acc32:
        return np.float64(np.float32(g + f))
    return g + f


@njit(cache=True)
def _mid_open_closed(a, b):
    """A value in ``(a, b]``, the midpoint when it is representable."""
    x = 0.5 * a + 0.5 * b
    if a < x <= b:
        return x
    return b


@njit(cache=True)
def _mid_closed_open(a, b):
    """A value in ``[a, b)``, the midpoint when it is representable."""
    x = 0.5 * a + 0.5 * b
    if a <= x < b:
        return x
    return a


@njit(cache=True)
def _select(vals, wts, n, budget, unit):
    """``(found, v)``: the smallest ``v`` of ``vals[:n]`` whose rows at or below it weigh more
    than ``budget`` (with ``unit`` weights: the ``floor(budget)``-th smallest, by selection)."""
    if unit:
        k = int(np.floor(budget))
        if n > k:
            return True, np.partition(vals[:n], k)[k]
        return False, np.inf
    idx = np.argsort(vals[:n])
    total = 0.0
    j = 0
    while j < n:
        v = vals[idx[j]]
        while j < n and vals[idx[j]] == v:  # equal scores exit together
            total += wts[idx[j]]
            j += 1
        if total > budget:
            return True, v
    return False, np.inf


@njit(cache=True)
def thresholds_one(s, bad_neg, bad_pos, w, unit, budget, neg_only, buf, wbuf):
    """Algorithm 2 for one position: ``(eps_neg, eps_pos)`` given scores ``s`` of undecided rows.

    ``bad_neg[i]`` / ``bad_pos[i]``: row ``i`` disagrees with the full ensemble if it exits
    negative / positive (a classifier: full-positive / full-negative; a regressor: both when
    its partial score is farther than the tolerance from its full one; a document: on the
    wrong side of its query's cut). ``w[i]`` is what its disagreement costs (its weight; all 1
    when ``unit``); ``budget`` the cost of disagreements still allowed (``alpha`` times the
    total, minus those made at earlier positions). Line 4 first: the largest
    negative exit set ``{s < eps_neg}`` whose ``bad_neg`` rows weigh at most ``budget`` (the
    positive exit disabled meanwhile). Line 5 then: the largest positive exit set ``{s >
    eps_pos}`` among the rest, with ``eps_pos >= eps_neg``, spending what the negative side
    left of the budget.
    ``buf``, ``wbuf`` are scratch of at least ``len(s)``. O(len(s)) via selection when
    ``unit``, a sort otherwise.
    """
    m = s.shape[0]
    inf = np.inf
    # ---------------------------------------------------------------- line 4: eps_neg
    npos = 0
    for i in range(m):
        if bad_neg[i]:
            buf[npos] = s[i]
            wbuf[npos] = w[i]
            npos += 1
    # e: the smallest full-positive score that may not exit
    has_e, e = _select(buf, wbuf, npos, budget, unit)
    any_neg = False
    L = -inf
    for i in range(m):
        if s[i] < e:
            any_neg = True
            if s[i] > L:
                L = s[i]
    if not any_neg:
        eps_neg = -inf
    elif has_e:
        eps_neg = _mid_open_closed(L, e)
    else:
        eps_neg = np.nextafter(L, inf)  # every undecided row exits negative
    # ---------------------------------------------------------------- line 5: eps_pos
    eps_pos = inf
    if not neg_only:
        used = 0.0
        nneg = 0
        nrest = 0
        min_rest = inf
        for i in range(m):
            if s[i] < eps_neg:
                if bad_neg[i]:
                    used += w[i]
            else:
                nrest += 1
                if s[i] < min_rest:
                    min_rest = s[i]
                if bad_pos[i]:
                    buf[nneg] = -s[i]
                    wbuf[nneg] = w[i]
                    nneg += 1
        if nrest > 0:
            # f: the largest full-negative score among the rest that may not exit
            has_f, neg_f = _select(buf, wbuf, nneg, budget - used, unit)
            if has_f:
                f = -neg_f
                U = inf
                for i in range(m):
                    if s[i] > f and s[i] < U:
                        U = s[i]
                if U < inf:
                    eps_pos = _mid_closed_open(f, U)
            else:
                # every remaining row may exit positive: eps_neg <= eps_pos < min_rest
                if any_neg:
                    x = 0.5 * L + 0.5 * min_rest
                    if L < x < min_rest:
                        eps_neg = x
                        eps_pos = x
                    else:
                        eps_pos = eps_neg  # no float strictly between: the min group stays
                else:
                    eps_pos = np.nextafter(min_rest, -inf)
    return eps_neg, eps_pos


@njit(cache=True)
def apply_thresholds(s, bad_neg, bad_pos, w, dw, eps_neg, eps_pos):
    """``(n_exit, w_exit, w_disagree)``: rows exiting at this position (runtime rule), their
    weight ``w`` and the disagreement cost ``dw`` of the wrong ones."""
    n_exit = 0
    w_exit = 0.0
    w_dis = 0.0
    for i in range(s.shape[0]):
        if s[i] > eps_pos:
            n_exit += 1
            w_exit += w[i]
            if bad_pos[i]:
                w_dis += dw[i]
        elif s[i] < eps_neg:
            n_exit += 1
            w_exit += w[i]
            if bad_neg[i]:
                w_dis += dw[i]
    return n_exit, w_exit, w_dis


@njit(inline="always", cache=True)
def _bad(kind, target, i, s):
    """Whether row ``i`` exiting with partial score ``s`` disagrees (the same on either side,
    except a classifier's): see ``scan_candidates``."""
    if kind == REGRESS:
        return abs(target[VALUE, i] - s) > target[AUX, i]
    # RANK: a full-top-k document must stay above its query's cut, any other below it
    if target[AUX, i] > 0.5:
        return s <= target[VALUE, i]
    return s >= target[VALUE, i]


@njit(parallel=True, cache=True)
def scan_candidates(Ft, cols, g, target, kind, w, unit, cand, budget, neg_only, acc32, out):
    """Algorithm 2 for every candidate base model ``cand[j]`` (a row of ``Ft``) at one position.

    ``Ft[:, cols]`` has shape (T, m): base-model outputs of the m undecided rows; ``g`` their
    partial scores, ``w`` their weights. ``target`` (3, m) says when an exit of row ``i`` with
    partial score ``s`` disagrees, by ``kind``: ``CLASSIFY``: ``target[VALUE, i]`` is 1.0 when
    the full ensemble decides it positive (else 0.0) and an exit to the other side disagrees;
    ``REGRESS``: when ``|target[VALUE, i] - s| > target[AUX, i]`` (full score, tolerance);
    ``RANK``: when ``s`` is on the wrong side of its query's cut ``target[VALUE, i]`` (wrong:
    ``<=`` for a document of the full top k, ``target[AUX, i] = 1.0``, else ``>=``).
    ``target[DW, i]`` is what its disagreement costs of the budget. Writes the chosen
    thresholds and the resulting exits (count and weight) and disagreements (cost) per
    candidate in the rows of ``out`` (``W_EXIT``, ``W_DIS``, ``EPS_NEG``, ``EPS_POS``,
    ``N_EXIT``).
    """
    w_exit = out[W_EXIT]
    w_dis = out[W_DIS]
    eps_neg = out[EPS_NEG]
    eps_pos = out[EPS_POS]
    n_exit = out[N_EXIT]
    dw = target[DW]
    m = g.shape[0]
    for j in prange(cand.shape[0]):
        k = cand[j]
        s = np.empty(m)
        buf = np.empty(m)
        wbuf = np.empty(m)
        bad_neg = np.empty(m, dtype=np.bool_)
        bad_pos = np.empty(m, dtype=np.bool_)
        for i in range(m):
            s[i] = _add(g[i], Ft[k, cols[i]], acc32)
            if kind == CLASSIFY:
                bad_neg[i] = target[VALUE, i] > 0.5
                bad_pos[i] = not bad_neg[i]
            else:
                bad_neg[i] = _bad(kind, target, i, s[i])
                bad_pos[i] = bad_neg[i]
        en, ep = thresholds_one(s, bad_neg, bad_pos, dw, unit, budget, neg_only, buf, wbuf)
        ne, we, wd = apply_thresholds(s, bad_neg, bad_pos, w, dw, en, ep)
        eps_neg[j] = en
        eps_pos[j] = ep
        n_exit[j] = ne
        w_exit[j] = we
        w_dis[j] = wd


@njit(parallel=True, cache=True)
def acquisition_costs(
    leaves, rows, w, cand, path_ptr, path_feat, closure_ptr, closure_units, unit_cost, paid, out
):
    """``out[j]``: what the undecided ``rows`` pay for the features tree ``cand[j]`` would newly
    acquire on their paths (each unit of a feature's closure paid once per example), each row
    weighted by ``w[row]``."""
    n_units = unit_cost.shape[0]
    for j in prange(cand.shape[0]):
        t = cand[j]
        stamp = np.zeros(n_units, dtype=np.int64)  # unit counted for the current row already
        total = 0.0
        for a in range(rows.shape[0]):
            i = rows[a]
            leaf = leaves[i, t]
            for q in range(path_ptr[leaf], path_ptr[leaf + 1]):
                f = path_feat[q]
                for c in range(closure_ptr[f], closure_ptr[f + 1]):
                    u = closure_units[c]
                    if not paid[i, u] and stamp[u] != a + 1:
                        stamp[u] = a + 1
                        total += w[i] * unit_cost[u]
        out[j] = total


@njit(cache=True)
def acquire(leaves, rows, t, path_ptr, path_feat, closure_ptr, closure_units, paid):
    """Mark as paid, for each of ``rows``, the units of the features on its path in tree ``t``."""
    for a in range(rows.shape[0]):
        i = rows[a]
        leaf = leaves[i, t]
        for q in range(path_ptr[leaf], path_ptr[leaf + 1]):
            f = path_feat[q]
            for c in range(closure_ptr[f], closure_ptr[f + 1]):
                paid[i, closure_units[c]] = True
