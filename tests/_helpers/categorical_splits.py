"""Categorical splits of one and two 32-bit words and the values a category code could be
decided wrongly on, for the tests of coded categorical splits (``ir_catshift``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

# Values a category code could be decided wrongly on: NaN, infinities, signed zeros, values just
# above -1 (truncated to category 0), fractions, each word's first and last category, the
# first code past two words, huge values and subnormals.
PROBES = np.array(
    [np.nan, np.inf, -np.inf, -0.0, 0.0, 5e-324, -5e-324, -1.0, -0.999, -0.5, -1.5, 0.5, 1.0, 30.9]
    + [31.0, 31.5, 32.0, 32.99, 33.0, 62.0, 63.0, 63.999, 64.0, 64.5, 65.0, 95.0, 96.0, 2.0**31, 1e300]
    + [float(c) for c in range(0, 70, 3)],
    dtype=np.float64,
)


def coded_splits(rng: np.random.Generator) -> SimpleNamespace:
    """Categorical splits of one and two words (empty words, bits 0, 31 and 63 among them),
    each with NaN left and right, as the arrays the IR reads."""
    words = [[0x1], [0x80000000], [0xFFFFFFFF], [0], [0, 0x80000000], [0x1, 0x1], [0xFFFFFFFF, 0]]
    words += [[int(w) for w in rng.integers(0, 2**32, size=int(rng.integers(1, 3)))] for _ in range(6)]
    rows = [(ws, ml) for ws in words for ml in (False, True)]
    starts = np.cumsum([0] + [len(ws) for ws, _ in rows])[:-1]
    return SimpleNamespace(
        threshold=np.zeros(len(rows)),
        missing_type=np.zeros(len(rows), dtype=np.int64),
        missing_left=np.array([ml for _, ml in rows]),
        cat_start=starts,
        cat_size=np.array([len(ws) for ws, _ in rows]),
        cat_bitsets=np.array([w for ws, _ in rows for w in ws], dtype=np.uint32).astype(np.int32),
    )


def assert_codes_agree(run, lanes: int, n: int) -> None:
    """Run the native ``run(x_ptr, out_ptr)`` over :data:`PROBES`, ``lanes`` values at a time;
    it stores, for each of ``n`` splits and each lane, the coded test's decision then the
    doubles test's (``<lanes x i8>`` each). Fails naming the first value the two decide
    differently, or when every probe went the same way (the test would decide nothing)."""
    X = np.resize(PROBES, -(-len(PROBES) // lanes) * lanes)
    seen = np.zeros(2, dtype=bool)
    for i in range(0, len(X), lanes):
        out = np.zeros(2 * n * lanes, dtype=np.uint8)
        run(X[i:].ctypes.data, out.ctypes.data)
        got = out.reshape(n, 2, lanes)
        bad = np.argwhere(got[:, 0] != got[:, 1])
        assert not len(bad), f"split {bad[0][0]} decides {X[i + bad[0][1]]} differently"
        seen[got[:, 0].ravel()] = True
    assert seen.all(), "every probe went the same way: the test decides nothing"
