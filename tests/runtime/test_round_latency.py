"""RoundLatency's account of one-row pairs (scalars) equals its account of the same pairs as
blocks of rows (the array path): groups, dependencies, given values, max and sum."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from thrifty.costs import CostModel
from thrifty.runtime.lazy import RoundLatency

NAMES = ["a", "b", "c", "d", "e", "f"]
COSTS = CostModel(
    {"a": 1.5, "b": 2.0, "panel": 4.0, "e": 0.25, "f": 0.0},
    feature_names=NAMES,
    groups={"panel": ["c", "d"]},
    dependencies={"f": ["a", "e"]},
)


class Blocks(RoundLatency):
    """The array path only: one-row pairs padded with a row of no request never take the
    scalar path; the padding row is dropped from ``rows`` by the mask of given values."""

    def add(self, requests):
        n = len(self.latency) - 1
        padded = [(f, np.append(rows, n)) for f, rows in requests]
        saved = self.given
        self.given = np.zeros((n + 1, len(NAMES)), dtype=np.bool_) if saved is None else saved
        self.given[n] = True  # the padding row: at hand, no fetch, no wait
        super().add(padded)
        self.given = saved


@given(
    st.integers(1, 4),
    st.lists(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3)), max_size=6), max_size=5),
    st.sampled_from(["max", "sum"]),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=200, deadline=None)
def test_one_row_pairs_are_accounted_as_blocks(n, rounds, how, seed):
    rng = np.random.default_rng(seed)
    given_mask = rng.random((n + 1, len(NAMES))) < 0.2
    given_mask[n] = True
    scalar = RoundLatency(COSTS, n + 1, how, given_mask.copy())
    block = Blocks(COSTS, n + 1, how, given_mask.copy())
    for pairs in rounds:
        # One pair per (feature, row), each of one row: the scalar path.
        requests = [(f, np.array([r % n], dtype=np.int64)) for f, r in dict.fromkeys(pairs)]
        requests = list({(f, int(r[0])): (f, r) for f, r in requests}.values())
        scalar.add(requests)
        block.add(requests)
    np.testing.assert_array_equal(scalar.latency, block.latency)
    np.testing.assert_array_equal(scalar.held, block.held)
