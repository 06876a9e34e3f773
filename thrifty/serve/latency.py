"""The latency a served row waits for its features, round by round, as ``evaluate_async``
reports it under ``latency="max"``.

The batcher drives the round generators itself, so it keeps this account itself: per row, the
sum over the rounds in which it waited of the slowest acquisition it waited for. Fetching
feature ``f`` costs the prices of the acquisition units of ``f``'s closure (its group, its
required inputs) that the row does not hold yet; a value the request gave is not waited for.
The serving tests check it against ``evaluate_async`` on each request alone.
"""

from __future__ import annotations

import numpy as np

from thrifty.costs import CostModel
from thrifty.runtime.lazy import Requests


class RoundLatency:
    """Per-row latency of a lazy evaluation whose rounds overlap their fetches."""

    def __init__(self, costs: CostModel, given: np.ndarray) -> None:
        self.costs, self.given = costs, given
        self.held = np.zeros((len(given), len(costs.unit_cost)), dtype=np.bool_)
        self.latency = np.zeros(len(given))

    def add(self, requests: Requests) -> None:
        """Account one round: each row waits for its slowest new acquisition."""
        c = self.costs
        wait = np.zeros(len(self.latency))
        for f, rows in requests:
            waiting = rows[~self.given[rows, f]]
            units = c.closure_units[c.closure_ptr[f] : c.closure_ptr[f + 1]]
            cells = np.ix_(waiting, units)
            new = ~self.held[cells]
            self.held[cells] = True
            slowest = np.where(new, c.unit_cost[units], 0.0).max(axis=1, initial=0.0)
            np.maximum.at(wait, waiting, slowest)
        self.latency += wait
