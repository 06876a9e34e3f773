"""Cronus: the closed-form stage solution, the cyclic optimization and the cascade it runs as."""

import numpy as np
import pytest
from scipy.optimize import minimize

import thrifty
from tests._helpers.reference import walk
from thrifty import CostModel, Forest
from thrifty.cascade import cronus, lambda_max, reweight
from thrifty.cascade._cronus_init import solve_stage, stage_gram, stage_objective
from thrifty.cascade._problem import build_problem, cost_norms, objective, soft_flow, substituted_objective

lightgbm = pytest.importorskip("lightgbm")


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """SLSQP and L-BFGS on tiny problems: BLAS threads only contend (much slower on a busy machine)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def small():
    """A 12-tree GBT on 6 features with distinct prices and a tree cost."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 2] + 0.5 * rng.normal(size=300) > 0.8).astype(int)
    model = lightgbm.LGBMClassifier(
        n_estimators=12, num_leaves=4, learning_rate=0.3, verbose=-1, n_jobs=1, min_child_samples=5
    ).fit(X, y)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 3.0, 5.0], tree_cost=0.5)
    return Forest.from_model(model), X, y, costs


@pytest.fixture(scope="module")
def medium():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(1500, 8))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=1500) > 1.0).astype(int)
    model = lightgbm.LGBMClassifier(
        n_estimators=40, num_leaves=8, learning_rate=0.2, verbose=-1, n_jobs=1
    ).fit(X[:1000], y[:1000])
    costs = CostModel([1, 1, 2, 5, 5, 10, 20, 20], tree_cost=1.0)
    return Forest.from_model(model), X[:1000], y[:1000], X[1000:], y[1000:], costs


def _reference_stage(prob, omega, prev_B, prev_d, d_k, lam, rho, start=None, maxiter=5000):
    """The convex last-stage problem as a smooth constrained program (epigraph variables for
    |beta_t| and for each norm), solved by SLSQP: independent of the reweighting."""
    T = prob.n_trees
    H = prob.H
    F = prob.F.astype(float)
    a_tree = ((prev_B[:, :-1] * prev_d[:, None]) ** 2).sum(axis=0) if len(prev_B) else np.zeros(T)
    a_unit = F @ a_tree
    U = len(prob.c)
    n_var = (T + 1) + T + T + U

    def split(v):
        return v[: T + 1], v[T + 1 : 2 * T + 1], v[2 * T + 1 : 3 * T + 1], v[3 * T + 1 :]

    def fun(v):
        beta, u, s, w = split(v)
        res = H @ beta - prob.y
        return 0.5 * np.sum(omega * res**2) + rho * u.sum() + lam * (prob.e @ s + prob.c @ w)

    def grad(v):
        beta, _, _, _ = split(v)
        return np.r_[H.T @ (omega * (H @ beta - prob.y)), np.full(T, rho), lam * prob.e, lam * prob.c]

    def cons(v):
        beta, u, s, w = split(v)
        b = beta[:-1]
        return np.r_[u - b, u + b, s**2 - a_tree - d_k**2 * b**2, w**2 - a_unit - d_k**2 * (F @ b**2)]

    def cons_jac(v):
        beta, _, s, w = split(v)
        b = beta[:-1]
        J = np.zeros((3 * T + U, n_var))
        eye = np.eye(T)
        J[:T, :T], J[:T, T + 1 : 2 * T + 1] = -eye, eye
        J[T : 2 * T, :T], J[T : 2 * T, T + 1 : 2 * T + 1] = eye, eye
        J[2 * T : 3 * T, :T] = -2 * d_k**2 * np.diag(b)
        J[2 * T : 3 * T, 2 * T + 1 : 3 * T + 1] = 2 * np.diag(s)
        J[3 * T :, :T] = -2 * d_k**2 * F * b[None, :]
        J[3 * T :, 3 * T + 1 :] = 2 * np.diag(w)
        return J

    if start is None:  # the weighted least-squares fit (no penalty), independent of the reweighting
        sw = np.sqrt(omega)
        start = np.linalg.lstsq(H * sw[:, None], prob.y * sw, rcond=None)[0]
    b = start[:-1]  # with the tightest epigraph variables, slightly relaxed
    x0 = np.r_[start, np.abs(b), np.sqrt(a_tree + d_k**2 * b**2), np.sqrt(a_unit + d_k**2 * (F @ b**2))]
    x0[T + 1 :] += 1e-6
    bounds = [(None, None)] * (T + 1) + [(0, None)] * (T + T + U)
    res = minimize(
        fun,
        x0,
        jac=grad,
        method="SLSQP",
        bounds=bounds,
        constraints=[{"type": "ineq", "fun": cons, "jac": cons_jac}],
        options={"maxiter": maxiter, "ftol": 1e-13},
    )
    assert np.min(cons(res.x)) > -1e-8, res.message  # a feasible point
    return split(res.x)[0], res.fun


