"""QWYC (Quit When You Can): Algorithm 1 order, Algorithm 2 thresholds, problem (2) budget."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import thrifty
from thrifty.order import qwyc, qwyc_scores

# ------------------------------------------------------------------------------ references


def simulate(F, order, eps_pos, eps_neg, base=0.0, threshold=0.0, cost=None):
    """Run a sequential plan on a score matrix: labels, exit positions and mean cost."""
    n, T = F.shape
    cost = np.ones(T) if cost is None else cost
    g = np.full(n, base)
    label = np.zeros(n, dtype=bool)
    done = np.zeros(n, dtype=bool)
    paid = np.zeros(n)
    for r, t in enumerate(order):
        live = ~done
        paid[live] += cost[t]
        g[live] = g[live] + F[live, t]
        pos = live & (g > eps_pos[r])
        neg = live & ~pos & (g < eps_neg[r])
        label[pos], label[neg] = True, False
        done |= pos | neg
    full = base + F.sum(1) > threshold
    label[~done] = full[~done]
    return label, full, paid.mean()


def cuts(s):
    """Thresholds realising every split of the sorted scores ``s`` (incl. none / all)."""
    v = np.unique(s)
    return np.concatenate([[-np.inf, v[0] - 1.0], (v[:-1] + v[1:]) / 2, [v[-1] + 1.0, np.inf]])


def brute_position(s, ypos, budget, neg_only):
    """Algorithm 2 by exhaustive search: line 4 (max negative exits), then line 5."""
    cs = cuts(s)
    best_neg, neg_cuts = -1, []
    for c in cs:
        k, d = int(np.sum(s < c)), int(np.sum(ypos & (s < c)))
        if d <= budget:
            if k > best_neg:
                best_neg, neg_cuts = k, [c]
            elif k == best_neg:
                neg_cuts.append(c)
    if neg_only:
        return best_neg, best_neg
    best = best_neg
    for c in neg_cuts:
        d = int(np.sum(ypos & (s < c)))
        for c2 in cs:
            if c2 < c:
                continue
            up = s > c2
            if d + int(np.sum(up & ~ypos)) <= budget:
                best = max(best, best_neg + int(up.sum()))
    return best_neg, best


int_scores = arrays(
    np.float64,
    st.tuples(st.integers(1, 12), st.integers(1, 4)),
    elements=st.integers(-3, 3).map(lambda v: v / 2.0),
)


# ------------------------------------------------------------------------------ paper A.1


def paper_a1():
    """Appendix A.1: 8 examples, 3 base models, decision threshold 0, unit costs."""
    F = np.zeros((8, 3))
    F[0, 0], F[1, 0] = 1, -1  # f_1(e_1) = 1, f_1(e_2) = -1
    F[2, 1], F[3, 1], F[4, 1] = 1, 1, -1  # f_2
    F[4, 2], F[5, 2], F[6, 2], F[7, 2] = -1, 1, -1, -1  # f_3
    return F


def test_paper_a1_order_321_costs_7_4():
    F = paper_a1()
    # the paper's order [3, 2, 1] (1-based) with Algorithm 2 thresholds costs 7/4
    res = qwyc_scores(F[:, [2, 1, 0]], alpha=0.0, ordering="given", return_result=True)
    assert res.mean_cost == pytest.approx(7 / 4)
    assert list(res.n_exit) == [4, 2, 2]
    labels, full, cost = simulate(F[:, [2, 1, 0]], res.order, res.eps_pos, res.eps_neg)
    assert cost == pytest.approx(7 / 4) and np.array_equal(labels, full)


def test_paper_a1_greedy():
    """QWYC picks f_3 first as in the paper; on partial sums it then beats the paper's 7/4.

    After f_3 the undecided e_1..e_4 all score 0, and f_1 moves e_1 to +1 and e_2 to -1:
    e_3, e_4 (still 0, full decision positive) exit positive too, which the paper's
    per-model sets S_t(1) do not model. 3/2 is the optimum of problem (2) (brute force).
    """
    F = paper_a1()
    res = qwyc_scores(F, alpha=0.0, return_result=True)
    assert res.order[0] == 2  # f_3 first (1-based 3), J_1 = 8/4
    assert res.J[0] == pytest.approx(2.0)
    assert res.mean_cost == pytest.approx(3 / 2) and res.mean_cost <= 7 / 4
    labels, full, cost = simulate(F, res.order, res.eps_pos, res.eps_neg)
    assert np.array_equal(labels, full) and cost == pytest.approx(3 / 2)
    # no order/threshold choice does better: one base model never decides all 8 examples
    for perm in itertools.permutations(range(3)):
        first = F[:, perm[0]]
        ypos = F.sum(1) > 0
        assert brute_position(first, ypos, 0, False)[1] < 8


# ------------------------------------------------------------------------------ Algorithm 2


@settings(max_examples=80, deadline=None)
@given(
    F=int_scores,
    alpha=st.sampled_from([0.0, 0.1, 0.25, 0.5]),
    base=st.sampled_from([0.0, 0.5]),
    neg_only=st.booleans(),
)
def test_algorithm2_matches_exhaustive_search(F, alpha, base, neg_only):
    n, T = F.shape
    mode = "negative" if neg_only else "both"
    res = qwyc_scores(F, alpha=alpha, base_score=base, mode=mode, ordering="given", return_result=True)
    assert list(res.order) == list(range(T))
    ypos_all = base + F.sum(1) > 0
    budget = int(np.floor(alpha * n))
    g = np.full(n, base)
    live = np.ones(n, dtype=bool)
    spent = 0
    for r in range(T):
        g = g + F[:, r]
        if not live.any():
            break
        s, ypos = g[live], ypos_all[live]
        best_neg, best = brute_position(s, ypos, budget - spent, neg_only)
        neg = s < res.eps_neg[r]
        pos = s > res.eps_pos[r]
        assert res.eps_neg[r] <= res.eps_pos[r]
        if best == 0:
            assert not (neg | pos).any()
        else:
            assert neg.sum() == best_neg  # line 4: negative side first, as far as it can
            assert (neg | pos).sum() == best  # line 5: positive side with what is left
        assert res.n_exit[r] == (neg | pos).sum()
        spent += int(np.sum(neg & ypos) + np.sum(pos & ~ypos))
        assert spent <= budget
        idx = np.flatnonzero(live)
        live[idx[neg | pos]] = False
    assert spent == res.n_disagree
    labels, full, cost = simulate(F, res.order, res.eps_pos, res.eps_neg, base=base)
    assert np.sum(labels != full) == res.n_disagree
    assert cost == pytest.approx(res.mean_cost)
    if neg_only:
        assert np.all(res.eps_pos == np.inf)


# ------------------------------------------------------------------------------ Algorithm 1


@settings(max_examples=60, deadline=None)
@given(
    F=int_scores,
    alpha=st.sampled_from([0.0, 0.1, 0.3]),
    costs=st.lists(st.sampled_from([1.0, 2.0, 3.0]), min_size=4, max_size=4),
)
def test_algorithm1_first_choice_is_argmin_J(F, alpha, costs):
    n, T = F.shape
    c = np.array(costs[:T])
    res = qwyc_scores(F, alpha=alpha, costs=c, return_result=True)
    assert sorted(res.order) == list(range(T))
    ypos = F.sum(1) > 0
    budget = int(np.floor(alpha * n))
    J = np.array(
        [c[t] * n / e if (e := brute_position(F[:, t], ypos, budget, False)[1]) else np.inf for t in range(T)]
    )
    if np.isfinite(J).any():
        assert res.order[0] == int(np.argmin(J))  # first strict minimum: the paper's tie-break
        assert res.J[0] == pytest.approx(J.min())
    else:
        assert res.order[0] == 0 and res.eps_pos[0] == np.inf and res.eps_neg[0] == -np.inf
    labels, full, cost = simulate(F, res.order, res.eps_pos, res.eps_neg, cost=c)
    assert np.sum(labels != full) == res.n_disagree <= alpha * n
    assert cost == pytest.approx(res.mean_cost)


@settings(max_examples=40, deadline=None)
@given(F=int_scores, alpha=st.sampled_from([0.0, 0.2]), seed=st.integers(0, 5))
def test_random_ordering_is_a_permutation_within_budget(F, alpha, seed):
    order, eps_pos, eps_neg = qwyc_scores(F, alpha=alpha, ordering="random", random_state=seed)
    assert sorted(order) == list(range(F.shape[1]))
    again = qwyc_scores(F, alpha=alpha, ordering="random", random_state=seed)
    assert np.array_equal(order, again[0])
    labels, full, _ = simulate(F, order, eps_pos, eps_neg)
    assert np.sum(labels != full) <= alpha * F.shape[0]


# ------------------------------------------------------------------------------ forests


@pytest.fixture(scope="module")
def lgbm():
    lightgbm = pytest.importorskip("lightgbm")
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=1500, n_features=8, n_informative=5, random_state=3)
    m = lightgbm.LGBMClassifier(n_estimators=40, num_leaves=8, learning_rate=0.2, verbose=-1).fit(X, y)
    return thrifty.Forest.from_model(m), X


@pytest.mark.parametrize("alpha", [0.0, 0.005, 0.05])
@pytest.mark.parametrize(
    "mode,ordering", [("both", "optimize"), ("negative", "optimize"), ("both", "given"), ("both", "random")]
)
def test_forest_plan_within_budget_and_cost_exact(lgbm, alpha, mode, ordering):
    forest, X = lgbm
    plan, res = qwyc(forest, X, alpha=alpha, mode=mode, ordering=ordering, random_state=0, return_result=True)
    assert isinstance(plan, thrifty.Sequential)
    ev = thrifty.evaluate(plan, X)
    full = forest.predict(X)
    n_diff = int(np.sum(ev.labels != full))
    assert n_diff <= alpha * len(X)
    assert n_diff == res.n_disagree
    if alpha == 0:
        assert n_diff == 0
    assert ev.cost.n_trees.mean() == pytest.approx(res.mean_cost)
    assert res.mean_cost < forest.n_trees  # something exits early
    if mode == "negative":
        assert np.all(plan.eps_pos == np.inf)


def test_forest_tree_cost_scales_objective(lgbm):
    forest, X = lgbm
    _, r1 = qwyc(forest, X, alpha=0.01, return_result=True)
    _, r2 = qwyc(
        forest,
        X,
        alpha=0.01,
        costs=thrifty.CostModel.uniform(forest.n_features, tree_cost=2.5),
        return_result=True,
    )
    assert np.array_equal(r1.order, r2.order)
    assert r2.mean_cost == pytest.approx(2.5 * r1.mean_cost)


# ------------------------------------------------------------------------------ validation


def test_validation(lgbm):
    forest, X = lgbm
    for bad in (-0.1, 1.0, 2, "x"):
        with pytest.raises(ValueError, match="alpha"):
            qwyc(forest, X, alpha=bad)
    with pytest.raises(ValueError, match="ordering"):
        qwyc(forest, X, ordering="best")
    with pytest.raises(ValueError, match="mode"):
        qwyc(forest, X, mode="positive")
    with pytest.raises(ValueError, match="at least one example"):
        qwyc(forest, X[:0])
    with pytest.raises(ValueError, match="decision threshold"):
        qwyc(forest, X, threshold=1.0)
    with pytest.raises(ValueError, match="at least one example"):
        qwyc_scores(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="per-model costs"):
        qwyc_scores(np.zeros((4, 3)), costs=[1.0, 0.0, 1.0])


def test_multiclass_orders_rounds_within_alpha():
    lightgbm = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=400), [-0.5, 0.5])
    m = lightgbm.LGBMClassifier(n_estimators=12, num_leaves=4, verbose=-1).fit(X, y)
    plan, res = qwyc(m, X, alpha=0.02, return_result=True)
    ev = thrifty.evaluate(plan, X)
    assert (ev.labels != m.predict(X)).sum() == res.n_disagree <= 8
    assert ev.cost.n_trees.mean() == pytest.approx(res.mean_cost)
    with pytest.raises(ValueError, match="no meaning for multiclass"):
        qwyc(m, X, mode="negative")
    with pytest.raises(ValueError, match="not available for multiclass"):
        qwyc(m, X, ordering="random")


@pytest.mark.parametrize(
    "spec",
    [
        dict(),  # plain per-feature prices
        dict(groups={"panel": [3, 4]}),  # a panel paid once for two features
        dict(dependencies={5: [0, 1]}),  # a derived feature pulls in its inputs
    ],
)
def test_feature_costs_objective_is_the_runtime_cost(spec):
    lightgbm = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 6))
    y = ((X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * X[:, 5]) > 0).astype(int)
    model = lightgbm.LGBMClassifier(n_estimators=30, num_leaves=8, verbose=-1).fit(X, y)
    costs = thrifty.CostModel([1.0, 2.0, 4.0, 8.0, 16.0, 32.0], tree_cost=0.5, **spec)
    plan, res = qwyc(model, X, alpha=0.01, costs=costs, feature_costs=True, return_result=True)
    ev = thrifty.evaluate(plan, X, costs)
    assert ev.cost.mean == pytest.approx(res.mean_cost, rel=1e-12)
    assert (ev.labels != model.predict(X)).mean() <= 0.01
    trees_only = thrifty.evaluate(qwyc(model, X, alpha=0.01, costs=costs), X, costs)
    assert ev.cost.mean <= trees_only.cost.mean  # pricing features finds a cheaper plan here


def test_feature_costs_need_a_cost_model():
    lightgbm = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    model = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1).fit(X, X[:, 0] > 0)
    with pytest.raises(ValueError, match="needs costs= a thrifty CostModel"):
        qwyc(model, X, feature_costs=True)


# ------------------------------------------------------------------------------ sample weights


def _same_result(a, b):
    for name in ("order", "eps_pos", "eps_neg", "n_exit"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert (a.mean_cost, a.n_disagree, a.budget) == (b.mean_cost, b.n_disagree, b.budget)


@settings(max_examples=60, deadline=None)
@given(
    F=int_scores,
    data=st.data(),
    alpha=st.sampled_from([0.0, 0.2, 0.5]),
    kw=st.sampled_from([{}, {"mode": "negative"}, {"ordering": "given"}]),
)
def test_integer_weights_are_repeated_rows_and_zero_weights_dropped_rows(F, data, alpha, kw):
    n = F.shape[0]
    w = np.array(data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n).filter(any)))
    weighted = qwyc_scores(F, alpha=alpha, sample_weight=w, return_result=True, **kw)
    repeated = qwyc_scores(np.repeat(F, w, axis=0), alpha=alpha, return_result=True, **kw)
    _same_result(weighted, repeated)


def test_forest_weights_are_repeated_rows(lgbm):
    forest, X = lgbm
    X, w = X[:300], np.random.default_rng(0).integers(0, 3, size=300)
    prices = thrifty.CostModel(np.arange(1.0, 9.0), tree_cost=1.0)  # integers: sums are exact
    for kw in ({}, {"ordering": "greedy_mse", "y": X[:, 0] > 0}, {"costs": prices, "feature_costs": True}):
        y = kw.pop("y", None)
        _, weighted = qwyc(forest, X, y, alpha=0.05, sample_weight=w, return_result=True, **kw)
        y_rep = None if y is None else np.repeat(y, w)
        _, repeated = qwyc(forest, np.repeat(X, w, axis=0), y_rep, alpha=0.05, return_result=True, **kw)
        _same_result(weighted, repeated)
