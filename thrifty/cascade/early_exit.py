"""Early-exit baselines of the Cronus paper, run on thrifty's runtime so costs compare exactly.

* :func:`truncate`: the GBRT itself cut after its first ``k`` trees.
* :func:`ranking_early_exit`: Cambazoglu et al. (WSDM 2010), "early exits using proximity
  threshold" as Chen et al. (2012) ran it: an exit every ``every`` trees; at the ``i``-th exit
  (``i = 1..n_exits``) a document is dropped when its partial score is at least
  ``(n_exits - i) / (n_exits - 1) * s`` below the ``k``-th best partial score of the documents
  of its query still being scored.
* The margin early exit for classification is :func:`thrifty.order.margin_early_exit`
  (LightGBM's ``pred_early_stop``).

The ranking rule compares documents of a query with each other, so it is not a per-example
plan: :func:`ranking_early_exit` decides each document's exit from partial scores, then
measures the cost exactly by evaluating, for each exit point, the prefix forest on the
documents that stopped there (``thrifty.evaluate``). :class:`EarlyExitRanker` holds the ranker and
the rule's settings as one model: its ``evaluate(X, costs, qid=...)`` is what ``thrifty.compare``
scores and costs on its validation and test queries, and it saves as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from thrifty._param_validation import Interval, validate_params
from thrifty._validation import as_forest
from thrifty.costs import CostModel, CostReport
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.io import forest_from_dict, forest_to_dict
from thrifty.forest.scores import tree_scores
from thrifty.runtime.evaluate import evaluate
from thrifty.runtime.evaluation import Evaluation
from thrifty.runtime.plans import Full

__all__ = ["EARLY_EXIT_FORMAT", "EarlyExitRanker", "RankingEarlyExit", "ranking_early_exit", "truncate"]

#: The ``format`` of a saved :class:`EarlyExitRanker` document.
EARLY_EXIT_FORMAT = "thrifty.ranking_early_exit"


def truncate(forest: Any, k: int) -> Full:
    """The ensemble cut after its first ``k`` trees (the paper's GBRT curve)."""
    forest = as_forest(forest, who="truncate")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= forest.n_trees:
        raise InputError(f"k must be an integer in [1, {forest.n_trees}], got {k!r}")
    return Full(forest.subset(range(int(k))))


@dataclass
class RankingEarlyExit:
    """Outcome of :func:`ranking_early_exit`.

    Attributes
    ----------
    score : ndarray of shape (n,)
        Ranking score: documents dropped at a later exit rank above those dropped earlier,
        survivors above all; within an exit, by partial score.
    n_trees : ndarray of int, shape (n,)
        Trees evaluated for each document.
    partial : ndarray of shape (n,)
        Partial raw score at the document's exit (its full score if it never exited).
    cost : CostReport
        Measured by ``thrifty.evaluate`` on the prefix forest of each document's exit.
    """

    score: np.ndarray
    n_trees: np.ndarray
    partial: np.ndarray
    cost: CostReport


def ranking_early_exit(
    forest: Any, X: Any, qid: Any, s: float, costs: CostModel | None = None, *, every: int = 10, k: int = 5
) -> RankingEarlyExit:
    """Cambazoglu et al.'s early exits using a proximity threshold, per query.

    Parameters
    ----------
    forest : Forest or fitted single-output tree ensemble
        The ranker (trees run in training order).
    X : array-like of shape (n, n_features)
    qid : array-like of shape (n,)
        Query of each document.
    s : float
        Proximity scale (>= 0): at exit ``i`` of ``n_exits`` a document is dropped when its
        partial score is at least ``(n_exits - i) / (n_exits - 1) * s`` below the ``k``-th best
        of its query's remaining documents. ``s = inf`` never drops anything.
    costs : CostModel, optional
        Prices for the cost report (default: 1 per feature).
    every : int, default=10
        Trees between exits (exits after ``every``, ``2 every``, ... trees, the last one before
        the final tree).
    k : int, default=5
        Rank of the reference document (the paper's fifth best).

    Returns
    -------
    RankingEarlyExit
    """
    forest = as_forest(forest, who="ranking_early_exit")
    if forest.n_outputs != 1:
        raise InputError("ranking early exits need a single-output ranker or regressor")
    validate_params(
        {
            "s": [Interval(Real, 0, None, closed="left")],  # inf disables the exits
            "every": [Interval(Integral, 1, None, closed="left")],
            "k": [Interval(Integral, 1, None, closed="left")],
        },
        {"s": s, "every": every, "k": k},
        "ranking_early_exit",
    )
    s = float(s)
    qid = np.asarray(qid).reshape(-1)
    n = qid.shape[0]
    if np.shape(X)[0] != n:
        raise InputError(f"X has {np.shape(X)[0]} rows but qid has {n}")
    T = forest.n_trees
    contrib = tree_scores(forest, X)
    exits = np.arange(every, T, every)  # trees evaluated at each exit (none after the last tree)
    n_exits = len(exits)
    g = np.full(n, float(forest.base_score[0]))
    alive = np.ones(n, dtype=bool)
    stop = np.full(n, T, dtype=np.int64)
    partial = np.empty(n)
    stage = np.full(n, n_exits, dtype=np.int64)
    _, q = np.unique(qid, return_inverse=True)
    done = 0
    for i, m in enumerate(exits, start=1):
        g = g + contrib[:, done:m].sum(axis=1)
        done = m
        margin = s * (n_exits - i) / (n_exits - 1) if n_exits > 1 else 0.0
        kth = _kth_best(g, q, alive, k)
        drop = alive & np.isfinite(kth) & (g <= kth - margin)
        stop[drop] = m
        partial[drop] = g[drop]
        stage[drop] = i - 1
        alive &= ~drop
    g = g + contrib[:, done:].sum(axis=1)
    partial[alive] = g[alive]
    score = stage + 0.5 + np.arctan(partial) / np.pi
    cost = _measure(forest, X, stop, costs)
    return RankingEarlyExit(score=score, n_trees=stop, partial=partial, cost=cost)


def _kth_best(g: np.ndarray, q: np.ndarray, alive: np.ndarray, k: int) -> np.ndarray:
    """Per document: the k-th largest partial score among its query's alive documents (NaN
    when fewer than k are alive, so nothing is dropped)."""
    idx = np.flatnonzero(alive)
    out = np.full(q.max() + 1 if len(q) else 0, np.nan)
    if len(idx):
        order = idx[np.lexsort((-g[idx], q[idx]))]
        qs = q[order]
        starts = np.flatnonzero(np.r_[True, qs[1:] != qs[:-1]])
        sizes = np.diff(np.r_[starts, len(qs)])
        ok = sizes >= k
        out[qs[starts[ok]]] = g[order[starts[ok] + k - 1]]
    return out[q]


def _measure(forest: Forest, X: Any, stop: np.ndarray, costs: CostModel | None) -> CostReport:
    """Cost of evaluating each document's first ``stop[i]`` trees, measured by the runtime."""
    n = len(stop)
    parts: dict[str, np.ndarray] = {}
    for m in np.unique(stop):
        rows = np.flatnonzero(stop == m)
        Xm = X.iloc[rows] if hasattr(X, "iloc") else np.asarray(X)[rows]
        rep = evaluate(Full(forest.subset(range(int(m)))), Xm, costs).cost
        for name in ("feature", "evaluation", "total", "n_trees", "n_nodes", "acquired"):
            arr = getattr(rep, name)
            if name not in parts:
                parts[name] = np.zeros((n,) + arr.shape[1:], dtype=arr.dtype)
            parts[name][rows] = arr
        names, fixed = rep.feature_names, rep.fixed  # the longest prefix (np.unique sorts)
    return CostReport(
        feature=parts["feature"],
        evaluation=parts["evaluation"],
        total=parts["total"],
        n_trees=parts["n_trees"],
        n_nodes=parts["n_nodes"],
        acquired=parts["acquired"],
        fixed=fixed,
        feature_names=names,
    )


@dataclass(frozen=True)
class EarlyExitRanker:
    """A ranker with Cambazoglu et al.'s early exits (:func:`ranking_early_exit`), as one model.

    The exit of a document depends on the other documents of its query, so the model is
    evaluated on whole queries: ``evaluate(X, costs, qid=qid)``. It is not a per-example plan,
    and ``thrifty.evaluate`` refuses it rather than evaluate every tree.

    Attributes
    ----------
    forest : Forest
        The single-output ranker (trees run in training order).
    s : float
        Proximity scale (``ranking_early_exit``'s ``s``).
    every : int
        Trees between exits.
    k : int
        Rank of the reference document.
    """

    forest: Forest
    s: float
    every: int = 10
    k: int = 5

    #: Marks a model whose evaluation needs each document's query (``thrifty.compare`` passes it).
    needs_qid = True

    def evaluate(self, X: Any, costs: CostModel | None = None, *, qid: Any) -> Evaluation:
        """Rank the documents of ``X`` query by query and report what each cost.

        Returns
        -------
        Evaluation
            ``raw``: the ranking score of :class:`RankingEarlyExit` (later exits above earlier
            ones); ``exit``: trees evaluated; ``cost``: measured by ``thrifty.evaluate`` on each
            document's prefix forest; no labels or probabilities.
        """
        if qid is None:
            raise InputError(
                "EarlyExitRanker needs qid= (the query of each document): a document's exit "
                "compares it with the other documents of its query"
            )
        res = ranking_early_exit(self.forest, X, qid, self.s, costs, every=self.every, k=self.k)
        return Evaluation(raw=res.score, proba=None, labels=None, exit=res.n_trees, cost=res.cost)

    @property
    def plan_(self) -> Any:
        # ``thrifty.evaluate`` and ``save`` look a fitted model's plan up here: a per-example
        # plan would drop the queries, so the lookup says how to evaluate this model instead.
        raise InputError(
            "an EarlyExitRanker is not a per-example plan (a document's exit depends on its "
            "query's other documents): call model.evaluate(X, costs, qid=qid)"
        )

    def predict(self, X: Any, qid: Any) -> np.ndarray:
        """Ranking scores of the documents of ``X`` (queries ``qid``), shape (n,)."""
        return self.evaluate(X, qid=qid).raw

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": EARLY_EXIT_FORMAT,
            "version": 1,
            "forest": forest_to_dict(self.forest),
            "s": self.s,
            "every": self.every,
            "k": self.k,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EarlyExitRanker:
        """The model ``to_dict`` wrote as ``d``."""
        if d.get("format") != EARLY_EXIT_FORMAT:
            raise InputError(f"not a thrifty ranking early exit document (format={d.get('format')!r})")
        return cls(forest_from_dict(d["forest"]), float(d["s"]), int(d["every"]), int(d["k"]))
