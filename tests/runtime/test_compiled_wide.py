"""Compiled plans over any number of features: the tested-feature set kept as one 64-bit word per
64 features (vector and scalar blocks, the serving path's pricing of more than 64 features and
units) gives the interpreter's results bit for bit at widths on and around the word boundaries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import VALUES
from tests._helpers.reference import random_forest, random_inputs
from tests._helpers.runtime_costs import lazy_provider
from thrifty import CostModel, Full, Sequential, evaluate
from thrifty.runtime.compiled.ir_serving import MEMO
from thrifty.runtime.compiled.layout import n_words, state_fields
from thrifty.runtime.compiled.raw_path import DeferredEvaluation
from thrifty.runtime.compiled.serving import SMALL, ScoresEvaluation, ServingEvaluation
from thrifty.runtime.compiled.vblocks import vector_ok

WIDTHS = (1, 63, 64, 65, 130, 300)
REPORT_FIELDS = ("feature", "evaluation", "total", "n_trees", "n_nodes", "acquired")


def wide_costs(F: int, seed: int) -> CostModel:
    """Prices of ``F`` features whose sums depend on their order (tiny and unit prices mixed),
    a group spanning the first, middle and last words, and a feature derived from features in
    other words: more than 64 priced units from 130 features on."""
    rng = np.random.default_rng(seed)
    names = [f"x{i}" for i in range(F)]
    prices = rng.choice([1e-16, 1.0, 1 / 3, 0.1, 2.5], size=F)
    group = sorted({0, F // 2, F - 1})
    spec = {n: float(p) for i, (n, p) in enumerate(zip(names, prices)) if i not in group or len(group) == 1}
    groups = {"panel": [names[i] for i in group]} if len(group) > 1 else None
    if groups:
        spec["panel"] = 1e-16
    deps = {names[F - 2]: [names[1], names[F - 3]]} if F >= 4 else None
    return CostModel(
        spec, feature_names=names, groups=groups, dependencies=deps, tree_cost=0.1, split_cost=0.3
    )


def _plans(F: int) -> dict[str, thrifty.runtime.Plan]:
    rng = np.random.default_rng(F)
    forest = random_forest(rng, F, n_trees=12, max_depth=5)
    multi = random_forest(rng, F, n_trees=9, max_depth=4, n_outputs=3, float32=True)
    order = rng.permutation(12)
    return {
        "full": Full(forest),
        # QWYC-style thresholds after each position: most rows exit early.
        "sequential": Sequential(forest, order, np.full(12, 1.0), np.full(12, -1.0)),
        "sequential-multiclass-float32": Sequential(multi, rng.permutation(9), np.full(9, 0.8)),
    }


PLANS = {F: _plans(F) for F in WIDTHS}
COSTS = {F: wide_costs(F, F) for F in WIDTHS}
_COMPILED: dict[tuple[int, str, bool], thrifty.CompiledPlan] = {}


def compiled(F: int, name: str, vector: bool, monkeypatch: pytest.MonkeyPatch) -> thrifty.CompiledPlan:
    """``PLANS[F][name]`` compiled with vector or scalar blocks (whatever this CPU would pick)."""
    key = (F, name, vector)
    if key not in _COMPILED:
        monkeypatch.setattr(objects, "use_vector", lambda lay: vector)
        _COMPILED[key] = thrifty.compile(PLANS[F][name], COSTS[F])
        monkeypatch.undo()
    return _COMPILED[key]


def assert_identical(got, want) -> None:
    """Every field of two evaluations equal bit for bit, with the same dtypes and shapes."""
    pairs = [(name, getattr(got, name), getattr(want, name)) for name in ("raw", "proba", "labels", "exit")]
    pairs += [(name, getattr(got.cost, name), getattr(want.cost, name)) for name in REPORT_FIELDS]
    for name, a, b in pairs:
        if b is None:
            assert a is None, name
            continue
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert got.cost.fixed == want.cost.fixed


@st.composite
def wide_inputs(draw, F: int) -> np.ndarray:
    """0 to SMALL + 6 rows of ``F`` features: values on and around the thresholds, category
    codes, NaN and infinities (``random_inputs``), with cells set to drawn values on top."""
    n = draw(st.sampled_from([0, 1, 2, 9]) | st.integers(0, SMALL + 6))
    X = random_inputs(np.random.default_rng(draw(st.integers(0, 2**32 - 1))), n, F)
    if n:
        cells = st.tuples(st.integers(0, n - 1), st.integers(0, F - 1), VALUES)
        for i, j, v in draw(st.lists(cells, max_size=20)):
            X[i, j] = v
    return X


def test_the_tested_feature_set_has_a_word_per_64_features():
    assert [n_words(F) for F in WIDTHS] == [1, 1, 1, 2, 3, 5]
    fields = state_fields(3)
    assert fields[-4:] == ("bits1", "bits2", "acq1", "acq2")
    # The wide forests test features in their last word (the tests exercise every word).
    for F in WIDTHS:
        assert PLANS[F]["full"].forest.feature.max() // 64 == n_words(F) - 1, F


@pytest.mark.parametrize("F", WIDTHS)
def test_wide_plans_take_vector_blocks_and_the_serving_path(F, monkeypatch):
    c = compiled(F, "sequential", True, monkeypatch)
    assert c.forest_code is not None and c.forest_code.layout is not None
    assert vector_ok(c.forest_code.layout)
    assert c.serving is not None and c.forest_code.code.serve is not None


@pytest.mark.parametrize("vector", [True, False], ids=["vector", "scalar"])
@pytest.mark.parametrize("name", ["full", "sequential", "sequential-multiclass-float32"])
@pytest.mark.parametrize("F", WIDTHS)
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_wide_plans_give_the_interpreters_results(F, name, vector, data, monkeypatch):
    """The serving path, the general path (executors around the same code, taken with another
    cost model object) and lazy evaluation all give the interpreter's results."""
    X = data.draw(wide_inputs(F))
    plan, costs = PLANS[F][name], COSTS[F]
    c = compiled(F, name, vector, monkeypatch)
    assert c.native and c.serving is not None
    want = evaluate(plan, X, costs)
    served = c.evaluate(X)
    # Scores first where the plan has no exits (``raw_path``), the serving path's fields.
    assert type(served) in (ServingEvaluation, ScoresEvaluation, DeferredEvaluation)
    assert_identical(served, want)
    # An equal cost model that is not the compiled plan's own takes the general path.
    again = wide_costs(F, F)
    general = evaluate(c, X, again)
    assert type(general) is not ServingEvaluation
    assert_identical(general, evaluate(plan, X, again))
    provider, _ = lazy_provider(X)
    assert_identical(evaluate(c, provider, n_rows=len(X)), want)


