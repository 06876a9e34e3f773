"""Fixed orders of base models (QWYC Appendix B): given, random, individual MSE, greedy MSE."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import thrifty
from thrifty.order import fixed_order, qwyc, qwyc_scores
from thrifty.order.orderings import order_from_scores

# ------------------------------------------------------------------------------ references


def mse(F, y_pos, cols, base=0.0, threshold=0.0, half=1.0):
    """MSE of the partial ensemble ``cols`` against labels mapped to ``threshold -/+ half``."""
    target = threshold + half * np.where(y_pos, 1.0, -1.0)
    s = base + F[:, list(cols)].sum(axis=1)
    return float(np.mean((s - target) ** 2))


def brute_individual(F, y_pos, base=0.0, threshold=0.0, half=1.0):
    """Sort by each model's own MSE, ties by index."""
    T = F.shape[1]
    return sorted(range(T), key=lambda t: (mse(F, y_pos, [t], base, threshold, half), t))


def brute_greedy(F, y_pos, base=0.0, threshold=0.0, half=1.0):
    """At each step, try every unused model and keep the partial ensemble of least MSE."""
    order, left = [], list(range(F.shape[1]))
    while left:
        best = min(left, key=lambda t: (mse(F, y_pos, order + [t], base, threshold, half), t))
        order.append(best)
        left.remove(best)
    return order


# half-integers: every MSE is exact in float64, so ties are real ties
small_scores = arrays(
    np.float64,
    st.tuples(st.integers(1, 10), st.integers(1, 6)),
    elements=st.integers(-4, 4).map(lambda v: v / 2.0),
)


@settings(max_examples=60, deadline=None)
@given(
    F=small_scores,
    data=st.data(),
    base=st.sampled_from([0.0, -0.5, 1.0]),
    threshold=st.sampled_from([0.0, 0.5]),
    half=st.sampled_from([1.0, 0.5]),
)
def test_mse_orders_match_brute_force(F, data, base, threshold, half):
    y = np.array(data.draw(st.lists(st.booleans(), min_size=F.shape[0], max_size=F.shape[0])))
    kw = dict(base_score=base, threshold=threshold, half_margin=half)
    ind = order_from_scores(F, y, kind="individual_mse", **kw)
    assert ind.tolist() == brute_individual(F, y, base, threshold, half)
    greedy = order_from_scores(F, y, kind="greedy_mse", **kw)
    assert greedy.tolist() == brute_greedy(F, y, base, threshold, half)
    # "first choose the best individual model (by MSE)"
    assert greedy[0] == ind[0]


def test_greedy_differs_from_individual_on_correlated_models():
    """Appendix B: individual MSE puts correlated accurate models first; greedy does not."""
    y = np.array([True, True, False, False])
    # models 0 and 1 are the same accurate model; 2 is weaker but fixes what 0 leaves
    F = np.array([[0.6, 0.6, 0.4], [0.6, 0.6, 0.4], [-0.6, -0.6, -0.4], [-0.6, -0.6, -0.4]])
    assert order_from_scores(F, y, kind="individual_mse").tolist() == [0, 1, 2]
    # after model 0 the residual is 0.4: model 2 closes it exactly, model 1 overshoots to 1.2
    assert order_from_scores(F, y, kind="greedy_mse").tolist() == [0, 2, 1]


def test_greedy_each_step_minimises_partial_mse():
    rng = np.random.default_rng(0)
    F = rng.normal(size=(50, 7))
    y = rng.random(50) < 0.5
    order = order_from_scores(F, y, kind="greedy_mse", base_score=0.3)
    for r in range(len(order)):
        prefix = order[:r].tolist()
        errs = {t: mse(F, y, prefix + [t], base=0.3) for t in range(7) if t not in prefix}
        assert errs[order[r]] == pytest.approx(min(errs.values()))


def test_given_and_random():
    F = np.zeros((3, 5))
    assert order_from_scores(F, kind="given").tolist() == [0, 1, 2, 3, 4]
    r1 = order_from_scores(F, kind="random", random_state=7)
    assert sorted(r1.tolist()) == list(range(5))
    assert np.array_equal(r1, order_from_scores(F, kind="random", random_state=7))


def test_every_permutation_is_reachable_by_random():
    seen = {tuple(order_from_scores(np.zeros((1, 3)), kind="random", random_state=s)) for s in range(60)}
    assert seen == set(itertools.permutations(range(3)))


# ------------------------------------------------------------------------------ on forests


