"""Branchy blocks (``compiled.ir_branchy``) and the rule that picks them (``choice.skewed``):
skewed forests take them, balanced, categorical or wide ones do not, and on every plan they
give the interpreter's results bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import PLANS, check, input_matrices
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from tests._helpers.shaped_forests import shaped_forest
from thrifty import CostModel, Full, Sequential
from thrifty.runtime import BinnedExits
from thrifty.runtime.compiled.choice import BLOCKS_ENV, branchy_blocks, coin_path, skewed, vector_blocks
from thrifty.runtime.compiled.ir_branchy import Packing, packing_of, path_words
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.tables import forest_code, leaf_tables


def layout(forest) -> Layout:
    n = forest.n_trees
    return Layout(forest, np.arange(n), np.zeros(n, dtype=np.int8), *leaf_tables(forest)[1:])


def forest(shape: str, **kw):
    return shaped_forest(np.random.default_rng(3), shape, **kw)


@pytest.mark.parametrize(
    "kw, expected",
    [
        (dict(shape="chain"), "branchy"),  # coin path 2 of 20 splits, 5 numeric features
        (dict(shape="balanced"), "vector"),  # depth 5: a coin-flip walk visits 5 of 31 splits
        (dict(shape="balanced", depth=7), "vector"),  # 7 of 127: short share, long path
        (dict(shape="chain", categorical=True), "vector"),  # categorical splits
        (dict(shape="chain", n_features=20), "vector"),  # more features than registers hold
        (dict(shape="chain", splits=10), "vector"),  # 2 of 10 splits: not a seventh
    ],
)
def test_skewed_forests_take_branchy_blocks_others_vector(kw, expected, monkeypatch):
    monkeypatch.delenv(BLOCKS_ENV, raising=False)
    lay = layout(forest(**kw))
    kind = "vector" if vector_blocks(lay, 8) else "branchy" if branchy_blocks(lay) else "scalar"
    assert kind == expected
    assert skewed(lay) is (expected == "branchy")


def test_the_scalar_target_takes_branchy_blocks_for_skewed_forests_only(monkeypatch):
    monkeypatch.delenv(BLOCKS_ENV, raising=False)
    assert not vector_blocks(layout(forest("chain")), 0) and branchy_blocks(layout(forest("chain")))
    assert not branchy_blocks(layout(forest("balanced")))


@pytest.mark.parametrize("forced, expected", [("vector", False), ("scalar", False), ("branchy", True)])
def test_a_forced_kind_overrides_the_rule(forced, expected, monkeypatch):
    monkeypatch.setenv(BLOCKS_ENV, forced)
    assert branchy_blocks(layout(forest("balanced"))) is expected
    assert vector_blocks(layout(forest("chain")), 8) is (forced == "vector")


def test_coin_path_against_its_sum_by_hand():
    # A chain of 3 splits: leaves at depths 1, 2, 3 and 3 -> 1/2 + 2/4 + 3/8 + 3/8.
    f = forest("chain", splits=3, n_trees=1)
    assert coin_path(f, int(f.roots[0])) == 0.5 + 0.5 + 0.375 + 0.375
    f = forest("balanced", depth=3, n_trees=1)
    assert coin_path(f, int(f.roots[0])) == 3.0


def test_path_constants_are_the_leaf_tables_records():
    """The depth and feature bits inlined at each leaf equal the ``leaf`` table's (which the
    plain scalar and vector blocks read)."""
    f = PLANS["full"].forest
    code = forest_code(f, PLANS["full"].schedule, progress=False)
    lay, records = code.layout, code.tables[0].view(np.int64)
    leaves = np.flatnonzero(f.feature < 0)
    assert [path_words(lay, int(leaf)) for leaf in leaves] == records[leaves, lay.K + 1 :].tolist()


def test_kinds_have_their_own_cache_keys(monkeypatch):
    lay = layout(forest("chain"))
    keys = set()
    for kind in ("vector", "scalar", "branchy"):
        monkeypatch.setenv(BLOCKS_ENV, kind)
        keys.add(objects.code_key(lay))
    assert len(keys) == 3


def _skewed_plans() -> dict:
    rng = np.random.default_rng(11)
    chain = shaped_forest(rng, "chain", n_features=N_FEATURES, n_trees=7)
    multi = shaped_forest(rng, "chain", n_features=N_FEATURES, n_trees=9, n_outputs=3)
    order = rng.permutation(7)
    bins = BinnedExits(
        rng.uniform(0.2, 1.0, 7).round(2),
        [{int(b): (1.0, -1.0) for b in rng.integers(-3, 3, 3)} for _ in range(7)],
    )
    return {
        "chain-full": Full(chain),
        "chain-multiclass": Full(multi),
        "chain-sequential": Sequential(chain, order, np.full(7, 1.0), np.full(7, -1.0)),
        "chain-bins": Sequential(chain, order, bins=bins),
    }


SKEWED = _skewed_plans()
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@pytest.mark.parametrize("name", sorted(SKEWED))
@settings(max_examples=5, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(N_FEATURES))
def test_skewed_plans_on_their_own_rule_match_the_interpreter(name, X, monkeypatch):
    """The rule's own choice (branchy blocks) on skewed plans with and without exits."""
    monkeypatch.delenv(BLOCKS_ENV, raising=False)
    assert branchy_blocks(layout(SKEWED[name].forest))
    check(SKEWED[name], X, cost_model(tree_cost=0.25, split_cost=0.125))


@pytest.mark.parametrize("name", sorted(PLANS))
@settings(max_examples=4, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(N_FEATURES))
def test_branchy_blocks_forced_on_every_plan_match_the_interpreter(name, X, monkeypatch):
    """Every split kind (missing types, categories, float32 inputs), exits and bins, classes."""
    monkeypatch.setenv(BLOCKS_ENV, "branchy")
    check(PLANS[name], X, cost_model(tree_cost=0.25, split_cost=0.125))


def test_counters_pack_where_their_fields_fit():
    """A word of counters for 5 features and 100 trees of depth 30 fits (7-bit counts, a
    12-bit sum of depths); for 16 features it does not, and the counters stay apart."""
    lay = layout(forest("chain", splits=30))
    assert packing_of(lay, 100) == Packing(5, 7)
    assert packing_of(layout(forest("chain", splits=30, n_features=16)), 100) is None
    # A leaf at depth 3 testing features 0 and 4: ones in their fields, 3 above them all.
    assert Packing(5, 7).word(3, [0b10001]) == 1 + (1 << 28) + (3 << 35)


@settings(max_examples=5, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(20))
def test_branchy_blocks_with_counters_apart_match_the_interpreter(X, monkeypatch):
    """20 features: no packing (``packing_of`` is None), the counters added apart."""
    monkeypatch.setenv(BLOCKS_ENV, "branchy")
    f = shaped_forest(np.random.default_rng(5), "chain", n_features=20, n_trees=40, splits=25)
    assert packing_of(layout(f), 40) is None
    plan = Sequential(f, np.arange(40), np.full(40, 2.0), np.full(40, -2.0))
    names = [f"x{i}" for i in range(20)]
    costs = CostModel(
        {n: 0.5 + i for i, n in enumerate(names)}, feature_names=names, tree_cost=0.25, split_cost=0.125
    )
    check(plan, X, costs)
