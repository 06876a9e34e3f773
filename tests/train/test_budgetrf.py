"""BudgetRFClassifier and BudgetRFRegressor: split rule, impurities and forest export against direct
references."""

import itertools
import math

import numpy as np
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

import thrifty
from thrifty import CostModel
from thrifty.estimator_checks import BudgetCase, parametrize_with_budget_checks
from thrifty.exceptions import BudgetError
from thrifty.train._budgetrf_kernels import SQUARED_PAIRS, impurity
from thrifty.train.budgetrf import BudgetRFClassifier, BudgetRFRegressor


def _pairs_ref(counts, alpha):
    out = 0.0
    for i, j in itertools.combinations(range(len(counts)), 2):
        v = max(counts[i] - alpha, 0) * max(counts[j] - alpha, 0) - alpha**2
        out += max(v, 0.0)
    return out


@pytest.mark.parametrize("counts", [[5, 0], [3, 4], [10, 2, 7], [1, 1, 1, 1], [0, 0, 0]])
@pytest.mark.parametrize("alpha", [0.0, 1.0, 2.5])
def test_impurities_match_their_formulas(counts, alpha):
    c = np.asarray(counts, dtype=float)
    assert impurity(c, 0, alpha, 2.0) == pytest.approx(_pairs_ref(counts, alpha))
    if alpha == 0.0:  # Pairs counts the pairs of differently labelled examples
        labels = np.repeat(np.arange(len(c)), counts)
        mixed = sum(a != b for a, b in itertools.combinations(labels, 2))
        assert impurity(c, 0, 0.0, 2.0) == mixed
        assert impurity(c, 2, 0.0, 2.0) == pytest.approx(2 * mixed)  # powers, p = 2
    total = sum(counts)
    h = -sum(k / total * math.log(k / total) for k in counts if k) if total else 0.0
    assert impurity(c, 1, alpha / 10, 2.0) == pytest.approx(h if h >= alpha / 10 else 0.0)
    m = np.maximum(c - alpha, 0)
    assert impurity(c, 2, alpha, 3.0) == pytest.approx(max(m.sum() ** 3 - (m**3).sum(), 0.0))


def _root_split_reference(X, y, cost, split, w=None, node_impurity=None):
    """Algorithm 1 of Nan et al. (2015) at the root, by enumeration, with ``node_impurity`` of
    a boolean row mask (default the Pairs impurity of weighted class counts); NaN tried on
    either side of every threshold (right first), and the split of the non-missing values from
    the missing ones."""
    w = np.ones(len(y)) if w is None else w

    def pairs(rows):
        return _pairs_ref(np.bincount(y[rows], weights=w[rows], minlength=2), 0.0)

    node_impurity = node_impurity or pairs

    def crit(left):
        il, ir = node_impurity(left), node_impurity(~left)
        if split == "minmax":
            return max(il, ir)
        return (w[left].sum() * il + w[~left].sum() * ir) / w.sum()

    imp = node_impurity(np.ones(len(y), dtype=bool))
    best = (np.inf, 0.0, None, None, None)
    for f in range(X.shape[1]):
        x = X[:, f]
        missing = np.isnan(x)
        values = np.unique(x[~missing])
        crit_f, thr_f, nan_left_f = np.inf, None, None
        for a, b in zip(values[:-1], values[1:]):
            for nan_left in (False, True) if missing.any() else (False,):
                c = crit((x <= a) | (missing & nan_left))
                if c < crit_f:
                    crit_f, thr_f, nan_left_f = c, (a + b) / 2, nan_left
        if missing.any() and len(values):
            c = crit(~missing)
            if c < crit_f:
                crit_f, thr_f, nan_left_f = c, values[-1], False
        red = imp - crit_f
        if red > 1e-7 * (1 + imp):
            score = cost[f] / red
            if score < best[0] or (score == best[0] and red > best[1]):
                best = (score, red, f, thr_f, nan_left_f)
    return best[2], best[3], best[4]


