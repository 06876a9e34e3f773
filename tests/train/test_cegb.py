"""CEGB on LightGBM: the translation of a CostModel into cegb_* penalties, budgets, estimators."""

import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from tests._helpers.data import linear_binary
from thrifty.costs import CostModel
from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.runtime.evaluate import evaluate
from thrifty.train.cegb import (
    BudgetError,
    CEGBClassifier,
    CEGBRanker,
    CEGBRegressor,
    cegb_frontier,
    cegb_params,
    cegb_penalties,
)

FAST = {"n_jobs": 1, "progress": False}


_WEIGHT_REASON = (
    "LightGBM is not: min_child_samples, its histogram bins and the rows of weight 0 count rows, "
    "not weight, and its CEGB penalties count a leaf's rows (a row of weight k pays once)"
)


# min_child_samples=5 so that the check's small data sets grow trees (with 20 they stay stumps
# and the weighted / repeated comparison passes vacuously)
@parametrize_with_checks(
    [
        CEGBClassifier(n_estimators=20, learning_rate=0.3, min_child_samples=5, n_jobs=1),
        CEGBRegressor(n_estimators=20, learning_rate=0.3, min_child_samples=5, n_jobs=1),
        CEGBRanker(n_estimators=20, learning_rate=0.3, min_child_samples=5, n_jobs=1),
    ],
    expected_failed_checks=lambda est: {"check_sample_weight_equivalence_on_dense_data": _WEIGHT_REASON},
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_tradeoff_is_the_papers_lambda():
    # One binary feature, one split possible: Eq. (12) gives its loss reduction
    # 1/2 (G_L^2/H_L + G_R^2/H_R - G^2/H) with g = mean(y) - y, h = 1. The split must happen
    # exactly when that exceeds lambda * beta * N (Eq. (13), every row pays the lazy cost).
    rng = np.random.default_rng(1)
    x = (rng.random(400) < 0.3).astype(float)
    y = 2.0 * x + rng.normal(scale=0.3, size=400)
    g = y.mean() - y
    gl, gr = g[x == 1].sum(), g[x == 0].sum()
    reduction = 0.5 * (gl**2 / (x == 1).sum() + gr**2 / (x == 0).sum() - g.sum() ** 2 / 400)
    beta = 3.0
    threshold = reduction / (beta * 400)
    costs = CostModel([beta])
    n_splits = []
    for lam in (0.99 * threshold, 1.01 * threshold):
        reg = CEGBRegressor(costs=costs, tradeoff=lam, n_estimators=1, min_child_samples=1, **FAST)
        reg.fit(x[:, None], y)
        n_splits.append(int((reg.forest_.feature >= 0).sum()))
    assert n_splits == [1, 0]


def test_penalties_from_groups_dependencies_and_evaluation_costs():
    costs = CostModel(
        {"age": 1, "TT4": 14.51, "T4U": 11.41, "FTI": 0, "a": 2, "b": 3, "panel": 4},
        feature_names=["age", "TT4", "T4U", "FTI", "a", "b"],
        groups={"panel": ["a", "b"]},
        dependencies={"FTI": ["TT4", "T4U"]},
        tree_cost=2.0,
        split_cost=0.5,
        fixed_costs={"a": 7.0},
    )
    pen = cegb_penalties(costs, num_leaves=31, max_depth=4)
    # a feature alone costs its closure: FTI pays its inputs, a group member the group's price
    assert pen["cegb_penalty_feature_lazy"] == pytest.approx([1, 14.51, 11.41, 25.92, 4, 4])
    assert pen["cegb_penalty_feature_coupled"] == [0, 0, 0, 0, 7.0, 0]
    assert pen["cegb_penalty_split"] == pytest.approx(0.5 + 2.0 / 4)
    # no depth limit: a tree's cost is spread over ceil(log2(num_leaves)) splits
    assert cegb_penalties(costs, num_leaves=31)["cegb_penalty_split"] == pytest.approx(0.5 + 2.0 / 5)
    params = cegb_params(costs, 0.25)
    assert params["cegb_tradeoff"] == 0.5  # LightGBM's gain is twice Eq. (12)'s
    assert cegb_params(costs, 0.0) == {}  # lambda = 0 is plain LightGBM


def test_expensive_feature_never_used_and_free_feature_used_freely():
    X, y = linear_binary()
    X = np.column_stack([X[:, 0], X[:, 0] + 1e-3 * np.random.default_rng(2).normal(size=len(y)), X[:, 1:]])
    # column 0 is free; column 1 is a (slightly noisy) copy of it costing 1000; others cost 5
    costs = CostModel([0.0, 1000.0, 5, 5, 5, 5, 5])
    clf = CEGBClassifier(costs=costs, tradeoff=0.05, n_estimators=50, **FAST).fit(X, y)
    usage = np.bincount(clf.forest_.feature[clf.forest_.feature >= 0], minlength=7)
    assert usage[1] == 0
    assert usage[0] > usage[2:].sum()  # the free feature carries most splits
    acquired = clf.cost_report(X).acquired
    assert acquired[:, 0].all() and not acquired[:, 1].any()


def test_coupled_cost_feature_is_reused_once_used():
    X, y = linear_binary()
    # only once-per-model costs: whichever of the two informative copies is paid for first is
    # then free, so the model never pays for the other copy
    Xc = np.column_stack([X[:, 0], X[:, 0].copy(), X[:, 1]])
    costs = CostModel([0.0, 0.0, 0.0], fixed_costs=[500.0, 500.0, 1e6])
    clf = CEGBClassifier(costs=costs, tradeoff=0.2, n_estimators=30, **FAST).fit(Xc, y)
    used = clf.forest_.feature[clf.forest_.feature >= 0]
    counts = np.bincount(used, minlength=3)
    assert (counts[:2] > 0).sum() == 1 and counts[:2].max() > 30  # one copy, many splits
    assert counts[2] == 0
    assert clf.cost_report(Xc).fixed == 500.0


def test_budget_search_records_every_trial_and_keeps_the_dearest_feasible():
    X, y = linear_binary(2000)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0, 8.0], split_cost=0.01)
    X_cal = X[1500:]
    clf = CEGBClassifier(costs=costs, budget=3.0, n_estimators=40, **FAST)
    clf.fit(X[:1500], y[:1500], calibration=(X_cal, y[1500:]))
    table = clf.budget_search_
    trials = table[~table["truncated"]]
    assert clf.n_fits_ == len(trials) <= clf.max_fits
    chosen = table[table["chosen"]].iloc[0]
    assert chosen["tradeoff"] == clf.tradeoff_ and chosen["cost"] == clf.calibration_cost_
    # no metric: the most expensive model within the budget, as measured on the calibration rows
    assert chosen["cost"] == table.loc[table["cost"] <= 3.0, "cost"].max()
    assert table["metric"].isna().all()


