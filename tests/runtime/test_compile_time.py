"""What makes compiling cheaper keeps the results: the scalar twins of vector blocks, compiled
without optimisation for plans without exits (``ir_vector.vector_module_irs``'s
``cold_scalar``), give the interpreter's results for the lone row of a call."""

from __future__ import annotations

import numpy as np
import pytest

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import assert_same
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import Full, Sequential, evaluate
from thrifty.runtime.compiled.ir_vector import vector_module_irs
from thrifty.runtime.compiled.layout import ROW_GROUP, Layout
from thrifty.runtime.compiled.tables import leaf_tables
from thrifty.runtime.compiled.vblocks import vblocks

FOREST = random_forest(np.random.default_rng(41), N_FEATURES, n_trees=70, max_depth=6)


def _layout(exits: np.ndarray) -> Layout:
    order = np.arange(FOREST.n_trees)
    return Layout(FOREST, order, np.asarray(exits, dtype=np.int8), *leaf_tables(FOREST)[1:])


@pytest.mark.parametrize("with_exits", [False, True])
def test_scalar_twins_are_cold_only_without_exits(with_exits, monkeypatch):
    """``_compile`` asks for unoptimised scalar blocks (one ``optnone`` per block) exactly when
    the plan has no exits: with exits, rows leave their groups and lone rows are common."""
    n = FOREST.n_trees
    lay = _layout(np.ones(n) if with_exits else np.zeros(n))
    asked = {}

    def spy(*args, **kwargs):
        asked["cold"] = kwargs["cold_scalar"]
        return vector_module_irs(*args, **kwargs)

    monkeypatch.setattr(objects, "use_vector", lambda lay: True)
    monkeypatch.setattr(objects, "vector_module_irs", spy)
    monkeypatch.setattr(objects, "_emit", lambda ir, target=None, level=1: b"")
    monkeypatch.setattr(objects, "_cores", lambda: 1)
    objects._compile(lay, "k", progress=False)
    assert asked["cold"] is (not with_exits)
    irs = vector_module_irs(lay, "k", 100, 8, 0, False, 0, cold_scalar=asked["cold"])
    text = "".join(irs)
    blocks = len(vblocks(lay))
    assert text.count("optnone noinline {") == (0 if with_exits else blocks)
    # Only the scalar twins: no vector block is ever unoptimised, and apart from the
    # attributes the code is the optimised plan's, character for character.
    assert all("optnone" not in line for line in text.splitlines() if "@vblock_" in line)
    warm = vector_module_irs(lay, "k", 100, 8, 0, False, 0, cold_scalar=False)
    assert [ir.replace(" optnone noinline", "") for ir in irs] == warm


@pytest.mark.parametrize("rows", [ROW_GROUP + 1, 2 * ROW_GROUP + 1])
@pytest.mark.parametrize("ranks", ["off", "32", "16"])
def test_a_lone_row_on_the_cold_scalar_block(rows, ranks, monkeypatch):
    """A call of ``k * ROW_GROUP + 1`` rows leaves one row alone in its last group, which
    ``run`` gives to the unoptimised scalar block: every field equals the interpreter's (and
    the scores LightGBM-style additions in the plan's order), NaN and ±inf included."""
    monkeypatch.setenv("THRIFTY_RANKS", ranks)
    monkeypatch.setattr(objects, "use_vector", lambda lay: True)
    rng = np.random.default_rng(rows)
    X = rng.normal(size=(rows, N_FEATURES))
    X[rng.random(X.shape) < 0.1] = np.nan
    X[rng.random(X.shape) < 0.03] = np.inf
    X[rng.random(X.shape) < 0.03] = -np.inf
    costs = cost_model(tree_cost=0.25, split_cost=0.125)
    compiled = thrifty.compile(Full(FOREST), costs)
    assert compiled.native
    reference = evaluate(Full(FOREST), X, costs)
    assert_same(compiled.evaluate(X, n_threads=1), reference)
    # The plan with exits keeps optimised scalar blocks, with the same results as ever.
    order = np.arange(FOREST.n_trees)
    plan = Sequential(FOREST, order, np.full(len(order), 2.0), np.full(len(order), -2.0))
    assert_same(thrifty.compile(plan, costs).evaluate(X, n_threads=1), evaluate(plan, X, costs))
