"""``evaluate_async``: lazy evaluation that awaits a provider, fetching each round concurrently.

It also measures each example's wall latency when features fetched together overlap in time
(beyond the papers, which price features as if fetched one after another): see
``docs/deploy.md``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Generator
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.runtime.evaluation import Evaluation, costs_for
from thrifty.runtime.interpret.executors import Accelerated
from thrifty.runtime.lazy.latency import RoundLatency
from thrifty.runtime.lazy.providers import Requests, async_fetcher, rows_served
from thrifty.runtime.lazy.rounds import drive, lazy_rounds
from thrifty.runtime.plans import Full, as_plan

_LATENCY = ("max", "sum")


async def evaluate_async(
    model: Any,
    provider: Any,
    costs: CostModel | None = None,
    *,
    n_rows: int | None = None,
    given: np.ndarray | None = None,
    latency: str = "max",
    trees: str = "in-order",
    chunk_size: int | None = None,
    n_threads: int | None = None,
    rounds: Any = "in_order",
) -> Evaluation:
    """Evaluate a plan lazily on an async (or sync) feature provider, awaiting each round.

    Parameters
    ----------
    model : Plan, CompiledPlan, Forest or fitted model
        A ``CompiledPlan`` runs each round natively (with its cost model when ``costs`` is
        None).
    provider : provider object or callable
        An object whose ``fetch(requests)`` answers a whole round (it may be ``async``; with a
        synchronous one the whole evaluation runs in a worker thread), or a callable
        ``provider(feature_ids, row_ids)`` (``async`` or not), then called once per
        feature of the round, concurrently.
    costs : CostModel, optional
        Prices, read as the **latency** of acquiring each feature (or group) when
        ``cost.latency`` is used; default: every feature costs 1.
    n_rows : int, optional
        Number of examples; a provider holding one key per row (``thrifty.providers``) gives
        it, and a count other than its keys' is an error.
    given : ndarray of bool, shape (n_rows, n_features), optional
        The values the provider has at hand (e.g. sent with a request): it still answers them
        and they are paid for as acquired features, but no fetch waits for them, so they add
        no latency.
    latency : {"max", "sum"}, default="max"
        How a round's fetches add up for an example: ``"max"``, they overlap (the round costs
        the example its slowest fetch); ``"sum"``, one after another (then ``cost.latency``
        equals ``cost.feature``).
    trees : {"in-order", "parallel"}, default="in-order"
        ``"parallel"`` (Full plans only) is ``rounds="parallel"``, kept for compatibility.
    chunk_size, n_threads
        As for :func:`thrifty.evaluate`.
    rounds : {"in_order", "parallel"} or Prefetch, default="in_order"
        Which features each round fetches (see :func:`thrifty.runtime.lazy.lazy_rounds`):
        ``"parallel"``, what every tree up to an example's next exit waits for (predictions
        and costs unchanged, rounds and latency shrink); a ``Prefetch``
        (``thrifty.prefetch_plan``) also fetches its features in the first round, charged.

    Returns
    -------
    Evaluation
        As :func:`thrifty.evaluate` returns, with ``cost.latency``: per example, the sum over
        the rounds in which it waited of the latency of what it waited for in that round.
    """
    if latency not in _LATENCY:
        raise InputError(f"latency must be one of {_LATENCY}, got {latency!r}")
    if trees not in ("in-order", "parallel"):
        raise InputError(f"trees must be 'in-order' or 'parallel', got {trees!r}")
    n_rows = rows_served(provider, n_rows)
    accelerated = model if isinstance(model, Accelerated) else None
    plan = accelerated.plan if accelerated is not None else as_plan(model)
    if costs is None and accelerated is not None:
        costs = accelerated.costs
    costs = costs_for(plan, costs)
    if trees == "parallel":
        if not isinstance(plan, Full):
            raise InputError(
                f"trees='parallel' needs a Full plan (every tree evaluated), got "
                f"{type(plan).__name__}; use rounds='parallel', which stops at each exit"
            )
        rounds = "parallel"
    gen = lazy_rounds(
        accelerated if accelerated is not None else plan,
        costs,
        n_rows=n_rows,
        chunk_size=chunk_size,
        n_threads=n_threads,
        rounds=rounds,
    )
    clock = RoundLatency(costs, n_rows, latency, _given(given, n_rows, plan.n_features))
    if hasattr(provider, "fetch") and not inspect.iscoroutinefunction(provider.fetch):
        # One worker thread runs the whole evaluation: one hand-off per call, not one per round.
        result = await asyncio.to_thread(drive, gen, provider.fetch, clock.add)
    else:
        result = await _drive(gen, async_fetcher(provider), clock)
    result.cost.latency = clock.latency
    return result


async def _drive(
    gen: Generator[Requests, list[np.ndarray], Evaluation], fetch: Any, clock: RoundLatency
) -> Evaluation:
    try:
        requests = next(gen)
        while True:
            answers = await fetch(requests)
            clock.add(requests)
            requests = gen.send(answers)
    except StopIteration as stop:
        return stop.value


def _given(given: Any, n: int, n_features: int) -> np.ndarray | None:
    """``given`` as a bool matrix of one row per example and one column per feature."""
    if given is None:
        return None
    mask = np.asarray(given)
    if mask.dtype != np.bool_ or mask.shape != (n, n_features):
        raise InputError(
            f"given must be a bool array of shape ({n}, {n_features}) (one row per example, one "
            f"column per feature), got {mask.dtype} of shape {mask.shape}"
        )
    return mask
