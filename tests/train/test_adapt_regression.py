"""ADAPT for regression: (OPT1) and (OPT2) with squared losses, checked against formulas written
out here and scipy's optimizers, and the ADAPTRegressor estimator."""

import warnings

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.linear_model import Ridge
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

from thrifty.costs import CostModel
from thrifty.estimator_checks import BudgetCase, parametrize_with_budget_checks
from thrifty.runtime import Gated, evaluate
from thrifty.train import ADAPTRegressionProblem, ADAPTRegressor, adapt_gbrt, adapt_lin, q_step
from thrifty.train._adapt_group_sparse import fit_group_sparse, smooth_loss

FAST = {"n_estimators": 10, "n_iter": 2, "progress": False}
PRICES = [1.0, 1.0, 4.0, 4.0, 8.0]


def _data(n=400, seed=0):
    """y depends on a cheap feature everywhere and on expensive ones in half of the space."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = 2.0 * X[:, 0] + np.where(X[:, 1] > 0, 3.0 * X[:, 2] * X[:, 3], 0.0) + 0.1 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def data():
    X, y = _data(600)
    hpc = DecisionTreeRegressor(max_depth=6, random_state=0).fit(X[:400], y[:400])
    return X[:400], y[:400], X[400:], y[400:], hpc


# ---------------------------------------------------------------------- the objective, written out


def _opt2(P, Z, t, q, l2, sw):
    """(OPT2) with squared loss, from the formula: (1/N) sum_i w_i [(1 - q_i) ((f1_i - t_i)^2 / 2
    + log(1 + e^{g_i})) + q_i log(1 + e^{-g_i})] + l2 / 2 ||P without intercepts||^2."""
    S = Z @ P[:-1] + P[-1]
    g, f = S[:, 0], S[:, 1]
    terms = (1 - q) * (0.5 * (f - t) ** 2 + np.log1p(np.exp(g))) + q * np.log1p(np.exp(-g))
    return float(np.sum(sw * terms) / np.sum(sw)) + 0.5 * l2 * float(np.sum(P[:-1] ** 2))


def _small_problem(seed=0, n=60, d=4):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, d))
    t = Z @ rng.normal(size=d) + 0.5 * rng.normal(size=n)
    q = rng.uniform(0.05, 0.95, n)
    sw = rng.integers(1, 4, n).astype(float)
    P = rng.normal(scale=0.3, size=(d + 1, 2))
    return Z, t, q, sw, P


@pytest.mark.parametrize("seed", [0, 1])
def test_squared_opt2_and_its_gradient(seed):
    Z, t, q, sw, P = _small_problem(seed)
    value, grad = smooth_loss(P, Z, t[:, None], q, 1e-2, sw, loss="squared")
    assert value == pytest.approx(_opt2(P, Z, t, q, 1e-2, sw), rel=1e-12)
    # central finite differences of the formula above
    h = 1e-6
    numeric = np.zeros_like(P)
    for idx in np.ndindex(P.shape):
        E = np.zeros_like(P)
        E[idx] = h
        numeric[idx] = (_opt2(P + E, Z, t, q, 1e-2, sw) - _opt2(P - E, Z, t, q, 1e-2, sw)) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize(
    "gamma",
    [
        0.0,  # smooth: L-BFGS reaches the same minimum
        0.05,  # group penalty: some features vanish from the gate and f1 together
    ],
)
def test_squared_opt2_solution_equals_scipy_minimize(gamma):
    Z, t, q, sw, _ = _small_problem(2)
    c = np.array([1.0, 2.0, 0.5, 4.0])
    P = fit_group_sparse(
        Z,
        t[:, None],
        q=q,
        weights=c,
        gamma=gamma,
        l2=1e-3,
        max_iter=5000,
        tol=1e-10,
        sample_weight=sw,
        loss="squared",
    )

    n = P.size

    def objective(x):
        # the group penalty as an epigraph: u_a >= ||P_a|| through the smooth u_a^2 >= ||P_a||^2
        return _opt2(x[:n].reshape(P.shape), Z, t, q, 1e-3, sw) + gamma * float(c @ x[n:])

    def epigraph(x):
        return x[n:] ** 2 - np.sum(x[:n].reshape(P.shape)[:-1] ** 2, axis=1)

    res = minimize(
        objective,
        np.r_[np.zeros(n), np.ones(len(c))],
        method="SLSQP",
        bounds=[(None, None)] * n + [(0, None)] * len(c),
        constraints=[{"type": "ineq", "fun": epigraph}],
        options={"ftol": 1e-15, "maxiter": 5000},
    )
    assert res.success, res.message
    norms = np.sqrt(np.sum(P[:-1] ** 2, axis=1))
    assert objective(np.r_[P.ravel(), norms]) <= res.fun + 1e-9
    np.testing.assert_allclose(P.ravel(), res.x[:n], atol=1e-5)
    if gamma > 0:
        assert np.any(np.all(P[:-1] == 0, axis=1))  # an exact zero in both columns


@pytest.mark.parametrize("p_full", [0.1, 0.4])
def test_regression_q_step_minimises_opt1(p_full):
    X, y = _data(30, seed=3)
    f0 = y + 0.3 * np.random.default_rng(4).normal(size=len(y))
    prob = ADAPTRegressionProblem.build(X, y, f0)
    rng = np.random.default_rng(5)
    g, F = rng.normal(size=len(y)), (y / prob.scale + rng.normal(size=len(y)))[:, None]
    A, B = prob.losses(g, F)
    # (OPT1) with the Gaussian losses, written out
    np.testing.assert_allclose(A, 0.5 * (F[:, 0] * prob.scale - y) ** 2 / prob.scale**2 + np.log1p(np.exp(g)))
    np.testing.assert_allclose(B, 0.5 * (f0 - y) ** 2 / prob.scale**2 + np.log1p(np.exp(-g)))
    q, _ = q_step(A, B, p_full)

    def opt1(v):
        v = np.clip(v, 1e-15, 1 - 1e-15)
        return float(np.mean((1 - v) * A + v * B + v * np.log(v) + (1 - v) * np.log(1 - v)))

    res = minimize(
        opt1,
        np.full(len(y), p_full * 0.9),
        method="SLSQP",
        bounds=[(1e-9, 1 - 1e-9)] * len(y),
        constraints=[{"type": "ineq", "fun": lambda v: p_full - v.mean()}],
        options={"ftol": 1e-14, "maxiter": 2000},
    )
    assert opt1(q) <= opt1(res.x) + 1e-8
    np.testing.assert_allclose(q, res.x, atol=1e-3)


def test_scale_is_f0s_rmse_and_its_mean_loss_one_half():
    X, y = _data(200)
    f0 = y + np.random.default_rng(1).normal(scale=0.4, size=len(y))
    prob = ADAPTRegressionProblem.build(X, y, f0)
    assert prob.scale == pytest.approx(np.sqrt(np.mean((f0 - y) ** 2)))
    assert prob.nll0.mean() == pytest.approx(0.5)
    # an f0 that interpolates its rows: s is floored, so f1's errors stay finite
    exact = ADAPTRegressionProblem.build(X, y, y)
    assert exact.scale == pytest.approx(1e-3 * y.std())


def test_target_hpc_measures_both_models_against_f0():
    X, y = _data(200)
    f0 = y + np.random.default_rng(1).normal(scale=0.4, size=len(y))
    prob = ADAPTRegressionProblem.build(X, y, f0, target="hpc")
    assert prob.scale == pytest.approx(np.sqrt(np.mean((f0 - y) ** 2)))  # the tolerance stays f0's error
    np.testing.assert_array_equal(prob.nll0, 0.0)
    g, F = np.zeros(len(y)), np.zeros((len(y), 1))
    A, _ = prob.losses(g, F)
    np.testing.assert_allclose(A, 0.5 * (f0 / prob.scale) ** 2 + np.log(2.0))
    with pytest.raises(ValueError, match="target"):
        ADAPTRegressionProblem.build(X, y, f0, target="f0")


def test_lin_f1_alone_is_least_squares_in_target_units():
    """p_full = 0 and no penalty: f1 is the ridge regression of y (standardized features), so the
    scaling by s is undone exactly; the gate never routes to f0."""
    X, y = _data(300)
    prob = ADAPTRegressionProblem.build(X, y, y + 0.5, CostModel(PRICES))
    fit = adapt_lin(prob, p_full=0.0, gamma=0.0, l2=1e-4, n_iter=1, max_iter=5000)
    Z = (X - X.mean(axis=0)) / X.std(axis=0)
    # the ridge of (OPT2) on y / s is alpha = l2 * N on the sum of squares
    ridge = Ridge(alpha=1e-4 * len(y)).fit(Z, y / prob.scale)
    np.testing.assert_allclose(
        np.asarray(evaluate(fit.low, X).raw).reshape(-1), prob.scale * ridge.predict(Z), atol=1e-4
    )
    assert np.all(np.asarray(evaluate(fit.gate, X).raw) <= 0)


def test_gbrt_low_model_predicts_in_target_units(data):
    X, y, _, _, hpc = data
    prob = ADAPTRegressionProblem.build(X, y, hpc.predict(X), CostModel(PRICES))
    fit = adapt_gbrt(prob, p_full=0.0, gamma=0.0, n_estimators=60, n_iter=1, learning_rate=0.3)
    pred = np.asarray(evaluate(fit.low, X).raw).reshape(-1)
    assert fit.low.task == "regression"
    assert np.mean((pred - y) ** 2) < 0.3 * np.var(y)


def _best_stump(X, y):
    """Brute force: the least-squares stump over every feature and threshold (midpoints of the
    sorted distinct values), and its predictions."""
    best = (np.sum((y - y.mean()) ** 2), y.mean() * np.ones(len(y)))
    for j in range(X.shape[1]):
        values = np.unique(X[:, j])
        for a, b in zip(values[:-1], values[1:]):
            left = X[:, j] <= (a + b) / 2
            pred = np.where(left, y[left].mean(), y[~left].mean())
            sse = np.sum((y - pred) ** 2)
            if sse < best[0] - 1e-9:
                best = (sse, pred)
    return best[1]


def test_gbrt_f1_alone_is_the_least_squares_stump():
    """p_full = 0, one depth-1 tree, learning rate 1, no ridge on the leaves: f1 is the best
    least-squares stump of y (in target units, the scaling by s undone), found by brute force."""
    rng = np.random.default_rng(8)
    X = rng.integers(0, 12, size=(90, 3)).astype(float)  # few distinct values: the bins are exact
    y = 40.0 * (X[:, 1] > 6) + 5.0 * X[:, 2] + rng.normal(scale=3.0, size=90)
    prob = ADAPTRegressionProblem.build(X, y, y + rng.normal(scale=2.0, size=90))
    fit = adapt_gbrt(
        prob,
        p_full=0.0,
        gamma=0.0,
        n_estimators=1,
        max_depth=1,
        learning_rate=1.0,
        n_iter=0,
        reg_lambda=0.0,
        min_samples_leaf=1,
    )
    np.testing.assert_allclose(
        np.asarray(evaluate(fit.low, X).raw).reshape(-1), _best_stump(X, y), rtol=1e-10
    )


# ------------------------------------------------------------------------------------ the estimator


@pytest.mark.parametrize("method", ["lin", "gbrt"])
def test_predictions_route_between_f1_and_the_hpc(data, method):
    X, y, Xt, yt, hpc = data
    costs = CostModel(PRICES)
    reg = ADAPTRegressor(hpc, costs=costs, method=method, p_full=0.3, **FAST).fit(X, y)
    assert isinstance(reg.plan_, Gated)
    route = reg.route(Xt)
    low = np.asarray(evaluate(reg.low_, Xt).raw).reshape(-1)
    np.testing.assert_allclose(reg.predict(Xt), np.where(route == 1, hpc.predict(Xt), low))
    np.testing.assert_array_equal(reg.cost_report(Xt).total, evaluate(reg.plan_, Xt, costs).cost.total)
    assert 0 < route.mean() < 0.6
    assert reg.scale_ == pytest.approx(np.sqrt(np.mean((hpc.predict(X) - y) ** 2)))
    # f1 answers most rows and the system keeps at least half of the variance the tree explains
    assert reg.score(Xt, yt) > 0.5 * hpc.score(Xt, yt)


def test_budget_search_ranks_by_mean_squared_error(data):
    X, y, Xt, yt, hpc = data
    reg = ADAPTRegressor(
        hpc, costs=PRICES, budget=8.0, method="lin", p_full_grid=(0.2, 0.5), gamma_grid=(0.1, 0.01), **FAST
    ).fit(X, y, calibration=(Xt, yt))
    table = reg.budget_search_
    assert len(table) == 4
    chosen = table[table["chosen"]].iloc[0]
    assert chosen["metric"] == pytest.approx(-np.mean((reg.predict(Xt) - yt) ** 2))
    ok = table[table["cost"] <= 8.0]
    assert chosen["metric"] == ok["metric"].max()


@pytest.mark.parametrize("method", ["lin", "gbrt"])
def test_integer_weights_equal_repeated_rows(data, method):
    X, y, Xt, _, hpc = data
    w = np.random.default_rng(0).integers(0, 3, size=len(y))
    kw = {"method": method, "p_full": 0.3, **FAST}
    weighted = ADAPTRegressor(hpc, **kw).fit(X, y, sample_weight=w)
    repeated = ADAPTRegressor(hpc, **kw).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    np.testing.assert_array_equal(weighted.route(Xt), repeated.route(Xt))
    np.testing.assert_allclose(weighted.predict(Xt), repeated.predict(Xt), rtol=1e-6, atol=1e-8)


def test_errors(data):
    X, y, _, _, hpc = data
    with pytest.raises(ValueError, match="method"):
        ADAPTRegressor(hpc, method="l1", progress=False).fit(X, y)
    with pytest.raises(ValueError, match="NaN"):
        ADAPTRegressor(hpc, progress=False).fit(X, np.r_[y[:-1], np.nan])
    from sklearn.tree import DecisionTreeClassifier

    clf = DecisionTreeClassifier(max_depth=2).fit(X, y > 0)
    with pytest.raises(ValueError, match="regressor"):
        ADAPTRegressor(clf, progress=False).fit(X, y)


def test_black_box_hpc_answers_with_predict(data):
    X, y, Xt, _, _ = data
    from sklearn.linear_model import LinearRegression

    hpc = LinearRegression().fit(X[:, [0, 2]], y)
    reg = ADAPTRegressor(hpc, costs=PRICES, hpc_features=[0, 2], method="lin", **FAST).fit(X, y)
    high = evaluate(reg.plan_.high, Xt, reg.costs_)
    np.testing.assert_allclose(np.asarray(high.raw).reshape(-1), hpc.predict(Xt[:, [0, 2]]))
    assert np.all(high.cost.total == PRICES[0] + PRICES[2])


_SMALL = {"n_estimators": 3, "n_iter": 1, "progress": False}


def _other_libraries():
    """ADAPTRegressor around an unfitted LightGBM and XGBoost regressor (when installed)."""
    for module, name, params in [
        ("lightgbm", "LGBMRegressor", {"n_estimators": 10, "min_child_samples": 2, "verbose": -1}),
        ("xgboost", "XGBRegressor", {"n_estimators": 10, "max_depth": 3}),
    ]:
        try:
            lib = __import__(module)
        except ImportError:
            continue
        yield ADAPTRegressor(getattr(lib, name)(n_jobs=1, **params), method="lin", **_SMALL)


@parametrize_with_checks(
    [
        # enough rounds for f1's trees to pass check_regressors_train's R^2 > 0.5
        ADAPTRegressor(
            DecisionTreeRegressor(max_depth=3, random_state=0),
            n_estimators=20,
            learning_rate=0.3,
            n_iter=1,
            progress=False,
        ),
        ADAPTRegressor(DecisionTreeRegressor(max_depth=3, random_state=0), method="lin", **_SMALL),
        *_other_libraries(),
    ],
    expected_failed_checks=lambda est: (
        {}
        if isinstance(est.hpc, DecisionTreeRegressor)
        else {
            "check_sample_weight_equivalence_on_dense_data": "the boosted hpc's histograms and leaf sizes "
            "count rows, not weights"
        }
    ),
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(estimator)


_X, _Y = _data(200, seed=7)


@parametrize_with_budget_checks(
    [
        BudgetCase(
            ADAPTRegressor(
                DecisionTreeRegressor(max_depth=4, random_state=0),
                method=method,
                p_full_grid=(0.1, 0.5),
                gamma_grid=(1.0, 1e-3),
                **_SMALL,
            ),
            _X,
            _Y,
            budgets=[5.0, 12.0, 30.0],
            costs=PRICES,
            id=f"ADAPTRegressor-{method}",
        )
        for method in ("lin", "gbrt")
    ]
)
def test_budget_contract(check):
    check()
