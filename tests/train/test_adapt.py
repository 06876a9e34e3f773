"""ADAPT: the q-step, the three methods, exact costs of the fitted Gated plan, the estimator."""

import pickle

import numpy as np
import pytest
from scipy.optimize import minimize
from sklearn.ensemble import RandomForestClassifier
from sklearn.svm import SVC
from sklearn.tree import DecisionTreeClassifier

from thrifty.costs import CostModel
from thrifty.exceptions import BudgetError, InvalidParameterError
from thrifty.forest import Forest
from thrifty.runtime import Full, Gated, Linear, Opaque, array_provider, evaluate
from thrifty.train import BudgetRFClassifier
from thrifty.train.adapt import ADAPTClassifier, q_step

# ------------------------------------------------------------------------------------ q-step


def _opt1(q, A, B):
    """(OPT1)'s objective: (1/N) sum (1 - q) A + q B - H(q)."""
    q = np.clip(q, 1e-15, 1 - 1e-15)
    H = -(q * np.log(q) + (1 - q) * np.log(1 - q))
    return float(np.mean((1 - q) * A + q * B - H))


def _opt1_grad(q, A, B):
    q = np.clip(q, 1e-15, 1 - 1e-15)
    return (B - A + np.log(q / (1 - q))) / len(q)


@pytest.mark.parametrize(
    "p_full,seed",
    [
        (0.05, 0),  # tight budget
        (0.3, 1),  # binding
        (0.9, 0),
    ],
)  # loose: beta = 0 when the constraint is slack
def test_q_step_equals_numerical_minimisation(p_full, seed):
    rng = np.random.default_rng(seed)
    n = 25
    A = rng.gamma(2.0, 0.7, n)
    B = rng.gamma(2.0, 0.3, n)  # f0 is usually better: the constraint binds
    q, beta = q_step(A, B, p_full)
    res = minimize(
        _opt1,
        np.full(n, min(p_full, 0.5) * 0.9),
        args=(A, B),
        method="SLSQP",
        jac=_opt1_grad,
        bounds=[(1e-9, 1 - 1e-9)] * n,
        constraints=[
            {"type": "ineq", "fun": lambda v: p_full - v.mean(), "jac": lambda v: -np.ones_like(v) / len(v)}
        ],
        options={"ftol": 1e-14, "maxiter": 2000},
    )
    assert res.success, res.message
    assert beta >= 0
    assert q.mean() <= p_full + 1e-12
    assert _opt1(q, A, B) <= _opt1(res.x, A, B) + 1e-8
    np.testing.assert_allclose(q, res.x, atol=2e-4)


def test_q_step_inactive_constraint_has_zero_beta():
    A = np.array([0.1, 0.2, 0.3])
    B = np.array([2.0, 3.0, 1.0])  # f1 better everywhere: few examples want f0
    q, beta = q_step(A, B, 0.9)
    assert beta == 0.0
    np.testing.assert_allclose(q, 1 / (1 + np.exp(B - A)))


def test_q_step_p_full_zero():
    q, beta = q_step(np.ones(5), np.zeros(5), 0.0)
    assert np.all(q == 0) and beta == np.inf


# ------------------------------------------------------------------------------------ data


def _binary(n=600, seed=0, n_features=6):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=n_features, n_informative=4, random_state=seed)
    return X, y


@pytest.fixture(scope="module")
def binary():
    X, y = _binary(900)
    hpc = RandomForestClassifier(n_estimators=30, max_depth=8, random_state=0, n_jobs=1).fit(X[:600], y[:600])
    return X[:600], y[:600], X[600:], y[600:], hpc


FAST = {"n_estimators": 15, "n_iter": 3, "progress": False}


# ------------------------------------------------------------------------------- behaviour
@pytest.mark.parametrize("method", ["gbrt", "lin"])
def test_p_full_zero_routes_everything_to_f1(binary, method):
    X, y, Xt, _, hpc = binary
    est = ADAPTClassifier(hpc, method=method, p_full=0.0, **FAST).fit(X, y)
    assert np.all(est.result_.q == 0)
    for data in (X, Xt):
        ev = evaluate(est.plan_, data)
        assert np.all(ev.exit == 0)
        np.testing.assert_array_equal(est.predict(data), evaluate(est.low_, data).labels)


