"""Opaque plans: a black-box model charged a fixed set of features on every example."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

import thrifty
from tests._helpers.reference import random_forest, walk
from tests._helpers.runtime_costs import N_FEATURES, REF, cost_model, lazy_provider
from thrifty import Full, Gated, Opaque, Sequential, evaluate
from thrifty.exceptions import InputError, InvalidParameterError

# The black box reads features 0, 2 and 4: 4 is derived from 0 and 3 (so 3 is paid too).
FEATURES = [4, 0, 2]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, N_FEATURES))
    y = (X[:, 0] - X[:, 2] + 0.3 * X[:, 4] > 0).astype(int)
    y3 = np.digitize(X[:, 0] + X[:, 4], [-0.5, 0.5])
    lr = LogisticRegression().fit(X[:, FEATURES], y)
    lr3 = LogisticRegression().fit(X[:, sorted(FEATURES)], y3)
    return X, lr, lr3


def binary(lr: LogisticRegression) -> Opaque:
    return Opaque(
        lr.decision_function,
        FEATURES,
        n_features=N_FEATURES,
        link="sigmoid",
        task="binary",
        classes=lr.classes_,
    )


def model_view(X: np.ndarray) -> np.ndarray:
    """What the black box is given: its features, in the order listed."""
    return np.ascontiguousarray(X[:, FEATURES])


def test_predictions_and_costs_are_the_models(data):
    X, lr, lr3 = data
    costs = cost_model(tree_cost=1.0)
    ev = evaluate(binary(lr), X, costs)
    Z = model_view(X)
    # Exact equality up to the BLAS's summation order (it depends on the batch's memory layout).
    np.testing.assert_allclose(ev.raw, lr.decision_function(Z), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ev.labels, lr.predict(Z))
    np.testing.assert_allclose(ev.proba, lr.predict_proba(Z), rtol=0, atol=1e-12)
    # Every row pays for exactly the listed features and what they require; no tree, no node.
    paid = REF.price(set(FEATURES))
    assert paid == 1.0 + 5.0 + 8.0 + 0.5  # x0, the panel (x1 and x2), x3 (x4 needs it), x4
    np.testing.assert_allclose(ev.cost.feature, paid, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ev.cost.total, ev.cost.feature)
    np.testing.assert_array_equal(ev.cost.n_trees, 0)
    acquired = np.zeros(N_FEATURES, dtype=bool)
    acquired[sorted(REF.acquired(set(FEATURES)))] = True
    np.testing.assert_array_equal(ev.cost.acquired, np.tile(acquired, (len(X), 1)))

    # Multiclass, features as a mask (listed in ascending order: the columns the model sees).
    mask = np.isin(np.arange(N_FEATURES), FEATURES)
    multi = Opaque(lr3.predict_proba, mask, width=3, link="proba", task="multiclass", classes=lr3.classes_)
    assert multi.features.tolist() == sorted(FEATURES)
    ev3 = evaluate(multi, X, costs)
    Z3 = np.ascontiguousarray(X[:, mask])
    np.testing.assert_allclose(ev3.proba, lr3.predict_proba(Z3), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(ev3.labels, lr3.predict(Z3))
    np.testing.assert_allclose(ev3.cost.feature, paid, rtol=0, atol=1e-12)


def test_lazy_fetches_only_its_features_and_matches_dense(data):
    X, lr, _ = data
    plan, costs = binary(lr), cost_model()
    provider, calls = lazy_provider(X)
    lazy = evaluate(plan, provider, costs, n_rows=len(X))
    dense = evaluate(plan, X, costs)
    np.testing.assert_allclose(lazy.raw, dense.raw, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(lazy.labels, dense.labels)
    np.testing.assert_array_equal(lazy.cost.feature, dense.cost.feature)
    np.testing.assert_array_equal(lazy.cost.acquired, dense.cost.acquired)
    assert sorted(calls) == sorted((r, f) for r in range(len(X)) for f in FEATURES)
    # No rows: the black box is never called.
    assert evaluate(plan, X[:0], costs).raw.shape == (0,)
    assert evaluate(plan, provider, costs, n_rows=0).raw.shape == (0,)


def test_a_gated_branch_charges_its_features_after_the_gate(data):
    X, lr, _ = data
    rng = np.random.default_rng(5)
    gate = random_forest(rng, N_FEATURES, n_trees=3, categorical=False)
    high = random_forest(rng, N_FEATURES, n_trees=4, categorical=False)
    plan = Gated(Full(gate), binary(lr), Sequential(high))
    costs = cost_model(tree_cost=1.0)
    ev = evaluate(plan, X, costs)
    Z = model_view(X)
    low_raw = lr.decision_function(Z)
    for i, x in enumerate(X):
        touched: list[int] = []
        g = gate.base_score[0]
        for t in range(gate.n_trees):
            leaf, _ = walk(gate, x, t, touched)
            g += gate.tree_weight[t] * gate.value[leaf, 0]
        route, trees = int(g > 0), gate.n_trees
        assert ev.exit[i] == route
        if route:
            s = high.base_score[0]
            for t in range(high.n_trees):
                leaf, _ = walk(high, x, t, touched)
                s += high.tree_weight[t] * high.value[leaf, 0]
            trees += high.n_trees
            assert ev.raw[i] == pytest.approx(s, abs=1e-12)
        else:
            touched.extend(FEATURES)
            assert ev.raw[i] == pytest.approx(low_raw[i], abs=1e-12)
        # Features the gate acquired are not paid twice (groups and dependencies included).
        assert ev.cost.feature[i] == pytest.approx(REF.price(set(touched)), abs=1e-12)
        assert ev.cost.n_trees[i] == trees
    assert 0 < ev.exit.mean() < 1, "the test should route rows both ways"
    np.testing.assert_array_equal(ev.labels, np.where(ev.exit == 1, ev.labels, lr.predict(Z)))

    # Compiled: the forests natively, the black box on the interpreter; the same results.
    compiled = thrifty.compile(plan, costs)
    assert not compiled.native
    again = compiled.evaluate(X)
    for name in ("raw", "exit", "labels", "proba"):
        np.testing.assert_array_equal(getattr(again, name), getattr(ev, name), err_msg=name)
    np.testing.assert_array_equal(again.cost.total, ev.cost.total)
    lazy = evaluate(plan, lazy_provider(X)[0], costs, n_rows=len(X))
    np.testing.assert_array_equal(lazy.exit, ev.exit)
    np.testing.assert_allclose(lazy.raw, ev.raw, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(lazy.cost.total, ev.cost.total)


def test_save_refuses_and_pickle_round_trips(data, tmp_path):
    X, lr, _ = data
    plan = binary(lr)
    with pytest.raises(InputError, match="cannot be saved as JSON"):
        thrifty.save(plan, tmp_path / "opaque.json")
    rng = np.random.default_rng(0)
    with pytest.raises(InputError, match="cannot be saved as JSON"):
        thrifty.save(Gated(Full(random_forest(rng, N_FEATURES)), plan, plan), tmp_path / "gated.json")
    back = pickle.loads(pickle.dumps(plan))
    np.testing.assert_array_equal(evaluate(back, X).raw, evaluate(plan, X).raw)


def test_bad_input_is_refused(data):
    X, lr, _ = data
    with pytest.raises(InvalidParameterError, match="callable"):
        Opaque(lr, FEATURES, n_features=N_FEATURES)
    with pytest.raises(InputError, match="n_features="):
        Opaque(lr.decision_function, FEATURES)
    with pytest.raises(InputError, match=r"indices in \[0, 6\)"):
        Opaque(lr.decision_function, [0, 6], n_features=N_FEATURES)
    with pytest.raises(InputError, match="more than once"):
        Opaque(lr.decision_function, [0, 0], n_features=N_FEATURES)
    with pytest.raises(InputError, match="unknown link"):
        Opaque(lr.decision_function, FEATURES, n_features=N_FEATURES, link="logit")
    wrong = Opaque(lr.predict_proba, FEATURES, n_features=N_FEATURES, task="binary", link="proba")
    with pytest.raises(InputError, match=r"returned shape \(300, 2\).*\(300, 1\)"):
        evaluate(wrong, X)
    nan = Opaque(lambda Z: np.full(len(Z), np.nan), FEATURES, n_features=N_FEATURES)
    with pytest.raises(InputError, match="NaN"):
        evaluate(nan, X)