@pytest.mark.parametrize(
    "lam,rho,previous",
    [
        (0.002, 1e-3, False),  # eq. (7): one stage, l1 + tree cost + feature mixed norm
        (0.01, 0.0, False),  # cost terms alone (no l1)
        (0.004, 5e-4, True),  # a second stage: the norms include the first stage's weights
    ],
)
def test_closed_form_stage_equals_numerical_minimum(small, lam, rho, previous):
    forest, X, y, costs = small
    prob, _ = build_problem(forest, X, y, costs, 3.5)
    rng = np.random.default_rng(5)
    if previous:
        prev_B = np.zeros((1, prob.n_trees + 1))
        prev_B[0, [0, 3, 4]] = [0.8, -0.5, 0.3]
        prev_d, d_k = np.array([1.0]), 0.6
        reach = rng.uniform(0.2, 1.0, size=prob.n)
    else:
        prev_B, prev_d, d_k, reach = np.zeros((0, prob.n_trees + 1)), np.zeros(0), 1.0, np.ones(prob.n)
    omega = prob.omega * reach
    G, r, c0 = stage_gram(prob, omega)
    beta, history = solve_stage(
        prob, G, r, c0, prev_B, prev_d, d_k, lam=lam, rho=rho, max_iter=5000, tol=1e-13
    )
    value = stage_objective(prob, G, r, c0, beta, prev_B, prev_d, d_k, lam, rho)
    # SLSQP from scratch on the epigraph form does no better (it may stall a little above) ...
    _, scratch_value = _reference_stage(prob, omega, prev_B, prev_d, d_k, lam, rho, maxiter=300)
    assert value <= scratch_value + 1e-9
    assert scratch_value == pytest.approx(value, rel=1e-3)
    # ... and started at the closed-form solution it finds nothing better nearby
    ref_beta, ref_value = _reference_stage(prob, omega, prev_B, prev_d, d_k, lam, rho, start=beta)
    assert value <= ref_value + 1e-8 * abs(value)
    scale = prob.scale
    np.testing.assert_allclose(beta * scale, ref_beta * scale, atol=2e-3)
    # each reweighting step lowers the objective (Lemma 1: an upper bound tight at the iterate)
    assert np.all(np.diff(history) <= 1e-12 * abs(history[0]))


def test_l1_stage_equals_weighted_lasso(small):
    """lam = 0: the stage problem is a weighted lasso with a free intercept (exact reference)."""
    from sklearn.linear_model import Lasso

    forest, X, y, costs = small
    prob, _ = build_problem(forest, X, y, costs, 3.5)
    rho = 2e-3
    G, r, c0 = stage_gram(prob, prob.omega)
    beta, _ = solve_stage(
        prob,
        G,
        r,
        c0,
        np.zeros((0, prob.n_trees + 1)),
        np.zeros(0),
        1.0,
        lam=0.0,
        rho=rho,
        max_iter=5000,
        tol=1e-14,
    )
    total = prob.omega.sum()
    lasso = Lasso(alpha=rho / total, tol=1e-12, max_iter=100_000).fit(
        prob.H[:, :-1], prob.y, sample_weight=prob.omega * len(prob.y) / total
    )
    ref = np.r_[lasso.coef_, lasso.intercept_]
    value = stage_objective(prob, G, r, c0, beta, np.zeros((0, len(beta))), np.zeros(0), 1.0, 0.0, rho)
    ref_value = stage_objective(prob, G, r, c0, ref, np.zeros((0, len(beta))), np.zeros(0), 1.0, 0.0, rho)
    assert value == pytest.approx(ref_value, rel=1e-7)
    np.testing.assert_allclose(beta * prob.scale, ref * prob.scale, atol=1e-3)
    np.testing.assert_array_equal(beta[:-1] == 0, lasso.coef_ == 0)


