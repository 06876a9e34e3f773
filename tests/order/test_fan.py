"""Fan et al.'s dynamic scheduling (QWYC paper, Appendix C) against a direct implementation."""

from __future__ import annotations

import numpy as np
import pytest

from thrifty import evaluate
from thrifty.forest import Forest
from thrifty.order.fan import bin_tables, fan

lgb = pytest.importorskip("lightgbm")


@pytest.fixture(scope="module")
def model_and_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * rng.normal(size=600) > 0.5).astype(int)
    model = lgb.LGBMClassifier(n_estimators=40, num_leaves=8, learning_rate=0.2, verbose=-1).fit(X, y)
    return Forest.from_model(model), X


def brute_force_tables(G, width, gamma, beta):
    tables = []
    for r in range(G.shape[1]):
        groups: dict[int, list[float]] = {}
        for g, f in zip(G[:, r], G[:, -1]):
            groups.setdefault(int(np.floor(g / width)), []).append(g - f)
        tables.append(
            {
                b: (beta + np.mean(d) + gamma * np.std(d), beta + np.mean(d) - gamma * np.std(d))
                for b, d in groups.items()
            }
        )
    return tables


def test_bin_statistics_equal_brute_force():
    rng = np.random.default_rng(1)
    G = np.cumsum(rng.normal(scale=0.3, size=(50, 6)), axis=1)
    got = bin_tables(G, 0.25, 1.5, 0.0)
    want = brute_force_tables(G, 0.25, 1.5, 0.0)
    assert [sorted(t) for t in got] == [sorted(t) for t in want]
    for g, w in zip(got, want):
        for b in w:
            np.testing.assert_allclose(g[b], w[b], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(
    "gamma, width",
    [
        (0.0, 0.05),  # thresholds at the bin means: many exits
        (2.0, 0.05),  # the usual confidence
        (3.0, 0.5),  # wide bins
    ],
)
def test_plan_applies_the_decision_rule(model_and_data, gamma, width):
    forest, X = model_and_data
    order = np.random.default_rng(2).permutation(forest.n_trees)
    plan = fan(forest, X, order=order, bin_width=width, gamma=gamma)
    X_new = np.random.default_rng(3).normal(size=(300, 5)) * 1.3  # some bins unseen
    ev = evaluate(plan, X_new)
    leaves = forest.apply(X_new)
    tables = plan.bins.tables()
    for i in range(len(X_new)):
        g, frozen, decision, p = forest.base_score[0], False, 0, 0
        for p, t in enumerate(order, start=1):
            g += forest.tree_weight[t] * forest.value[leaves[i, t], 0]
            if frozen:
                continue
            b = int(np.floor(g / width))
            if b not in tables[p - 1]:
                frozen = True  # Fan et al.: a bin missing from the table -> full evaluation
                continue
            hi, lo = tables[p - 1][b]
            if g > hi or g < lo:
                decision = 1 if g > hi else -1
                break
        assert ev.exit[i] == p
        assert ev.labels[i] == (decision > 0 if decision else g > 0)


def test_larger_gamma_is_more_faithful_and_slower(model_and_data):
    forest, X = model_and_data
    full = forest.predict(X)
    results = []
    for gamma in (0.0, 1.0, 3.0):
        ev = evaluate(fan(forest, X, bin_width=0.05, gamma=gamma), X)
        results.append(((ev.labels != full).mean(), ev.cost.n_trees.mean()))
    assert results[0][1] < forest.n_trees  # exits do happen
    assert results[0][0] >= results[1][0] >= results[2][0]
    assert results[0][1] <= results[1][1] <= results[2][1]


def test_bad_arguments(model_and_data):
    forest, X = model_and_data
    with pytest.raises(ValueError, match="bin_width"):
        fan(forest, X, bin_width=0)
    with pytest.raises(ValueError, match="gamma"):
        fan(forest, X, gamma=-1)
    with pytest.raises(ValueError, match="permutation"):
        fan(forest, X, order=[0, 0, 1])
    with pytest.raises(ValueError, match="at least one"):
        fan(forest, X[:0])


# ------------------------------------------------------------------------------ multiclass
K, ROUNDS = 3, 15


@pytest.fixture(scope="module")
def multiclass():
    from sklearn.datasets import make_classification

    X, y = make_classification(500, 6, n_informative=4, n_classes=K, flip_y=0.05, random_state=4)
    booster = lgb.train(
        dict(objective="multiclass", num_class=K, num_leaves=6, learning_rate=0.2, verbose=-1, num_threads=1),
        lgb.Dataset(X, y),
        ROUNDS,
    )
    return booster, X


def brute_force_margin_threshold(booster, X, rounds_done, width, gamma):
    """Fan's rule on the leading class's margin, one example and one bin at a time, with
    LightGBM's own partial scores."""
    G = booster.predict(X, raw_score=True, num_iteration=rounds_done)
    F = booster.predict(X, raw_score=True)
    rows = []
    for g, f in zip(G, F):
        c = int(np.argmax(g))
        m = g[c] - max(g[j] for j in range(K) if j != c)
        M = f[c] - max(f[j] for j in range(K) if j != c)
        rows.append((m, m - M))
    groups: dict[int, list[float]] = {}
    for m, d in rows:
        groups.setdefault(int(np.floor(m / width)), []).append(d)
    kept = [
        m
        for m, _ in rows
        if not m
        > np.mean(groups[int(np.floor(m / width))]) + gamma * np.std(groups[int(np.floor(m / width))])
    ]
    return max([0.0, *kept])


@pytest.mark.parametrize("gamma, width", [(0.0, 0.1), (2.0, 0.1), (1.0, 0.5)])
def test_multiclass_thresholds_and_exits_equal_brute_force(multiclass, gamma, width):
    booster, X = multiclass
    plan = fan(booster, X, bin_width=width, gamma=gamma)
    ends = np.arange(1, ROUNDS + 1) * K - 1
    assert np.array_equal(np.flatnonzero(np.isfinite(plan.eps_pos)), ends[:-1])
    for r in range(1, ROUNDS):
        want = brute_force_margin_threshold(booster, X, r, width, gamma)
        assert plan.eps_pos[ends[r - 1]] == pytest.approx(want, abs=1e-9)
    # on new rows an example stops after the first round whose margin beats that round's threshold
    X_new = np.random.default_rng(5).normal(size=(200, X.shape[1])) * 1.5
    ev = evaluate(plan, X_new)
    stops = np.full(len(X_new), ROUNDS)
    label = np.argmax(booster.predict(X_new, raw_score=True), axis=1)
    for r in range(ROUNDS - 1, 0, -1):
        G = booster.predict(X_new, raw_score=True, num_iteration=r)
        top = np.sort(G, axis=1)
        fires = top[:, -1] - top[:, -2] > plan.eps_pos[ends[r - 1]]
        stops[fires] = r
        label[fires] = np.argmax(G[fires], axis=1)
    np.testing.assert_array_equal(ev.cost.n_trees, stops * K)
    np.testing.assert_array_equal(ev.labels, label)
    if gamma == 0.0:
        assert stops.mean() < ROUNDS  # thresholds at the bin means let examples go early


def test_multiclass_rounds_order_and_errors(multiclass):
    booster, X = multiclass
    order = np.random.default_rng(0).permutation(ROUNDS)
    plan = fan(booster, X, order=order, gamma=1.0)
    assert np.array_equal(plan.order[::K] // K, order)
    with pytest.raises(ValueError, match="permutation of the 15 boosting rounds"):
        fan(booster, X, order=np.arange(ROUNDS * K))
    from sklearn.ensemble import RandomForestClassifier

    rf = RandomForestClassifier(4, max_depth=3, random_state=0).fit(X, np.arange(len(X)) % 3)
    with pytest.raises(ValueError, match="rounds add one tree to each class"):
        fan(rf, X)
