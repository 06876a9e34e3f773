"""The vector blocks' leaf records (``tables._vector_records``): in forests of up to
``PACK_FEATURES`` features the splits on a leaf's path ride in the top byte of its tested-feature
word; the widest such forest (feature 55 next to that byte) and the narrowest unpacked one give
the interpreter's splits visited and features tested, on every target here, ranks or doubles."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests._helpers.compiled_plans import check, input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES
from thrifty import Full, Sequential
from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.ir_ranks import RANKS_ENV
from thrifty.runtime.compiled.layout import PACK_FEATURES, Layout
from thrifty.runtime.compiled.tables import leaf_tables

VECTOR = [n for n in targets.runnable() if n != "generic"]


def _forest(n_features: int):
    f = random_forest(np.random.default_rng(n_features), n_features, n_trees=12, max_depth=6)
    # Every tree (not a lone leaf) splits on the last feature at its root: that bit is set on
    # every path.
    feature = f.feature.copy()
    roots = f.roots[f.feature[f.roots] >= 0]
    feature[roots] = n_features - 1
    return dataclasses.replace(f, feature=feature)


PACKED, UNPACKED = _forest(PACK_FEATURES), _forest(PACK_FEATURES + 1)


def test_packing_stops_past_its_width():
    for forest, packed in ((PACKED, True), (UNPACKED, False)):
        order = np.arange(forest.n_trees)
        lay = Layout(forest, order, np.zeros(len(order), dtype=np.int8), *leaf_tables(forest)[1:])
        assert lay.packed is packed


@pytest.mark.parametrize("target", VECTOR)
@pytest.mark.parametrize("ranks", ["on", "off"])
@pytest.mark.parametrize("forest", ["packed", "unpacked"])
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=input_matrices(N_FEATURES, max_rows=30))
def test_packed_records_count_as_the_interpreter(target, ranks, forest, data, monkeypatch):
    monkeypatch.setenv(targets.ENV, target)
    monkeypatch.setenv(RANKS_ENV, ranks)
    f = PACKED if forest == "packed" else UNPACKED
    X = np.tile(data, (1, -(-f.n_features // N_FEATURES)))[:, : f.n_features]
    check(Full(f), X, None)
    order = np.arange(f.n_trees)[::-1]
    check(Sequential(f, order, np.full(f.n_trees, 1.0), np.full(f.n_trees, -1.0)), X, None)
