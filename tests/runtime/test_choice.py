"""The choice of block kind (``compiled.choice``): its rule, what forces either kind, and that a
forced kind gives the interpreter's results bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import PLANS, check, input_matrices
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled.choice import BLOCKS_ENV, forced_kind, vector_blocks
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.tables import leaf_tables


def layout(plan) -> Layout:
    s = plan.schedule
    kinds = np.where(s.bins.width > 0, 2, np.isfinite(s.eps_pos) | np.isfinite(s.eps_neg)).astype(np.int8)
    return Layout(plan.forest, s.order, kinds, *leaf_tables(plan.forest)[1:])


@pytest.mark.parametrize(
    "forced, lanes, expected",
    [
        (None, 8, True),  # the rule: vector blocks wherever the target has lanes (AVX-512)
        (None, 4, True),  # AVX2
        (None, 0, False),  # the scalar target: scalar blocks
        ("auto", 8, True),
        ("vector", 4, True),
        ("vector", 0, False),  # the scalar target has no vector blocks to force
        ("scalar", 8, False),
        (" Scalar ", 8, False),  # case and spaces are forgiven
    ],
)
def test_rule_and_forced_kinds(forced, lanes, expected, monkeypatch):
    if forced is None:
        monkeypatch.delenv(BLOCKS_ENV, raising=False)
    else:
        monkeypatch.setenv(BLOCKS_ENV, forced)
    assert vector_blocks(layout(PLANS["full"]), lanes) is expected


def test_plans_vector_blocks_cannot_take_stay_scalar_even_when_forced(monkeypatch):
    monkeypatch.setenv(BLOCKS_ENV, "vector")
    assert vector_blocks(layout(PLANS["sequential-bins"]), 8) is False


def test_a_bad_kind_is_a_one_line_error(monkeypatch):
    monkeypatch.setenv(BLOCKS_ENV, "simd")
    with pytest.raises(InvalidParameterError, match=r"THRIFTY_BLOCKS='simd'.*one of") as err:
        forced_kind()
    assert "\n" not in str(err.value)


def test_the_kind_is_in_the_cache_key(monkeypatch):
    lay = layout(PLANS["full"])
    keys = set()
    for kind in ("vector", "scalar"):
        monkeypatch.setenv(BLOCKS_ENV, kind)
        keys.add(objects.code_key(lay))
    assert len(keys) == 2


@pytest.mark.parametrize("name", ["full", "sequential-multiclass", "gated-forests"])
@pytest.mark.parametrize("kind", ["vector", "scalar"])
@settings(
    max_examples=4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(X=input_matrices(N_FEATURES))
def test_forced_kinds_match_the_interpreter(name, kind, X, monkeypatch):
    """Compiled through ``THRIFTY_BLOCKS`` (not a patched ``use_vector``): dense, served, one
    row and lazily, the interpreter's results bit for bit."""
    monkeypatch.setenv(BLOCKS_ENV, kind)
    check(PLANS[name], X, cost_model(tree_cost=0.25, split_cost=0.125))