@pytest.fixture(scope="module")
def lgbm():
    lightgbm = pytest.importorskip("lightgbm")
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=800, n_features=6, n_informative=4, random_state=5)
    m = lightgbm.LGBMClassifier(n_estimators=25, num_leaves=6, learning_rate=0.3, verbose=-1).fit(X, y)
    return thrifty.Forest.from_model(m), X, y


@pytest.mark.parametrize("kind", ["individual_mse", "greedy_mse"])
def test_forest_orders_use_margin_and_pm1_labels(lgbm, kind):
    forest, X, y = lgbm
    F = forest.tree_weight[None, :] * forest.value[forest.apply(X), 0]
    ref = brute_individual if kind == "individual_mse" else brute_greedy
    expect = ref(F, y == 1, base=float(forest.base_score[0]))
    got = fixed_order(forest, X, y, kind=kind)
    assert got.tolist() == expect
    # labels as -1/+1 or booleans give the same order
    assert np.array_equal(got, fixed_order(forest, X, np.where(y == 1, 1, -1), kind=kind))
    assert np.array_equal(got, fixed_order(forest, X, y == 1, kind=kind))


def test_random_forest_uses_probability_targets():
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=300) > 0, "yes", "no")
    forest = thrifty.Forest.from_model(
        RandomForestClassifier(n_estimators=8, max_depth=3, random_state=0).fit(X, y)
    )
    F = forest.tree_weight[None, :] * forest.value[forest.apply(X), 0]
    got = fixed_order(forest, X, y, kind="individual_mse")
    # averaged probabilities against 0/1 targets: threshold 1/2 -/+ 1/2
    assert got.tolist() == brute_individual(F, y == "yes", threshold=0.5, half=0.5)


@pytest.mark.parametrize("alpha", [0.0, 0.02])
@pytest.mark.parametrize("kind", ["individual_mse", "greedy_mse"])
def test_qwyc_with_mse_orderings(lgbm, alpha, kind):
    forest, X, y = lgbm
    plan, res = qwyc(forest, X, y, alpha=alpha, ordering=kind, return_result=True)
    assert np.array_equal(plan.order, fixed_order(forest, X, y, kind=kind))
    # Algorithm 2 thresholds for that fixed order: the same as giving the reordered scores
    F = forest.tree_weight[None, :] * forest.value[forest.apply(X), 0]
    ref = qwyc_scores(
        F[:, plan.order],
        alpha=alpha,
        base_score=float(forest.base_score[0]),
        ordering="given",
        return_result=True,
    )
    assert np.array_equal(res.eps_pos, ref.eps_pos) and np.array_equal(res.eps_neg, ref.eps_neg)
    ev = thrifty.evaluate(plan, X)
    assert np.sum(ev.labels != forest.predict(X)) == res.n_disagree <= alpha * len(X)
    assert ev.cost.n_trees.mean() == pytest.approx(res.mean_cost)


def test_qwyc_scores_mse_ordering():
    F = np.array([[1.0, 0.0, 2.0], [-1.0, 0.0, -2.0], [1.0, 0.5, 0.5]])
    y = [1, 0, 1]
    res = qwyc_scores(F, y, alpha=0.0, ordering="greedy_mse", return_result=True)
    assert res.order.tolist() == brute_greedy(F, np.array(y) == 1)


# ------------------------------------------------------------------------------ validation


def test_labels_are_required(lgbm):
    forest, X, _ = lgbm
    for kind in ("individual_mse", "greedy_mse"):
        with pytest.raises(ValueError, match=f"ordering='{kind}' needs labels"):
            fixed_order(forest, X, kind=kind)
        with pytest.raises(ValueError, match="needs labels"):
            qwyc(forest, X, ordering=kind)
        with pytest.raises(ValueError, match="needs labels"):
            qwyc_scores(np.ones((3, 2)), ordering=kind)


def test_bad_labels_and_kind(lgbm):
    forest, X, y = lgbm
    with pytest.raises(ValueError, match="unknown fixed ordering"):
        fixed_order(forest, X, y, kind="optimize")
    with pytest.raises(ValueError, match="binary labels"):
        fixed_order(forest, X, np.arange(len(X)) % 3, kind="greedy_mse")
    with pytest.raises(ValueError, match="1-d array of 800 labels"):
        fixed_order(forest, X, y[:10], kind="individual_mse")
    assert fixed_order(forest, X, kind="given").tolist() == list(range(forest.n_trees))