@pytest.mark.parametrize("split", ["minmax", "expected"])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_root_split_follows_the_cost_weighted_rule(split, seed, missing):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(60, 5)).round(1)
    y = (X[:, 0] + 0.7 * X[:, 1] + rng.normal(scale=0.8, size=60) > 0).astype(int)
    X[rng.random(X.shape) < missing] = np.nan
    cost = rng.uniform(0.5, 5.0, size=5)
    w = rng.uniform(0.2, 3.0, size=60) if missing else None
    m = BudgetRFClassifier(
        1, costs=cost, max_depth=1, max_features=None, bootstrap=False, split=split, progress=False
    ).fit(X, y, sample_weight=w)
    f, t, nan_left = _root_split_reference(X, y, cost, split, w)
    root = m.forest_.roots[0]
    assert m.forest_.feature[root] == f
    assert m.forest_.threshold[root] == pytest.approx(t)
    if missing and np.isnan(X[:, f]).any():
        assert m.forest_.missing_left[root] == nan_left


def test_full_trees_are_pure_and_proba_averages_leaf_distributions():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=300, n_features=6, n_classes=3, n_informative=4, random_state=0)
    m = BudgetRFClassifier(7, random_state=0, progress=False).fit(X, y)
    f = m.forest_
    assert f.aggregation == "mean" and f.link == "proba" and f.n_trees == 7
    leaves = f.apply(X)
    manual = np.mean([f.value[leaves[:, t]] for t in range(7)], axis=0)
    np.testing.assert_allclose(m.predict_proba(X), manual)
    np.testing.assert_allclose(thrifty.evaluate(f, X).proba, manual)
    # without bootstrap and with every feature, an unlimited tree separates distinct rows
    single = BudgetRFClassifier(1, bootstrap=False, max_features=None, progress=False).fit(X, y)
    assert np.mean(single.predict(X) == y) == 1.0
    assert set(np.unique(single.forest_.value)) <= {0.0, 1.0}


