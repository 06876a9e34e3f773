"""``evaluate``: run a plan on a dense matrix or lazily on a feature provider, with exact costs."""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.forest._inputs import to_matrix
from thrifty.forest._predict import threads
from thrifty.runtime._executors import Context, executor
from thrifty.runtime._results import Collector, Evaluation, chunk_rows, costs_for
from thrifty.runtime.lazy import Provider, array_provider, run_lazy
from thrifty.runtime.plans import Plan, as_plan

__all__ = ["Evaluation", "Provider", "array_provider", "evaluate"]


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
        features some evaluated tree needs, never twice for the same (row, feature)
        (see ``thrifty.runtime.lazy.lazy_rounds`` to drive the rounds yourself).
    costs : CostModel, optional
        Prices; default: every feature costs 1, evaluation is free.
    n_rows : int
        Number of examples (lazy mode only).
    n_threads : int, optional
        Threads for the kernels (default: all; batches under ``SERIAL_ROWS`` rows run on the
        calling thread).
    chunk_size : int, optional
        Rows evaluated at once (default: sized so per-row state stays near 128 MiB).

    Returns
    -------
    Evaluation
    """
    plan = as_plan(model)
    if callable(X) and not hasattr(X, "shape"):
        return run_lazy(plan, X, costs, n_rows=n_rows, chunk_size=chunk_size, n_threads=n_threads)
    costs = costs_for(plan, costs)
    if X is None:
        raise ValueError("evaluate needs X (a matrix or DataFrame) or a feature provider")
    if n_rows is not None:
        raise ValueError("n_rows= is only for lazy evaluation with a feature provider")
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    # Validate on an empty slice first: errors come before any work.
    to_matrix(X[:0], plan.n_features, plan.feature_names, plan.categories)
    n = X.shape[0]
    chunk = chunk_rows(plan, costs, False, chunk_size)
    out = Collector(plan, costs, n)
    with threads(n_threads):
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            rows = X.iloc[lo:hi] if hasattr(X, "iloc") else X[lo:hi]
            M = to_matrix(rows, plan.n_features, plan.feature_names, plan.categories)
            out.add(lo, hi, *_run_dense(plan, M, costs))
    return out.result()


def _run_dense(plan: Plan, X: np.ndarray, costs: CostModel) -> tuple[Context, Any]:
    ctx = Context(X, np.ones((1, 1), dtype=np.bool_), True, costs)
    ex = executor(plan, ctx)
    ex.advance(np.arange(ctx.n, dtype=np.int64))
    return ctx, ex
