"""Forests and inputs for the vector blocks' exactness tests (``test_compiled_ranks``,
``test_ir_vraw``, ``test_ir_vtile``): thresholds where ranks could go wrong (``SPECIAL``,
``special_thresholds``), inputs on and next to them (``SPECIAL_VALUES``), and forests of every
shape the vector blocks take (``FORESTS``)."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import strategies as st

from tests._helpers.compiled_plans import PLANS, VALUES
from tests._helpers.oblivious import oblivious_forest
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES
from thrifty import Forest
from thrifty.forest.kernels import MISSING_NAN, MISSING_ZERO

SUBNORMAL, TINY = 5e-324, 2.2250738585072014e-308
# Thresholds where a rank could disagree with the double comparison if it were built wrong.
SPECIAL = [-np.inf, np.inf, -0.0, 0.0, SUBNORMAL, -SUBNORMAL, 1e-310, TINY, -1.0, 0.5, 1.0, 1e30, np.nan]


def special_thresholds(forest: Forest, seed: int) -> Forest:
    """``forest`` with its numeric thresholds drawn from ``SPECIAL``, "zero as missing" splits
    only on feature 0 and category sets only on feature 1 (the others compare ranks)."""
    rng = np.random.default_rng(seed)
    f = forest
    cat_start = np.where((f.cat_start >= 0) & (f.feature != 1), -1, f.cat_start)
    zero = (f.missing_type == MISSING_ZERO) & (f.feature != 0)
    missing_type = np.where(zero, MISSING_NAN, f.missing_type)
    threshold = f.threshold.copy()
    numeric = (f.feature >= 0) & (cat_start < 0)
    threshold[numeric] = rng.choice(np.array(SPECIAL), size=int(numeric.sum()))
    return dataclasses.replace(f, threshold=threshold, cat_start=cat_start, missing_type=missing_type)


def _around(values) -> list[float]:
    """Each finite value and its neighbours on both sides."""
    out = []
    for v in values:
        out.append(v)
        if np.isfinite(v):
            out += [np.nextafter(v, -np.inf), np.nextafter(v, np.inf)]
    return out


PROBES = np.array(_around(SPECIAL) + [np.nan, 0.25, -2.0, 7.0], dtype=np.float64)
SPECIAL_VALUES = VALUES | st.sampled_from(PROBES.tolist())


def three_word_sets(forest: Forest) -> Forest:
    """``forest`` with every category set three words long (codes up to 95), read from a table."""
    cat = np.flatnonzero(forest.cat_start >= 0)
    rng = np.random.default_rng(len(cat))
    start, size = forest.cat_start.copy(), forest.cat_size.copy()
    start[cat], size[cat] = 3 * np.arange(len(cat)), 3
    words = rng.integers(0, 2**32, size=3 * len(cat), dtype=np.uint64).astype(np.uint32)
    return dataclasses.replace(forest, cat_start=start, cat_size=size, cat_bitsets=words)


FORESTS = {
    "full": PLANS["full"].forest,  # numeric and categorical splits, every missing type
    "multiclass": PLANS["full-multiclass"].forest,
    "deep": random_forest(np.random.default_rng(33), N_FEATURES, n_trees=6, max_depth=9),  # > 64 leaves
    "wide": random_forest(np.random.default_rng(130), 130, n_trees=8, max_depth=5),  # > 64 features
    "categories": three_word_sets(
        random_forest(np.random.default_rng(7), N_FEATURES, n_trees=8, max_depth=5)
    ),
    "oblivious": oblivious_forest(np.random.default_rng(5), N_FEATURES, [3, 5, 1, 4], others=3),
}


def wide(X: np.ndarray, F: int) -> np.ndarray:
    """``X``'s columns tiled to ``F`` features."""
    return np.ascontiguousarray(np.tile(X, (1, -(-F // X.shape[1])))[:, :F])
