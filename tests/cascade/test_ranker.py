"""CronusRanker: the scikit-learn meta-estimator around Cronus for rankers."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

import thrifty
from thrifty import CostModel
from thrifty.cascade import CronusRanker, cascade_scores, cronus, lambda_max
from thrifty.estimator_checks import BudgetCase, parametrize_with_budget_checks

lightgbm = pytest.importorskip("lightgbm")

N_QUERIES, N_DOCS = 60, 20
COSTS = CostModel([1, 2, 2, 5, 10, 20], tree_cost=1.0)
# Few stages and cycles: the fits stay fast, and the function layer runs the same options.
FAST = dict(n_stages=3, max_cycles=1, progress=False, n_threads=1)


def _queries(seed):
    """Documents of consecutive queries with relevance 0-4 rising with a noisy score."""
    rng = np.random.default_rng(seed)
    qid = np.repeat(np.arange(N_QUERIES), N_DOCS)
    X = rng.normal(size=(len(qid), 6))
    s = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + 0.3 * X[:, 4] + 0.3 * rng.normal(size=len(qid))
    y = np.clip(np.round(s + 1.5), 0, 4).astype(int)
    return X, y, qid


@pytest.fixture(scope="module")
def data():
    X, y, qid = _queries(0)
    X_cal, y_cal, q_cal = _queries(1)
    group = np.full(N_QUERIES, N_DOCS)
    model = lightgbm.LGBMRanker(n_estimators=20, num_leaves=4, min_child_samples=5, verbose=-1, n_jobs=1)
    return model.fit(X, y, group=group), X, y, qid, X_cal, y_cal, q_cal


def test_plan_is_the_function_layers(data):
    model, X, y, qid, *_ = data
    ranker = CronusRanker(model, costs=COSTS, **FAST).fit(X, y, qid=qid)
    # the paper's binarization y >= 3, the default lam (lambda_max / 16) and options
    relevant = y >= 3
    lam = lambda_max(model, X, relevant, COSTS, exact=False) / 16
    plan = cronus(model, X, relevant, COSTS, lam=lam, n_stages=3, max_cycles=1, n_threads=1)
    np.testing.assert_array_equal(ranker.plan_.stage_weights, plan.stage_weights)
    np.testing.assert_array_equal(ranker.plan_.stage_thresholds, plan.stage_thresholds)
    np.testing.assert_array_equal(ranker.plan_.stage_bias, plan.stage_bias)
    assert ranker.lam_ == pytest.approx(lam)
    np.testing.assert_array_equal(ranker.predict(X), cascade_scores(thrifty.evaluate(plan, X)))


def test_budget_search_on_calibration_queries(data, precision_by_query):
    model, X, y, qid, X_cal, y_cal, q_cal = data
    full = thrifty.evaluate(model, X_cal, COSTS).cost.mean
    ranker = CronusRanker(model, costs=COSTS, budget=0.5 * full, n_lams=4, **FAST)
    ranker.fit(X, y, qid=qid, calibration=(X_cal, y_cal, q_cal))
    table = ranker.budget_search_
    assert len(table) == 4 and table["lam"].is_monotonic_decreasing
    relevant = y >= 3
    for row in table.itertuples():
        # each row: the function layer's cascade for its lam, measured independently
        plan = cronus(model, X, relevant, COSTS, lam=row.lam, n_stages=3, max_cycles=1, n_threads=1)
        ev = thrifty.evaluate(plan, X_cal, COSTS)
        assert row.cost == pytest.approx(ev.cost.total.mean(), rel=1e-12)
        precision = precision_by_query(y_cal >= 3, cascade_scores(ev), q_cal)
        assert row.metric == pytest.approx(precision, abs=1e-12)
        if row.chosen:
            np.testing.assert_array_equal(ranker.plan_.stage_weights, plan.stage_weights)
    # the rule, recomputed: the highest precision@5 within the budget, the cheaper on a tie
    ok = table[table["cost"] <= ranker.budget]
    best = ok[ok["metric"] >= ok["metric"].max() - 1e-12]
    assert table.loc[table["chosen"], "lam"].item() == best.loc[best["cost"].idxmin(), "lam"] == ranker.lam_
    assert ranker.score(X_cal, y_cal, q_cal) == pytest.approx(best["metric"].max())
    assert ranker.cost_report(X_cal).mean <= ranker.budget


def test_score_is_precision_at_k_by_query(data, precision_by_query):
    model, X, y, qid, X_cal, y_cal, q_cal = data
    ranker = CronusRanker(model, costs=COSTS, relevant_min=2, k=3, **FAST).fit(X, y, qid=qid)
    scores = ranker.predict(X_cal)
    assert ranker.score(X_cal, y_cal, q_cal) == pytest.approx(
        precision_by_query(y_cal >= 2, scores, q_cal, k=3), abs=1e-12
    )
    # without qid every document is in one query
    assert ranker.score(X_cal, y_cal) == pytest.approx(
        precision_by_query(y_cal >= 2, scores, np.zeros(len(y_cal)), k=3), abs=1e-12
    )


def test_unfitted_rankers_are_fitted_with_their_queries(data):
    _, X, y, qid, *_ = data
    unfitted = lightgbm.LGBMRanker(n_estimators=5, num_leaves=4, min_child_samples=5, verbose=-1, n_jobs=1)
    ranker = clone(CronusRanker(unfitted, costs=COSTS, **FAST)).fit(X, y, qid=qid)
    reference = clone(unfitted).fit(X, y, group=np.full(N_QUERIES, N_DOCS))
    assert ranker.estimator_ is not unfitted
    np.testing.assert_array_equal(ranker.estimator_.predict(X), reference.predict(X))
    xgboost = pytest.importorskip("xgboost")
    unfitted = xgboost.XGBRanker(n_estimators=5, max_depth=2, n_jobs=1)
    ranker = CronusRanker(unfitted, costs=COSTS, **FAST).fit(X, y, qid=qid)
    reference = clone(unfitted).fit(X, y, qid=qid)
    np.testing.assert_array_equal(ranker.estimator_.predict(X), reference.predict(X))
    with pytest.raises(ValueError, match="weighs queries"):
        CronusRanker(unfitted, **FAST).fit(X, y, qid=qid, sample_weight=np.ones(len(y)))


def test_errors(data):
    model, X, y, qid, *_ = data
    with pytest.raises(ValueError, match="qid must give"):
        CronusRanker(model, **FAST).fit(X, y, qid=qid[:-1])
    with pytest.raises(ValueError, match="calibration must be"):
        CronusRanker(model, **FAST).fit(X, y, qid=qid, calibration=X)
    with pytest.raises(ValueError, match="relevance labels"):
        CronusRanker(model, **FAST).fit(X, np.where(y > 2, "good", "bad"), qid=qid)
    with pytest.raises(ValueError, match="balanced"):
        CronusRanker(model, class_weight="balanced", **FAST).fit(X, np.zeros_like(y), qid=qid)
    with pytest.raises(ValueError, match="k must be"):
        CronusRanker(model, k=0, **FAST).fit(X, y, qid=qid)
    clf = lightgbm.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y > 2)
    with pytest.raises(ValueError, match="CronusClassifier"):
        CronusRanker(clf, **FAST).fit(X, y, qid=qid)


_SMALL_RANKER = lightgbm.LGBMRanker(n_estimators=5, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1)
_CHECKED = dict(relevant_min=1, n_stages=2, max_cycles=1, progress=False)
_ROWS_NOT_WEIGHTS = {
    "check_sample_weight_equivalence_on_dense_data": "the wrapped model counts rows, not weights"
}


def _rankers():
    """The wrapped rankers of each supported library (XGBoost's when it is installed)."""
    yield CronusRanker(_SMALL_RANKER, **_CHECKED)
    try:
        import xgboost
    except ImportError:
        return
    # lam given: on the checks' tiny data XGBoost grows trees without a split, which cost nothing,
    # and the default lam (scaled by the trees' costs) has no scale
    yield CronusRanker(xgboost.XGBRanker(n_estimators=5, max_depth=2, n_jobs=1), lam=1e-3, **_CHECKED)


_XGB_WEIGHTS = "XGBoost's ranking weights are per query: an unfitted XGBRanker refuses document weights"


def _expected_failures(est):
    if type(est.estimator).__module__.startswith("xgboost"):
        return {
            check: _XGB_WEIGHTS
            for check in (
                "check_sample_weights_pandas_series",
                "check_sample_weights_not_an_array",
                "check_sample_weights_list",
                "check_sample_weights_shape",
                "check_sample_weights_not_overwritten",
                "check_sample_weight_equivalence_on_dense_data",
                "check_sample_weights_invariance(kind=ones)",
                "check_sample_weights_invariance(kind=zeros)",
            )
        }
    return _ROWS_NOT_WEIGHTS


# fit(X, y) without qid: one query, as CEGBRanker (scikit-learn's checks know no queries)
@parametrize_with_checks(list(_rankers()), expected_failed_checks=_expected_failures)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_weights_equal_repeated_rows_end_to_end():
    """scikit-learn's own equivalence check, with a wrapped model that weights exactly (a tree)."""
    from sklearn.tree import DecisionTreeRegressor
    from sklearn.utils.estimator_checks import check_sample_weight_equivalence_on_dense_data

    tree = DecisionTreeRegressor(max_depth=3, random_state=0)
    est = CronusRanker(tree, relevant_min=1, n_stages=2, max_cycles=1, progress=False)
    check_sample_weight_equivalence_on_dense_data("CronusRanker", est)


_X, _Y, _QID = _queries(2)


@parametrize_with_budget_checks(
    [
        BudgetCase(
            CronusRanker(_SMALL_RANKER, n_lams=4, **FAST),
            _X,
            _Y,
            budgets=[3.0, 8.0, 20.0],
            costs=[1.0, 2.0, 2.0, 5.0, 10.0, 20.0],
            fit_params={"qid": _QID},
        )
    ]
)
def test_budget_contract(check):
    check()
