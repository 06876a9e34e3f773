"""The log-space budget search against cost curves with known answers."""

import math

import numpy as np
import pytest

from thrifty.train._search import BudgetError, search_tradeoff


def _power(lam: float) -> tuple[None, float]:
    # cost 100 at lambda = 0, falling like lambda^-0.7 (the shape CEGB's cost curves have)
    return None, 100.0 / (1.0 + (3.0 * lam) ** 0.7)


@pytest.mark.parametrize("budget", [0.5, 3.0, 10.0, 40.0, 99.0])
def test_power_law_meets_budget_in_few_fits(budget):
    res = search_tradeoff(_power, budget, start=0.01, progress=False)
    assert 0.95 * budget <= res.cost <= budget
    assert res.n_fits <= 8
    # the analytic inverse: the cost at the returned trade-off is the one reported
    assert res.cost == pytest.approx(_power(res.tradeoff)[1])


def test_unpenalised_model_returned_when_it_fits():
    res = search_tradeoff(_power, 150.0, start=0.01, progress=False)
    assert res.tradeoff == 0.0 and res.cost == 100.0 and res.n_fits == 2


def test_step_function_returns_best_feasible_against_brute_force():
    # cost only takes the values of a few features entering: no model lands in the band
    steps = np.array([0.0, 3.0, 5.5, 10.0, 23.0])
    edges = np.array([0.2, 0.02, 0.012, 0.004])  # cost jumps up below each edge

    def fit(lam):
        return None, float(steps[int(np.sum(lam < edges))])

    res = search_tradeoff(fit, 8.0, start=0.05, progress=False)
    grid = np.geomspace(1e-4, 1.0, 4001)
    best = max(fit(g)[1] for g in grid if fit(g)[1] <= 8.0)
    assert res.cost == best == 5.5
    assert res.n_fits <= 12


def test_non_monotone_step_never_returns_over_budget():
    rng = np.random.default_rng(0)
    noise = {}

    def fit(lam):
        key = round(math.log(lam), 6) if lam > 0 else -99
        noise.setdefault(key, rng.normal(scale=0.08))
        return None, _power(lam)[1] * (1 + noise[key])

    for budget in (2.0, 7.0, 30.0):
        res = search_tradeoff(fit, budget, start=0.01, progress=False)
        assert res.cost <= budget
        assert all(c <= budget or lam != res.tradeoff for lam, c in res.history)


def test_budget_below_floor_raises_before_fitting():
    calls = []
    with pytest.raises(BudgetError, match="cheapest possible model"):
        search_tradeoff(
            lambda lam: calls.append(lam) or (None, 1.0), 0.5, start=1.0, floor=2.0, progress=False
        )
    assert calls == []


def test_unreachable_budget_raises():
    with pytest.raises(BudgetError, match="no model met the budget"):
        search_tradeoff(lambda lam: (None, 5.0), 1.0, start=1.0, max_fits=4, progress=False)


@pytest.mark.parametrize("kwargs", [{"tolerance": 0}, {"max_fits": 1}, {"start": 0}])
def test_bad_options(kwargs):
    opts = {"start": 1.0, **kwargs}
    with pytest.raises(ValueError):
        search_tradeoff(_power, 5.0, progress=False, **opts)
