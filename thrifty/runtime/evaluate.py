"""``evaluate``: run a plan on a dense matrix or lazily on a feature provider, with exact costs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from thrifty.costs import CostModel, CostReport
from thrifty.forest._inputs import to_matrix
from thrifty.forest._predict import threads
from thrifty.runtime._executors import Context, executor
from thrifty.runtime.plans import Cascade, Gated, Plan, as_plan
from thrifty.runtime.rounds import check_answers

Provider = Callable[[np.ndarray, np.ndarray], Any]

# Bytes of per-row state a chunk may hold; bounds memory whatever the number of rows.
_CHUNK_BYTES = 1 << 27


@dataclass
class Evaluation:
    """The result of evaluating a plan on a set of examples.

    Attributes
    ----------
    raw : ndarray, shape (n,) or (n, n_outputs)
        Raw scores (for early exits: the partial score at exit).
    proba : ndarray of shape (n, n_classes) or None
        Class probabilities, for classifiers.
    labels : ndarray of shape (n,) or None
        Predicted classes, for classifiers (early exits decide by their exit side).
    exit : ndarray of int, shape (n,)
        Trees evaluated before stopping (Full/Sequential), stage reached (Cascade), or route
        (Gated: 0 low-cost model, 1 expensive model).
    cost : CostReport
        What each example cost.
    """

    raw: np.ndarray
    proba: np.ndarray | None
    labels: np.ndarray | None
    exit: np.ndarray
    cost: CostReport

    @property
    def predictions(self) -> np.ndarray:
        """Labels for classifiers, raw scores otherwise."""
        return self.labels if self.labels is not None else self.raw


def evaluate(model: Any, X: Any = None, costs: CostModel | None = None, *,
             n_rows: int | None = None, n_threads: int | None = None,
             chunk_size: int | None = None) -> Evaluation:
    """Evaluate a plan (or forest, or fitted model) and report what each prediction cost.

    Parameters
    ----------
    model : Plan, Forest, fitted thrifty estimator, or LightGBM/XGBoost/scikit-learn model
    X : array-like of shape (n, n_features), or callable
        Dense mode: every feature value (cost is accounted, not saved). Lazy mode: a feature
        provider ``provider(feature_ids, row_ids) -> values`` returning an array of shape
        ``(len(row_ids), len(feature_ids))``; it is called in batched rounds, only for
        features some evaluated tree needs, never twice for the same (row, feature). A
        provider with a ``fetch(requests)`` method (``thrifty.providers.RoundProvider``, e.g.
        ``sql_provider``) is asked once per round for all its ``(feature_id, row_ids)`` pairs.
    costs : CostModel, optional
        Prices; default: every feature costs 1, evaluation is free.
    n_rows : int
        Number of examples (lazy mode only).
    n_threads : int, optional
        Threads for the kernels (default: all).
    chunk_size : int, optional
        Rows evaluated at once (default: sized so per-row state stays near 128 MiB).

    Returns
    -------
    Evaluation
    """
    plan = as_plan(model)
    costs = _costs_for(plan, costs)
    lazy = (callable(X) or hasattr(X, "fetch")) and not hasattr(X, "shape")
    if lazy:
        if n_rows is None:
            raise ValueError("lazy evaluation needs n_rows= (the number of examples the provider serves)")
        n = int(n_rows)
        if n < 0:
            raise ValueError(f"n_rows must be >= 0, got {n}")
    else:
        if X is None:
            raise ValueError("evaluate needs X (a matrix or DataFrame) or a feature provider")
        if n_rows is not None:
            raise ValueError("n_rows= is only for lazy evaluation with a feature provider")
        if not hasattr(X, "shape"):
            X = np.asarray(X)
        # Validate on an empty slice first: errors come before any work.
        to_matrix(X[:0], plan.n_features, plan.feature_names, plan.categories)
        n = X.shape[0]
    F, U = plan.n_features, len(costs.unit_cost)
    per_row = 8 * (F + 2 * plan.n_outputs + 8) + F + U + 9 * _cache_width(plan) + (9 * F if lazy else 0)
    chunk = chunk_size or max(256, min(1 << 16, _CHUNK_BYTES // per_row))
    out = _Collector(plan, costs, n)
    with threads(n_threads):
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            if lazy:
                out.add(lo, hi, *_run_lazy(plan, X, costs, lo, hi))
            else:
                rows = X.iloc[lo:hi] if hasattr(X, "iloc") else X[lo:hi]
                M = to_matrix(rows, plan.n_features, plan.feature_names, plan.categories)
                out.add(lo, hi, *_run_dense(plan, M, costs))
    return out.result()


def _costs_for(plan: Plan, costs: CostModel | None) -> CostModel:
    if costs is None:
        return CostModel.uniform(plan.n_features, feature_names=plan.feature_names)
    if not isinstance(costs, CostModel):
        raise TypeError(f"costs must be a thrifty CostModel, got {type(costs).__name__}; "
                        "build one with CostModel(...) or CostModel.from_file(path)")
    return costs.for_features(plan.feature_names, plan.n_features)


def _cache_width(plan: Plan) -> int:
    """Trees whose outputs a cascade caches per row (it reuses them across stages)."""
    if isinstance(plan, Cascade):
        return plan.forest.n_trees
    if isinstance(plan, Gated):
        return sum(_cache_width(p) for p in (plan.gate, plan.low, plan.high))
    return 0


def _run_dense(plan: Plan, X: np.ndarray, costs: CostModel) -> tuple[Context, Any]:
    ctx = Context(X, np.ones((1, 1), dtype=np.bool_), True, costs)
    ex = executor(plan, ctx)
    ex.advance(np.arange(ctx.n, dtype=np.int64))
    return ctx, ex


def _run_lazy(plan: Plan, provider: Provider, costs: CostModel, lo: int, hi: int) -> tuple[Context, Any]:
    n, F = hi - lo, plan.n_features
    ctx = Context(np.full((n, F), np.nan), np.zeros((n, F), dtype=np.bool_), False, costs)
    ex = executor(plan, ctx)
    active = np.arange(n, dtype=np.int64)
    while len(active):
        ex.advance(active)
        blocked = ctx.blocked[active]
        active = active[blocked >= 0]
        if not len(active):
            break
        features = ctx.blocked[active]
        wanted = [(int(f), active[features == f]) for f in np.unique(features)]
        if hasattr(provider, "fetch"):
            answers = check_answers(provider.fetch([(f, rows + lo) for f, rows in wanted]), wanted)
        else:
            answers = [_call_provider(provider, np.array([f], dtype=np.int64), rows + lo)[:, 0]
                       for f, rows in wanted]
        for (f, rows), values in zip(wanted, answers):
            ctx.X[rows, f] = values
            ctx.known[rows, f] = True
    return ctx, ex


def _call_provider(provider: Provider, features: np.ndarray, rows: np.ndarray) -> np.ndarray:
    values = np.asarray(provider(features, rows))
    if values.ndim == 1 and len(features) == 1:
        values = values.reshape(-1, 1)
    if values.shape != (len(rows), len(features)):
        raise ValueError(f"the feature provider returned shape {values.shape} for {len(rows)} rows "
                         f"and {len(features)} feature(s); it must return (len(row_ids), len(feature_ids))")
    try:
        return values.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError("the feature provider returned non-numeric values; return numbers "
                         "(category codes for categorical features)") from exc


class _Collector:
    """Outputs of every chunk written into arrays allocated once (memory stays bounded)."""

    def __init__(self, plan: Plan, costs: CostModel, n: int) -> None:
        self.plan, self.costs, self.n = plan, costs, n
        K, F = plan.n_outputs, plan.n_features
        self.raw = np.zeros((n, K))
        self.exit = np.zeros(n, dtype=np.int64)
        self.feature = np.zeros(n)
        self.n_nodes = np.zeros(n, dtype=np.int64)
        self.n_trees = np.zeros(n, dtype=np.int64)
        self.acquired = np.zeros((n, F), dtype=np.bool_)
        self.proba: np.ndarray | None = None
        self.labels: np.ndarray | None = None
        if plan.is_classifier:
            n_classes = len(plan.classes) if plan.classes is not None else max(2, K)
            self.proba = np.zeros((n, n_classes))
            classes = np.asarray(plan.classes) if plan.classes is not None else np.arange(n_classes)
            self.labels = np.zeros(n, dtype=classes.dtype)

    def add(self, lo: int, hi: int, ctx: Context, ex: Any) -> None:
        self.raw[lo:hi] = ex.raw
        self.exit[lo:hi] = ex.exit
        self.acquired[lo:hi], self.feature[lo:hi] = ctx.settle()
        self.n_nodes[lo:hi] = ctx.n_nodes
        self.n_trees[lo:hi] = ctx.n_trees
        if self.proba is not None:
            self.proba[lo:hi] = ex.proba()
            self.labels[lo:hi] = ex.labels()

    def result(self) -> Evaluation:
        costs, plan = self.costs, self.plan
        evaluation = costs.tree_cost * self.n_trees + costs.split_cost * self.n_nodes
        report = CostReport(feature=self.feature, evaluation=evaluation, total=self.feature + evaluation,
                            n_trees=self.n_trees, n_nodes=self.n_nodes, acquired=self.acquired,
                            fixed=costs.fixed_cost(plan.feature_usage()),
                            feature_names=costs.feature_names or plan.feature_names)
        raw = self.raw[:, 0] if plan.n_outputs == 1 else self.raw
        return Evaluation(raw=raw, proba=self.proba, labels=self.labels, exit=self.exit, cost=report)


def array_provider(X: Any, model: Any = None) -> Provider:
    """A feature provider serving a matrix or DataFrame already in memory.

    Useful to test a deployment and to measure lazy evaluation. With ``model``, a DataFrame is
    coded the way the model reads it (column order, category codes).
    """
    if model is not None:
        plan = as_plan(model)
        M = to_matrix(X, plan.n_features, plan.feature_names, plan.categories)
    else:
        M = to_matrix(X, np.shape(X)[1])

    def provider(feature_ids: np.ndarray, row_ids: np.ndarray) -> np.ndarray:
        return M[np.ix_(row_ids, feature_ids)]

    return provider
