"""``evaluate``: run a plan on a dense matrix or lazily on a feature provider, with exact costs."""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import to_matrix
from thrifty.forest.kernels import SERIAL_ROWS, threads
from thrifty.runtime._compiled import NativePlan
from thrifty.runtime._executors import Context, executor
from thrifty.runtime._results import MIN_CHUNK, Collector, Evaluation, chunk_rows, costs_for, evaluation_of
from thrifty.runtime.lazy import Provider, array_provider, run_lazy
from thrifty.runtime.plans import Plan, as_plan

__all__ = ["Evaluation", "Provider", "array_provider", "costs_for", "evaluate"]


def evaluate(
    model: Any,
    X: Any = None,
    costs: CostModel | None = None,
    *,
    n_rows: int | None = None,
    n_threads: int | None = None,
    chunk_size: int | None = None,
) -> Evaluation:
    """Evaluate a plan (or forest, or fitted model) and report what each prediction cost.

    Parameters
    ----------
    model : Plan, CompiledPlan, Forest, fitted thrifty estimator, or LightGBM/XGBoost/scikit-learn model
        A ``CompiledPlan`` (``thrifty.compile``) runs its native code in dense evaluation and
        supplies its cost model when ``costs`` is None; ``evaluate`` never compiles on its own.
    X : array-like of shape (n, n_features), or callable
        Dense mode: every feature value (cost is accounted, not saved). Lazy mode: a feature
        provider ``provider(feature_ids, row_ids) -> values`` returning an array of shape
        ``(len(row_ids), len(feature_ids))``; it is called in batched rounds, only for
        features some evaluated tree needs, never twice for the same (row, feature)
        (see ``thrifty.runtime.lazy.lazy_rounds`` to drive the rounds yourself). A provider
        with a ``fetch(requests)`` method (``thrifty.providers.sql_provider``) is asked once
        per round; an async one needs ``thrifty.evaluate_async``.
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
    compiled = model if isinstance(model, NativePlan) else None
    if compiled is not None and compiled.fast is not None and (costs is None or costs is compiled.costs):
        # The serving path: one native call from the matrix to the settled costs.
        if n_rows is None and chunk_size is None:
            ev = compiled.fast.serve(X, n_threads)
            if ev is not None:
                return ev
    plan = compiled.plan if compiled is not None else as_plan(model)
    if compiled is not None and costs is None:
        costs = compiled.costs
    if (callable(X) or hasattr(X, "fetch")) and not hasattr(X, "shape"):
        return run_lazy(plan, X, costs, n_rows=n_rows, chunk_size=chunk_size, n_threads=n_threads)
    costs = costs_for(plan, costs)
    if X is None:
        raise InputError("evaluate needs X (a matrix or DataFrame) or a feature provider")
    if n_rows is not None:
        raise InputError("n_rows= is only for lazy evaluation with a feature provider")
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    n = X.shape[0]
    # A small batch (a service's one-row call) is one chunk whatever the default size.
    chunk = n if n <= MIN_CHUNK and chunk_size is None else chunk_rows(plan, costs, False, chunk_size)
    # Batches under SERIAL_ROWS run serial kernels: the thread count does not matter to them.
    with threads(n_threads if n >= SERIAL_ROWS else None):
        if n <= chunk:
            # One chunk (every call of a service): no copy of its outputs.
            M = to_matrix(X, plan.n_features, plan.feature_names, plan.categories)
            return evaluation_of(plan, costs, *_run_dense(plan, M, costs, compiled))
        # Validate on an empty slice first: errors come before any work.
        to_matrix(X[:0], plan.n_features, plan.feature_names, plan.categories)
        out = Collector(plan, costs, n)
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            rows = X.iloc[lo:hi] if hasattr(X, "iloc") else X[lo:hi]
            M = to_matrix(rows, plan.n_features, plan.feature_names, plan.categories)
            out.add(lo, hi, *_run_dense(plan, M, costs, compiled))
    return out.result()


def _run_dense(
    plan: Plan, X: np.ndarray, costs: CostModel, compiled: NativePlan | None
) -> tuple[Context, Any]:
    ctx = Context(X, np.ones((1, 1), dtype=np.bool_), True, costs)
    ex = executor(plan, ctx, compiled)
    ex.advance(np.arange(ctx.n, dtype=np.int64))
    return ctx, ex
