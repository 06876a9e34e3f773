"""budget_prune / budget_prune_path on regression forests: (IP3) with squared errors, against
HiGHS on its LP and against brute force over every pruning."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

import thrifty
from thrifty import CostModel
from thrifty.prune import budget_prune, budget_prune_path
from thrifty.prune.budgetprune import objective, prepare, solve


def _instance(seed, n=200, d=5, trees=3, depth=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).round(2)
    y = 3.0 * X[:, 0] + X[:, 1] ** 2 - 2.0 * (X[:, 2] > 0) + rng.normal(scale=0.7, size=n)
    rf = RandomForestRegressor(n_estimators=trees, max_depth=depth, max_features=2, random_state=seed).fit(
        X, y
    )
    costs = rng.uniform(0.2, 3.0, size=d).round(2)
    return rf, X, y, costs


def _lp(ip3_lp, rf, X, y, c, lam, keep):
    """(IP3)'s LP with ``e_h`` the squared error of the mean of the rows at h (or at a kept
    leaf, of the tree's own value)."""

    def node_error(tree, h, rows):
        v = tree.value[h, 0, 0] if keep and tree.children_left[h] < 0 else y[rows].mean()
        return np.sum((y[rows] - v) ** 2)

    return ip3_lp(rf.estimators_, X, c, lam, node_error)


@pytest.mark.parametrize(
    "seed,lam,leaves",
    [
        (0, 0.002, "mean"),  # little pruning
        (1, 0.05, "mean"),  # moderate
        (2, 0.5, "mean"),  # (nearly) everything pruned
        (3, 0.0, "keep"),  # lam = 0 with the forest's own leaves: splits can hurt
        (4, 0.02, "keep"),  # the forest's own leaves, some pruning
    ],
)
def test_min_cut_matches_highs_on_the_lp_of_ip3(seed, lam, leaves, ip3_lp):
    rf, X, y, c = _instance(seed)
    costs = CostModel(c)
    problem, _, _, _ = prepare(rf, X, y, costs, leaf_values=leaves)
    chosen = solve(problem, lam)
    lp_value, x, _ = _lp(ip3_lp, rf, X, y, c, lam, keep=leaves == "keep")
    assert objective(problem, chosen, lam) == pytest.approx(lp_value, rel=1e-9, abs=1e-12)
    # Theorem 4.2 carries: the loss changes e_h only, so the LP's vertex optimum is integral
    np.testing.assert_allclose(x, np.round(x), atol=1e-7)
    pruned = budget_prune(rf, X, y, costs, lam=lam, leaf_values=leaves)
    ev = thrifty.evaluate(pruned, X, costs)
    assert ev.cost.mean == pytest.approx(problem.mean_cost(chosen), rel=1e-12, abs=1e-12)
    assert problem.error(chosen) + lam * ev.cost.mean == pytest.approx(lp_value, rel=1e-9)


