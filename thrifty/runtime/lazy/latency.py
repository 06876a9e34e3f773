"""The latency a lazily evaluated example waits for its features, round by round."""

from __future__ import annotations

import numpy as np

from thrifty.costs import CostModel
from thrifty.runtime.lazy.providers import Requests


class RoundLatency:
    """Per-example wall latency: sum over rounds of the (max or sum) latency it waited for.

    ``evaluate_async`` keeps this account for the rounds it drives, and so does the server's
    batcher for the rounds of its batches (``thrifty.serve.batcher``).

    Fetching feature ``f`` for an example costs the prices of the acquisition units of ``f``'s
    closure (its group, its required inputs) that the example does not hold yet; the units of
    one fetch, like the fetches of one round, overlap under ``"max"``.
    """

    def __init__(self, costs: CostModel, n: int, how: str, given: np.ndarray | None) -> None:
        self.costs, self.how, self.given = costs, how, given
        self.held = np.zeros((n, len(costs.unit_cost)), dtype=np.bool_)
        self.latency = np.zeros(n)

    def add(self, requests: Requests) -> None:
        """Account one round: each example waits for its slowest (or every) new acquisition."""
        c = self.costs
        wait = np.zeros(len(self.latency))
        for f, rows in requests:
            if len(rows) == 1:
                # One row (a service's request, most pairs of a small batch): scalars, the
                # same arithmetic as the block below on a 1-row block.
                self._add_row(int(f), int(rows[0]), wait)
                continue
            if self.given is not None:
                rows = rows[~self.given[rows, f]]  # at hand: no fetch, no wait
            units = c.closure_units[c.closure_ptr[f] : c.closure_ptr[f + 1]]
            block = np.ix_(rows, units)
            paid = np.where(self.held[block], 0.0, c.unit_cost[units])
            self.held[block] = True
            if self.how == "max":
                np.maximum.at(wait, rows, paid.max(axis=1, initial=0.0))
            else:
                np.add.at(wait, rows, paid.sum(axis=1))
        self.latency += wait

    def _add_row(self, f: int, r: int, wait: np.ndarray) -> None:
        """:meth:`add`'s account of one (feature, row) pair."""
        if self.given is not None and self.given[r, f]:
            return
        c = self.costs
        lo, hi = int(c.closure_ptr[f]), int(c.closure_ptr[f + 1])
        held = self.held[r]
        if hi - lo == 1:
            u = int(c.closure_units[lo])
            paid = 0.0 if held[u] else c.unit_cost[u]
            held[u] = True
            wait[r] = max(wait[r], paid) if self.how == "max" else wait[r] + paid
            return
        units = c.closure_units[lo:hi]
        owed = np.where(held[units], 0.0, c.unit_cost[units])
        held[units] = True
        if self.how == "max":
            wait[r] = max(wait[r], owed.max(initial=0.0))
        else:
            wait[r] += owed.sum()