def test_l1_baseline_p_full_zero_routes_everything_to_f1(binary):
    X, y, _, _, hpc = binary
    est = ADAPTClassifier(hpc, method="l1", p_full=0.0, gamma=0.01).fit(X, y)
    assert np.all(est.route(X) == 0)


@pytest.mark.parametrize("method", ["gbrt", "lin", "l1"])
def test_plan_is_gated_and_routes_by_gate_sign(binary, method):
    X, y, Xt, _, hpc = binary
    est = ADAPTClassifier(hpc, method=method, p_full=0.3, **({} if method == "l1" else FAST)).fit(X, y)
    assert isinstance(est.plan_, Gated)
    gate_raw = np.asarray(evaluate(est.gate_, Xt).raw).reshape(-1)
    np.testing.assert_array_equal(est.route(Xt), (gate_raw > 0).astype(int))
    high = est.route(Xt) == 1
    expect = np.where(high, hpc.predict(Xt), evaluate(est.low_, Xt).labels)
    np.testing.assert_array_equal(est.predict(Xt), expect)
    assert est.predict_proba(Xt).shape == (len(Xt), 2)
    # the oracle q honours the constraint
    if method != "l1":
        assert est.result_.q.mean() <= 0.3 + 1e-9


def test_larger_gamma_uses_fewer_features(binary):
    X, y, _, _, hpc = binary
    used = []
    for gamma in (1e-5, 1e-3, 3e-2):
        est = ADAPTClassifier(hpc, p_full=0.2, gamma=gamma, **FAST).fit(X, y)
        used.append(int((est.gate_.feature_usage() | est.low_.feature_usage()).astype(bool).sum()))
    assert used[0] >= used[1] >= used[2]
    assert used[0] > used[2]


def test_gbrt_prefers_the_cheap_equivalent_feature():
    rng = np.random.default_rng(3)
    n = 800
    z = rng.standard_normal(n)
    X = np.column_stack(
        [z + 0.01 * rng.standard_normal(n), z + 0.01 * rng.standard_normal(n), rng.standard_normal(n)]
    )
    y = (z > 0).astype(int)
    hpc = DecisionTreeClassifier(max_depth=4, random_state=0).fit(X, y)
    costs = CostModel([100.0, 1.0, 1.0])
    est = ADAPTClassifier(hpc, costs=costs, p_full=0.1, gamma=1e-3, **FAST).fit(X, y)
    used = est.gate_.feature_usage() + est.low_.feature_usage()
    assert used[1] > 0 and used[0] == 0


# ------------------------------------------------------------------------------ exact costs
def _path_features(forest: Forest, x: np.ndarray) -> set[int]:
    """Features tested on x's path in every tree (plain traversal, independent of the runtime)."""
    out = set()
    for root in forest.roots:
        node = int(root)
        while forest.feature[node] >= 0:
            f = int(forest.feature[node])
            out.add(f)
            v = x[f]
            left = forest.missing_left[node] if np.isnan(v) else v <= forest.threshold[node]
            node = int(forest.children_left[node] if left else forest.children_right[node])
    return out


def _features(model, x) -> set[int]:
    if isinstance(model, Linear):
        return set(np.flatnonzero(model.coef.any(axis=1)).tolist())
    return _path_features(model, x)


@pytest.mark.parametrize("method", ["gbrt", "lin"])
def test_reported_cost_equals_cost_recomputed_by_hand(method):
    X, y = _binary(500, seed=4, n_features=7)
    names = [f"f{i}" for i in range(7)]
    # a group (one lab panel) and a derived feature needing two others
    costs = CostModel(
        {"f0": 1.0, "f1": 2.0, "f2": 0.5, "f3": 4.0, "f4": 3.0, "f5": 0.0, "panel": 6.0},
        feature_names=names,
        groups={"panel": ["f4", "f6"]},
        dependencies={"f5": ["f1", "f2"]},
    )
    hpc = RandomForestClassifier(n_estimators=8, max_depth=5, random_state=1, n_jobs=1).fit(X, y)
    est = ADAPTClassifier(
        hpc, costs=costs, method=method, p_full=0.4, gamma=1e-4 if method == "gbrt" else 0.05, **FAST
    ).fit(X, y)
    ev = evaluate(est.plan_, X, costs)
    high = Forest.from_model(hpc)
    gate_raw = np.asarray(evaluate(est.gate_, X).raw).reshape(-1)
    for i in range(len(X)):
        feats = _features(est.gate_, X[i])
        feats |= _features(high, X[i]) if gate_raw[i] > 0 else _features(est.low_, X[i])
        units = set()
        for f in feats:
            units.update(costs.closure_units[costs.closure_ptr[f] : costs.closure_ptr[f + 1]].tolist())
        assert ev.cost.feature[i] == pytest.approx(sum(costs.unit_cost[u] for u in units)), i
    assert 0 < ev.cost.mean < costs.acquisition_cost(names)