def test_lemma1_substitution_gives_back_eq8(medium):
    forest, X, y, _, _, costs = medium
    prob, _ = build_problem(forest, X, y, costs, 3.5)
    rng = np.random.default_rng(2)
    K = 3
    B = rng.normal(scale=0.3, size=(K, prob.n_trees + 1)) * (rng.random((K, prob.n_trees + 1)) < 0.5)
    B[:, -1] = rng.normal(size=K)
    theta = np.array([-0.5, -0.2, 0.0])
    kw = dict(lam=0.003, rho=np.array([1e-3, 2e-3, 5e-4]), gamma=50.0)
    exact = objective(prob, B, theta, **kw)
    _, p, _ = soft_flow(prob.H @ B.T, theta, 50.0)
    kappa, eta = cost_norms(B, p.mean(axis=0), prob.F)
    sigma = np.abs(B[:, :-1])
    # zero weights: any sigma > 0 works in the limit; use a tiny one where the term is 0/0
    tiny = 1e-300
    sub = substituted_objective(
        prob, B, theta, np.maximum(sigma, tiny), np.maximum(kappa, tiny), np.maximum(eta, tiny), **kw
    )
    assert sub == pytest.approx(exact, rel=1e-10)
    for factor in (0.5, 2.0):  # any other auxiliary values bound eq. (8) from above
        off = substituted_objective(
            prob,
            B,
            theta,
            np.maximum(sigma, tiny) * factor,
            np.maximum(kappa, tiny) * factor,
            np.maximum(eta, tiny) * factor,
            **kw,
        )
        assert off > exact


def test_lemma1_alternation_converges_to_nonsmooth_value(small):
    """The alternating minimisation's substituted values approach the non-smooth optimum."""
    forest, X, y, costs = small
    prob, _ = build_problem(forest, X, y, costs, 3.5)
    G, r, c0 = stage_gram(prob, prob.omega)
    none = np.zeros((0, prob.n_trees + 1))
    _, history = solve_stage(
        prob, G, r, c0, none, np.zeros(0), 1.0, lam=0.002, rho=1e-3, max_iter=5000, tol=1e-13
    )
    beta, _ = solve_stage(
        prob, G, r, c0, none, np.zeros(0), 1.0, lam=0.002, rho=1e-3, max_iter=5000, tol=1e-13
    )
    _, ref_value = _reference_stage(prob, prob.omega, none, np.zeros(0), 1.0, 0.002, 1e-3, start=beta)
    assert history[0] > ref_value + 1e-3  # it starts far away (the original ensemble) ...
    assert history[-1] == pytest.approx(ref_value, rel=1e-7)  # ... and converges to the optimum
    assert np.all(np.diff(history) <= 1e-12 * abs(history[0]))


def test_lam0_single_stage_fits_at_least_as_well(medium):
    forest, X, y, _, _, costs = medium
    plan = reweight(forest, X, y, costs, lam=0.0, rho=0.0, class_weight=3.5, n_threads=1)
    assert isinstance(plan, thrifty.Cascade) and plan.n_stages == 1
    s = np.where(y == 1, 1.0, -1.0)
    w = np.where(y == 1, 3.5, 1.0)
    raw = thrifty.evaluate(plan, X).raw
    original = forest.predict_raw(X)
    assert np.sum(w * (raw - s) ** 2) <= np.sum(w * (original - s) ** 2)
    # it is the weighted least-squares fit of the targets on the trees plus a constant
    from thrifty.forest.scores import tree_scores

    A = np.column_stack([tree_scores(forest, X), np.ones(len(X))])
    sw = np.sqrt(w)
    coef = np.linalg.lstsq(A * sw[:, None], s * sw, rcond=None)[0]
    best = np.sum(w * (A @ coef - s) ** 2)
    assert np.sum(w * (raw - s) ** 2) == pytest.approx(best, rel=1e-6)


