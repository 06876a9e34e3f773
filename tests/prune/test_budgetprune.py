"""budget_prune / budget_prune_path: the min-cut solve of (IP3) against HiGHS on the paper's LP."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

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


@pytest.mark.parametrize(
    "seed,classes,lam,leaves",
    [
        (0, 2, 0.0005, "distribution"),  # little pruning
        (1, 2, 0.01, "distribution"),  # moderate
        (2, 3, 0.003, "distribution"),  # multiclass
        (3, 2, 0.2, "distribution"),  # (nearly) everything pruned
        (4, 2, 0.0, "keep"),  # lam = 0 with the forest's own leaves: splits can hurt
        (5, 3, 0.002, "keep"),  # multiclass, the forest's own leaves
    ],
)
def test_min_cut_matches_highs_on_the_lp_of_ip3(seed, classes, lam, leaves, ip3_lp):
    rf, X, y, c = _instance(seed, classes=classes)
    costs = CostModel(c)
    problem, _, _, _ = prepare(rf, X, y, costs, leaf_values=leaves)
    chosen = solve(problem, lam)
    lp_value, x, n_int = _class_lp(ip3_lp, rf, X, y, c, lam, keep=leaves == "keep")
    assert objective(problem, chosen, lam) == pytest.approx(lp_value, rel=1e-9, abs=1e-12)
    # Theorem 4.2: the LP optimum HiGHS returns (a vertex) is integral
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