def test_dense_and_lazy_evaluation_agree(binary):
    X, y, Xt, _, hpc = binary
    est = ADAPTClassifier(hpc, p_full=0.3, **FAST).fit(X, y)
    dense = evaluate(est.plan_, Xt)
    lazy = evaluate(est.plan_, array_provider(Xt), n_rows=len(Xt))
    np.testing.assert_array_equal(dense.labels, lazy.labels)
    np.testing.assert_allclose(dense.cost.total, lazy.cost.total)


# ------------------------------------------------------------------------------ hpc kinds
def test_unfitted_hpc_is_cloned_and_fitted(binary):
    X, y, _, _, _ = binary
    proto = DecisionTreeClassifier(max_depth=3, random_state=0)
    est = ADAPTClassifier(proto, p_full=0.2, **FAST).fit(X, y)
    assert not hasattr(proto, "tree_")
    assert hasattr(est.hpc_, "tree_") and isinstance(est.plan_.high, Full)


class _SignSVC(SVC):
    """An SVC whose probabilities are its hard decision (an honest black box, fast)."""

    def predict_proba(self, X):
        up = self.decision_function(X) > 0
        return np.column_stack([~up, up]).astype(float)


def test_black_box_hpc_is_an_opaque_plan_charged_its_features(binary):
    X, y, Xt, _, _ = binary
    cols = [0, 2, 3]
    svc = _SignSVC(random_state=0).fit(X[:, cols], y)  # it reads three of the six features
    est = ADAPTClassifier(svc, p_full=0.5, hpc_features=cols, **{**FAST, "n_iter": 8}).fit(X, y)
    assert isinstance(est.plan_.high, Opaque)
    ev = evaluate(est.plan_, Xt)
    high = ev.exit == 1
    assert high.any()
    # every example sent on pays exactly the gate's features and the hpc's three
    gate_only = evaluate(est.gate_, Xt).cost.acquired
    expect = gate_only[high] | np.isin(np.arange(6), cols)
    np.testing.assert_array_equal(ev.cost.acquired[high], expect)
    # its labels and probabilities are the black box's, through the plan alone
    np.testing.assert_array_equal(ev.labels[high], svc.predict(Xt[high][:, cols]))
    np.testing.assert_array_equal(est.predict_proba(Xt)[high], svc.predict_proba(Xt[high][:, cols]))
    # unfitted, it is fitted on its columns
    est = ADAPTClassifier(_SignSVC(random_state=0), p_full=0.5, hpc_features=cols, **FAST).fit(X, y)
    assert est.hpc_.n_features_in_ == 3
    with pytest.raises(ValueError, match="fitted on 3 features but hpc_features lists 6"):
        ADAPTClassifier(svc, **FAST).fit(X, y)


def test_errors_name_the_problem(binary):
    X, y, _, _, hpc = binary
    with pytest.raises(ValueError, match="X has 6 features, but costs= prices 3"):
        ADAPTClassifier(hpc, costs=[1.0, 2.0, 3.0], **FAST).fit(X, y)
    with pytest.raises(ValueError, match="cost of feature"):
        ADAPTClassifier(hpc, costs=[1.0, -2.0, 3.0, 1, 1, 1], **FAST).fit(X, y)
    with pytest.raises(InvalidParameterError, match="ADAPTClassifier: method must be a str among"):
        ADAPTClassifier(hpc, method="svm").fit(X, y)
    with pytest.raises(TypeError, match="hpc must be None, an object with predict_proba()"):
        ADAPTClassifier(object(), **FAST).fit(X, y)
    with pytest.raises(ValueError, match="hpc predicts classes"):
        ADAPTClassifier(hpc, **FAST).fit(X, y + 5)
    est = ADAPTClassifier(hpc, **FAST).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(X[:, :4])