@pytest.mark.parametrize("estimator", [BudgetRFClassifier, BudgetRFRegressor])
def test_costs_steer_the_forest_to_cheap_features(estimator):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(800, 6))
    y = X[:, 0] + X[:, 1] + 0.5 * X[:, 2]
    y = (y > 0).astype(int) if estimator is BudgetRFClassifier else y
    uniform = estimator(20, max_depth=6, random_state=0, progress=False).fit(X, y)
    costs = CostModel([50.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    budgeted = estimator(20, costs=costs, max_depth=6, random_state=0, progress=False).fit(X, y)
    assert budgeted.forest_.feature_usage()[0] < uniform.forest_.feature_usage()[0]
    assert (
        thrifty.evaluate(budgeted.forest_, X, costs).cost.mean
        < thrifty.evaluate(uniform.forest_, X, costs).cost.mean
    )


def _prefix_table(forest, X, y, costs):
    """Cost and metric (accuracy, or minus the mean squared error) of every prefix of ``forest``,
    by brute force."""
    rows = []
    for k in range(1, forest.n_trees + 1):
        ev = thrifty.evaluate(forest.subset(range(k)), X, costs)
        if forest.is_classifier:
            metric = np.mean(forest.classes[np.argmax(ev.proba, axis=1)] == y)
        else:
            metric = -np.mean((ev.raw - y) ** 2)
        rows.append((k, ev.cost.mean, metric))
    return rows


def _budget_data(regression=False):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = X[:, 0] + X[:, 1] + 0.5 * X[:, 2] + rng.normal(scale=0.5, size=400)
    return (
        X,
        y if regression else (y > 0).astype(int),
        CostModel([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], tree_cost=0.1),
    )


def test_budget_on_training_rows_keeps_the_longest_prefix_within_it():
    # the paper's rule: trees are added while the mean cost stays within the budget
    X, y, costs = _budget_data()
    params = dict(costs=costs, max_depth=4, random_state=0, progress=False)
    full = BudgetRFClassifier(12, **params).fit(X, y)
    table = _prefix_table(full.forest_, X, y, costs)
    budget = (table[3][1] + table[4][1]) / 2 if table[3][1] < table[4][1] else table[6][1]
    m = BudgetRFClassifier(12, budget=budget, **params).fit(X, y)
    k = max(k for k, cost, _ in table if cost <= budget)
    assert m.n_estimators_ == k < 12 and m.oob_mask().shape == (400, k)
    np.testing.assert_allclose(m.predict_proba(X), full.forest_.subset(range(k)).predict_proba(X))
    # the prefixes up to the first one over the budget, where adding trees stops
    assert m.budget_search_["n_trees"].tolist() == list(range(1, k + 2))
    np.testing.assert_allclose(m.budget_search_["cost"], [c for _, c, _ in table[: k + 1]])
    assert m.budget_search_["metric"].isna().all()


@pytest.mark.parametrize("estimator", [BudgetRFClassifier, BudgetRFRegressor])
def test_budget_with_calibration_rows_keeps_the_best_prefix_within_it(estimator):
    # the most accurate prefix, or for a regressor the one of least squared error
    X, y, costs = _budget_data(regression=estimator is BudgetRFRegressor)
    params = dict(costs=costs, max_depth=4, random_state=0, progress=False)
    full = estimator(12, **params).fit(X[:250], y[:250])
    table = _prefix_table(full.forest_, X[250:], y[250:], costs)
    budget = table[8][1]
    feasible = [row for row in table if row[1] <= budget]
    best = max(acc for _, _, acc in feasible)
    k = min((row for row in feasible if row[2] >= best - 1e-12), key=lambda r: (r[1], r[0]))[0]
    m = estimator(12, budget=budget, **params).fit(X[:250], y[:250], calibration=(X[250:], y[250:]))
    assert m.n_estimators_ == k
    over = next(i for i, row in enumerate(table) if row[1] > budget)
    np.testing.assert_allclose(m.budget_search_["metric"], [acc for _, _, acc in table[: over + 1]])
    with pytest.raises(BudgetError, match="no model meets budget"):
        estimator(12, budget=0.5 * table[0][1], **params).fit(X[:250], y[:250])


def test_oob_estimates_and_string_labels():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=400, n_features=5, random_state=1)
    labels = np.array(["no", "yes"])[y]
    m = BudgetRFClassifier(30, max_depth=5, oob_score=True, random_state=0, progress=False)
    m.fit(X, labels)
    np.testing.assert_array_equal(m.classes_, ["no", "yes"])
    np.testing.assert_allclose(m.oob_decision_function_.sum(axis=1), 1.0)
    assert 0.7 < m.oob_score_ <= 1.0
    assert set(m.predict(X)) <= {"no", "yes"}


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"impurity": "gini"}, "impurity must be"),
        ({"split": "median"}, "split must be"),
        ({"alpha": -1.0}, "alpha must be"),
        ({"max_features": 0}, "max_features"),
        ({"oob_score": True, "bootstrap": False}, "needs bootstrap"),
        ({"budget": 0.0}, "budget must be"),
        ({"costs": [1.0, 2.0]}, "X has 3 features, but costs= prices 2"),
    ],
)
def test_errors(kwargs, match):
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match=match):
        BudgetRFClassifier(2, progress=False, **kwargs).fit(X, np.arange(20) % 2)


def _expected_failures(est):
    if est.bootstrap:
        reason = (
            "a bootstrap draws n rows uniformly, so a row repeated k times is drawn about k times as "
            "often as one of weight k: equal in expectation, not draw for draw (bootstrap=False passes)"
        )
        return {"check_sample_weight_equivalence_on_dense_data": reason}
    return {}


