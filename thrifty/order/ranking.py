"""QWYC for rankers (beyond the paper): early exits that keep each query's top ``k`` set.

The paper's disagreement is a changed label. For a ranker a *query* disagrees when the set of
its ``k`` best documents under the reported scores (a document's partial score where it
exits, its full score elsewhere) differs from the set under the full scores. Problem (2)
becomes: minimise the mean cost per document ``(1/n) sum_r c_{pi(r)} |C_{r-1}|`` subject to

    |{queries q : an exit of q moved a document across q's cut}| <= alpha |queries|,

where q's cut is the midpoint of its ``k``-th and ``(k+1)``-th full scores: a document of the
full top ``k`` must exit above it, any other below it. While every exit of a query respects its
cut, every reported score is on the side of the cut its full score is on, so the top-``k`` set
is unchanged: the constraint bounds the changed queries from above, exactly. Algorithm 2 takes
the largest exit sets whose newly counted queries fit the budget left (a query already counted
costs nothing more); Algorithm 1 is unchanged.

The set says nothing of the order within it: a document of the top ``k`` that exits above the
cut is ranked by its partial score among the full scores of the others, and a query of at most
``k`` documents (cut ``-inf``) lets every document exit. NDCG@k weighs that order. With
``keep="order"`` a document of the full top ``k`` never exits without its query counting
against ``alpha`` (its cut is ``+inf``): the top ``k`` keep their full scores, the documents
that exit do so below the cut, so the query's top-``k`` *list*, and its NDCG@k, are the full
model's.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np

from thrifty._param_validation import Interval, StrOptions, validate_params
from thrifty._validation import as_forest
from thrifty.exceptions import InputError
from thrifty.forest.scores import tree_scores
from thrifty.order.orderings import order_from_scores
from thrifty.order.qwyc import _OPTIONS, _fit, _tree_costs, check_unlabelled
from thrifty.runtime.plans import Sequential

__all__ = ["qwyc_ranking", "qwyc_ranking_scores", "topk_changed"]

_K = [Interval(Integral, 1, None, closed="left")]
_KEEP = [StrOptions({"set", "order"})]


def qwyc_ranking(
    model: Any,
    X: Any,
    qid: Any,
    *,
    k: int = 5,
    alpha: float = 0.05,
    costs: Any = None,
    mode: str = "both",
    ordering: str = "optimize",
    random_state: Any = None,
    return_result: bool = False,
    progress: bool = False,
    keep: str = "set",
) -> Any:
    """Order the trees of a ranker and choose early exits keeping each query's top ``k``.

    Parameters
    ----------
    model : Forest or fitted ranker (or regressor) ``Forest.from_model`` imports
    X : array-like of shape (n, n_features)
        Documents the order and thresholds are fitted on (no relevance labels needed).
    qid : array-like of shape (n,)
        Query of each document (any hashable values).
    k : int, default=5
        The top ``k`` whose set must not change (the precision@5 setting of Cronus).
    alpha : float in [0, 1), default=0.05
        Largest fraction of the queries whose top-``k`` set (list) may change.
    keep : {"set", "order"}, default="set"
        What must not change: the top-``k`` set (precision@k), or the top-``k`` list, its
        order included (NDCG@k: a document of the full top ``k`` is then evaluated in full).
    costs, mode, ordering, random_state, return_result, progress
        As in ``qwyc`` (``ordering`` "optimize", "given" or "random").

    Returns
    -------
    Sequential, or (Sequential, QWYCResult) with ``return_result=True``; the result's
    ``n_disagree`` and ``budget`` count queries.
    """
    forest = as_forest(model, who="qwyc_ranking")
    if forest.n_outputs != 1 or forest.task not in ("ranking", "regression"):
        raise InputError(f"qwyc_ranking needs a ranker; this forest's task is {forest.task!r}")
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    F = tree_scores(forest, X)
    res = qwyc_ranking_scores(
        F,
        qid,
        k=k,
        alpha=alpha,
        base_score=float(forest.base_score[0]),
        costs=costs,
        mode=mode,
        ordering=ordering,
        random_state=random_state,
        progress=progress,
        acc32=forest.accumulate == "float32",
        keep=keep,
    )
    plan = Sequential(forest, res.order, res.eps_pos, res.eps_neg)
    return (plan, res) if return_result else plan


def qwyc_ranking_scores(
    F: Any,
    qid: Any,
    *,
    k: int = 5,
    alpha: float = 0.05,
    base_score: float = 0.0,
    costs: Any = None,
    mode: str = "both",
    ordering: str = "optimize",
    random_state: Any = None,
    progress: bool = False,
    acc32: bool = False,
    keep: str = "set",
) -> Any:
    """``qwyc_ranking`` on a score matrix ``F[i, t]`` (base model ``t`` on document ``i``);
    returns the ``QWYCResult``."""
    validate_params(
        {**_OPTIONS, "k": _K, "keep": _KEEP},
        {"alpha": alpha, "mode": mode, "ordering": ordering, "k": k, "keep": keep},
        "qwyc",
    )
    check_unlabelled(ordering, "ranker")
    F = np.asarray(F, dtype=np.float64)
    if F.ndim != 2 or F.shape[0] == 0 or F.shape[1] == 0:
        raise InputError(f"F must be a non-empty 2-d score matrix, got shape {F.shape}")
    q = np.asarray(qid).reshape(-1)
    if q.shape[0] != F.shape[0]:
        raise InputError(f"qid must give one query per row ({F.shape[0]} rows), got {q.shape[0]}")
    codes = np.unique(q, return_inverse=True)[1].astype(np.int64)
    order = None
    if ordering != "optimize":
        order = order_from_scores(F, None, kind=ordering, base_score=base_score, random_state=random_state)
    cost = _tree_costs(costs, F.shape[1])
    return _fit(
        F,
        base_score,
        0.0,
        cost,
        alpha,
        mode,
        order,
        acc32,
        progress,
        None,
        None,
        None,
        (codes, int(k), keep == "order"),
    )


def topk_changed(pred: Any, full: Any, qid: Any, k: int, keep: str = "set") -> np.ndarray:
    """Per query (sorted by ``qid``): whether its top-``k`` set (``keep="set"``) or list, its
    order included (``keep="order"``), under ``pred`` differs from the one under ``full``
    (ties: the earlier row)."""
    if keep not in ("set", "order"):
        raise InputError(f"keep must be 'set' or 'order', got {keep!r}")
    pred, full = np.asarray(pred, float).reshape(-1), np.asarray(full, float).reshape(-1)
    q = np.asarray(qid).reshape(-1)

    def tops(s: np.ndarray) -> list[Any]:
        out: list[Any] = []
        for v in np.unique(q):
            rows = np.flatnonzero(q == v)
            best = rows[np.argsort(-s[rows], kind="stable")[:k]].tolist()
            out.append(tuple(best) if keep == "order" else frozenset(best))
        return out

    return np.array([a != b for a, b in zip(tops(pred), tops(full), strict=True)])