def test_an_importer_error_surfaces_instead_of_a_black_box(binary):
    """Only "no importer for this type" makes a black box: a tree model the importer refuses
    raises its error rather than being charged every feature silently."""
    from sklearn.ensemble import GradientBoostingClassifier

    X, y, _, _, _ = binary
    gb = GradientBoostingClassifier(loss="exponential", n_estimators=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="exponential"):
        ADAPTClassifier(gb, **FAST).fit(X, y)


def test_an_hpc_refitted_in_place_is_imported_again(binary):
    X, y, Xt, _, _ = binary
    hpc = DecisionTreeClassifier(max_depth=1, random_state=0).fit(X, y)
    est = ADAPTClassifier(hpc, p_full=0.5, **FAST).fit(X, y)
    assert est.plan_.high.forest.n_nodes == 3
    hpc.set_params(max_depth=5).fit(X, y)  # same object, new trees
    est.fit(X, y)
    fresh = Forest.from_model(hpc)
    assert est.plan_.high.forest.n_nodes == fresh.n_nodes > 3
    np.testing.assert_array_equal(evaluate(est.plan_.high, Xt).raw, evaluate(fresh, Xt).raw)


def test_the_l1_memo_lives_in_one_fit_only(binary):
    """The L1 steps shared across p_full are kept for one budget sweep, never on the estimator
    (nor in its pickle)."""
    X, y, _, _, hpc = binary
    X, y = np.tile(X, (4, 1)), np.tile(y, 4)
    est = ADAPTClassifier(
        hpc, method="l1", budget=1e9, p_full_grid=(0.1, 0.3), gamma_grid=(0.1, 0.01), progress=False
    ).fit(X, y)
    assert len(est.budget_search_) == 4
    assert {k for k in vars(est) if k.startswith("_")} <= {"_high"}
    parts = (est.result_, est.plan_, est.hpc_, est.budget_search_, est.costs_, est.classes_)
    # the memo held a score per training row and gamma (2 x 2400 floats = 38 kB)
    assert len(pickle.dumps(est)) < len(pickle.dumps(parts)) + 4000


# ------------------------------------------------------------------------------ budget
def test_budget_sweeps_the_grids_and_names_the_cheapest_when_none_fits(binary):
    X, y, _, _, hpc = binary
    kw = {"p_full_grid": (0.1, 0.3), "gamma_grid": (1e-2, 1e-3), "random_state": 0, **FAST}
    est = ADAPTClassifier(hpc, budget=6.0, **kw).fit(X, y)
    table = est.budget_search_
    assert len(table) == 4 and set(table["p_full"]) == {0.1, 0.3} and set(table["gamma"]) == {1e-2, 1e-3}
    chosen = table[table["chosen"]].iloc[0]
    assert (est.p_full_, est.gamma_) == (chosen["p_full"], chosen["gamma"])
    with pytest.raises(BudgetError, match="no model meets budget=0"):
        ADAPTClassifier(hpc, budget=0.0, **{**kw, "gamma_grid": (1e-5,)}).fit(X, y)


def test_function_layer_on_arrays(binary):
    from thrifty.train.adapt import ADAPTProblem, adapt_gbrt, adapt_lin

    X, y, Xt, _, hpc = binary
    prob = ADAPTProblem.build(X, y, hpc.predict_proba(X))
    for fit in (
        adapt_gbrt(prob, p_full=0.2, gamma=1e-3, n_estimators=10, n_iter=2),
        adapt_lin(prob, p_full=0.2, gamma=0.01, n_iter=2),
    ):
        assert fit.q.mean() <= 0.2 + 1e-9 and len(fit.history) == 2
        plan = Gated(fit.gate, fit.low, Forest.from_model(hpc))
        assert evaluate(plan, Xt).labels.shape == (len(Xt),)
    with pytest.raises(ValueError, match="one column per class"):
        ADAPTProblem.build(X, y, hpc.predict_proba(X)[:, :1])