def _recount(forest, plan, X, costs):
    """Trees, nodes and cost of each example from the stages it reached, walked independently."""
    trees, costs_out = [], []
    ev = thrifty.evaluate(plan, X, costs)
    for x, stage in zip(X, ev.exit):
        used = sorted(set().union(*[set(np.flatnonzero(plan.stage_weights[k])) for k in range(stage + 1)]))
        touched: list[int] = []
        for t in used:
            walk(forest, x, int(t), touched)
        trees.append(len(used))
        costs_out.append(costs.acquisition_cost(sorted(set(touched))) + costs.tree_cost * len(used))
    return ev, np.array(trees), np.array(costs_out)


def test_trees_once_per_example_and_cost_recomputed(medium):
    forest, X, y, X_test, _, costs = medium
    lam = lambda_max(forest, X, y, costs) / 16
    res = cronus(forest, X, y, costs, n_stages=4, lam=lam, max_cycles=2, n_threads=1, return_result=True)
    plan = res.plan
    W = plan.stage_weights != 0
    shared = (W.sum(axis=0) > 1).sum()
    assert shared > 0  # stages reuse trees, so double evaluation would show
    ev, trees, recomputed = _recount(forest, plan, X_test, costs)
    np.testing.assert_array_equal(ev.cost.n_trees, trees)
    stage_sum = np.array([W[: e + 1].sum() for e in ev.exit])
    assert np.any(ev.cost.n_trees < stage_sum)
    np.testing.assert_allclose(ev.cost.total, recomputed)
    # lazy evaluation (features fetched on demand) gives the same predictions and costs
    from thrifty.runtime.evaluate import array_provider

    lazy = thrifty.evaluate(plan, array_provider(X_test), costs, n_rows=len(X_test))
    np.testing.assert_array_equal(lazy.raw, ev.raw)
    np.testing.assert_array_equal(lazy.exit, ev.exit)
    np.testing.assert_array_equal(lazy.cost.total, ev.cost.total)
    # a handmade cascade where every stage uses every tree: still each tree once
    T = forest.n_trees
    every = thrifty.Cascade(forest, np.ones((3, T)), [-np.inf, -np.inf, 0.0], [0.0, 0.0, 0.0])
    ev2 = thrifty.evaluate(every, X_test, costs)
    assert np.all(ev2.cost.n_trees == T)


def test_cronus_result_and_plan(medium):
    forest, X, y, X_test, y_test, costs = medium
    lam = lambda_max(forest, X, y, costs) / 16
    res = cronus(forest, X, y, costs, n_stages=5, lam=lam, n_threads=1, return_result=True)
    # Algorithm 1 never increases eq. (8)
    assert np.all(np.diff(res.history) <= 1e-12)
    assert res.objective <= res.init_objective
    assert res.objective == pytest.approx(
        objective(
            build_problem(forest, X, y, costs, 3.5)[0],
            res.weights,
            res.thresholds,
            lam=lam,
            rho=1e-3,
            gamma=50.0,
        )
    )
    # initialization: each stage passes 85% of the (soft) inputs it receives
    prob, _ = build_problem(forest, X, y, costs, 3.5)
    _, p, _ = soft_flow(prob.H @ res.init_weights.T, res.init_thresholds, 50.0)
    np.testing.assert_allclose(p.mean(axis=0), 0.85 ** np.arange(5), rtol=1e-6)
    only = cronus(forest, X, y, costs, n_stages=5, lam=lam, n_threads=1, init_only=True)
    np.testing.assert_array_equal(only.stage_weights, res.init_plan.stage_weights)
    np.testing.assert_array_equal(only.stage_thresholds, res.init_plan.stage_thresholds)
    plan = res.plan
    np.testing.assert_array_equal(plan.stage_weights, res.weights[:, :-1])
    np.testing.assert_array_equal(plan.stage_bias, res.weights[:, -1])
    assert plan.stage_thresholds[-1] == 0.0
    ev = thrifty.evaluate(plan, X_test, costs)
    full = thrifty.evaluate(forest, X_test, costs)
    assert ev.cost.mean < full.cost.mean
    assert np.mean(ev.labels == y_test) > 0.8
    # the plan round-trips through JSON
    import json

    from thrifty.runtime.plans import plan_from_dict

    again = plan_from_dict(json.loads(plan.to_json()))
    np.testing.assert_array_equal(thrifty.evaluate(again, X_test).raw, ev.raw)


