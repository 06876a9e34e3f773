"""Lazy evaluation as a generator of rounds: the driver fetches each round's features its own way."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.forest._predict import threads
from thrifty.runtime._executors import Context, executor
from thrifty.runtime.evaluate import _CHUNK_BYTES, Evaluation, _cache_width, _Collector, _costs_for
from thrifty.runtime.plans import as_plan

Round = list[tuple[int, np.ndarray]]


def lazy_rounds(model: Any, costs: CostModel | None = None, *, n_rows: int, chunk_size: int | None = None,
                n_threads: int | None = None) -> Generator[Round, list[np.ndarray], Evaluation]:
    """Evaluate a plan lazily, one round of feature requests at a time.

    Every active example advances until it finishes or blocks on a feature it does not have;
    the examples blocked on the same feature form one request. Each ``next()``/``send()``
    yields a round: a list of ``(feature_id, row_ids)`` pairs (``row_ids``: int64 global row
    numbers; the pairs of a round can be fetched concurrently). The driver sends back one
    float64 array per pair, aligned with its ``row_ids``. When every example is done, the
    generator returns the :class:`Evaluation` (``StopIteration.value``), identical to dense
    evaluation's in predictions and costs.

    Parameters
    ----------
    model : Plan, Forest or fitted model
    costs : CostModel, optional
        Prices; default: every feature costs 1.
    n_rows : int
        Number of examples.
    chunk_size : int, optional
        Rows evaluated at once (default: sized so per-row state stays near 128 MiB).
    n_threads : int, optional
        Threads for the kernels (default: all).
    """
    plan = as_plan(model)
    costs = _costs_for(plan, costs)
    n = int(n_rows)
    if n < 0:
        raise ValueError(f"n_rows must be >= 0, got {n}")
    F, U = plan.n_features, len(costs.unit_cost)
    per_row = 8 * (F + 2 * plan.n_outputs + 8) + F + U + 9 * _cache_width(plan) + 9 * F
    chunk = chunk_size or max(256, min(1 << 16, _CHUNK_BYTES // per_row))
    out = _Collector(plan, costs, n)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        ctx = Context(np.full((hi - lo, F), np.nan), np.zeros((hi - lo, F), dtype=np.bool_), False, costs)
        ex = executor(plan, ctx)
        active = np.arange(hi - lo, dtype=np.int64)
        while len(active):
            with threads(n_threads):
                ex.advance(active)
            active = active[ctx.blocked[active] >= 0]
            if not len(active):
                break
            features = ctx.blocked[active]
            wanted = [(int(f), active[features == f]) for f in np.unique(features)]
            answers = yield [(f, rows + lo) for f, rows in wanted]
            if answers is None or len(answers) != len(wanted):
                raise ValueError(f"send one array of values per request of the round ({len(wanted)})")
            for (f, rows), values in zip(wanted, answers):
                ctx.X[rows, f] = values
                ctx.known[rows, f] = True
        with threads(n_threads):
            out.add(lo, hi, ctx, ex)
    return out.result()
