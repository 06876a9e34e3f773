"""Numba kernels of QWYC: Algorithm 2 (thresholds of one position) for many candidates at once.

Private; plain arrays only. Every kernel works on the examples still undecided (``C_{r-1}``).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


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
def thresholds_one(s, ypos, budget, neg_only, buf):
    """Algorithm 2 for one position: ``(eps_neg, eps_pos)`` given scores ``s`` of undecided rows.

    ``ypos[i]`` is the full ensemble's decision of row ``i``; ``budget`` the number of
    disagreements still allowed (``floor(alpha n)`` minus those made at earlier positions).
    Line 4 first: the largest negative exit set ``{s < eps_neg}`` holding at most ``budget``
    full-positive rows (the positive exit disabled meanwhile). Line 5 then: the largest
    positive exit set ``{s > eps_pos}`` among the rest, with ``eps_pos >= eps_neg``, spending
    what the negative side left of the budget. ``buf`` is scratch of at least ``len(s)``.
    O(len(s)) via selection, no sort.
    """
    m = s.shape[0]
    inf = np.inf
    # ---------------------------------------------------------------- line 4: eps_neg
    npos = 0
    for i in range(m):
        if ypos[i]:
            buf[npos] = s[i]
            npos += 1
    has_e = npos > budget
    e = inf
    if has_e:
        # the (budget+1)-th smallest full-positive score: the first one that may not exit
        e = np.partition(buf[:npos], budget)[budget]
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
        used = 0
        nneg = 0
        nrest = 0
        min_rest = inf
        for i in range(m):
            if s[i] < eps_neg:
                if ypos[i]:
                    used += 1
            else:
                nrest += 1
                if s[i] < min_rest:
                    min_rest = s[i]
                if not ypos[i]:
                    buf[nneg] = s[i]
                    nneg += 1
        left = budget - used
        if nrest > 0:
            if nneg > left:
                # the (left+1)-th largest full-negative score among the rest may not exit
                f = np.partition(buf[:nneg], nneg - 1 - left)[nneg - 1 - left]
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
def apply_thresholds(s, ypos, eps_neg, eps_pos):
    """``(n_exit, n_disagree)``: rows exiting at this position (runtime rule) and wrong ones."""
    n_exit = 0
    n_dis = 0
    for i in range(s.shape[0]):
        if s[i] > eps_pos:
            n_exit += 1
            if not ypos[i]:
                n_dis += 1
        elif s[i] < eps_neg:
            n_exit += 1
            if ypos[i]:
                n_dis += 1
    return n_exit, n_dis


@njit(parallel=True, cache=True)
def scan_candidates(Ft, cols, g, ypos, cand, budget, neg_only, acc32, n_exit, n_dis, eps_neg, eps_pos):
    """Algorithm 2 for every candidate base model ``cand[j]`` (a row of ``Ft``) at one position.

    ``Ft[:, cols]`` has shape (T, m): base-model outputs of the m undecided rows; ``g`` their
    partial scores. Writes the chosen thresholds and resulting exits/disagreements per candidate.
    """
    m = g.shape[0]
    for j in prange(cand.shape[0]):
        k = cand[j]
        s = np.empty(m)
        buf = np.empty(m)
        for i in range(m):
            s[i] = _add(g[i], Ft[k, cols[i]], acc32)
        en, ep = thresholds_one(s, ypos, budget, neg_only, buf)
        ne, nd = apply_thresholds(s, ypos, en, ep)
        eps_neg[j] = en
        eps_pos[j] = ep
        n_exit[j] = ne
        n_dis[j] = nd


@njit(parallel=True, cache=True)
def acquisition_costs(
    leaves, rows, cand, path_ptr, path_feat, closure_ptr, closure_units, unit_cost, paid, out
):
    """``out[j]``: what the undecided ``rows`` pay for the features tree ``cand[j]`` would newly
    acquire on their paths (each unit of a feature's closure paid once per example)."""
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
                        total += unit_cost[u]
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