@parametrize_with_checks(
    [
        # bootstrapped forests, and one tree on every row and feature, of both tasks
        BudgetRFClassifier(5, max_depth=4, random_state=0, progress=False),
        BudgetRFClassifier(3, max_depth=4, bootstrap=False, max_features=None, progress=False),
        BudgetRFRegressor(5, max_depth=4, random_state=0, progress=False),
        BudgetRFRegressor(3, max_depth=4, bootstrap=False, max_features=None, progress=False),
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _same_forest(a, b):
    for name in ("feature", "threshold", "children_left", "missing_left", "value"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def _weighted_data(seed=0, n=120):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).round(1)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + rng.normal(scale=0.7, size=n) > 0).astype(int) + (X[:, 1] > 1)
    return X, y


@pytest.mark.parametrize("split", ["minmax", "expected"])
@pytest.mark.parametrize("impurity", ["pairs", "entropy", "powers"])
def test_integer_weights_equal_repeated_rows(split, impurity):
    X, y = _weighted_data()
    w = np.random.default_rng(1).integers(0, 4, size=len(y))
    params = dict(bootstrap=False, max_features=None, split=split, impurity=impurity, progress=False)
    params.update(min_samples_split=3, alpha=0.5 if impurity != "entropy" else 0.05)
    weighted = BudgetRFClassifier(3, random_state=0, **params).fit(X, y, sample_weight=w)
    repeated = BudgetRFClassifier(3, random_state=0, **params).fit(np.repeat(X, w, 0), np.repeat(y, w))
    _same_forest(weighted.forest_, repeated.forest_)
    # weight 0 is the same as leaving the row out
    kept = w > 0
    dropped = BudgetRFClassifier(3, random_state=0, **params).fit(X[kept], y[kept], sample_weight=w[kept])
    _same_forest(weighted.forest_, dropped.forest_)


def test_weights_enter_the_bootstrap_as_counts():
    # a bootstrapped tree's class counts at the root are the drawn rows' counts times their weights
    X, y = _weighted_data(2)
    w = np.random.default_rng(3).uniform(0.0, 3.0, size=len(y))
    m = BudgetRFClassifier(2, max_depth=0, random_state=0, progress=False).fit(X, y, sample_weight=w)
    for t, sample in enumerate(m.estimators_samples_):
        counts = np.bincount(y[sample], weights=w[sample], minlength=3)
        np.testing.assert_allclose(m.forest_.value[m.forest_.roots[t]], counts / counts.sum())


def test_missing_values_follow_the_learned_direction():
    # the label is "x is missing": the only useful split sends NaN one way
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = (rng.random(200) < 0.5).astype(int)
    x[y == 1] = np.nan
    X = np.column_stack([x, rng.normal(size=200)])
    m = BudgetRFClassifier(1, bootstrap=False, max_features=None, max_depth=1, progress=False).fit(X, y)
    assert m.score(X, y) == 1.0
    np.testing.assert_array_equal(m.predict([[np.nan, 0.0], [0.3, 0.0]]), [1, 0])
    np.testing.assert_allclose(thrifty.evaluate(m.forest_, X).proba, m.predict_proba(X))


def test_pandas_categories_are_coded_and_recorded():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    colour = rng.choice(["red", "green", "blue"], size=300)
    df = pd.DataFrame({"colour": pd.Categorical(colour), "x": rng.normal(size=300)})
    df.loc[::17, "colour"] = None
    y = np.isin(colour, ["red"]).astype(int)
    m = BudgetRFClassifier(5, max_features=None, random_state=0, progress=False).fit(df, y)
    assert m.forest_.categories == {0: ["blue", "green", "red"]}
    assert list(m.feature_names_in_) == ["colour", "x"]
    # the same rows with the columns reordered and a category order changed predict the same
    other = df[["x", "colour"]].copy()
    other["colour"] = other["colour"].cat.reorder_categories(["red", "blue", "green"])
    np.testing.assert_array_equal(m.predict_proba(df), m.forest_.predict_proba(other))
    # coded by hand: the codes the forest was trained on
    codes = df["colour"].cat.codes.to_numpy().astype(float)
    codes[codes < 0] = np.nan
    np.testing.assert_allclose(
        m.predict_proba(df), m.forest_.predict_proba(np.column_stack([codes, df["x"]]))
    )
    assert m.score(df, y) > 0.9


@pytest.mark.parametrize("kind", ["polars", "pyarrow"])
def test_polars_and_pyarrow_tables_keep_names_and_categories(kind):
    pd = pytest.importorskip("pandas")
    lib = pytest.importorskip(kind, reason=f"{kind} is needed to test {kind} input")
    rng = np.random.default_rng(1)
    colour = rng.choice(["red", "green", "blue"], size=200)
    df = pd.DataFrame({"x": rng.normal(size=200), "colour": pd.Categorical(colour)})
    y = (colour == "red").astype(int)
    table = lib.from_pandas(df) if kind == "polars" else lib.Table.from_pandas(df, preserve_index=False)
    params = dict(costs={"x": 1.0, "colour": 3.0}, max_features=None, random_state=0, progress=False)
    m = BudgetRFClassifier(4, **params).fit(table, y)
    assert list(m.feature_names_in_) == ["x", "colour"] and m.costs_.feature_costs.tolist() == [1.0, 3.0]
    # polars keeps its categories in order of appearance: they are recorded as given
    assert sorted(m.forest_.categories[1]) == ["blue", "green", "red"]
    reference = BudgetRFClassifier(4, **params).fit(table.to_pandas(), y)
    np.testing.assert_array_equal(m.predict_proba(table), reference.predict_proba(table.to_pandas()))
    # coded by category name, a pandas frame of the same rows predicts the same
    np.testing.assert_array_equal(m.predict_proba(table), m.predict_proba(df))


def test_pruned_and_adapt_wrap_a_forest_of_categorical_frames():
    # issue 16: both failed with "could not convert string to float" when wrapping BudgetRF
    pd = pytest.importorskip("pandas")
    from thrifty.prune.estimator import BudgetPrunedClassifier
    from thrifty.train import ADAPTClassifier

    rng = np.random.default_rng(0)
    colour = rng.choice(["red", "green", "blue"], size=300)
    df = pd.DataFrame({"colour": pd.Categorical(colour), "x": rng.normal(size=300)})
    y = ((colour == "red") ^ (df["x"] > 1)).astype(int).to_numpy()
    rf = BudgetRFClassifier(10, max_depth=5, random_state=0, progress=False)
    for wrapper in (BudgetPrunedClassifier(rf, budget=3.0), ADAPTClassifier(rf)):
        fitted = wrapper.fit(df, y)
        np.testing.assert_array_equal(fitted.predict(df), fitted.evaluate(df).labels)


# ------------------------------------------------------------------------------ regression
def _squared_pairs_ref(y, w, sigma2, alpha=0.0):
    """``[sum_{i<j} w_i w_j (y_i - y_j)^2 / sigma^2 - alpha]_+``, pair by pair."""
    total = sum(w[i] * w[j] * (y[i] - y[j]) ** 2 for i, j in itertools.combinations(range(len(y)), 2))
    return max(total / sigma2 - alpha, 0.0)


@pytest.mark.parametrize("alpha", [0.0, 0.5, 40.0])
def test_squared_pairs_match_their_formula_and_are_admissible(alpha):
    rng = np.random.default_rng(0)
    y, w = rng.normal(size=12), rng.uniform(0.2, 2.0, size=12)

    def F(rows):
        rows = np.asarray(rows, dtype=int)
        sums = np.array([w[rows].sum(), (w * y)[rows].sum(), (w * y * y)[rows].sum()])
        return impurity(sums, SQUARED_PAIRS, alpha, 2.0)

    assert F(range(12)) == pytest.approx(_squared_pairs_ref(y, w, 1.0, alpha))
    assert F([3]) == 0.0 and impurity(np.array([2.0, 2.0, 2.0]), SQUARED_PAIRS, 0.0, 2.0) == 0.0
    # monotone and supermodular (Nan et al. 2015's admissibility), on random nested sets
    for _ in range(200):
        big = np.flatnonzero(rng.random(12) < 0.6)
        small = big[rng.random(len(big)) < 0.5]
        j = rng.integers(12)
        if j in big:
            continue
        assert F(small) <= F(big) + 1e-12
        assert F([*big, j]) - F(big) >= F([*small, j]) - F(small) - 1e-9


@pytest.mark.parametrize("split", ["minmax", "expected"])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("missing", [0.0, 0.2])
def test_regressor_root_split_follows_the_cost_weighted_rule(split, seed, missing):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(40, 4)).round(1)
    y = 2.0 * X[:, 0] + X[:, 1] + rng.normal(scale=0.5, size=40)
    X[rng.random(X.shape) < missing] = np.nan
    cost = rng.uniform(0.5, 5.0, size=4)
    w = rng.uniform(0.2, 3.0, size=40) if missing else np.ones(40)
    sigma2 = np.average((y - np.average(y, weights=w)) ** 2, weights=w)
    m = BudgetRFRegressor(
        1, costs=cost, max_depth=1, max_features=None, bootstrap=False, split=split, progress=False
    ).fit(X, y, sample_weight=w)
    f, t, nan_left = _root_split_reference(
        X, y, cost, split, w, node_impurity=lambda rows: _squared_pairs_ref(y[rows], w[rows], sigma2)
    )
    root = m.forest_.roots[0]
    assert m.forest_.feature[root] == f
    assert m.forest_.threshold[root] == pytest.approx(t)
    if missing and np.isnan(X[:, f]).any():
        assert m.forest_.missing_left[root] == nan_left
    # each leaf predicts the weighted mean target of its rows
    leaves = m.forest_.apply(X)[:, 0]
    for leaf in np.unique(leaves):
        rows = leaves == leaf
        assert m.forest_.value[leaf, 0] == pytest.approx(np.average(y[rows], weights=w[rows]))


