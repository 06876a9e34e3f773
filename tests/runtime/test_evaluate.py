"""The runtime against a pure-Python reference: predictions, exits and exact costs, dense and lazy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._helpers.reference import (
    random_forest,
    random_inputs,
    reference_cascade,
    reference_sequential,
    walk,
)
from tests._helpers.runtime_costs import N_FEATURES, PRICES, REF, cost_model, lazy_provider
from thrifty import Cascade, CostModel, Full, Gated, Linear, Sequential, evaluate
from thrifty.runtime import plan_from_dict


def check_costs(ev, touched_per_row, nodes_per_row, trees_per_row, costs):
    expected_feat = np.array([REF.price(set(t)) for t in touched_per_row])
    np.testing.assert_allclose(ev.cost.feature, expected_feat, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ev.cost.n_nodes, nodes_per_row)
    np.testing.assert_array_equal(ev.cost.n_trees, trees_per_row)
    np.testing.assert_allclose(
        ev.cost.total,
        expected_feat
        + costs.tree_cost * np.asarray(trees_per_row)
        + costs.split_cost * np.asarray(nodes_per_row),
        atol=1e-9,
    )
    for i, t in enumerate(touched_per_row):
        assert set(np.flatnonzero(ev.cost.acquired[i])) == REF.acquired(set(t))


def check_lazy(plan, X, costs, ev, touched_per_row):
    provider, calls = lazy_provider(X)
    lz = evaluate(plan, provider, costs, n_rows=len(X))
    np.testing.assert_array_equal(lz.raw, ev.raw)
    np.testing.assert_array_equal(lz.exit, ev.exit)
    np.testing.assert_array_equal(lz.cost.total, ev.cost.total)
    np.testing.assert_array_equal(lz.cost.acquired, ev.cost.acquired)
    if ev.labels is not None:
        np.testing.assert_array_equal(lz.labels, ev.labels)
    assert len(calls) == len(set(calls)), "provider asked twice for the same (row, feature)"
    assert set(calls) == {(i, f) for i, t in enumerate(touched_per_row) for f in set(t)}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.sampled_from([0, 1, 7, 60]),
    float32=st.booleans(),
    outputs=st.sampled_from([1, 1, 3]),
)
def test_full_matches_reference(seed, n, float32, outputs):
    rng = np.random.default_rng(seed)
    forest = random_forest(rng, N_FEATURES, n_trees=9, n_outputs=outputs, float32=float32)
    X = random_inputs(rng, n, N_FEATURES)
    costs = cost_model(tree_cost=0.25, split_cost=0.125)
    ev = evaluate(forest, X, costs)
    T = forest.n_trees
    ref = reference_sequential(forest, X, np.arange(T), np.full(T, np.inf), np.full(T, -np.inf))
    raw = np.array([r[0] for r in ref]).reshape(n, outputs)
    np.testing.assert_allclose(ev.raw.reshape(n, outputs), raw, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(forest.predict_raw(X).reshape(n, outputs), raw, rtol=1e-12, atol=1e-12)
    check_costs(ev, [r[3] for r in ref], [r[4] for r in ref], [T] * n, costs)
    assert ev.proba.shape == (n, max(2, outputs))
    check_lazy(Full(forest), X, costs, ev, [r[3] for r in ref])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([0, 1, 40]))
def test_sequential_matches_reference(seed, n):
    rng = np.random.default_rng(seed)
    forest = random_forest(rng, N_FEATURES, n_trees=10)
    X = random_inputs(rng, n, N_FEATURES)
    order = rng.permutation(10)[: int(rng.integers(1, 11))]
    lo = rng.uniform(-3, 0, size=len(order))
    hi = lo + rng.uniform(0, 4, size=len(order))
    hi[rng.random(len(order)) < 0.3] = np.inf
    plan = Sequential(forest, order, hi, lo)
    costs = cost_model(tree_cost=1.0)
    ev = evaluate(plan, X, costs)
    ref = reference_sequential(forest, X, order, hi, lo)
    np.testing.assert_allclose(ev.raw, [r[0][0] for r in ref], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ev.exit, [r[1] for r in ref])
    expected_labels = [(d > 0) if d else (r[0][0] > 0) for r, d in ((r, r[2]) for r in ref)]
    np.testing.assert_array_equal(ev.labels, np.asarray(expected_labels, dtype=int))
    check_costs(ev, [r[3] for r in ref], [r[4] for r in ref], [r[1] for r in ref], costs)
    check_lazy(plan, X, costs, ev, [r[3] for r in ref])
    again = plan_from_dict(plan.to_dict())
    np.testing.assert_array_equal(evaluate(again, X, costs).raw, ev.raw)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([0, 1, 40]), stages=st.integers(1, 4))
def test_cascade_matches_reference(seed, n, stages):
    rng = np.random.default_rng(seed)
    forest = random_forest(rng, N_FEATURES, n_trees=8)
    X = random_inputs(rng, n, N_FEATURES)
    W = rng.normal(size=(stages, 8)) * (rng.random((stages, 8)) < 0.5)
    if stages > 1:
        W[0] = 0.0  # an all-zero stage costs nothing and passes everything below its threshold
    thr = rng.normal(size=stages) - 0.5
    thr[0] = -np.inf if stages > 1 else thr[0]
    bias = rng.normal(size=stages)
    plan = Cascade(forest, W, thr, bias)
    costs = cost_model(tree_cost=1.0, split_cost=0.5)
    ev = evaluate(plan, X, costs)
    ref = reference_cascade(forest, X, W, thr, bias)
    np.testing.assert_allclose(ev.raw, [r[0] for r in ref], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ev.exit, [r[1] for r in ref])
    np.testing.assert_array_equal(ev.labels, [int(r[2] > 0) for r in ref])
    check_costs(ev, [r[3] for r in ref], [r[4] for r in ref], [r[5] for r in ref], costs)
    check_lazy(plan, X, costs, ev, [r[3] for r in ref])
    np.testing.assert_array_equal(evaluate(plan_from_dict(plan.to_dict()), X, costs).raw, ev.raw)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([0, 1, 50]), linear_low=st.booleans())
def test_gated_matches_reference(seed, n, linear_low):
    rng = np.random.default_rng(seed)
    gate = random_forest(rng, N_FEATURES, n_trees=2, max_depth=2)
    high = random_forest(rng, N_FEATURES, n_trees=6)
    if linear_low:
        coef = np.zeros(N_FEATURES)
        coef[[0, 5]] = rng.normal(size=2)
        low = Linear(coef, 0.1, link="sigmoid", task="binary")
        X = rng.normal(size=(n, N_FEATURES))  # a linear model needs finite inputs
    else:
        low = random_forest(rng, N_FEATURES, n_trees=2)
        X = random_inputs(rng, n, N_FEATURES)
    plan = Gated(gate, low, high)
    costs = cost_model(tree_cost=1.0)
    ev = evaluate(plan, X, costs)
    touched, trees, raws, routes = [], [], [], []
    for x in X:
        t: list[int] = []
        g = gate.base_score[0]
        for j in range(gate.n_trees):
            leaf, _ = walk(gate, x, j, t)
            g += gate.tree_weight[j] * gate.value[leaf, 0]
        route = int(g > 0)
        model = high if route else low
        ntrees = gate.n_trees
        if isinstance(model, Linear):
            t.extend(np.flatnonzero(model.coef[:, 0]).tolist())
            raws.append(model.intercept[0] + x @ model.coef[:, 0])
        else:
            s = model.base_score[0]
            for j in range(model.n_trees):
                leaf, _ = walk(model, x, j, t)
                s += model.tree_weight[j] * model.value[leaf, 0]
            raws.append(s)
            ntrees += model.n_trees
        touched.append(t)
        trees.append(ntrees)
        routes.append(route)
    np.testing.assert_allclose(ev.raw, raws, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ev.exit, routes)
    np.testing.assert_array_equal(ev.cost.n_trees, trees)
    np.testing.assert_allclose(ev.cost.feature, [REF.price(set(t)) for t in touched], atol=1e-12)
    check_lazy(plan, X, costs, ev, touched)
    np.testing.assert_allclose(evaluate(plan_from_dict(plan.to_dict()), X, costs).raw, ev.raw)


def test_chunking_changes_nothing():
    rng = np.random.default_rng(3)
    forest = random_forest(rng, N_FEATURES, n_trees=12)
    X = random_inputs(rng, 1000, N_FEATURES)
    costs = cost_model(tree_cost=1.0)
    whole = evaluate(forest, X, costs)
    chunked = evaluate(forest, X, costs, chunk_size=97, n_threads=1)
    np.testing.assert_array_equal(whole.raw, chunked.raw)
    np.testing.assert_array_equal(whole.cost.total, chunked.cost.total)
    provider, calls = lazy_provider(X)
    lazy = evaluate(forest, provider, costs, n_rows=1000, chunk_size=333)
    np.testing.assert_array_equal(lazy.cost.acquired, whole.cost.acquired)
    assert len(calls) == len(set(calls))


def test_feature_reused_across_trees_is_paid_once():
    # Two stumps on the same feature: the second test of feature 0 is free.
    rng = np.random.default_rng(0)
    forest = random_forest(rng, 1, n_trees=1, max_depth=1, categorical=False)
    stump = forest.subset([0, 0]) if forest.feature[forest.roots[0]] >= 0 else None
    if stump is None:
        pytest.skip("the random tree was a single leaf")
    ev = evaluate(stump, np.zeros((3, 1)), CostModel([7.0]))
    np.testing.assert_array_equal(ev.cost.feature, [7.0, 7.0, 7.0])
    np.testing.assert_array_equal(ev.cost.n_nodes, [2, 2, 2])


def test_fixed_costs_are_paid_once_per_model():
    rng = np.random.default_rng(1)
    forest = random_forest(rng, N_FEATURES, n_trees=6)
    fixed = np.arange(N_FEATURES, dtype=float) * 10
    ev = evaluate(forest, random_inputs(rng, 5, N_FEATURES), CostModel(PRICES, fixed_costs=fixed))
    assert ev.cost.fixed == pytest.approx(fixed[forest.feature_usage() > 0].sum())


def test_bad_inputs_give_clear_errors():
    rng = np.random.default_rng(0)
    forest = random_forest(rng, N_FEATURES, n_trees=3)
    with pytest.raises(ValueError, match="expects 6"):
        evaluate(forest, np.zeros((2, 5)))
    with pytest.raises(ValueError, match="2-dimensional"):
        evaluate(forest, np.zeros(6))
    with pytest.raises(ValueError, match="n_rows"):
        evaluate(forest, lambda f, r: np.zeros((len(r), len(f))))
    with pytest.raises(ValueError, match="returned shape"):
        evaluate(forest, lambda f, r: np.zeros(3), n_rows=10)
    with pytest.raises(ValueError, match="prices 5 features"):
        evaluate(forest, np.zeros((2, 6)), CostModel(np.ones(5)))
    with pytest.raises(TypeError, match="CostModel"):
        evaluate(forest, np.zeros((2, 6)), costs=np.ones(6))
    with pytest.raises(ValueError, match="exceeds eps_pos"):
        Sequential(forest, [0, 1], [0.0, 0.0], [1.0, -1.0])
    with pytest.raises(ValueError, match="more than once"):
        Sequential(forest, [0, 0])
    with pytest.raises(ValueError, match="eps_neg must be -inf"):
        Sequential(random_forest(rng, N_FEATURES, n_outputs=3), eps_neg=np.zeros(8))
    with pytest.raises(ValueError, match="shape"):
        Cascade(forest, np.ones((2, 4)), [0.0, 0.0])
    with pytest.raises(TypeError, match="Forest.from_model"):
        Full("not a forest")


def test_dataframe_inputs_are_matched_by_name():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(5)
    forest = random_forest(rng, N_FEATURES, n_trees=4, categorical=False)
    forest.feature_names = [f"x{i}" for i in range(N_FEATURES)]
    X = rng.normal(size=(20, N_FEATURES))
    df = pd.DataFrame(X, columns=forest.feature_names)[list(reversed(forest.feature_names))]
    np.testing.assert_array_equal(evaluate(forest, df).raw, evaluate(forest, X).raw)
    with pytest.raises(ValueError, match="x0"):
        evaluate(forest, df.rename(columns={"x0": "age"}))


def test_imported_lightgbm_model_dense_lazy_and_reference():
    """A real model with categorical splits and NaN: runtime == reference == LightGBM."""
    lgb = pytest.importorskip("lightgbm")
    pd = pytest.importorskip("pandas")
    from thrifty import Forest
    from thrifty.runtime import array_provider

    rng = np.random.default_rng(11)
    n = 400
    df = pd.DataFrame(
        {
            "a": rng.normal(size=n),
            "b": rng.normal(size=n),
            "c": pd.Categorical(rng.choice(list("pqrst"), size=n)),
        }
    )
    df.loc[rng.random(n) < 0.1, "a"] = np.nan
    y = ((df["a"].fillna(0) > 0) ^ df["c"].isin(["p", "q"])).astype(int)
    model = lgb.LGBMClassifier(
        n_estimators=15, num_leaves=6, min_data_per_group=5, cat_smooth=1, verbose=-1
    ).fit(df, y)
    forest = Forest.from_model(model)
    assert (forest.cat_start >= 0).any(), "the model should have categorical splits"
    costs = CostModel({"a": 1.0, "b": 2.0, "c": 4.0}, feature_names=["a", "b", "c"], tree_cost=0.1)
    ev = evaluate(model, df, costs)
    np.testing.assert_allclose(ev.raw, model.predict(df, raw_score=True), rtol=1e-12)
    M = forest._as_matrix(df)
    touched = []
    for x in M:
        t: list[int] = []
        for j in range(forest.n_trees):
            walk(forest, x, j, t)
        touched.append(set(t))
    np.testing.assert_allclose(ev.cost.feature, [sum(costs.feature_costs[list(t)]) for t in touched])
    lazy = evaluate(forest, array_provider(df, forest), costs, n_rows=n)
    np.testing.assert_array_equal(lazy.raw, ev.raw)
    np.testing.assert_array_equal(lazy.cost.total, ev.cost.total)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([1, 40]))
def test_binned_exits_match_reference(seed, n):
    from thrifty.runtime import BinnedExits

    rng = np.random.default_rng(seed)
    forest = random_forest(rng, N_FEATURES, n_trees=8)
    X = random_inputs(rng, n, N_FEATURES)
    order = rng.permutation(8)
    width = np.where(rng.random(8) < 0.7, rng.choice([0.25, 0.5, 1.0], size=8), 0.0)
    tables = []
    for w in width:
        table = {}
        if w > 0:
            for b in range(-8, 8):
                if rng.random() < 0.7:  # the other bins are unseen: the row is evaluated in full
                    lo = rng.normal()
                    table[b] = (lo + abs(rng.normal()), lo)
        tables.append(table)
    eps_pos = np.where(rng.random(8) < 0.3, rng.uniform(1, 3, 8), np.inf)
    plan = Sequential(forest, order, eps_pos, np.full(8, -np.inf), bins=BinnedExits(width, tables))
    ev = evaluate(plan, X, cost_model())
    for i, x in enumerate(X):
        g, touched, frozen, decision, p = forest.base_score[0], [], False, 0, 0
        for p, t in enumerate(order, start=1):
            leaf, _ = walk(forest, x, t, touched)
            g += forest.tree_weight[t] * forest.value[leaf, 0]
            if frozen:
                continue
            if g > eps_pos[p - 1]:
                decision = 1
                break
            if width[p - 1] > 0:
                b = np.floor(g / width[p - 1])
                if not np.isfinite(b) or int(b) not in tables[p - 1]:
                    frozen = True
                    continue
                hi, lo = tables[p - 1][int(b)]
                if g > hi:
                    decision = 1
                    break
                if g < lo:
                    decision = -1
                    break
        assert ev.raw[i] == pytest.approx(g, rel=1e-12, abs=1e-12)
        assert ev.exit[i] == p
        assert ev.labels[i] == (decision > 0 if decision else g > 0)
        assert ev.cost.feature[i] == pytest.approx(REF.price(set(touched)))
    provider, calls = lazy_provider(X)
    lazy = evaluate(plan, provider, cost_model(), n_rows=n)
    np.testing.assert_array_equal(lazy.raw, ev.raw)
    np.testing.assert_array_equal(lazy.exit, ev.exit)
    np.testing.assert_array_equal(evaluate(plan_from_dict(plan.to_dict()), X).raw, ev.raw)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.sampled_from([1, 40]))
def test_multiclass_sequential_exits_on_the_margin(seed, n):
    rng = np.random.default_rng(seed)
    forest = random_forest(rng, N_FEATURES, n_trees=9, n_outputs=3)
    X = random_inputs(rng, n, N_FEATURES)
    order = rng.permutation(9)
    eps = np.where(rng.random(9) < 0.5, rng.uniform(0, 2, 9), np.inf)
    plan = Sequential(forest, order, eps)
    ev = evaluate(plan, X, cost_model())
    ref = reference_sequential(forest, X, order, eps, np.full(9, -np.inf))
    np.testing.assert_allclose(ev.raw, [r[0] for r in ref], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ev.exit, [r[1] for r in ref])
    np.testing.assert_array_equal(ev.labels, [int(np.argmax(r[0])) for r in ref])
    check_costs(ev, [r[3] for r in ref], [r[4] for r in ref], [r[1] for r in ref], cost_model())
    check_lazy(plan, X, cost_model(), ev, [r[3] for r in ref])


def test_gated_classes_must_agree_and_come_from_either_model():
    rng = np.random.default_rng(0)
    gate = random_forest(rng, N_FEATURES, n_trees=1)
    coef = np.zeros(N_FEATURES)
    coef[0] = 1.0
    low = Linear(coef, link="sigmoid", task="binary", classes=["no", "yes"])
    high = Linear(-coef, link="sigmoid", task="binary", classes=["yes", "no"])
    with pytest.raises(ValueError, match="same classes in the same order"):
        Gated(gate, low, high)
    # A high model that does not name its classes takes low's: the labels are strings.
    plan = Gated(gate, low, Linear(-coef, link="sigmoid", task="binary"))
    assert list(plan.classes) == ["no", "yes"]
    labels = evaluate(plan, rng.normal(size=(20, N_FEATURES))).labels
    assert set(labels) <= {"no", "yes"}