def test_weighted_calibration_rows_weigh_the_mean_cost():
    X, y = linear_binary(1200)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0, 8.0])
    w = np.random.default_rng(0).uniform(0, 2, size=400)
    clf = CEGBClassifier(costs=costs, budget=4.0, n_estimators=20, **FAST)
    clf.fit(X[:800], y[:800], calibration=(X[800:], y[800:], w))
    per_row = evaluate(clf.forest_, X[800:], costs).cost.total
    assert (
        clf.calibration_cost_ == pytest.approx(np.average(per_row, weights=w))
        and clf.calibration_cost_ <= 4.0
    )


def test_budget_below_the_cheapest_model_raises():
    X, y = linear_binary(300)
    costs = CostModel.uniform(6, tree_cost=1.0)
    with pytest.raises(BudgetError, match="cheapest possible model"):
        CEGBClassifier(costs=costs, budget=0.5, n_estimators=5, **FAST).fit(X, y)


def test_forest_equals_booster_with_categorical_and_multiclass():
    from thrifty.datasets import load_demo

    ds = load_demo()
    X, y, _ = ds.subset("train")
    clf = CEGBClassifier(costs=ds.costs, tradeoff=1e-3, n_estimators=30, **FAST).fit(X, y)
    assert any(str(X[c].dtype) == "category" for c in X.columns)
    np.testing.assert_allclose(clf.predict_proba(X)[:, 1], clf.booster_.predict(X), rtol=1e-12)
    rng = np.random.default_rng(3)
    Xm = rng.normal(size=(600, 4))
    ym = np.digitize(Xm[:, 0] + 0.5 * Xm[:, 1], [-0.5, 0.5])
    clf = CEGBClassifier(tradeoff=1e-3, n_estimators=20, **FAST).fit(Xm, ym)
    np.testing.assert_allclose(clf.predict_proba(Xm), clf.booster_.predict(Xm), rtol=1e-10)