def _pairs_by_outer(y):
    """Unweighted squared pairs ``sum_{i<j} (y_i - y_j)^2``, from the full difference matrix."""
    return float(np.square(np.subtract.outer(y, y)).sum()) / 2.0


@pytest.mark.parametrize("split", ["minmax", "expected"])
@pytest.mark.parametrize("cost_ratio", [1.2, 1.5, 3.0])
def test_regressor_every_node_follows_the_cost_weighted_rule(split, cost_ratio):
    """Below the root too: each internal node's split is the enumerated rule's on the node's rows,
    and a leaf above ``max_depth`` is a node where no feature reduces the impurity."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(48, 3)).round(2)
    y = 3.0 * (X[:, 1] > 0) + 0.3 * X[:, 2] + 0.1 * rng.normal(size=48)
    cost = np.array([1.0, cost_ratio, 2.0])
    m = BudgetRFRegressor(
        1, costs=cost, max_depth=4, max_features=None, bootstrap=False, split=split, progress=False
    ).fit(X, y)
    f = m.forest_
    stack, checked = [(f.roots[0], np.ones(len(y), dtype=bool), 0)], 0
    while stack:
        node, rows, depth = stack.pop()
        Xn, yn = X[rows], y[rows]
        ref_f, ref_t, _ = _root_split_reference(
            Xn, yn, cost, split, np.ones(len(yn)), node_impurity=lambda r, yn=yn: _pairs_by_outer(yn[r])
        )
        if f.feature[node] < 0:
            assert depth == 4 or ref_f is None
            continue
        assert f.feature[node] == ref_f
        assert f.threshold[node] == pytest.approx(ref_t)
        left = rows & (X[:, ref_f] <= ref_t)
        stack += [(f.children_left[node], left, depth + 1), (f.children_right[node], rows & ~left, depth + 1)]
        checked += 1
    assert checked >= 7


def test_regressor_prefers_a_useless_cheap_feature_to_one_over_four_thirds_its_cost():
    """The rule, not a bug: a balanced cut on a feature unrelated to ``y`` leaves each half about a
    quarter of the node's squared pairs (it has half the rows, so a quarter of the pairs), i.e.
    removes 3/4 of them, and no cut removes more than all of them. So ``cost / reduction`` prefers
    the useless feature as soon as the useful one costs more than ``red_useful / red_useless``
    (about 4/3) times as much; grown out, trees then test the useful feature almost never, unless
    ``max_features`` leaves the cheap feature out of some nodes' candidates."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = 3.0 * (X[:, 1] > 0) + 0.1 * rng.normal(size=200)
    total = _pairs_by_outer(y)

    def best_reduction(x):
        o = np.argsort(x)
        return total - min(
            max(_pairs_by_outer(y[o[:k]]), _pairs_by_outer(y[o[k:]])) for k in range(1, len(y))
        )

    useless, useful = best_reduction(X[:, 0]) / total, best_reduction(X[:, 1]) / total
    assert 0.74 < useless < 0.76 and useful > 0.99
    ratio = useful / useless
    assert ratio == pytest.approx(4 / 3, abs=0.01)
    for c in (0.97 * ratio, 1.03 * ratio):
        m = BudgetRFRegressor(
            1, costs=[1.0, c], max_depth=1, max_features=None, bootstrap=False, progress=False
        ).fit(X, y)
        assert m.forest_.feature[m.forest_.roots[0]] == (1 if c < ratio else 0)
    grown = BudgetRFRegressor(5, costs=[1.0, 3.0], max_features=None, random_state=0, progress=False).fit(
        X, y
    )
    usage = grown.forest_.feature_usage()
    assert (grown.forest_.feature[grown.forest_.roots] == 0).all() and usage[1] < 0.02 * usage.sum()
    sampled = BudgetRFRegressor(5, costs=[1.0, 3.0], max_features=1, random_state=0, progress=False).fit(X, y)
    usage = sampled.forest_.feature_usage()
    assert usage[1] > 0.2 * usage.sum()