# ------------------------------------------------------------------- ADAPT-LIN support cut
def test_truncate_lin_keeps_the_strongest_features_exactly(binary):
    from thrifty.train.adapt import ADAPTProblem, adapt_lin, lin_objective, truncate_lin

    X, y, _, _, hpc = binary
    prob = ADAPTProblem.build(X, y, hpc.predict_proba(X))
    fit = adapt_lin(prob, p_full=0.2, gamma=1e-3, n_iter=5)
    norms = np.linalg.norm(fit.state[:-1], axis=1)
    assert np.count_nonzero(norms) > 2
    cut = truncate_lin(prob, fit, 2, p_full=0.2, gamma=1e-3, n_iter=5)
    kept = np.linalg.norm(cut.state[:-1], axis=1) > 0
    assert kept.sum() <= 2
    # only features among the two strongest (uniform prices) may stay, and none else is paid
    assert set(np.flatnonzero(kept)) <= set(np.argsort(-norms)[:2])
    used = (cut.gate.feature_usage() | cut.low.feature_usage()).astype(bool)
    assert np.array_equal(used, kept)
    assert cut.q.mean() <= 0.2 + 1e-9
    # a fit already within the limit comes back unchanged
    assert truncate_lin(prob, cut, 2, p_full=0.2, gamma=1e-3) is cut
    # the refit keeps the better, by (OPT), of its two starts: the cut parameters and a cold one
    top2 = np.zeros(len(norms), dtype=bool)
    top2[np.argsort(-norms)[:2]] = True
    starts = [
        adapt_lin(prob, p_full=0.2, gamma=1e-3, n_iter=5, init=init, support=top2)
        for init in (fit.state, None)
    ]
    values = [lin_objective(prob, f.state, 0.2, 1e-3) for f in starts]
    assert lin_objective(prob, cut.state, 0.2, 1e-3) == pytest.approx(min(values), rel=1e-12)


def test_lin_objective_matches_its_formula(binary):
    from thrifty.train._adapt_group_sparse import Standardizer
    from thrifty.train._adapt_problem import losses as _losses
    from thrifty.train.adapt import ADAPTProblem, adapt_lin, lin_objective

    X, y, _, _, hpc = binary
    prob = ADAPTProblem.build(X, y, hpc.predict_proba(X))
    fit = adapt_lin(prob, p_full=0.3, gamma=1e-2, n_iter=3)
    P = fit.state
    S = Standardizer(X).transform(X) @ P[:-1] + P[-1]
    A, B = _losses(S[:, 0], S[:, 1:], prob.y, prob.nll0)
    q, _ = q_step(A, B, 0.3)
    expected = _opt1(q, A, B) + 1e-2 * np.sum(prob.feature_prices() * np.linalg.norm(P[:-1], axis=1))
    assert lin_objective(prob, P, 0.3, 1e-2) == pytest.approx(expected, rel=1e-9)
    # and q at its optimum: any other feasible q gives a larger (OPT1) value
    other = np.clip(q * 0.5, 0, 1)
    assert _opt1(other, A, B) > _opt1(q, A, B)


def test_max_features_applies_to_lin_only(binary):
    X, y, _, _, hpc = binary
    with pytest.raises(InvalidParameterError, match="max_features applies to method='lin' only"):
        ADAPTClassifier(hpc, method="gbrt", max_features=2, **FAST).fit(X, y)
    with pytest.raises(InvalidParameterError, match="max_features must be an int >= 1 or None, got 0"):
        ADAPTClassifier(hpc, method="lin", max_features=0, **FAST).fit(X, y)
    est = ADAPTClassifier(hpc, method="lin", gamma=1e-3, max_features=1, **FAST).fit(X, y)
    assert (est.gate_.feature_usage() | est.low_.feature_usage()).astype(bool).sum() == 1


