"""Scores only on vector blocks (``compiled.ir_vraw``): a compiled plan without exits on vector
blocks computes its raw scores alone (``raw_path``) on every vector target this CPU runs, with
and without rank blocks, and its scores equal the serving path's and the interpreter's bit for
bit (NaN, infinities, values on thresholds, category sets of one to three words, several
outputs, trees of more than 64 leaves, more than 64 features, oblivious trees, 0 to 300 rows);
the aarch64 targets' scores-only code is cross-compiled here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import PLANS, assert_same, input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from tests._helpers.vector_forests import FORESTS, wide
from thrifty import Full, evaluate
from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.ir_ranks import RANKS_ENV
from thrifty.runtime.compiled.ir_vraw import vraw_module_irs
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.raw_path import DeferredEvaluation
from thrifty.runtime.compiled.tables import leaf_tables
from thrifty.runtime.compiled.vblocks import RAW_TREES_ENV

VECTOR_TARGETS = [name for name in targets.runnable() if name != "generic"]
COSTS = cost_model(tree_cost=0.25, split_cost=0.125)
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@pytest.fixture(params=VECTOR_TARGETS)
def target(request, monkeypatch):
    monkeypatch.setenv(targets.ENV, request.param)
    monkeypatch.setenv("THRIFTY_BLOCKS", "vector")
    return request.param


@pytest.mark.parametrize("ranks", ["16", "32", "off"])
@pytest.mark.parametrize("name", list(FORESTS))
@settings(max_examples=5, deadline=None, suppress_health_check=SLOW)
@given(data=input_matrices(N_FEATURES, max_rows=70))
def test_scores_only_equal_the_serving_path_and_the_interpreter(target, name, ranks, data, monkeypatch):
    monkeypatch.setenv(RANKS_ENV, ranks)
    forest = FORESTS[name]
    X = wide(data, forest.n_features)
    costs = COSTS if forest.n_features == N_FEATURES else None
    compiled = thrifty.compile(Full(forest), costs)
    assert compiled.raw_path is not None and compiled.forest_code.code.vector
    reference = evaluate(Full(forest), X, costs)
    ev = compiled.evaluate(X)
    # One row takes the serving path's lanes; more rows the scores first.
    assert isinstance(ev, DeferredEvaluation) is (len(X) > compiled.raw_path.lane_rows)
    np.testing.assert_array_equal(ev.raw, reference.raw)
    np.testing.assert_array_equal(ev.raw, compiled.serving.serve(X).raw)
    assert_same(ev, reference)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 8, 9, 17, 129, 300])
def test_every_row_count_past_whole_vectors(target, n):
    """Row counts around the vectors' 4, 8 and 16 rows and the per-thread buffers' 128: a
    partial vector stores no score past its rows (the buffer's other rows keep theirs)."""
    rng = np.random.default_rng(n)
    X = rng.uniform(-5, 70, (n, N_FEATURES))
    X[rng.random(X.shape) < 0.2] = np.nan
    plan = PLANS["full-multiclass"]
    compiled = thrifty.compile(plan, COSTS)
    for threads in (1, 2):
        assert_same(compiled.evaluate(X, n_threads=threads), evaluate(plan, X, COSTS))


def test_plans_with_exits_or_float32_inputs_have_none(target):
    assert thrifty.compile(PLANS["sequential"], COSTS).raw_path is None
    assert thrifty.compile(PLANS["full-float32"], COSTS).raw_path is None


@pytest.mark.parametrize("size", [1, 3])
def test_several_blocks_give_the_same_scores(target, size, monkeypatch):
    """Blocks of ``size`` positions (``rawblk`` after ``rawblk`` over the same rows,
    ``THRIFTY_RAW_TREES``) add up to the interpreter's sums."""
    monkeypatch.setenv(RAW_TREES_ENV, str(size))
    plan = Full(random_forest(np.random.default_rng(100 + size), N_FEATURES, n_trees=11, n_outputs=3))
    X = np.random.default_rng(size).uniform(-5, 70, (50, N_FEATURES))
    ev = thrifty.compile(plan, COSTS).evaluate(X)
    assert isinstance(ev, DeferredEvaluation)
    assert_same(ev, evaluate(plan, X, COSTS))


# ELF: 64-bit little-endian, e_machine 183 (EM_AARCH64).
EM_AARCH64 = 183


@pytest.mark.parametrize("name", ["neon", "sve"])
@pytest.mark.parametrize("ranks", [0, 16, 32])
def test_aarch64_scores_only_code_cross_compiles(name, ranks):
    t = targets.cross(name)
    for forest in (FORESTS["full"], FORESTS["deep"], FORESTS["categories"]):
        order = np.arange(forest.n_trees)
        lay = Layout(forest, order, np.zeros(len(order), dtype=np.int8), *leaf_tables(forest)[1:])
        for ir in vraw_module_irs(lay, "k", t.lanes, t.vscale, t.by_exponent, ranks):
            obj = objects._emit(ir, t)
            assert obj[:4] == b"\x7fELF" and int.from_bytes(obj[18:20], "little") == EM_AARCH64
