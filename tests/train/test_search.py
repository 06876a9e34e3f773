"""The log-space budget search against cost curves with known answers."""

import math

import numpy as np
import pytest

from thrifty.train._search import BudgetError, search_tradeoff


def _chosen(res, budget):
    """The trial the estimators' selection keeps: the feasible one of highest cost."""
    feasible = [(c, -lam, lam) for lam, c in res.history if c <= budget]
    assert feasible, "no trial met the budget"
    cost, _, lam = max(feasible)
    return lam, cost


def _power(lam: float) -> tuple[None, float]:
    # cost 100 at lambda = 0, falling like lambda^-0.7 (the shape CEGB's cost curves have)
    return None, 100.0 / (1.0 + (3.0 * lam) ** 0.7)


@pytest.mark.parametrize("budget", [0.5, 3.0, 10.0, 40.0, 99.0])
def test_power_law_meets_budget_in_few_fits(budget):
    res = search_tradeoff(_power, budget, start=0.01, progress=False)
    lam, cost = _chosen(res, budget)
    assert 0.95 * budget <= cost <= budget
    assert res.n_fits <= 8 and len(res.models) == res.n_fits
    # the analytic inverse: the cost at the returned trade-off is the one reported
    assert cost == pytest.approx(_power(lam)[1])


def test_unpenalised_model_returned_when_it_fits():
    res = search_tradeoff(_power, 150.0, start=0.01, progress=False)
    assert _chosen(res, 150.0) == (0.0, 100.0) and res.n_fits == 2


def test_step_function_returns_best_feasible_against_brute_force():
    # cost only takes the values of a few features entering: no model lands in the band
    steps = np.array([0.0, 3.0, 5.5, 10.0, 23.0])
    edges = np.array([0.2, 0.02, 0.012, 0.004])  # cost jumps up below each edge

    def fit(lam):
        return None, float(steps[int(np.sum(lam < edges))])

    res = search_tradeoff(fit, 8.0, start=0.05, progress=False)
    grid = np.geomspace(1e-4, 1.0, 4001)
    best = max(fit(g)[1] for g in grid if fit(g)[1] <= 8.0)
    assert _chosen(res, 8.0)[1] == best == 5.5
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
        lam, cost = _chosen(res, budget)
        assert cost <= budget
        assert all(c <= budget or t != lam for t, c in res.history)


def test_budget_below_floor_raises_before_fitting():
    calls = []
    with pytest.raises(BudgetError, match="cheapest possible model"):
        search_tradeoff(
            lambda lam: calls.append(lam) or (None, 1.0), 0.5, start=1.0, floor=2.0, progress=False
        )
    assert calls == []


def test_unreachable_budget_returns_every_trial():
    # the caller's selection raises BudgetError; the search spends max_fits going up
    res = search_tradeoff(lambda lam: (lam, 5.0), 1.0, start=1.0, max_fits=4, progress=False)
    assert res.n_fits == 4 and all(c == 5.0 for _, c in res.history)
    assert res.models == [lam for lam, _ in res.history] and res.history[-1][0] > res.history[0][0]


@pytest.mark.parametrize("kwargs", [{"tolerance": 0}, {"max_fits": 1}, {"start": 0}])
def test_bad_options(kwargs):
    opts = {"start": 1.0, **kwargs}
    with pytest.raises(ValueError):
        search_tradeoff(_power, 5.0, progress=False, **opts)