def test_errors_name_the_problem():
    X, y = linear_binary(200)
    with pytest.raises(ValueError, match="X has 6 features, but costs= prices 2"):
        CEGBClassifier(costs=[1.0, 2.0], **FAST).fit(X, y)
    with pytest.raises(InvalidParameterError, match="not both"):
        CEGBClassifier(tradeoff=0.1, budget=3.0, **FAST).fit(X, y)
    with pytest.raises(InvalidParameterError, match="CEGBClassifier: budget must be"):
        CEGBClassifier(budget=-1.0, **FAST).fit(X, y)
    with pytest.raises(InputError, match="calibration must be a tuple"):
        CEGBClassifier(**FAST).fit(X, y, calibration=X)
    with pytest.raises(ValueError, match="features"):
        CEGBClassifier(n_estimators=5, **FAST).fit(X, y).predict(X[:, :3])


def test_ranker_with_qid_and_frontier():
    rng = np.random.default_rng(4)
    qid = np.repeat(np.arange(40), 15)
    X = rng.normal(size=(600, 8))
    y = np.clip(np.round(X[:, 0] + 0.5 * X[:, 1] + 1.5 + rng.normal(scale=0.5, size=600)), 0, 4).astype(int)
    costs = CostModel([1, 1, 5, 5, 20, 20, 50, 50.0])
    rk = CEGBRanker(costs=costs, budget=4.0, n_estimators=20, min_child_samples=5, **FAST)
    rk.fit(X, y, qid=qid)
    assert rk.forest_.task == "ranking"
    np.testing.assert_allclose(rk.predict(X), rk.booster_.predict(X), rtol=1e-10)
    table = cegb_frontier(
        X, y, costs, budgets=[2.0, 8.0], qid=qid, n_estimators=10, min_child_samples=5, **FAST
    )
    assert list(table["budget"]) == [2.0, 8.0]
    assert (table["mean_cost"] <= table["budget"] + 1e-9).all()  # measured on the training rows
    assert table["metric"].iloc[0] == "ndcg@10"  # the ranking task's primary metric


def test_dataframe_names_align_costs():
    X, y = linear_binary(400)
    df = pd.DataFrame(X, columns=list("abcdef"))
    costs = CostModel(dict(zip("fedcba", [1.0, 1, 1, 1, 1, 100.0])), feature_names=list("fedcba"))
    clf = CEGBClassifier(costs=costs, tradeoff=0.01, n_estimators=20, **FAST).fit(df, y)
    assert clf.costs_.feature_names == list("abcdef")
    assert clf.costs_.feature_costs[0] == 100.0  # "a" keeps its own price after re-ordering


