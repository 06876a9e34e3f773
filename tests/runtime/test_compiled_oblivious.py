"""Oblivious trees on vector blocks (``ir_oblivious``): recognised from the forest's arrays
whatever grew them, and bit for bit the interpreter's results (raw scores, exits, costs), dense,
served, one row and lazily, at depths 1 to 10, multiclass, and mixed with other trees."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import check, input_matrices
from tests._helpers.oblivious import oblivious_forest
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import Full, Sequential
from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.ir_vector import vblock_ir
from thrifty.runtime.compiled.layout import Layout, oblivious_levels
from thrifty.runtime.compiled.tables import leaf_tables
from thrifty.runtime.compiled.vblocks import VECTOR_LEAVES, vector_ok

SETTINGS = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
COSTS = cost_model(tree_cost=0.25, split_cost=0.125)


def layout(forest, order, exits) -> Layout:
    return Layout(forest, np.asarray(order), np.asarray(exits, dtype=np.int8), *leaf_tables(forest)[1:])


def test_oblivious_trees_are_recognised_from_their_arrays():
    rng = np.random.default_rng(0)
    forest = oblivious_forest(rng, N_FEATURES, [0, 1, 3, 10, 4], broken=(4,), others=4)
    levels = [oblivious_levels(forest, int(r)) for r in forest.roots]
    assert [len(x) if x is not None else None for x in levels[:5]] == [0, 1, 3, 10, None]
    for t, tree_levels in enumerate(levels[:4]):
        # One node per level, each on the leftmost path: the root, then left children.
        node = int(forest.roots[t])
        for rep in tree_levels:
            assert rep == node
            node = int(forest.children_left[node])
    # The same tree with level 1's thresholds differing only in their last bit is not oblivious.
    root = int(forest.roots[2])
    a, b = int(forest.children_left[root]), int(forest.children_right[root])
    threshold, cat_start = forest.threshold.copy(), forest.cat_start.copy()
    cat_start[[a, b]] = -1
    threshold[a], threshold[b] = 0.5, 0.5
    assert oblivious_levels(replace(forest, threshold=threshold, cat_start=cat_start), root) is not None
    threshold[b] = np.nextafter(0.5, np.inf)
    assert oblivious_levels(replace(forest, threshold=threshold, cat_start=cat_start), root) is None


@pytest.mark.parametrize("change", ["feature", "missing_left", "missing_type", "leaf"])
def test_any_difference_within_a_level_is_not_oblivious(change):
    rng = np.random.default_rng(1)
    forest = oblivious_forest(rng, N_FEATURES, [3], categorical=False)
    node = 2  # the right child of the root: level 1, not its first node
    if change == "leaf":
        # A split's children made leaves: the tree is no longer complete.
        feature = forest.feature.copy()
        feature[[5, 6]] = -1
        left, right = forest.children_left.copy(), forest.children_right.copy()
        left[[5, 6]], right[[5, 6]] = -1, -1
        changed = replace(forest, feature=feature, children_left=left, children_right=right)
    else:
        arr = getattr(forest, change).copy()
        arr[node] = (
            not arr[node] if change == "missing_left" else (arr[node] + 1) % (3 + 3 * (change == "feature"))
        )
        changed = replace(forest, **{change: arr})
    assert oblivious_levels(changed, 0) is None
    assert oblivious_levels(forest, 0) is not None


def test_deep_oblivious_trees_take_vector_blocks_and_no_leaf_mask():
    """Past ``VECTOR_LEAVES`` leaves an oblivious tree still suits vector blocks: its code has
    one comparison per level and no leaf mask (no count of trailing zeros)."""
    rng = np.random.default_rng(2)
    deep = oblivious_forest(rng, N_FEATURES, [10, 9], categorical=False)
    assert 2**10 > VECTOR_LEAVES and vector_ok(layout(deep, np.arange(2), np.zeros(2)))
    other = random_forest(rng, N_FEATURES, n_trees=2, max_depth=10)
    broken = oblivious_forest(rng, N_FEATURES, [10], broken=(0,), categorical=False)
    assert not vector_ok(layout(broken, np.arange(1), np.zeros(1)))
    ir = vblock_ir(layout(deep, np.arange(2), np.zeros(2)), 0, 2, 0, "k")
    assert "cttz" not in ir and ir.count("fcmp") <= 2 * 19
    mixed = vblock_ir(layout(other, np.arange(2), np.zeros(2)), 0, 2, 0, "k")
    assert "cttz" in mixed


FORESTS = {
    # Depths 1 to 10, every split kind (categories, missing types, NaN thresholds).
    "depths": oblivious_forest(np.random.default_rng(10), N_FEATURES, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
    "float32": oblivious_forest(np.random.default_rng(11), N_FEATURES, [6, 6, 6, 6], float32=True),
    # Class trees, one output each (as LightGBM's multiclass trees), and CatBoost's vector leaves.
    "multiclass": oblivious_forest(np.random.default_rng(12), N_FEATURES, [2, 5, 6, 3, 4, 6], n_outputs=3),
    "vector-leaves": oblivious_forest(
        np.random.default_rng(13), N_FEATURES, [4, 6, 5, 1], n_outputs=3, vector_leaves=True
    ),
    # Oblivious trees, nearly oblivious ones and ordinary random trees in one forest.
    "mixed": oblivious_forest(np.random.default_rng(14), N_FEATURES, [3, 6, 2, 5], broken=(1, 3), others=4),
}


@pytest.mark.parametrize("target", [t for t in targets.runnable() if t != "generic"])
@pytest.mark.parametrize("name", list(FORESTS))
@SETTINGS
@given(X=input_matrices(N_FEATURES))
def test_oblivious_vector_blocks_match_the_interpreter(target, name, X, monkeypatch):
    """On every vector target this CPU runs, the vector blocks of oblivious trees give the
    interpreter's raw scores, exits and costs bit for bit (NaN, infinities, values on the
    thresholds, 0 and 1 rows: ``input_matrices``)."""
    monkeypatch.setenv(targets.ENV, target)
    monkeypatch.setattr(objects, "use_vector", lambda lay: True)
    forest = FORESTS[name]
    n = forest.n_trees
    check(Full(forest), X, COSTS)
    order = np.random.default_rng(n).permutation(n)
    # Several outputs exit on the leading class's margin (eps_neg -inf).
    neg = -np.inf if forest.n_outputs > 1 else -1.0
    check(Sequential(forest, order, np.full(n, 1.0), np.full(n, neg)), X, COSTS)
