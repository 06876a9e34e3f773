"""This module contains the njitted driver of a plan's native code (see ``native``).

The native code returns the leaf each row reaches; the driver adds leaf values in the plan's
order, accounts cost from per-leaf tables (splits on the path, features it tests) and applies
the exits after each position exactly as ``_kernels.run_sequential`` does, so compiled and
interpreted evaluation agree bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from thrifty.forest._predict import Twin
from thrifty.forest._traverse import add_leaf
from thrifty.runtime._kernels import _exit_after, _exit_score


@njit(parallel=True, cache=True)
def run_native(
    leaves,
    X,
    rows,
    order,
    stop,
    has_exit,
    value,
    tree_weight,
    tree_class,
    leaf_rec,
    path_ptr,
    path_feat,
    eps_pos,
    eps_neg,
    acc32,
    bin_width,
    bin_ptr,
    bin_key,
    bin_pos,
    bin_neg,
    touched,
    n_nodes,
    n_trees,
    pos,
    raw,
    done,
    exit_dir,
    frozen,
    active,
    mask,
    buf,
    block,
    chunk,
):
    """Trees in ``order`` over the rows ``rows`` of ``X`` (none started yet), with the exits of
    ``run_sequential``.

    Rows go in blocks of ``block``; for the rows of a block still running, the native
    ``leaves`` runs a block of up to ``chunk`` positions, never past the next position with an
    exit (``stop[p]``; ``native.plan_blocks`` cuts the same blocks), so no tree is evaluated
    after a row's exit. ``active`` (len(rows),), ``mask`` (len(X),) and ``buf``
    (n_blocks * block * chunk,) are work space.
    ``leaf_rec`` holds one record per node, read once per leaf reached: ``wv``, the tree's
    weight times the leaf value (the product the interpreter forms, so sums agree bit for bit),
    ``depth``, the splits on its path, and, with at most 64 features, ``mask``, the features
    its path tests as bits, OR-ed per row and spread into ``touched`` at the end.
    """
    n = rows.shape[0]
    n_features = X.shape[1]
    n_order = order.shape[0]
    width = value.shape[1]
    single = width == 1
    for t in range(tree_class.shape[0]):
        single = single and tree_class[t] <= 0
    masked = n_features <= 64
    n_blocks = (n + block - 1) // block
    x_ptr = X.ctypes.data
    for b in prange(n_blocks):
        lo = b * block
        hi = min(n, lo + block)
        m = hi - lo
        out = b * block * chunk
        for a in range(m):
            active[lo + a] = rows[lo + a]
            mask[rows[lo + a]] = 0
        p = 0
        while p < n_order and m > 0:
            k = min(stop[p], p + chunk) - p
            leaves(x_ptr, n_features, active.ctypes.data + 8 * lo, m, p, k, buf.ctypes.data + 4 * out)
            kept = 0
            for a in range(m):
                i = active[lo + a]
                running = True
                acc = raw[i, 0]
                bits = mask[i]
                nodes = 0
                j = 0
                while j < k:
                    leaf = buf[out + a * k + j]
                    rec = leaf_rec[leaf]
                    if single:
                        acc = add_leaf(acc, 1.0, rec.wv, acc32)
                    elif tree_class[order[p + j]] >= 0:
                        t = order[p + j]
                        c = tree_class[t]
                        raw[i, c] = add_leaf(raw[i, c], tree_weight[t], value[leaf, 0], acc32)
                    else:
                        t = order[p + j]
                        for o in range(width):
                            raw[i, o] = add_leaf(raw[i, o], tree_weight[t], value[leaf, o], acc32)
                    nodes += rec.depth
                    if masked:
                        bits |= rec.mask
                    else:
                        for e in range(path_ptr[leaf], path_ptr[leaf + 1]):
                            touched[i, path_feat[e]] = True
                    j += 1
                    if has_exit[p + j - 1]:
                        if single:
                            raw[i, 0] = acc
                        if _exit_after(
                            i,
                            p + j - 1,
                            _exit_score(raw, i, width),
                            eps_pos,
                            eps_neg,
                            bin_width,
                            bin_ptr,
                            bin_key,
                            bin_pos,
                            bin_neg,
                            exit_dir,
                            frozen,
                        ):
                            done[i] = True
                            running = False
                            break
                if single:
                    raw[i, 0] = acc
                mask[i] = bits
                n_nodes[i] += nodes
                n_trees[i] += j
                pos[i] = p + j
                if running:
                    active[lo + kept] = i
                    kept += 1
            m = kept
            p += k
        for a in range(m):
            done[active[lo + a]] = True
        if masked:
            for a in range(hi - lo):
                i = rows[lo + a]
                bits = mask[i]
                for f in range(n_features):
                    if (bits >> np.uint64(f)) & np.uint64(1):
                        touched[i, f] = True


RUN_NATIVE = Twin(run_native)
