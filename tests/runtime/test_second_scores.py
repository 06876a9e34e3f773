"""A second scores-only entry in the other kind of blocks (``choice.second_scores``,
``objects.second_entry``, ``raw_path``): vector scores for a branchy plan's large calls, branchy
scores for a vector plan's one row. Whichever entry a call takes, every field equals the
interpreter's bit for bit; the rule gives each entry where it says; the cache key names it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.choice as choice
from tests._helpers.compiled_plans import PLANS, assert_same, input_matrices, plan_layout
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from tests._helpers.shaped_forests import shaped_forest
from thrifty import Full, evaluate
from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled import objects, targets
from thrifty.runtime.compiled.choice import BLOCKS_ENV, SECOND_ENV, second_scores
from thrifty.runtime.compiled.raw_path import DeferredEvaluation

SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
COSTS = cost_model(tree_cost=0.25, split_cost=0.125)
LANES = targets.current().lanes
CHAIN = Full(shaped_forest(np.random.default_rng(41), "chain", n_features=N_FEATURES, n_trees=9))
CHAIN3 = Full(
    shaped_forest(np.random.default_rng(42), "chain", n_features=N_FEATURES, n_trees=7, n_outputs=3)
)


@pytest.fixture
def forced(monkeypatch):
    """Second entries on every plan that can have one; a branchy plan's vector scores from two
    rows on, so that hypothesis's small matrices reach them."""
    monkeypatch.setenv(SECOND_ENV, "on")
    monkeypatch.setattr(choice, "VECTOR_FROM", 2)


def entry_of(compiled, n: int) -> str:
    """Which entry a call of ``n`` float64 rows takes: ``second``, ``raw`` or ``serve``."""
    path = compiled.raw_path
    if path is None or n <= path.lane_rows:
        return "serve"
    lo, hi = path.second_rows
    return "second" if path.second is not None and lo <= n <= hi else "raw"


@pytest.mark.skipif(LANES == 0, reason="no vector target on this CPU")
@pytest.mark.parametrize(
    "plan, blocks, second",
    [
        (PLANS["full"], "branchy", "vector"),  # numeric and categorical splits, every missing type
        (PLANS["full-multiclass"], "branchy", "vector"),
        (CHAIN, "branchy", "vector"),
        (CHAIN3, "branchy", "vector"),
        (PLANS["full"], "vector", "branchy"),
        (PLANS["full-multiclass"], "vector", "branchy"),
    ],
    ids=["full-b", "multiclass-b", "chain-b", "chain3-b", "full-v", "multiclass-v"],
)
@settings(max_examples=8, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(N_FEATURES, max_rows=150))
def test_every_entry_matches_the_interpreter(plan, blocks, second, X, forced, monkeypatch):
    """NaN, ±inf, signed zeros, values on thresholds and category codes; 0 to 150 rows, each
    call through the entry its row count picks (one row: a vector plan's branchy scores; two
    rows on: a branchy plan's vector scores), every field read after the caller overwrote its
    matrix."""
    monkeypatch.setenv(BLOCKS_ENV, blocks)
    compiled = thrifty.compile(plan, COSTS)
    code = compiled.forest_code.code
    assert code.second is not None and objects.second_entry(compiled.forest_code.layout)[0] == second
    calls = [(compiled.evaluate(rows), rows.copy()) for rows in (X, X[:1], X[:2])]
    X[...] = np.nan
    for ev, rows in calls:
        want = evaluate(plan, rows, COSTS)
        np.testing.assert_array_equal(ev.raw, want.raw)
        if entry_of(compiled, len(rows)) != "serve":
            assert isinstance(ev, DeferredEvaluation)
        assert_same(ev, want)


@pytest.mark.skipif(LANES == 0, reason="no vector target on this CPU")
@pytest.mark.parametrize("blocks, one, two", [("branchy", "raw", "second"), ("vector", "second", "raw")])
def test_calls_take_the_entry_their_rows_say(blocks, one, two, forced, monkeypatch):
    monkeypatch.setenv(BLOCKS_ENV, blocks)
    compiled = thrifty.compile(PLANS["full"], COSTS)
    assert (entry_of(compiled, 1), entry_of(compiled, 2)) == (one, two)
    # The routing is raw_path's: spy on the entries it calls.
    path, called = compiled.raw_path, []
    second, raw = path.second, path.entry
    path.second = lambda ctx: called.append("second") or second(ctx)
    path.entry = lambda ctx: called.append("raw") or raw(ctx)
    path._small = [path._entry(n) for n in range(len(path._small))]  # small calls' entries
    X = np.random.default_rng(5).uniform(-5, 70, (300, N_FEATURES))
    for n in (1, 2, 300):
        called.clear()
        np.testing.assert_array_equal(compiled.evaluate(X[:n]).raw, evaluate(PLANS["full"], X[:n], COSTS).raw)
        assert called == [entry_of(compiled, n)]


