"""budget_prune / budget_prune_path: the min-cut solve of (IP3) against HiGHS on the paper's LP, for
classification and regression forests (squared errors, also against brute force over every pruning)."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import thrifty
from thrifty import CostModel
from thrifty.prune import budget_prune, budget_prune_path
from thrifty.prune.budgetprune import objective, prepare, solve


def _instance(seed, n=240, d=6, trees=3, depth=3, classes=2):
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=n,
        n_features=d,
        n_informative=4,
        n_redundant=0,
        n_classes=classes,
        n_clusters_per_class=1,
        flip_y=0.1,
        random_state=seed,
    )
    rf = RandomForestClassifier(n_estimators=trees, max_depth=depth, max_features=2, random_state=seed).fit(
        X, y
    )
    costs = np.random.default_rng(seed).uniform(0.2, 3.0, size=d).round(2)
    return rf, X, y, costs


def _class_lp(ip3_lp, rf, X, y, costs, lam, keep=False):
    """The LP of (IP3) (the fixture ``ip3_lp``) with ``e_h`` the errors of the majority class of
    the examples at h, or with ``keep`` at a leaf those of the leaf's own vote."""
    cls = np.searchsorted(rf.classes_, y)

    def node_error(tree, h, rows):
        c = np.bincount(cls[rows], minlength=len(rf.classes_))
        vote = np.argmax(tree.value[h, 0]) if keep and tree.children_left[h] < 0 else np.argmax(c)
        return c.sum() - c[vote]

    return ip3_lp(rf.estimators_, X, costs, lam, node_error)


def _regression_instance(seed, n=200, d=5, trees=3, depth=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).round(2)
    y = 3.0 * X[:, 0] + X[:, 1] ** 2 - 2.0 * (X[:, 2] > 0) + rng.normal(scale=0.7, size=n)
    rf = RandomForestRegressor(n_estimators=trees, max_depth=depth, max_features=2, random_state=seed).fit(
        X, y
    )
    costs = rng.uniform(0.2, 3.0, size=d).round(2)
    return rf, X, y, costs


def _squared_lp(ip3_lp, rf, X, y, c, lam, keep=False):
    """(IP3)'s LP with ``e_h`` the squared error of the mean of the rows at h (or at a kept
    leaf, of the tree's own value)."""

    def node_error(tree, h, rows):
        v = tree.value[h, 0, 0] if keep and tree.children_left[h] < 0 else y[rows].mean()
        return np.sum((y[rows] - v) ** 2)

    return ip3_lp(rf.estimators_, X, c, lam, node_error)


@pytest.mark.parametrize(
    "classes,seed,lam,leaves",
    [
        (2, 0, 0.0005, "distribution"),  # little pruning
        (2, 1, 0.01, "distribution"),  # moderate
        (3, 2, 0.003, "distribution"),  # multiclass
        (2, 3, 0.2, "distribution"),  # (nearly) everything pruned
        (2, 4, 0.0, "keep"),  # lam = 0 with the forest's own leaves: splits can hurt
        (3, 5, 0.002, "keep"),  # multiclass, the forest's own leaves
        (0, 0, 0.002, "mean"),  # regression (squared errors), little pruning
        (0, 1, 0.05, "mean"),  # regression, moderate
        (0, 2, 0.5, "mean"),  # regression, (nearly) everything pruned
        (0, 3, 0.0, "keep"),  # regression, lam = 0 with the forest's own leaves
        (0, 4, 0.02, "keep"),  # regression, the forest's own leaves, some pruning
    ],
)
def test_min_cut_matches_highs_on_the_lp_of_ip3(classes, seed, lam, leaves, ip3_lp):
    # classes = 0: a regression forest, e_h the squared error of what node h predicts
    rf, X, y, c = _regression_instance(seed) if classes == 0 else _instance(seed, classes=classes)
    costs = CostModel(c)
    problem, _, _, _ = prepare(rf, X, y, costs, leaf_values=leaves)
    chosen = solve(problem, lam)
    lp = _squared_lp if classes == 0 else _class_lp
    lp_value, x, n_int = lp(ip3_lp, rf, X, y, c, lam, keep=leaves == "keep")
    assert objective(problem, chosen, lam) == pytest.approx(lp_value, rel=1e-9, abs=1e-12)
    # Theorem 4.2: the LP optimum HiGHS returns (a vertex) is integral (the loss changes e_h only)
    np.testing.assert_allclose(x, np.round(x), atol=1e-7)
    # the runtime's mean feature cost of the pruned forest is the w-term of the objective
    pruned = budget_prune(rf, X, y, costs, lam=lam, leaf_values=leaves)
    measured = thrifty.evaluate(pruned, X, costs).cost.mean
    assert measured == pytest.approx(problem.mean_cost(chosen), rel=1e-12, abs=1e-12)
    error_term = problem.error(chosen)
    assert error_term + lam * measured == pytest.approx(lp_value, rel=1e-9, abs=1e-12)


