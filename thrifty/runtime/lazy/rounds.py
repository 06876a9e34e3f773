"""Lazy evaluation: features are fetched only when an evaluated tree needs them.

``lazy_rounds`` is the resumable core, a generator that yields each *round* of feature
requests and receives their values; ``run_lazy`` drives it with a synchronous provider (what
``thrifty.evaluate(model, provider, n_rows=...)`` does). Other drivers (asynchronous,
round-batched) build on the same generator, so every mode shares one exact semantics.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.forest.kernels import threads
from thrifty.runtime.evaluation import Evaluation, costs_for
from thrifty.runtime.interpret.executors import Accelerated, Context, executor
from thrifty.runtime.interpret.results import Collector, chunk_rows
from thrifty.runtime.lazy.policies import Policy, policy_for
from thrifty.runtime.lazy.providers import (
    Provider,
    Requests,
    check_answer,
    column,
    provider_column,
    rows_served,
)
from thrifty.runtime.plans import as_plan


def lazy_rounds(
    model: Any,
    costs: CostModel | None = None,
    *,
    n_rows: int | None,
    chunk_size: int | None = None,
    n_threads: int | None = None,
    rounds: Any = "in_order",
) -> Generator[Requests, list[np.ndarray], Evaluation]:
    """Evaluate ``model`` lazily as a generator of feature-request rounds.

    Each ``next()``/``send()`` yields one round: a list of ``(feature_id, row_ids)`` pairs,
    ``row_ids`` being int64 global row numbers (in ``[0, n_rows)``) whose evaluation is blocked
    on that feature. Every pair of a round can be fetched concurrently, and no (row, feature)
    is ever requested twice. The driver sends back a list with one float64 array per pair,
    aligned with its ``row_ids`` (category codes for categorical features, NaN for missing).
    When every row is done the generator returns the ``Evaluation`` (``StopIteration.value``),
    identical to dense evaluation on the same values.

    Parameters
    ----------
    model : Plan, CompiledPlan, Forest, fitted thrifty estimator, or supported tree model
        A ``CompiledPlan`` (``thrifty.compile``) runs each round as one native call over the
        rows that wait (its Full and Sequential parts); the rounds and results are the same.
        One row of a compiled Full or Sequential plan (``n_rows=1``, no ``chunk_size``) reuses
        per-row state prepared once per plan and cost model (``compiled/lazy_row.py``).
    costs : CostModel, optional
        Prices; default: every feature costs 1 (a compiled plan's own cost model when it has
        one), evaluation is free.
    n_rows : int
        Number of examples.
    chunk_size : int, optional
        Rows evaluated at once (default: sized so per-row state stays near 128 MiB); each
        chunk's rounds finish before the next chunk's begin.
    n_threads : int, optional
        Threads for the kernels (default: all).
    rounds : {"in_order", "parallel"} or Prefetch, default="in_order"
        Which features a round asks for (``thrifty.runtime.lazy.policies``): ``"in_order"``,
        the one feature each row's evaluation waits for; ``"parallel"`` (Full and Sequential
        plans), also what every later tree up to the row's next exit position waits for, at no
        extra feature cost; a ``Prefetch`` (``thrifty.prefetch_plan``), the first round also
        fetches its features for every row, charged to each row whether used or not.

    Returns
    -------
    Generator
        Yields rounds, receives values, returns the ``Evaluation``.

    Examples
    --------
    >>> rounds = lazy_rounds(forest, n_rows=len(X))          # doctest: +SKIP
    >>> try:
    ...     request = next(rounds)
    ...     while True:
    ...         request = rounds.send([X[rows, f] for f, rows in request])
    ... except StopIteration as stop:
    ...     evaluation = stop.value
    """
    if n_rows == 1 and chunk_size is None and isinstance(model, Accelerated):
        # One row (a service's request): the engine's own rounds, their state prepared once per
        # plan and cost model.
        in_order = isinstance(rounds, str) and rounds == "in_order"
        one_policy = None if in_order else policy_for(model.plan, rounds)
        row = model.lazy_row(costs)
        if row is not None:
            rounds_of_row: Generator[Requests, list[np.ndarray], Evaluation] = row.rounds(one_policy)
            return rounds_of_row
    accelerated = model if isinstance(model, Accelerated) else None
    plan = accelerated.plan if accelerated is not None else as_plan(model)
    if costs is None and accelerated is not None:
        costs = accelerated.costs
    # A compiled plan's serving path, when it prices with these costs, settles the result.
    own = accelerated is not None and (costs is None or costs is accelerated.costs)
    costs = costs_for(plan, costs)
    n = rows_served(None, n_rows)
    chunk = chunk_rows(plan, costs, True, chunk_size)
    policy = policy_for(plan, rounds)
    # A prefetch charges what no tree tested: only the collector settles that.
    serve = accelerated if own and not policy.prefetches else None
    return _rounds(plan, costs, n, chunk, n_threads, accelerated, policy, serve)


def _rounds(
    plan: Any,
    costs: CostModel,
    n: int,
    chunk: int,
    n_threads: int | None,
    accelerated: Accelerated | None,
    policy: Policy,
    serve: Accelerated | None = None,
) -> Generator[Requests, list[np.ndarray], Evaluation]:
    out: Collector | None = None
    F = plan.n_features
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        ctx = Context(np.full((hi - lo, F), np.nan), np.zeros((hi - lo, F), dtype=np.bool_), False, costs)
        ex = executor(plan, ctx, accelerated)
        settles = serve is not None and hi - lo == n
        if settles:
            # The serving path settles the result: what the executor would hand over for the
            # collector waits until (and unless) it is needed.
            ex.defer_results()
        active = np.arange(hi - lo, dtype=np.int64)
        first = True
        if hi - lo == 1 and policy.plain:
            # One row (a service's request): the same rounds, with scalars.
            yield from _one_row(ctx, ex, active, lo, n_threads)
            active = active[:0]
        while len(active):
            # The thread count is set per step, never held across a yield.
            with threads(n_threads):
                ex.advance(active)
            features = ctx.blocked[active]
            waiting = features >= 0
            if not waiting.all():
                active, features = active[waiting], features[waiting]
            if not len(active):
                break
            if policy.plain:
                if len(active) == 1:
                    # One row (a service's request): one feature, no grouping.
                    request = [(int(features[0]), active + lo)]
                else:
                    request = [(int(f), active[features == f] + lo) for f in np.unique(features)]
            else:
                with threads(n_threads):
                    request = policy.request(ctx, ex, active, lo, first)
            first = False
            values = yield request
            check_answer(values, len(request))
            for (f, rows), v in zip(request, values):
                local = rows - lo
                ctx.X[local, f] = column(v, len(rows), f)
                ctx.known[local, f] = True
        if settles:
            # One chunk of a compiled forest plan: the evaluation is dense evaluation's on the
            # values fetched (features never fetched are never read: NaN stands in), which its
            # serving path gives in one native call, costs settled.
            assert serve is not None
            ev = serve.serve(ctx.X, n_threads)
            if ev is not None:
                return ev
            ex.hand_over()
        if out is None:
            out = Collector(plan, costs, n)
        with threads(n_threads):
            out.add(lo, hi, ctx, ex)
    return (out if out is not None else Collector(plan, costs, n)).result()


def _one_row(
    ctx: Context, ex: Any, active: np.ndarray, lo: int, n_threads: int | None
) -> Generator[Requests, list[np.ndarray], None]:
    """The in-order rounds of a chunk of one row (``_rounds``'s loop without array indexing)."""
    X, known, blocked = ctx.X, ctx.known, ctx.blocked
    while True:
        if n_threads is None:
            ex.advance(active)
        else:
            with threads(n_threads):
                ex.advance(active)
        f = int(blocked[0])
        if f < 0:
            return
        values = yield [(f, np.array([lo], dtype=np.int64))]
        check_answer(values, 1)
        X[0, f] = column(values[0], 1, f)[0]
        known[0, f] = True


def run_lazy(
    model: Any,
    provider: Provider,
    costs: CostModel | None = None,
    *,
    n_rows: int | None,
    chunk_size: int | None = None,
    n_threads: int | None = None,
    rounds: Any = "in_order",
) -> Evaluation:
    """Drive ``lazy_rounds`` with a synchronous ``provider(feature_ids, row_ids) -> values``.

    The provider is called once per requested pair, with one feature id, and returns an array
    of shape ``(len(row_ids), 1)`` (or ``(len(row_ids),)``). A provider with a
    ``fetch(requests)`` method (``thrifty.providers.RoundProvider``) is asked once per round.
    """
    fetch = getattr(provider, "fetch", None)
    if inspect.iscoroutinefunction(fetch) or inspect.iscoroutinefunction(provider):
        raise TypeError("the feature provider is async; use `await thrifty.evaluate_async(...)`")
    if fetch is None:

        def fetch(request: Requests) -> list[np.ndarray]:
            return [
                provider_column(provider(np.array([f], dtype=np.int64), rows), len(rows))
                for f, rows in request
            ]

    n_rows = rows_served(provider, n_rows)
    gen = lazy_rounds(model, costs, n_rows=n_rows, chunk_size=chunk_size, n_threads=n_threads, rounds=rounds)
    return drive(gen, fetch)


def drive(
    rounds: Generator[Requests, list[np.ndarray], Evaluation],
    fetch: Callable[[Requests], Any],
    after: Callable[[Requests], None] | None = None,
) -> Evaluation:
    """Run a round generator to its ``Evaluation``, answering each round with ``fetch(round)``
    (then calling ``after(round)``, e.g. to account latency)."""
    try:
        request = next(rounds)
        while True:
            answers = fetch(request)
            if after is not None:
                after(request)
            request = rounds.send(answers)
    except StopIteration as stop:
        return stop.value