def test_the_rule(monkeypatch):
    """Branchy plans take vector scores where 16-bit ranks fit, from ``VECTOR_FROM`` rows; not
    on a scalar target, not when a kind is forced, not past ``SECOND_TREES`` positions."""
    monkeypatch.delenv(BLOCKS_ENV, raising=False)
    monkeypatch.delenv(SECOND_ENV, raising=False)
    lay = plan_layout(CHAIN)
    assert second_scores(lay, 8, False, True) == ("vector", choice.VECTOR_FROM, 1 << 16)
    assert second_scores(lay, 8, False, False) == ("", 0, 0)
    assert second_scores(lay, 0, False, True) == ("", 0, 0)
    monkeypatch.setattr(choice, "SECOND_TREES", len(lay.order) - 1)
    assert second_scores(lay, 8, False, True) == ("", 0, 0)
    monkeypatch.setattr(choice, "SECOND_TREES", len(lay.order))
    monkeypatch.setenv(BLOCKS_ENV, "branchy")
    assert second_scores(lay, 8, False, True) == ("", 0, 0)
    monkeypatch.setenv(SECOND_ENV, "on")
    assert second_scores(lay, 8, False, False) == ("vector", choice.VECTOR_FROM, 1 << 16)
    assert second_scores(lay, 8, True, False) == ("branchy", 1, 1)
    monkeypatch.setenv(SECOND_ENV, "off")
    monkeypatch.setenv(BLOCKS_ENV, "auto")
    assert second_scores(lay, 8, False, True) == ("", 0, 0)


def test_a_bad_setting_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv(SECOND_ENV, "maybe")
    with pytest.raises(InvalidParameterError, match=SECOND_ENV) as err:
        second_scores(plan_layout(CHAIN), 8, False, True)
    assert "\n" not in str(err.value)


@pytest.mark.skipif(LANES == 0, reason="no vector target on this CPU")
def test_the_second_entry_is_in_the_cache_key(monkeypatch):
    monkeypatch.setenv(BLOCKS_ENV, "branchy")
    lay = plan_layout(PLANS["full"])
    keys = set()
    for setting in ("off", "on"):
        monkeypatch.setenv(SECOND_ENV, setting)
        keys.add(objects.code_key(lay))
    monkeypatch.setattr(choice, "VECTOR_FROM", 7)
    keys.add(objects.code_key(lay))
    assert len(keys) == 3


def test_the_one_row_rule_on_constructed_forests(monkeypatch):
    """Vector plans serve one row by branchy scores only when one row takes no lanes; where it
    does, short paths (chains: 2 splits, mtpl2's shape) keep the lanes as balanced trees do."""
    monkeypatch.delenv(BLOCKS_ENV, raising=False)
    monkeypatch.delenv(SECOND_ENV, raising=False)
    rng = np.random.default_rng(43)
    chain = plan_layout(Full(shaped_forest(rng, "chain", n_trees=70, categorical=True)))
    balanced = plan_layout(Full(shaped_forest(rng, "balanced", n_trees=70)))
    assert choice.mean_coin_path(chain.forest) < 3.0 < choice.mean_coin_path(balanced.forest)
    for lay in (chain, balanced):
        assert second_scores(lay, 8, True, False) == ("", 0, 0)
        assert second_scores(lay, 8, True, False, lane_row=False) == ("branchy", 1, 1)
    monkeypatch.setenv(SECOND_ENV, "on")
    assert second_scores(balanced, 8, True, False) == ("branchy", 1, 1)


@pytest.mark.skipif(LANES == 0, reason="no vector target on this CPU")
def test_a_categorical_chain_forest_serves_one_row_by_branchy_scores(monkeypatch):
    """The rule end to end (categorical, so vector blocks; fewer positions than a block of
    lanes): one row takes the branchy scores, exactly, on thresholds, category codes, NaN,
    ±inf, signed zeros."""
    monkeypatch.delenv(BLOCKS_ENV, raising=False)
    monkeypatch.delenv(SECOND_ENV, raising=False)
    plan = Full(
        shaped_forest(np.random.default_rng(44), "chain", n_features=N_FEATURES, n_trees=40, categorical=True)
    )
    compiled = thrifty.compile(plan, COSTS)
    assert compiled.forest_code.code.vector and entry_of(compiled, 1) == "second"
    assert entry_of(compiled, 2) == "raw"
    values = np.array([-1.0, 0.0, -0.0, 0.5, 1.0, 2.5, 3.0, 31.0, 64.0, np.nan, np.inf, -np.inf])
    X = np.random.default_rng(6).choice(values, (200, N_FEATURES))
    reference = evaluate(plan, X, COSTS)
    for i in range(len(X)):
        ev = compiled.evaluate(X[i : i + 1])
        np.testing.assert_array_equal(ev.raw, reference.raw[i : i + 1])
    assert_same(compiled.evaluate(X[:1]), evaluate(plan, X[:1], COSTS))