def test_cost_jump_bridged_by_stopping_boosting_at_the_budget():
    # uniform costs: just above the trade-off that makes the first split worthwhile the model
    # is empty; just below it, many small leaves buy features at once. A budget in that gap is
    # met by the cheapest over-budget model cut where the budget runs out.
    X, y = linear_binary(2000, seed=5)
    clf = CEGBClassifier(costs=CostModel.uniform(6), budget=2.5, n_estimators=60, **FAST).fit(X, y)
    assert clf.calibration_cost_ <= 2.5 and clf.truncated_
    assert clf.n_estimators_ < clf.booster_.current_iteration()
    table = clf.budget_search_
    assert table["truncated"].iloc[-1] and table["chosen"].iloc[-1]
    # the cut model is the cheapest over-budget trial's
    over = table[(table["cost"] > 2.5) & ~table["truncated"]]
    assert clf.tradeoff_ == over["tradeoff"].max()
    np.testing.assert_allclose(
        clf.predict_proba(X)[:, 1], clf.booster_.predict(X, num_iteration=clf.n_estimators_), rtol=1e-12
    )
    no_cut = CEGBClassifier(
        costs=CostModel.uniform(6), budget=2.5, n_estimators=60, truncate=False, **FAST
    ).fit(X, y)
    assert not no_cut.truncated_ and no_cut.calibration_cost_ <= clf.calibration_cost_


def test_thyroid_dependencies_are_paid_exactly(data_home):
    from thrifty.datasets import load

    ds = load("thyroid", data_home=data_home)
    X, y, _ = ds.subset("train")
    clf = CEGBClassifier(costs=ds.costs, budget=45.0, n_estimators=30, **FAST).fit(X, y)
    report = clf.cost_report(X)
    names = ds.feature_names
    fti, tt4, t4u = (names.index(n) for n in ("FTI", "TT4", "T4U"))
    got_fti = report.acquired[:, fti]
    assert report.acquired[got_fti][:, [tt4, t4u]].all()
    # cost recomputed from the acquired features (FTI itself is free, its inputs are not)
    recomputed = report.acquired.astype(float) @ ds.costs.feature_costs
    np.testing.assert_allclose(report.feature, recomputed)


@pytest.mark.parametrize("kind", ["polars", "pyarrow"])
def test_polars_and_pyarrow_tables_keep_names_and_categories(kind):
    lib = pytest.importorskip(kind, reason=f"{kind} is needed to test {kind} input")
    X, y = linear_binary(600)
    df = pd.DataFrame(X, columns=list("abcdef"))
    df["g"] = pd.Categorical(np.where(X[:, 0] > 0.5, "hi", np.where(X[:, 0] < -0.5, "lo", "mid")))
    table = lib.from_pandas(df) if kind == "polars" else lib.Table.from_pandas(df, preserve_index=False)
    costs = {"a": 50.0, "b": 1.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 1.0, "g": 2.0}
    params = dict(costs=costs, tradeoff=0.003, n_estimators=20, **FAST)
    clf = CEGBClassifier(**params).fit(table, y)
    assert list(clf.feature_names_in_) == list("abcdefg")
    assert clf.costs_.feature_costs[0] == 50.0  # costs matched by name
    assert clf.forest_.categories  # the categorical column is a categorical feature
    reference = CEGBClassifier(**params).fit(table.to_pandas(), y)
    np.testing.assert_array_equal(clf.predict_proba(table), reference.predict_proba(table.to_pandas()))
    np.testing.assert_array_equal(clf.cost_report(table).total, reference.cost_report(df).total)
    np.testing.assert_array_equal(clf.predict_proba(table), clf.predict_proba(df))


def test_warm_start_sweeps_budgets_on_one_tradeoff_path():
    budgets = (3.0, 1.5, 6.0)  # compare's order: the middle budget first
    X, y = linear_binary(2000)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0, 8.0], split_cost=0.01)
    data = (X[:1500], y[:1500])
    cal = (X[1500:], y[1500:])
    warm = CEGBClassifier(costs=costs, n_estimators=30, warm_start=True, **FAST)
    seen = 0
    for b in budgets:
        warm.set_params(budget=b).fit(*data, calibration=cal)
        cold = CEGBClassifier(costs=costs, budget=b, n_estimators=30, **FAST).fit(*data, calibration=cal)
        table = warm.budget_search_
        # every model the earlier fits trained is a candidate again, without being retrained
        assert int(table["reused"].sum()) == seen
        seen += warm.n_fits_
        assert warm.calibration_cost_ <= b
        # at least as much of the budget spent as a cold search, with no more fits
        assert warm.calibration_cost_ >= cold.calibration_cost_ or np.isclose(
            warm.calibration_cost_, cold.calibration_cost_
        )
        assert warm.n_fits_ <= cold.n_fits_
        per_row = evaluate(warm.forest_, cal[0], costs).cost.total
        assert warm.calibration_cost_ == pytest.approx(per_row.mean())
    # fitting the first budget again trains nothing: its model is on the path
    first = CEGBClassifier(costs=costs, budget=budgets[0], n_estimators=30, **FAST)
    first.fit(*data, calibration=cal)
    warm.set_params(budget=budgets[0]).fit(*data, calibration=cal)
    assert warm.n_fits_ == 0 and warm.calibration_cost_ >= first.calibration_cost_
    if warm.tradeoff_ == first.tradeoff_:  # the cold search's own model: the same predictions
        np.testing.assert_array_equal(warm.predict_proba(cal[0]), first.predict_proba(cal[0]))


