"""compare fits a method's settings in the order that covers their costs first
(``registry.CostOrder``): the middle, the two ends, then the widest gap in cost between fitted
neighbours, so that a time allowance that stops a method early still leaves settings near every
budget, not only where the grid is dense."""

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thrifty import CostModel
from thrifty.comparison import METHODS
from thrifty.comparison.methods import QWYC_ALPHAS
from thrifty.comparison.registry import CostOrder, spread
from thrifty.comparison.settings import Settings
from thrifty.comparison.sweep import fitting_context


def _ordered(values, cost):
    """The settings of ``values`` in CostOrder's order, each given ``cost(value)``."""
    order, out = CostOrder(values), []
    for v in order:
        out.append(v)
        order.cost(cost(v))
    return out


def _widest_gap(costs, taken):
    """The widest gap between the sorted costs of the settings taken (the range's ends included)."""
    c = sorted(costs[i] for i in taken)
    return max(np.diff([min(costs), *c, max(costs)]))


#: A cost curve like QWYC's on flights (12 per flight for the plain model): flat over the small
#: alphas, then falling steeply from alpha=0.05 to 0.2.
FLIGHTS_LIKE = dict(zip(QWYC_ALPHAS, (12.0, 12.0, 11.9, 11.8, 11.5, 10.8, 9.0, 5.4, 3.2, 0.1, 0.05)))


def test_the_steep_part_of_a_cost_curve_is_covered_before_the_flat_one():
    order = _ordered(QWYC_ALPHAS, FLIGHTS_LIKE.__getitem__)
    assert order[:3] == [0.02, 0.0, 0.3]  # the middle (spread's first), then the range's ends
    # The six settings flights' run fitted include 0.05 and 0.1, the plans near its budgets of
    # 6 and 9 (spread's six had neither 0.1 nor anything between 9.0 and 3.2).
    assert {0.05, 0.1} <= set(order[:6])
    assert 0.1 not in spread(QWYC_ALPHAS)[:6]
    costs = [FLIGHTS_LIKE[a] for a in QWYC_ALPHAS]
    mine = _widest_gap(costs, [QWYC_ALPHAS.index(a) for a in order[:6]])
    theirs = _widest_gap(costs, [QWYC_ALPHAS.index(a) for a in spread(QWYC_ALPHAS)[:6]])
    assert mine < 4.0 < theirs


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=0, max_size=25))
def test_every_setting_once_each_later_one_splitting_the_widest_gap(costs):
    n = len(costs)
    order = _ordered(list(range(n)), costs.__getitem__)
    assert sorted(order) == list(range(n))
    if n >= 3:
        assert order[:3] == [(n - 1) // 2, 0, n - 1]
    for k in range(3, n):
        taken = sorted(order[:k])
        gaps = [(abs(costs[b] - costs[a]), b - a - 1) for a, b in zip(taken, taken[1:]) if b - a > 1]
        widest = max(gaps)
        a = order[k]
        lo = max(t for t in taken if t < a)
        hi = min(t for t in taken if t > a)
        assert (abs(costs[hi] - costs[lo]), hi - lo - 1) == widest


def test_a_setting_without_a_cost_is_no_neighbour_and_every_setting_still_comes():
    costs = {0: 10.0, 1: math.nan, 2: math.nan, 3: 5.0, 4: math.nan, 5: 0.0, 6: 0.0}
    order = _ordered(list(range(7)), costs.__getitem__)
    assert sorted(order) == list(range(7))
    assert order[:3] == [3, 0, 6]


@pytest.fixture(scope="module")
def qwyc_context():
    rng = np.random.default_rng(0)
    n = 600
    X = pd.DataFrame(rng.normal(size=(n, 6)), columns=[f"f{i}" for i in range(6)])
    y = (X["f0"] + 0.5 * X["f1"] + 0.8 * rng.normal(size=n) > 0).astype(int).to_numpy()
    params = {"n_estimators": 15, "num_leaves": 4, "n_jobs": 1, "verbose": -1, "random_state": 0}
    s = Settings(
        task="binary",
        costs=CostModel(np.arange(1.0, 7.0)),
        budgets=(2.0, 5.0),
        lightgbm_params=params,
        n_jobs=1,
        random_state=0,
        quick=False,
    )
    return fitting_context(s, X, y, None)


def test_qwyc_fits_its_alphas_in_the_order_that_covers_their_costs(qwyc_context):
    ctx = qwyc_context
    cands = list(METHODS["qwyc"].run(ctx))
    alphas = [c.params["alpha"] for c in cands]
    costs = {c.params["alpha"]: ctx.order_cost(c.model) for c in cands}
    # The same order CostOrder gives with the plans' costs (measured without labels), which
    # is not spread's: the range's ends come second and third, not alpha=0.002.
    assert alphas == _ordered(QWYC_ALPHAS, costs.__getitem__)
    assert alphas[:3] == [0.02, 0.0, 0.3]
    assert alphas != spread(QWYC_ALPHAS)


def test_a_setting_of_known_cost_bounds_the_gaps_and_comes_last():
    costs = [0.0, 1.0, 2.0, 3.0, 9.0, 10.0, 11.0, 12.0]
    order, out = CostOrder(list(range(8)), known={0: 0.0}), []
    for v in order:
        out.append(v)
        order.cost(costs[v])
    assert sorted(out) == list(range(8)) and out[-1] == 0
    # The middle, the other end, then the widest gap, with setting 0's cost 0 as a neighbour:
    # [0, 3] (3.0) against [3, 7] (9.0) - setting 5 next.
    assert out[:3] == [3, 7, 5]


def test_cronus_fits_lambda_max_which_keeps_no_tree_last(qwyc_context):
    ctx = qwyc_context
    cands = list(METHODS["cronus"].run(ctx))
    names = [c.name for c in cands]
    assert names[-1] == "lam=lambda_max/2^0"
    assert ctx.order_cost(cands[-1].model) == 0.0  # the cost CostOrder was told
    assert names[0] == f"lam=lambda_max/2^{(len(names) - 1) // 2}"  # the grid's middle first