def test_regressor_grows_to_pure_leaves_and_averages_them():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 6))
    y = X[:, 0] + X[:, 1] + 0.5 * X[:, 2]
    single = BudgetRFRegressor(1, bootstrap=False, max_features=None, progress=False).fit(X, y)
    np.testing.assert_allclose(single.predict(X), y)  # distinct targets: every leaf is one row
    uniform = BudgetRFRegressor(20, max_depth=6, random_state=0, progress=False).fit(X, y)
    f = uniform.forest_
    assert f.task == "regression" and f.aggregation == "mean" and f.link == "identity"
    np.testing.assert_allclose(thrifty.evaluate(f, X).raw, uniform.predict(X))
    # a constant target is one leaf per tree
    flat = BudgetRFRegressor(3, random_state=0, progress=False).fit(X, np.full(500, 7.0))
    assert flat.forest_.n_nodes == 3
    np.testing.assert_allclose(flat.predict(X), 7.0)


@pytest.mark.parametrize("split", ["minmax", "expected"])
def test_regressor_integer_weights_equal_repeated_rows(split):
    # integral targets: the sums are exact, so ties between splits break alike
    X, _ = _weighted_data()
    y = np.round(np.nan_to_num(X[:, 0]) * 20 + np.random.default_rng(4).normal(scale=10, size=len(X)))
    w = np.random.default_rng(1).integers(0, 4, size=len(y))
    params = dict(
        bootstrap=False, max_features=None, split=split, alpha=0.5, min_samples_split=3, progress=False
    )
    weighted = BudgetRFRegressor(3, random_state=0, **params).fit(X, y, sample_weight=w)
    repeated = BudgetRFRegressor(3, random_state=0, **params).fit(np.repeat(X, w, 0), np.repeat(y, w))
    _same_forest(weighted.forest_, repeated.forest_)