@pytest.mark.parametrize(
    "seed,weighted",
    [
        (5, False),  # unit weights
        (6, True),  # real-valued sample weights
    ],
)
def test_path_is_optimal_against_brute_force_over_all_prunings(seed, weighted, ip3_regression_brute_force):
    rf, X, y, c = _instance(seed, n=80, trees=3, depth=2)
    w = np.random.default_rng(seed).uniform(0.2, 3.0, size=len(y)) if weighted else np.ones(len(y))
    costs = CostModel(c)
    kw = {"leaf_values": "mean", "sample_weight": w}
    path = budget_prune_path(rf, X, y, costs, progress=False, **kw)
    problem, _, _, _ = prepare(rf, X, y, costs, **kw)
    assert len(path) > 2
    lams = [*path.lambdas[1:], 2 * path.lambdas[-1] + 1]
    for k in range(1, len(path)):
        mid = 0.5 * (lams[k - 1] + lams[k])
        best = ip3_regression_brute_force(rf.estimators_, X, y, w, c, mid)
        assert objective(problem, path.chosen(k), mid) == pytest.approx(best, rel=1e-10)
    # the path's error is the trees' weighted mean squared error, as the pruned forests predict
    for k in (0, len(path) // 2, len(path) - 1):
        f = path.forest(k)
        per_tree = [f.subset([t]).predict(X) for t in range(f.n_trees)]
        mse = np.mean([np.average((y - p) ** 2, weights=w) for p in per_tree])
        assert path.error[k] == pytest.approx(mse, rel=1e-9)
        assert path.score()[k] == pytest.approx(-np.average((y - f.predict(X)) ** 2, weights=w), rel=1e-9)


def test_leaves_predict_the_mean_of_their_rows_or_keep_the_forest():
    rf, X, y, c = _instance(7)
    pruned = budget_prune(rf, X, y, CostModel(c), lam=0.05, leaf_values="mean")
    assert pruned.task == "regression" and pruned.link == "identity" and pruned.n_trees == 3
    leaves = pruned.apply(X)
    for t in range(3):
        for leaf in np.unique(leaves[:, t]):
            assert pruned.value[leaf, 0] * pruned.tree_weight[t] * 3 == pytest.approx(
                y[leaves[:, t] == leaf].mean()
            )
    # by default the forest's own leaves are kept: the path starts at the forest itself
    path = budget_prune_path(rf, X, y, CostModel(c), progress=False)
    np.testing.assert_allclose(path.forest(0).predict(X), rf.predict(X), rtol=1e-12)
    assert path.cost[-1] == 0.0 and path.n_splits[-1] == 0
    np.testing.assert_allclose(path.forest(-1).predict(X), y.mean())
    # lam = 0 with re-fitted means keeps every split (none raises the squared error)
    full = budget_prune(rf, X, y, CostModel(c), lam=0.0, leaf_values="mean")
    assert full.n_nodes == thrifty.Forest.from_model(rf).n_nodes


def test_integer_weights_equal_repeated_rows():
    rf, X, y, c = _instance(8)
    w = np.random.default_rng(1).integers(0, 4, size=len(y))
    weighted = budget_prune_path(rf, X, y, CostModel(c), sample_weight=w, progress=False)
    repeated = budget_prune_path(rf, np.repeat(X, w, 0), np.repeat(y, w), CostModel(c), progress=False)
    assert len(weighted) == len(repeated) > 3
    for name in ("lambdas", "error", "cost"):
        np.testing.assert_allclose(getattr(weighted, name), getattr(repeated, name), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(weighted.score(), repeated.score(), rtol=1e-9)


def test_out_of_bag_rows_are_charged_against_in_bag_means():
    # a node predicts the mean of its in-bag rows and is charged its out-of-bag squared error
    rf, X, y, c = _instance(9, trees=2)
    mask = np.ones((len(X), 2), dtype=bool)
    for t, rows in enumerate(rf.estimators_samples_):
        mask[rows, t] = False
    problem, f, _, _ = prepare(rf, X, y, CostModel(c), leaf_values="mean", count_mask=mask)
    for t in range(2):
        est = rf.estimators_[t]
        paths = est.decision_path(X.astype(np.float32)).toarray().astype(bool)
        nodes = f._tree_nodes(t)  # preorder, as scikit-learn numbers its nodes
        e = np.zeros(len(nodes))
        for h in range(len(nodes)):
            rows = paths[:, h]
            in_bag = rows & ~mask[:, t]
            v = y[in_bag].mean() if in_bag.any() else y[rows].mean()
            e[h] = np.sum((y[rows & mask[:, t]] - v) ** 2)
        for h, g in enumerate(nodes):
            v = problem.var_of_node[g]
            if v >= 0:
                lh = np.flatnonzero(nodes == f.children_left[g])[0]
                rh = np.flatnonzero(nodes == f.children_right[g])[0]
                assert problem.a[v] == pytest.approx(e[lh] + e[rh] - e[h], rel=1e-9, abs=1e-9)


def test_any_averaging_regressor_the_importers_read():
    lightgbm = pytest.importorskip("lightgbm")
    from thrifty.train import BudgetRFRegressor

    rf, X, y, c = _instance(10)
    models = [
        lightgbm.LGBMRegressor(
            boosting_type="rf", n_estimators=5, subsample=0.7, subsample_freq=1, num_leaves=8, verbose=-1
        ),
        BudgetRFRegressor(4, costs=c, max_depth=3, random_state=0, progress=False),
    ]
    for model in models:
        model.fit(X, y)
        path = budget_prune_path(model, X, y, CostModel(c), progress=False)
        np.testing.assert_allclose(path.forest(0).predict(X), model.predict(X), rtol=1e-9, atol=1e-9)
        assert np.all(np.diff(path.cost) <= 1e-12) and path.cost[-1] < path.cost[0]


def test_errors():
    lightgbm = pytest.importorskip("lightgbm")
    rf, X, y, c = _instance(11, n=60)
    with pytest.raises(ValueError, match="leaf_values='majority' is not for a regressor"):
        budget_prune(rf, X, y, CostModel(c), lam=0.1, leaf_values="majority")
    with pytest.raises(ValueError, match="regression targets must be finite"):
        budget_prune(rf, X, np.where(y > 0, np.nan, y), CostModel(c), lam=0.1)
    boosted = lightgbm.LGBMRegressor(n_estimators=3, verbose=-1).fit(X, y)
    with pytest.raises(ValueError, match="is boosted"):
        budget_prune(boosted, X, y, CostModel(c), lam=0.1)
    two = RandomForestRegressor(n_estimators=2, max_depth=2).fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="single-output"):
        budget_prune(two, X, y, CostModel(c), lam=0.1)