def test_warm_start_forgets_trials_of_other_data_or_parameters():
    X, y = linear_binary(2000)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0, 8.0], split_cost=0.01)
    est = CEGBClassifier(costs=costs, budget=3.0, n_estimators=20, warm_start=True, **FAST)
    est.fit(X[:1000], y[:1000])
    # other rows: nothing reused
    est.fit(X[1000:], y[1000:])
    assert not est.budget_search_["reused"].any() and est.n_fits_ >= 1
    # another tree shape: nothing reused either
    est.set_params(num_leaves=7).fit(X[1000:], y[1000:])
    assert not est.budget_search_["reused"].any()
    # the same again: everything reused, nothing trained
    est.fit(X[1000:], y[1000:])
    assert est.budget_search_["reused"].any() and est.n_fits_ == 0


def test_frontier_walks_one_path_and_keeps_each_budgets_model():
    X, y = linear_binary(2000)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0, 8.0], split_cost=0.01)
    budgets = [3.0, 1.5, 6.0]
    cal = (X[1500:], y[1500:])
    table, models = cegb_frontier(
        X[:1500],
        y[:1500],
        costs,
        budgets=budgets,
        calibration=cal,
        return_models=True,
        n_estimators=30,
        **FAST,
    )
    assert [m.budget for m in models] == budgets and len({id(m.forest_) for m in models}) == 3
    for m, b in zip(models, budgets, strict=True):
        assert m.calibration_cost_ <= b
        assert m.calibration_cost_ == pytest.approx(evaluate(m.forest_, cal[0], costs).cost.mean)
    # the later budgets reuse the path: fewer fits than the first
    assert table["n_fits"].iloc[1:].sum() <= 2 * table["n_fits"].iloc[0]


