"""What makes a QWYC exit disagree, per task: the kernels' ``target`` rows, the budget, and for
ranking the queries an exit has put at risk. Private; see ``thrifty.order.qwyc._fit``."""

from __future__ import annotations

import numpy as np

from thrifty.order import _qwyc_kernels as _k


def targets(
    full: np.ndarray,
    threshold: float,
    tolerance: float | None,
    ranking: tuple | None,
    w: np.ndarray,
    alpha: float,
) -> tuple[int, np.ndarray, float]:
    """``(kind, target, budget)`` for ``_k.scan_candidates``.

    A classifier's rows disagree by their side of ``threshold``, a regressor's (``tolerance``)
    by their distance to the full score; both cost their weight ``w`` of ``alpha w.sum()``.
    With ``ranking = (qid, k)`` the budget is ``alpha`` times the number of queries, and a
    document's exit costs 1 unless its query is already counted (``broken``). With
    ``ranking = (qid, k, True)`` the query's top ``k`` *list* must not change: a document of
    the full top ``k`` never exits without breaking its query (its cut is ``+inf``), so the
    top ``k`` keep their full scores and their order, and every document that exits below the
    cut stays below them.
    """
    target = np.empty((3, full.shape[0]))
    target[_k.DW] = w
    if ranking is not None:
        qid, k = ranking[0], ranking[1]
        cut, top = topk_cuts(full, qid, k)
        if len(ranking) > 2 and ranking[2]:
            cut = np.where(top > 0.5, np.inf, cut)
        target[_k.VALUE], target[_k.AUX] = cut, top
        return _k.RANK, target, float(alpha) * float(len(np.unique(qid)))
    if tolerance is not None:
        target[_k.VALUE] = full
        target[_k.AUX] = tolerance
        return _k.REGRESS, target, float(alpha) * float(w.sum())
    target[_k.VALUE] = full > threshold
    target[_k.AUX] = 0.0
    return _k.CLASSIFY, target, float(alpha) * float(w.sum())


def topk_cuts(full: np.ndarray, qid: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per document: its query's cut and whether it is in the full top ``k`` (1.0 / 0.0).

    The full top ``k`` of a query are its ``k`` highest full scores (ties: the earlier row);
    the cut is the midpoint of the ``k``-th and ``(k+1)``-th scores, so if every document's
    reported score stays on its side of the cut, the query's top-``k`` set is unchanged. A
    query of at most ``k`` documents cannot change: its cut is ``-inf``, all in the top.
    """
    order = np.lexsort((np.arange(len(full)), -full, qid))  # by query, score descending
    q = qid[order]
    start = np.flatnonzero(np.r_[True, q[1:] != q[:-1]])
    size = np.diff(np.r_[start, len(q)])
    rank = np.arange(len(q)) - np.repeat(start, size)
    top = np.empty(len(full))
    top[order] = rank < k
    f = full[order]
    kth = np.where(size > k, f[start + np.minimum(k - 1, size - 1)], -np.inf)
    nxt = np.where(size > k, f[np.minimum(start + k, len(q) - 1)], -np.inf)
    cut = np.empty(len(full))
    cut[order] = np.repeat(np.where(size > k, 0.5 * kth + 0.5 * nxt, -np.inf), size)
    return cut, top


def break_queries(
    target: np.ndarray, s: np.ndarray, exits: np.ndarray, qid: np.ndarray, broken: np.ndarray
) -> int:
    """Mark the queries of the documents ``exits`` puts on the wrong side of their cut as
    broken (``broken[query]``) and return how many were not before: the ranking
    disagreements of this position (at most what the kernel counted, which may count a
    query twice). ``qid`` are the undecided rows' query codes, ``s`` their partial scores."""
    top = target[_k.AUX] > 0.5
    wrong = np.where(top, s <= target[_k.VALUE], s >= target[_k.VALUE]) & exits
    new = np.unique(qid[wrong])
    new = new[~broken[new]]
    broken[new] = True
    return len(new)
