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
