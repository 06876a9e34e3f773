"""``evaluate``, the runtime's front door: a plan on a dense matrix (the interpreter's dense loop,
or a compiled plan's engine) or lazily on a feature provider (``lazy``), with exact costs."""

from __future__ import annotations

from typing import Any

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.runtime.evaluation import Evaluation, costs_for
from thrifty.runtime.interpret.dense import run_dense
from thrifty.runtime.interpret.executors import Accelerated
from thrifty.runtime.lazy import Provider, array_provider, run_lazy
from thrifty.runtime.plans import as_plan

__all__ = ["Evaluation", "Provider", "array_provider", "costs_for", "evaluate"]


def evaluate(
    model: Any,
    X: Any = None,
    costs: CostModel | None = None,
    *,
    n_rows: int | None = None,
    n_threads: int | None = None,
    chunk_size: int | None = None,
    rounds: Any = "in_order",
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
    n_rows : int, optional
        Number of examples (lazy mode only); a provider holding one key per row
        (``thrifty.providers``) gives it, and a count other than its keys' is an error.
    n_threads : int, optional
        Threads for the kernels (default: all; batches under ``SERIAL_ROWS`` rows run on the
        calling thread).
    chunk_size : int, optional
        Rows evaluated at once (default: sized so per-row state stays near 128 MiB).
    rounds : {"in_order", "parallel"} or Prefetch, default="in_order"
        Lazy mode only: which features each round fetches (see
        ``thrifty.runtime.lazy.lazy_rounds``); ``"parallel"`` takes fewer rounds at the same
        cost, a ``Prefetch`` (``thrifty.prefetch_plan``) fewer still at the cost of what it
        prefetches. A ``CompiledPlan`` runs each round natively.

    Returns
    -------
    Evaluation
    """
    accelerated = model if isinstance(model, Accelerated) else None
    if accelerated is not None and (costs is None or costs is accelerated.costs):
        if n_rows is None and chunk_size is None and rounds == "in_order":
            # The engine's one call (a compiled plan's serving path), when it takes X.
            ev = accelerated.serve(X, n_threads)
            if ev is not None:
                return ev
    plan = accelerated.plan if accelerated is not None else as_plan(model)
    if accelerated is not None and costs is None:
        costs = accelerated.costs
    if (callable(X) or hasattr(X, "fetch")) and not hasattr(X, "shape"):
        return run_lazy(
            accelerated if accelerated is not None else plan,
            X,
            costs,
            n_rows=n_rows,
            chunk_size=chunk_size,
            n_threads=n_threads,
            rounds=rounds,
        )
    costs = costs_for(plan, costs)
    if X is None:
        raise InputError("evaluate needs X (a matrix or DataFrame) or a feature provider")
    if n_rows is not None:
        raise InputError("n_rows= is only for lazy evaluation with a feature provider")
    if not (isinstance(rounds, str) and rounds == "in_order"):
        raise InputError("rounds= is only for lazy evaluation with a feature provider")
    return run_dense(plan, X, costs, accelerated, n_threads=n_threads, chunk_size=chunk_size)