def test_regressor_oob_prediction_and_errors():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] - X[:, 1] + rng.normal(scale=0.3, size=300)
    m = BudgetRFRegressor(30, max_depth=6, oob_score=True, random_state=0, progress=False).fit(X, y)
    mask = m.oob_mask()
    per_tree = np.column_stack([m.forest_.subset([t]).predict(X) for t in range(30)])
    expected = (per_tree * mask).sum(axis=1) / mask.sum(axis=1)
    np.testing.assert_allclose(m.oob_prediction_, expected)
    assert 0.7 < m.oob_score_ < 1.0
    with pytest.raises(ValueError, match="regression targets must be finite"):
        BudgetRFRegressor(2, progress=False).fit(X, np.where(y > 0, np.nan, y))
    with pytest.raises(ValueError, match="BudgetRFRegressor: oob_score=True needs bootstrap=True"):
        BudgetRFRegressor(2, oob_score=True, bootstrap=False, progress=False).fit(X, y)


_Xr = np.random.default_rng(5).normal(size=(200, 6))
_yr = _Xr[:, 0] + 0.5 * _Xr[:, 1] + np.random.default_rng(6).normal(scale=0.3, size=200)


@parametrize_with_budget_checks(
    [
        BudgetCase(
            BudgetRFRegressor(8, max_depth=4, max_features=1.0, random_state=0, progress=False),
            _Xr,
            _yr,
            budgets=[4.0, 8.0, 30.0],
            costs=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        ),
        # The default draws sqrt(6) = 2 candidates per node: pricier trees, so dearer budgets.
        BudgetCase(
            BudgetRFRegressor(8, max_depth=4, random_state=0, progress=False),
            _Xr,
            _yr,
            budgets=[8.0, 12.0, 30.0],
            costs=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        ),
    ]
)
def test_regressor_budget_contract(check):
    check()
