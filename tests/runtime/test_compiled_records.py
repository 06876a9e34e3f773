"""The vector blocks' leaf records (``tables._vector_records``): in forests of up to
``PACK_FEATURES`` features the splits on a leaf's path ride in the top byte of its tested-feature
word; wider forests fold their words into a few (``Layout.folds``), the splits in fold 0's top
byte. The widest packed forest (feature 55 next to that byte), the narrowest unpacked one and a
300-feature one give the interpreter's splits visited and features tested, on every target here,
ranks or doubles."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._helpers.compiled_plans import check, input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES
from thrifty import Full, Sequential
from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.ir_ranks import RANKS_ENV
from thrifty.runtime.compiled.layout import PACK_FEATURES, Layout, _fold, _rotl
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


PACKED, UNPACKED, WIDE = _forest(PACK_FEATURES), _forest(PACK_FEATURES + 1), _forest(300)
FORESTS = {"packed": PACKED, "unpacked": UNPACKED, "wide": WIDE}


def _layout(forest) -> Layout:
    order = np.arange(forest.n_trees)
    return Layout(forest, order, np.zeros(len(order), dtype=np.int8), *leaf_tables(forest)[1:])


def test_packing_stops_past_its_width():
    for forest, packed in ((PACKED, True), (UNPACKED, False), (WIDE, False)):
        lay = _layout(forest)
        assert lay.packed is packed and lay.folded is not packed


def test_the_wide_forest_folds_words_together_and_rotates_them():
    lay = _layout(WIDE)
    plans = [lay.folds(t) for t in range(WIDE.n_trees)]
    # Some tree folds several words into one, some needs a second fold, some word is rotated.
    assert any(len(p) > lay.tree_folds(t) for t, p in enumerate(plans))
    assert lay.n_folds >= 2 and any(r for p in plans for _, _, r, _ in p)
    assert lay.vrecord == WIDE.n_outputs + lay.n_folds


@settings(max_examples=200, deadline=None)
@given(
    masks=st.dictionaries(st.integers(0, 6), st.integers(1, 2**64 - 1), max_size=7),
    seed=st.integers(0, 2**32 - 1),
)
def test_folds_give_back_every_word_of_every_path(masks, seed):
    plan = _fold(masks)
    assert sorted(w for w, _, _, _ in plan) == sorted(masks)
    n = 1 + max((i for _, i, _, _ in plan), default=0)
    used = [0xFF << 56] + [0] * (n - 1)
    for _, i, r, mask in plan:
        # No two words of a fold (nor fold 0's byte of splits) share a bit.
        assert not used[i] & _rotl(mask, r)
        used[i] |= _rotl(mask, r)
    # Any path (a subset of each word's features) folds and unfolds to itself.
    rng = np.random.default_rng(seed)
    path = {w: int(rng.integers(0, 2**63)) * 2 + int(rng.integers(2)) & m for w, m in masks.items()}
    folds = [0] * n
    for w, i, r, _ in plan:
        folds[i] |= _rotl(path[w], r)
    for w, i, r, mask in plan:
        assert _rotl(folds[i], (64 - r) % 64) & mask == path[w]


@pytest.mark.parametrize("target", VECTOR)
@pytest.mark.parametrize("ranks", ["16", "32", "off"])
@pytest.mark.parametrize("forest", list(FORESTS))
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=input_matrices(N_FEATURES, max_rows=30))
def test_packed_records_count_as_the_interpreter(target, ranks, forest, data, monkeypatch):
    monkeypatch.setenv(targets.ENV, target)
    monkeypatch.setenv(RANKS_ENV, ranks)
    f = FORESTS[forest]
    X = np.tile(data, (1, -(-f.n_features // N_FEATURES)))[:, : f.n_features]
    check(Full(f), X, None)
    order = np.arange(f.n_trees)[::-1]
    check(Sequential(f, order, np.full(f.n_trees, 1.0), np.full(f.n_trees, -1.0)), X, None)