def test_zero_stages_pass_everything_and_cost_nothing(medium):
    forest, X, y, X_test, _, costs = medium
    lam = lambda_max(forest, X, y, costs) * 4  # every stage empty
    plan = cronus(forest, X, y, costs, n_stages=3, lam=lam, n_threads=1)
    assert not np.any(plan.stage_weights)
    ev = thrifty.evaluate(plan, X_test, costs)
    assert np.all(ev.exit == 2) and np.all(ev.cost.total == 0)


def test_default_lam(small):
    forest, X, y, costs = small
    res = cronus(forest, X, y, costs, n_stages=2, max_cycles=1, return_result=True)
    assert res.lam == pytest.approx(lambda_max(forest, X, y, costs, exact=False) / 16)
    assert np.all(res.thresholds <= 0)  # a stage rejects only inputs it scores negative


def test_lambda_max_keeps_no_tree(medium):
    forest, X, y, _, _, costs = medium
    top = lambda_max(forest, X, y, costs)
    assert not np.any(reweight(forest, X, y, costs, lam=top * 1.001, rho=0.0).stage_weights)
    assert np.any(reweight(forest, X, y, costs, lam=top * 0.94, rho=0.0).stage_weights)
    lone = lambda_max(forest, X, y, costs, exact=False)
    assert lone <= top and np.any(reweight(forest, X, y, costs, lam=lone * 0.99, rho=0.0).stage_weights)


def test_errors(small, medium):
    forest, X, y, costs = small
    with pytest.raises(ValueError, match="n_stages"):
        cronus(forest, X, y, costs, n_stages=0)
    with pytest.raises(ValueError, match="eps"):
        cronus(forest, X, y, costs, eps=1.0)
    with pytest.raises(ValueError, match="gamma"):
        cronus(forest, X, y, costs, gamma=0.0)
    with pytest.raises(ValueError, match="rho"):
        cronus(forest, X, y, costs, n_stages=3, rho=[1e-3, 1e-3, 1e-3, 1e-3])
    with pytest.raises(ValueError, match="shape"):
        cronus(forest, X[:, :4], y, costs)
    with pytest.raises(ValueError, match="binarize"):
        cronus(forest, X, np.arange(len(y)) % 3, costs)
    with pytest.raises(TypeError, match="CostModel"):
        cronus(forest, X, y, [1.0] * 6)
    with pytest.raises(ValueError, match="cost"):
        cronus(forest, X, y, CostModel.uniform(7))
    with pytest.raises(ValueError, match="lam"):
        reweight(forest, X, y, costs, lam=-1.0)
    multi = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1).fit(
        X, np.arange(len(y)) % 3
    )
    with pytest.raises(ValueError, match="single-output"):
        cronus(multi, X, y, costs)


@pytest.mark.parametrize("init_only", [True, False])
def test_integer_weights_are_repeated_rows_and_zero_weights_dropped_rows(small, init_only):
    forest, X, y, costs = small
    w = np.random.default_rng(5).integers(0, 3, size=len(y))
    kw = dict(lam=0.01, n_stages=3, max_cycles=1, init_only=init_only, return_result=True)
    weighted = cronus(forest, X, y, costs, sample_weight=w, **kw)
    repeated = cronus(forest, np.repeat(X, w, axis=0), np.repeat(y, w), costs, **kw)
    # the same problem, summed in another order: equal up to rounding
    np.testing.assert_allclose(weighted.weights, repeated.weights, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(weighted.thresholds, repeated.thresholds, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(weighted.reach, repeated.reach, rtol=1e-9)
    assert weighted.objective == pytest.approx(repeated.objective, rel=1e-9)
    one = reweight(forest, X, y, costs, lam=0.01, sample_weight=w)
    again = reweight(forest, np.repeat(X, w, axis=0), np.repeat(y, w), costs, lam=0.01)
    np.testing.assert_allclose(one.stage_weights, again.stage_weights, rtol=1e-6, atol=1e-9)
    top = lambda_max(forest, X, y, costs, sample_weight=w, exact=False)
    assert top == pytest.approx(
        lambda_max(forest, np.repeat(X, w, axis=0), np.repeat(y, w), costs, exact=False)
    )