def test_multiclass_cost_jump_bridged_by_the_first_features_the_path_buys():
    """Eight classes, each told by its own feature: one tree per class, each buying its class's
    feature, so the path jumps from no feature to all eight and stopping boosting cannot help
    (one round is eight trees). The budget is met by a model of the first features the path
    buys (CEGB with an infinite penalty on the others and none on those)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 8))
    y = np.argmax(X + 0.5 * rng.normal(size=X.shape), axis=1)
    costs = CostModel.uniform(8)
    fit, cal, test = slice(0, 1600), slice(1600, 2000), slice(2000, None)
    kw = {"costs": costs, "budget": 2.5, "n_estimators": 30, **FAST}
    jump = CEGBClassifier(truncate=False, **kw).fit(X[fit], y[fit], calibration=(X[cal], y[cal]))
    assert jump.calibration_cost_ == 0.0  # the path's only model within the budget is constant
    clf = CEGBClassifier(**kw).fit(X[fit], y[fit], calibration=(X[cal], y[cal]))
    table = clf.budget_search_
    chosen = table[table["chosen"]].iloc[0]
    assert chosen["features"] == 2 and clf.calibration_cost_ == 2.0 and clf.tradeoff_ == 0.0
    # The first two features the richest trial buys: tree by tree (the order boosting grew
    # them), each tree's splits by depth, left to right.
    richest = clf.search_models_[int(table.loc[table["features"].isna(), "cost"].idxmax())]

    def splits(node, depth):
        if richest.feature[node] < 0:
            return []
        left, right = richest.children_left[node], richest.children_right[node]
        return [(depth, int(richest.feature[node]))] + splits(left, depth + 1) + splits(right, depth + 1)

    bought = [f for r in richest.roots for _, f in sorted(splits(r, 0), key=lambda s: s[0])]
    used = np.unique(clf.forest_.feature[clf.forest_.feature >= 0])
    assert sorted(used) == sorted(list(dict.fromkeys(bought))[:2])
    # The same as plain boosting (no penalty) on those two features alone.
    blank = X.copy()
    blank[:, [j for j in range(8) if j not in used]] = np.nan
    ref = CEGBClassifier(costs=costs, tradeoff=0.0, n_estimators=30, **FAST).fit(blank[fit], y[fit])
    np.testing.assert_allclose(clf.predict_proba(X[test]), ref.predict_proba(X[test]), rtol=1e-9, atol=1e-12)
    assert np.mean(clf.predict(X[test]) == y[test]) > np.mean(jump.predict(X[test]) == y[test]) + 0.1


def test_first_features_skip_one_priced_over_the_budget():
    """The path buys the best feature, priced 10, before two priced 1 each (flights' dep_delay
    before its weather and aircraft lookups). A budget of 2.5 is then met by a model of the
    affordable features the path bought, not stopped at the dear one with the free feature alone."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 4))
    y = (30 * X[:, 1] + X[:, 2] + X[:, 3] + 0.1 * X[:, 0] + rng.normal(size=3000) > 0).astype(int)
    costs = CostModel([0.0, 10.0, 1.0, 1.0])
    fit, cal = slice(0, 1600), slice(1600, 2000)
    clf = CEGBClassifier(costs=costs, budget=2.5, n_estimators=30, **FAST)
    clf.fit(X[fit], y[fit], calibration=(X[cal], y[cal]))
    used = set(np.unique(clf.forest_.feature[clf.forest_.feature >= 0]).tolist())
    # Before, the prefixes stopped at the dear feature: a model of the free one and one lookup.
    assert {2, 3} <= used and 1 not in used and 1.0 < clf.calibration_cost_ <= 2.5
    assert clf.tradeoff_ == 0.0  # plain boosting on the affordable features the path bought


def test_first_features_reach_the_affordable_features_the_path_never_bought():
    """The path's richest model bought the free feature and the dear one only (flights' CEGB at
    trade-off 0.037: ``dep_delay`` and the schedule, little weather, no aircraft lookup). The
    ladder of first-features models then goes on to the affordable features it never bought,
    cheapest first, so that a budget of 2.5 is spent on both lookups, not on the free feature
    alone."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2000, 4))
    y = (X[:, 0] + 3 * X[:, 1] + X[:, 2] + X[:, 3] + rng.normal(size=2000) > 0).astype(int)
    costs = CostModel([0.0, 10.0, 1.0, 1.5])
    # The richest model of a path that priced both lookups out: it reads features 0 and 1 only.
    blank = X.copy()
    blank[:, 2:] = np.nan
    richest = CEGBClassifier(costs=costs, tradeoff=0.0, n_estimators=5, **FAST).fit(blank, y).forest_
    assert set(np.unique(richest.feature[richest.feature >= 0]).tolist()) == {0, 1}
    fitted = []

    def fit_only(keep):
        fitted.append(keep)
        return (richest, None), float(costs.acquisition_cost(list(keep)))

    est = CEGBClassifier(costs=costs, budget=2.5, **FAST)
    found, fits = est._first_features(fit_only, [(0.5, 10.0, (richest, None))], 2.5, costs)
    # Feature 1 alone is over the budget; feature 2 (price 1) comes before feature 3 (1.5).
    assert fitted == [(0,), (0, 2), (0, 2, 3)] and fits == 3
    assert [c.cost for c in found] == [0.0, 1.0, 2.5]