# ------------------------------------------------------------------------------ sample weights
@pytest.mark.parametrize("method", ["gbrt", "lin", "l1"])
def test_integer_weights_equal_repeated_rows_and_zero_drops_the_row(binary, method):
    X, y, Xt, _, hpc = binary
    X, y = X[:300], y[:300]
    w = np.random.default_rng(0).integers(0, 4, size=len(y))  # a quarter of the rows dropped
    kw = {"method": method, "p_full": 0.3, **({} if method == "l1" else FAST)}
    weighted = ADAPTClassifier(hpc, **kw).fit(X, y, sample_weight=w)
    repeated = ADAPTClassifier(hpc, **kw).fit(np.repeat(X, w, axis=0), np.repeat(y, w))
    np.testing.assert_array_equal(weighted.route(Xt), repeated.route(Xt))
    np.testing.assert_array_equal(weighted.predict(Xt), repeated.predict(Xt))
    np.testing.assert_allclose(weighted.predict_proba(Xt), repeated.predict_proba(Xt), rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(
        np.repeat(weighted.result_.q, w[w > 0]), repeated.result_.q, rtol=1e-6, atol=1e-9
    )
    # and the weights matter: unweighted, the same rows give another model
    plain = ADAPTClassifier(hpc, **kw).fit(X, y)
    assert not np.allclose(plain.predict_proba(Xt), weighted.predict_proba(Xt))


def test_weighted_calibration_measures_weighted_cost_and_accuracy(binary):
    X, y, Xt, yt, hpc = binary
    w = np.where(yt == 1, 3.0, 1.0)
    est = ADAPTClassifier(hpc, budget=1e9, p_full_grid=(0.3,), gamma_grid=(1e-3,), **FAST).fit(
        X, y, calibration=(Xt, yt, w)
    )
    ev = evaluate(est.plan_, Xt)
    row = est.budget_search_.iloc[0]
    assert row["cost"] == pytest.approx(np.average(ev.cost.total, weights=w))
    assert row["metric"] == pytest.approx(np.average(est.predict(Xt) == yt, weights=w))


# ------------------------------------------------------------------------------ input kinds
def _categorical_frame(n, seed):
    import pandas as pd

    rng = np.random.default_rng(seed)
    colour = rng.choice(["red", "green", "blue"], size=n)
    x1, x2 = rng.standard_normal(n), rng.standard_normal(n)
    y = ((colour == "red") ^ (x1 > 0.3)).astype(int)
    X = pd.DataFrame(
        {"colour": pd.Categorical(colour, categories=["blue", "green", "red"]), "x1": x1, "x2": x2}
    )
    return X, y


@pytest.mark.parametrize("kind", ["budgetrf", "lightgbm"])
def test_a_categorical_frame_goes_through_to_the_hpc(kind):
    X, y = _categorical_frame(600, 0)
    Xt, yt = _categorical_frame(300, 1)
    costs = {"colour": 1.0, "x1": 2.0, "x2": 4.0}
    if kind == "budgetrf":
        hpc = BudgetRFClassifier(10, costs=costs, max_depth=6, random_state=0, progress=False)
    else:
        lightgbm = pytest.importorskip("lightgbm")
        hpc = lightgbm.LGBMClassifier(
            n_estimators=20, num_leaves=8, min_child_samples=5, n_jobs=1, verbose=-1
        )
    hpc.fit(X, y)
    est = ADAPTClassifier(hpc, costs=costs, p_full=0.3, **FAST).fit(X, y)
    assert list(est.feature_names_in_) == ["colour", "x1", "x2"]
    assert est.costs_.feature_costs.tolist() == [1.0, 2.0, 4.0]
    # the gate and f1 split on the hpc's category codes; a frame with the categories in
    # another order is coded the same way
    shuffled = Xt.assign(colour=Xt["colour"].cat.reorder_categories(["red", "blue", "green"]))
    np.testing.assert_array_equal(est.predict(Xt), est.predict(shuffled))
    assert np.mean(est.predict(Xt) == yt) > 0.9
    with pytest.raises(ValueError, match="method='lin' needs numeric features"):
        ADAPTClassifier(hpc, method="lin", **FAST).fit(X, y)


@pytest.mark.parametrize("module", ["polars", "pyarrow"])
def test_polars_and_pyarrow_frames_equal_pandas(binary, module):
    import pandas as pd

    lib = pytest.importorskip(module)
    X, y, Xt, _, hpc = binary
    names = [f"f{i}" for i in range(X.shape[1])]
    frame = pd.DataFrame(X, columns=names)
    hpc = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(frame, y)
    ref = ADAPTClassifier(hpc, **FAST).fit(frame, y).predict_proba(pd.DataFrame(Xt, columns=names))
    convert = lib.Table.from_pandas if module == "pyarrow" else lib.from_pandas
    est = ADAPTClassifier(hpc, **FAST).fit(convert(frame), y)
    assert list(est.feature_names_in_) == names
    np.testing.assert_array_equal(est.predict_proba(convert(pd.DataFrame(Xt, columns=names))), ref)