@pytest.mark.parametrize("F", [65, 300])
def test_wide_batches_past_the_thread_buffers(F, monkeypatch):
    """Batches larger than a service's call (parallel parts) and one row at a time."""
    rng = np.random.default_rng(21)
    X = random_inputs(rng, 2500, F)
    for name in ("full", "sequential"):
        plan, costs = PLANS[F][name], COSTS[F]
        c = compiled(F, name, True, monkeypatch)
        assert_identical(c.evaluate(X), evaluate(plan, X, costs))
        for i in range(0, 40, 3):
            assert_identical(c.evaluate(X[i : i + 1]), evaluate(plan, X[i : i + 1], costs))


@pytest.mark.parametrize("F", [63, 130])
def test_rows_of_many_feature_sets_are_priced_each_as_their_own(F, monkeypatch):
    """The serving path keeps each call's priced tested-feature sets in ``ir_serving.MEMO``
    slots: rows of more distinct sets than slots (sets sharing a slot, evicting each other)
    still get their own cost and acquired features, in either order of the rows."""
    rng = np.random.default_rng(F + 1)
    X = random_inputs(rng, 3000, F)
    plan, costs = PLANS[F]["full"], COSTS[F]
    c = compiled(F, "full", True, monkeypatch)
    want = evaluate(plan, X, costs)
    acquired = np.asarray(want.cost.acquired).reshape(len(X), -1)
    assert len(np.unique(acquired, axis=0)) > MEMO
    assert_identical(c.evaluate(X), want)
    assert_identical(c.evaluate(X[::-1].copy()), evaluate(plan, X[::-1].copy(), costs))
