"""Lazy rounds of a Full plan whose trees advance independently: several features per row a round.

A Full plan evaluates every tree of every example, so a tree may fetch what it needs without
waiting for the trees before it: each round, every unfinished tree of every example walks until
it blocks, and the round fetches what all of them block on. The features fetched are exactly
those the in-order evaluation fetches (the same paths); only fewer rounds wait for them.
"""

from __future__ import annotations

from collections.abc import Generator

import numpy as np

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest.kernels import threads
from thrifty.runtime.evaluation import Evaluation
from thrifty.runtime.interpret.executors import Context, executor
from thrifty.runtime.lazy.providers import Requests, column
from thrifty.runtime.lazy.rounds import drive, lazy_rounds
from thrifty.runtime.plans import Full, Sequential

# Rows discovered at once: each tree keeps its own per-row state.
_CHUNK = 4096


def tree_rounds(
    plan: Full, costs: CostModel, *, n_rows: int, chunk_size: int | None = None, n_threads: int | None = None
) -> Generator[Requests, list[np.ndarray], Evaluation]:
    """Rounds (as :func:`thrifty.runtime.lazy.lazy_rounds`) with every tree advancing on its own.

    The yielded pairs ``(feature_id, row_ids)`` have distinct features within a round, but a
    row may appear under several features. The returned Evaluation is that of the in-order
    evaluation (it is computed by :func:`lazy_rounds` on the values fetched).
    """
    n, F, T = int(n_rows), plan.n_features, plan.forest.n_trees
    X = np.full((n, F), np.nan)
    known = np.zeros((n, F), dtype=np.bool_)
    chunk = chunk_size or _CHUNK
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        walkers = []
        for t in range(T):
            ctx = Context(X[lo:hi], known[lo:hi], False, costs)
            walkers.append((ctx, executor(Sequential(plan.forest, order=[t]), ctx)))
        active = [np.arange(hi - lo, dtype=np.int64)] * T
        while True:
            rows, feats = [], []
            with threads(n_threads):
                for t, (ctx, ex) in enumerate(walkers):
                    if len(active[t]):
                        ex.advance(active[t])
                        blocked = ctx.blocked[active[t]]
                        active[t] = active[t][blocked >= 0]
                        rows.append(active[t])
                        feats.append(ctx.blocked[active[t]].astype(np.int64))
            if not any(len(a) for a in active):
                break
            pairs = np.unique(np.column_stack([np.concatenate(feats), np.concatenate(rows)]), axis=0)
            wanted = [(int(f), pairs[pairs[:, 0] == f, 1]) for f in np.unique(pairs[:, 0])]
            answers = yield [(f, r + lo) for f, r in wanted]
            if answers is None or len(answers) != len(wanted):
                raise InputError(
                    f"send one array of values per requested (feature, rows) pair: "
                    f"{len(wanted)} were requested"
                )
            for (f, r), values in zip(wanted, answers):
                X[r + lo, f] = column(values, len(r), f)
                known[r + lo, f] = True

    # Every value the in-order evaluation asks for has been fetched; it runs from them.
    def answer(requests: Requests) -> list[np.ndarray]:
        if not all(known[r, f].all() for f, r in requests):
            raise RuntimeError(
                "tree-parallel rounds missed a feature the in-order evaluation needs; please report this bug"
            )
        return [X[r, f] for f, r in requests]

    return drive(lazy_rounds(plan, costs, n_rows=n, chunk_size=chunk_size, n_threads=n_threads), answer)
