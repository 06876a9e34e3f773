"""The dense loop: every feature value given, rows evaluated chunk by chunk into an ``Evaluation``."""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.forest import to_matrix
from thrifty.forest.kernels import SERIAL_ROWS, threads
from thrifty.runtime.evaluation import Evaluation
from thrifty.runtime.interpret.executors import Accelerated, Context, Executor, executor
from thrifty.runtime.interpret.results import MIN_CHUNK, Collector, chunk_rows, evaluation_of
from thrifty.runtime.plans import Plan


def run_dense(
    plan: Plan,
    X: Any,
    costs: CostModel,
    accelerated: Accelerated | None = None,
    *,
    n_threads: int | None = None,
    chunk_size: int | None = None,
) -> Evaluation:
    """Evaluate ``plan`` on the rows of ``X`` (a matrix or DataFrame) under ``costs`` (aligned to
    the plan's features), its parts on ``accelerated``'s engine where it runs them."""
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    if X.ndim < 2:
        to_matrix(X, plan.n_features)  # the user's error: a file name, or rows of one value
    n = X.shape[0]
    # A small batch (a service's one-row call) is one chunk whatever the default size.
    chunk = n if n <= MIN_CHUNK and chunk_size is None else chunk_rows(plan, costs, False, chunk_size)
    # Batches under SERIAL_ROWS run serial kernels: the thread count does not matter to them.
    with threads(n_threads if n >= SERIAL_ROWS else None):
        if n <= chunk:
            # One chunk (every call of a service): no copy of its outputs.
            M = to_matrix(X, plan.n_features, plan.feature_names, plan.categories)
            ctx, ex = _run_chunk(plan, M, costs, accelerated)
            return evaluation_of(plan, costs, ctx, ex)
        # Validate on an empty slice first: errors come before any work.
        to_matrix(X[:0], plan.n_features, plan.feature_names, plan.categories)
        out = Collector(plan, costs, n)
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            rows = X.iloc[lo:hi] if hasattr(X, "iloc") else X[lo:hi]
            M = to_matrix(rows, plan.n_features, plan.feature_names, plan.categories)
            ctx, ex = _run_chunk(plan, M, costs, accelerated)
            out.add(lo, hi, ctx, ex)
    return out.result()


def _run_chunk(
    plan: Plan, X: np.ndarray, costs: CostModel, accelerated: Accelerated | None
) -> tuple[Context, Executor]:
    ctx = Context(X, np.ones((1, 1), dtype=np.bool_), True, costs)
    ex = executor(plan, ctx, accelerated)
    ex.advance(np.arange(ctx.n, dtype=np.int64))
    return ctx, ex
