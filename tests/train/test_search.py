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


# ---------------------------------------------------------------------- a prior history
def _path(budgets, fit, start=0.01):
    """Budgets searched one after another, each with every earlier trial as its history (the
    shared trade-off path): the fits each budget needed, and every trial."""
    known, fits = [], []
    for b in budgets:
        res = search_tradeoff(fit, b, start=start, progress=False, history=known)
        fits.append(res.n_fits)
        known = known + res.history
    return fits, known


@pytest.mark.parametrize("budget", [0.5, 3.0, 10.0, 40.0])
def test_history_that_brackets_the_budget_needs_fewer_fits(budget):
    cold = search_tradeoff(_power, budget, start=0.01, progress=False)
    # a bracket a factor 4 wide around the budget's trade-off, measured before (a neighbouring
    # budget's trials)
    lam = _chosen(cold, budget)[0]
    history = [(lam / 2, _power(lam / 2)[1]), (lam * 2, _power(lam * 2)[1])]
    warm = search_tradeoff(_power, budget, start=0.01, progress=False, history=history)
    assert warm.n_fits < cold.n_fits and warm.n_fits <= 3
    assert 0.95 * budget <= _chosen(warm, budget)[1] <= budget


def test_history_holding_the_cold_searchs_model_trains_nothing():
    cold = search_tradeoff(_power, 10.0, start=0.01, progress=False)
    warm = search_tradeoff(_power, 10.0, start=0.01, progress=False, history=cold.history)
    # nothing trained: the caller's selection over the history picks the cold search's model
    assert warm.n_fits == 0
    assert _chosen(cold, 10.0) == _chosen(warm.__class__(cold.history + warm.history), 10.0)


def test_shared_path_over_a_grid_of_budgets():
    budgets = [10.0, 0.5, 40.0, 3.0, 99.0, 1.5, 20.0]  # the order compare spreads them in
    fits, known = _path(budgets, _power)
    cold = [search_tradeoff(_power, b, start=0.01, progress=False).n_fits for b in budgets]
    assert sum(fits) < sum(cold)
    assert max(fits[2:]) <= 3  # once the path is bracketed, a budget takes a few fits
    for b in budgets:
        feasible = [c for _, c in known if c <= b]
        assert feasible and 0.95 * b <= max(feasible) <= b


def test_history_of_a_step_function_keeps_the_brute_force_answer():
    steps = np.array([0.0, 3.0, 5.5, 10.0, 23.0])
    edges = np.array([0.2, 0.02, 0.012, 0.004])

    def fit(lam):
        return None, float(steps[int(np.sum(lam < edges))])

    _, known = _path([20.0, 8.0, 4.0], fit, start=0.05)
    grid = np.geomspace(1e-4, 1.0, 4001)
    for b in (20.0, 8.0, 4.0):
        best = max(fit(g)[1] for g in grid if fit(g)[1] <= b)
        assert max(c for _, c in known if c <= b) == best


def test_history_with_the_unpenalised_model_only():
    # lambda = 0 over budget brackets nothing: the search starts at ``start``
    res = search_tradeoff(_power, 10.0, start=0.01, progress=False, history=[(0.0, 100.0)])
    assert res.history[0][0] == 0.01 and 9.5 <= _chosen(res, 10.0)[1] <= 10.0
    assert all(lam > 0 for lam, _ in res.history)


@pytest.mark.parametrize("bad", [[(-1.0, 2.0)], [(1.0, math.nan)], [(math.inf, 1.0)]])
def test_bad_history(bad):
    with pytest.raises(ValueError, match="history"):
        search_tradeoff(_power, 5.0, start=1.0, progress=False, history=bad)