def test_path_points_are_the_optimal_solutions_between_breakpoints(ip3_lp):
    rf, X, y, c = _instance(4, trees=4)
    costs = CostModel(c)
    path = budget_prune_path(rf, X, y, costs, progress=False)
    problem, _, _, _ = prepare(rf, X, y, costs)
    assert len(path) > 3
    # monotone: a larger lambda never costs more nor errs less, and splits are nested
    assert np.all(np.diff(path.lambdas) >= 0)
    assert np.all(np.diff(path.cost) <= 1e-12)
    # from point 1 on every point is optimal for its lambdas; point 0 (no pruning) may err
    # more than point 1 when some of the forest's own leaves vote worse than their parent
    assert np.all(np.diff(path.error[1:]) >= -1e-12) and path.error[1] <= path.error[0]
    for k in range(1, len(path)):
        assert np.all(path.chosen(k) <= path.chosen(k - 1))
    lams = list(path.lambdas[1:]) + [path.lambdas[-1] * 2 + 1]
    for k in range(1, len(path)):
        lo, hi = lams[k - 1], lams[k]
        mid = 0.5 * (lo + hi)
        direct = solve(problem, mid)
        # the path's solution is optimal at every lambda of its interval
        assert objective(problem, path.chosen(k), mid) == pytest.approx(
            objective(problem, direct, mid), rel=1e-10, abs=1e-13
        )
        lp_value, _, _ = (
            _class_lp(ip3_lp, rf, X, y, c, mid, keep=True) if k in (1, len(path) // 2) else (None, 0, 0)
        )
        if lp_value is not None:
            assert objective(problem, path.chosen(k), mid) == pytest.approx(lp_value, rel=1e-9)
    # the runtime measures every point's cost as the path reports it
    for k in (0, 1, len(path) // 2, len(path) - 1):
        ev = thrifty.evaluate(path.forest(k), X, costs)
        assert ev.cost.mean == pytest.approx(path.cost[k], rel=1e-12, abs=1e-12)
        assert np.mean(ev.labels == y) == pytest.approx(path.accuracy()[k])


def test_lam_zero_prunes_nothing_that_lowers_the_error():
    rf, X, y, c = _instance(5)
    costs = CostModel(c)
    full = thrifty.Forest.from_model(rf)
    # re-labelled leaves: no split raises the error, so lam = 0 keeps them all
    pruned = budget_prune(rf, X, y, costs, lam=0.0, leaf_values="distribution")
    assert pruned.n_nodes == full.n_nodes and pruned.n_trees == full.n_trees
    np.testing.assert_array_equal(np.sort(pruned.feature), np.sort(full.feature))
    # the forest's own leaves: lam = 0 prunes exactly the splits whose removal does not
    # raise the error on the data, and the largest such set of splits is kept
    problem, f, _, _ = prepare(rf, X, y, costs, leaf_values="keep")
    kept = solve(problem, 0.0)
    assert problem.error(kept) <= problem.error(np.ones_like(kept))
    for j in np.flatnonzero(kept[: problem.n_split]):
        # giving up any kept split (with its kept descendants) raises the error
        drop = kept.copy()
        node = problem.split_node[j]
        stack = [node]
        while stack:
            h = stack.pop()
            v = problem.var_of_node[h]
            if v >= 0 and drop[v]:
                drop[v] = False
                stack += [f.children_left[h], f.children_right[h]]
        assert problem.error(drop) >= problem.error(kept)
    path = budget_prune_path(rf, X, y, costs, leaf_values="distribution", progress=False)
    # the smallest positive lambda keeps every split that lowers the training error
    assert path.error[1] == pytest.approx(path.error[0])
    assert budget_prune(rf, X, y, costs, lam=1e6).n_nodes == full.n_trees
    assert path.cost[-1] == 0.0 and path.n_splits[-1] == 0


def test_individual_mode_prunes_each_tree_on_its_own():
    rf, X, y, c = _instance(6, trees=3)
    costs = CostModel(c)
    lam = 0.004
    both = budget_prune(rf, X, y, costs, lam=lam, mode="individual")
    full = thrifty.Forest.from_model(rf)
    for t in range(full.n_trees):
        alone = budget_prune(full.subset([t]), X, y, costs, lam=lam)
        assert np.array_equal(np.sort(alone.feature), np.sort(both.subset([t]).feature))
    # every individual pruning is a valid pruning: at each lambda the ensemble solution's
    # true objective (shared feature costs) is no worse
    ens = budget_prune_path(rf, X, y, costs, progress=False)
    ind = budget_prune_path(rf, X, y, costs, mode="individual", progress=False)
    for lam in ens.lambdas[1:] * 1.001:
        k = np.searchsorted(ens.lambdas, lam, side="right") - 1
        assert np.all(ens.error[k] + lam * ens.cost[k] <= ind.error + lam * ind.cost + 1e-12)


def test_groups_dependencies_and_split_costs_are_what_the_runtime_charges():
    rf, X, y, c = _instance(7, d=6, trees=4)
    names = [f"f{i}" for i in range(6)]
    costs = CostModel(
        {"f0": 1.0, "f1": 2.0, "f4": 0.5, "f5": 0.0, "panel": 3.0},
        feature_names=names,
        groups={"panel": ["f2", "f3"]},
        dependencies={"f5": ["f0", "f1"]},
        split_cost=0.01,
        tree_cost=0.1,
    )
    for evaluation in (False, True):
        path = budget_prune_path(rf, X, y, costs, evaluation=evaluation, progress=False)
        for k in range(0, len(path), max(1, len(path) // 6)):
            ev = thrifty.evaluate(path.forest(k), X, costs)
            assert ev.cost.mean == pytest.approx(path.cost[k], rel=1e-12)
        assert path.cost[-1] == pytest.approx(0.1 * 4)  # tree costs are paid whatever happens


def test_budget_picks_the_most_accurate_point_within_budget():
    rf, X, y, c = _instance(8, trees=4)
    costs = CostModel(c)
    path = budget_prune_path(rf, X, y, costs, progress=False)
    budget = 0.5 * path.cost[0]
    pruned = budget_prune(rf, X, y, costs, budget=budget)
    ev = thrifty.evaluate(pruned, X, costs)
    assert ev.cost.mean <= budget
    within = path.cost <= budget
    assert np.mean(ev.labels == y) == pytest.approx(path.accuracy()[within].max())


def test_leaves_predict_the_class_distribution_of_their_examples():
    rf, X, y, c = _instance(9, trees=2)
    pruned = budget_prune(rf, X, y, CostModel(c), lam=0.002, leaf_values="distribution")
    leaves = pruned.apply(X)
    for t in range(2):
        for leaf in np.unique(leaves[:, t])[:5]:
            share = np.mean(y[leaves[:, t] == leaf] == 1)
            assert pruned.value[leaf, 0] == pytest.approx(share)
    majority = budget_prune(rf, X, y, CostModel(c), lam=0.002, leaf_values="majority")
    assert set(np.unique(majority.value)) <= {0.0, 1.0}
    # by default a random forest's leaves keep their own class distributions: the path's
    # first point is the forest itself, prediction for prediction
    path = budget_prune_path(rf, X, y, CostModel(c), progress=False)
    np.testing.assert_allclose(path.forest(0).predict_proba(X), rf.predict_proba(X), atol=1e-12)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({}, "exactly one of"),
        ({"lam": 0.1, "budget": 1.0}, "exactly one of"),
        ({"lam": -1.0}, "budget_prune: lam must be a float >= 0 or None, got -1.0"),
        ({"lam": 0.1, "mode": "trees"}, "budget_prune: mode must be a str among 'ensemble', 'individual'"),
    ],
)
def test_errors(kwargs, match):
    rf, X, y, c = _instance(0, n=60)
    with pytest.raises(ValueError, match=match):
        budget_prune(rf, X, y, CostModel(c), **kwargs)


def test_errors_on_data():
    rf, X, y, c = _instance(0, n=60)
    with pytest.raises(ValueError, match="not among the forest's classes"):
        budget_prune(rf, X, y + 5, CostModel(c), lam=0.1)
    with pytest.raises(ValueError, match="features"):
        budget_prune(rf, X[:, :3], y, CostModel(c), lam=0.1)
    with pytest.raises(ValueError, match="prices 5 features"):
        budget_prune(rf, X, y, CostModel(np.ones(5)), lam=0.1)
    cm = CostModel(c, tree_cost=1.0)
    with pytest.raises(ValueError, match="below the cheapest"):
        budget_prune(rf, X, y, cm, budget=0.5)


def test_count_mask_counts_errors_on_the_chosen_rows_only():
    from thrifty.train.budgetrf import BudgetRFClassifier

    rf, X, y, c = _instance(10, trees=3)
    brf = BudgetRFClassifier(3, max_depth=4, random_state=0, progress=False).fit(X, y)
    mask = brf.oob_mask()
    assert mask.shape == (len(X), 3) and 0.2 < mask.mean() < 0.5  # about 1/e out of bag
    problem, f, _, _ = prepare(brf, X, y, CostModel(c), count_mask=mask, leaf_values="distribution")
    for t in range(3):
        nodes = f._tree_nodes(t)
        counted, _, _, _ = prepare(
            f.subset([t]), X[mask[:, t]], y[mask[:, t]], CostModel(c), leaf_values="distribution"
        )
        in_bag, _, _, _ = prepare(
            f.subset([t]), X[~mask[:, t]], y[~mask[:, t]], CostModel(c), leaf_values="distribution"
        )
        # a node votes for its in-bag majority and is charged its out-of-bag errors
        votes = np.argmax(in_bag.counts, axis=1)
        seen = in_bag.counts.sum(axis=1) > 0
        np.testing.assert_array_equal(np.argmax(problem.counts[nodes], axis=1)[seen], votes[seen])
        e = counted.counts.sum(axis=1) - counted.counts[np.arange(len(nodes)), votes]
        local = {g: j for j, g in enumerate(nodes)}
        for v, h in enumerate(problem.split_node):
            if (
                h in local
                and seen[local[h]]
                and all(seen[local[ch]] for ch in (f.children_left[h], f.children_right[h]))
            ):
                expected = e[local[f.children_left[h]]] + e[local[f.children_right[h]]] - e[local[h]]
                assert problem.a[v] == expected
    with pytest.raises(ValueError, match="count_mask must have shape"):
        prepare(brf, X, y, CostModel(c), count_mask=mask[:, :2])


# ------------------------------------------------------------------------------ regression
@pytest.mark.parametrize(
    "seed,weighted",
    [
        (5, False),  # unit weights
        (6, True),  # real-valued sample weights
    ],
)
def test_path_is_optimal_against_brute_force_over_all_prunings(seed, weighted, ip3_regression_brute_force):
    rf, X, y, c = _regression_instance(seed, n=80, trees=3, depth=2)
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
    # the path's error is the trees' weighted mean squared error, and its score minus the
    # forest's, as every pruned forest predicts
    score = path.score()
    for k in range(len(path)):
        f = path.forest(k)
        per_tree = [f.subset([t]).predict(X) for t in range(f.n_trees)]
        mse = np.mean([np.average((y - p) ** 2, weights=w) for p in per_tree])
        assert path.error[k] == pytest.approx(mse, rel=1e-9)
        assert score[k] == pytest.approx(-np.average((y - f.predict(X)) ** 2, weights=w), rel=1e-9)


def test_leaves_predict_the_mean_of_their_rows_or_keep_the_forest():
    rf, X, y, c = _regression_instance(7)
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


def test_regression_integer_weights_equal_repeated_rows():
    rf, X, y, c = _regression_instance(8)
    w = np.random.default_rng(1).integers(0, 4, size=len(y))
    weighted = budget_prune_path(rf, X, y, CostModel(c), sample_weight=w, progress=False)
    repeated = budget_prune_path(rf, np.repeat(X, w, 0), np.repeat(y, w), CostModel(c), progress=False)
    assert len(weighted) == len(repeated) > 3
    for name in ("lambdas", "error", "cost"):
        np.testing.assert_allclose(getattr(weighted, name), getattr(repeated, name), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(weighted.score(), repeated.score(), rtol=1e-9)


def test_out_of_bag_rows_are_charged_against_in_bag_means():
    # a node predicts the mean of its in-bag rows and is charged its out-of-bag squared error
    rf, X, y, c = _regression_instance(9, trees=2)
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

    rf, X, y, c = _regression_instance(10)
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


def test_errors_on_regression_forests():
    lightgbm = pytest.importorskip("lightgbm")
    rf, X, y, c = _regression_instance(11, n=60)
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
