"""QWYCRanker: QWYC for rankers as a scikit-learn meta-estimator, checked against prefix forests
and the function layer (``qwyc_ranking``)."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.frozen import FrozenEstimator
from sklearn.utils.estimator_checks import parametrize_with_checks

import thrifty
from thrifty import CostModel
from thrifty.estimator_checks import BudgetCase, parametrize_with_budget_checks
from thrifty.exceptions import BudgetError
from thrifty.order import QWYCRanker, qwyc_ranking

lightgbm = pytest.importorskip("lightgbm")

N_QUERIES, N_DOCS = 50, 16
COSTS = CostModel([1, 2, 2, 5, 10, 20], tree_cost=1.0)


def _queries(seed):
    rng = np.random.default_rng(seed)
    qid = np.repeat(np.arange(N_QUERIES), N_DOCS)
    X = rng.normal(size=(len(qid), 6))
    s = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + 0.3 * X[:, 4] + 0.3 * rng.normal(size=len(qid))
    return X, np.clip(np.round(s + 1.5), 0, 4).astype(int), qid


@pytest.fixture(scope="module")
def ranked():
    X, y, qid = _queries(0)
    model = lightgbm.LGBMRanker(
        n_estimators=30, num_leaves=6, learning_rate=0.2, min_child_samples=3, verbose=-1, n_jobs=1
    ).fit(X, y, group=[N_DOCS] * N_QUERIES)
    return model, X, y, qid


def _changed_queries_by_prefix(est, X, qid, k, keep="set"):
    """Share of queries whose top-k set (``keep="set"``) or list (``"order"``) under the exits
    differs from the full model's, each document's score recomputed from the prefix of the
    plan's order it evaluated."""
    ev = thrifty.evaluate(est.plan_, X, est.costs_)
    forest, order = est.forest_, est.plan_.order
    score = np.array(
        [forest.subset(order[: int(n)].tolist()).predict_raw(X[i : i + 1])[0] for i, n in enumerate(ev.exit)]
    )
    np.testing.assert_allclose(score, ev.raw, atol=1e-9)
    full = forest.predict_raw(X)
    changed = []
    for q in np.unique(qid):
        d = np.flatnonzero(qid == q)
        tops = [d[np.argsort(-s[d], kind="stable")[:k]].tolist() for s in (score, full)]
        if keep == "set":
            tops = [set(t) for t in tops]
        changed.append(tops[0] != tops[1])
    return float(np.mean(changed)), ev


@pytest.mark.parametrize("keep", ["set", "order"])
@pytest.mark.parametrize("alpha, k", [(0.0, 5), (0.1, 5), (0.2, 3)])
def test_within_alpha_of_queries_and_as_the_function(ranked, alpha, k, keep):
    model, X, _, qid = ranked
    est = QWYCRanker(model, k=k, alpha=alpha, keep=keep, costs=COSTS, progress=False).fit(X, qid=qid)
    share, ev = _changed_queries_by_prefix(est, X, qid, k, keep)
    assert share <= alpha + 1e-12
    assert est.disagreement(X, qid) == pytest.approx(share)
    plan = qwyc_ranking(model, X, qid, k=k, alpha=alpha, costs=COSTS, keep=keep)
    np.testing.assert_array_equal(est.plan_.order, plan.order)
    np.testing.assert_array_equal(est.plan_.eps_pos, plan.eps_pos)
    np.testing.assert_array_equal(est.predict(X), ev.raw)
    if alpha > 0:
        assert ev.cost.n_trees.mean() < model.n_estimators  # exits save trees
    assert est.budget_search_["metric"].iloc[0] == pytest.approx(-share)


def test_keeping_the_order_keeps_ndcg_at_k_and_is_the_default(ranked):
    """The default, ``keep="order"`` (compare's), keeps every query's NDCG@k at alpha=0;
    keeping the set only, documents of the top k exit with partial scores and NDCG@k moves."""
    from thrifty.metrics import ndcg_per_query

    model, X, y, qid = ranked
    assert QWYCRanker(model).keep == "order"
    full = ndcg_per_query(y, model.predict(X), qid, k=5)
    kept = QWYCRanker(model, alpha=0.0, costs=COSTS, progress=False).fit(X, qid=qid)
    np.testing.assert_allclose(ndcg_per_query(y, kept.predict(X), qid, k=5), full, atol=1e-12)
    as_set = QWYCRanker(model, alpha=0.0, keep="set", costs=COSTS, progress=False).fit(X, qid=qid)
    assert not np.allclose(ndcg_per_query(y, as_set.predict(X), qid, k=5), full)
    with pytest.raises(ValueError, match="keep"):
        QWYCRanker(model, keep="list", progress=False).fit(X, qid=qid)


def test_budget_search_and_errors(ranked):
    model, X, y, qid = ranked
    full = thrifty.evaluate(model, X, COSTS).cost.mean
    tried = QWYCRanker(model, costs=COSTS, budget=full, progress=False).fit(X, qid=qid).budget_search_["cost"]
    assert tried.min() < full  # some alpha saves cost
    costs = []
    for budget in (tried.min(), tried.median(), full):
        est = QWYCRanker(model, costs=COSTS, budget=budget, progress=False).fit(X, qid=qid)
        assert est.cost_report(X).mean <= budget * (1 + 1e-9)
        assert est.budget_search_["chosen"].sum() == 1
        costs.append(est.cost_report(X).mean)
    assert costs == sorted(costs)
    with pytest.raises(BudgetError, match="no model meets budget"):
        QWYCRanker(model, costs=COSTS, budget=0.01, progress=False).fit(X, qid=qid)
    with pytest.raises(ValueError, match="the query of each of the 800 documents"):
        QWYCRanker(model, progress=False).fit(X, qid=qid[:-1])
    clf = lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, y > 2)
    with pytest.raises(ValueError, match="use QWYCClassifier"):
        QWYCRanker(clf, progress=False).fit(X, qid=qid)
    # calibration on other queries: fitted there, labels not needed
    X2, _, q2 = _queries(1)
    est = QWYCRanker(model, alpha=0.1, progress=False).fit(X, qid=qid, calibration=(X2, None, q2 + 100))
    assert est.disagreement(X2, q2) <= 0.1 + 1e-12
    assert 0.0 <= est.score(X, y, qid) <= 1.0


def test_unfitted_rankers_are_fitted_with_their_queries():
    X, y, qid = _queries(2)
    est = QWYCRanker(lightgbm.LGBMRanker(n_estimators=8, num_leaves=4, verbose=-1), progress=False)
    est.fit(X, y, qid=qid)
    direct = lightgbm.LGBMRanker(n_estimators=8, num_leaves=4, verbose=-1).fit(
        X, y, group=[N_DOCS] * N_QUERIES
    )
    np.testing.assert_allclose(est.forest_.predict_raw(X), direct.predict(X), atol=1e-9)
    xgboost = pytest.importorskip("xgboost")
    est = QWYCRanker(xgboost.XGBRanker(n_estimators=6, max_depth=2), progress=False).fit(X, y, qid=qid)
    direct = xgboost.XGBRanker(n_estimators=6, max_depth=2).fit(X, y, qid=qid)
    np.testing.assert_allclose(est.forest_.predict_raw(X), direct.predict(X), atol=1e-5)


_SMALL = lightgbm.LGBMRanker(n_estimators=5, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1)


def _wrapped():
    """The rankers (and relevance regressors) of each supported library."""
    yield QWYCRanker(_SMALL, progress=False)
    yield QWYCRanker(GradientBoostingRegressor(n_estimators=5, max_depth=2, random_state=0), progress=False)
    yield QWYCRanker(RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0), progress=False)
    try:
        import xgboost
    except ImportError:
        return
    yield QWYCRanker(xgboost.XGBRanker(n_estimators=5, max_depth=2, n_jobs=1), progress=False)


# fit(X, y) without qid: one query (scikit-learn's checks know no queries)
@parametrize_with_checks(list(_wrapped()))
def test_sklearn_compatible(estimator, check):
    check(estimator)


_X, _Y, _QID = _queries(3)
_FITTED = FrozenEstimator(clone(_SMALL).set_params(n_estimators=12).fit(_X, _Y, group=[N_DOCS] * N_QUERIES))


@parametrize_with_budget_checks(
    [
        BudgetCase(
            QWYCRanker(_FITTED, progress=False),
            _X,
            _Y,
            budgets=[20.0, 30.0, 45.0],
            costs=[1.0, 2.0, 2.0, 5.0, 10.0, 20.0],
            fit_params={"qid": _QID},
        )
    ]
)
def test_budget_contract(check):
    check()


def _lists_changed(plan, forest, X, qid, k):
    """Per query: whether its top-k *list* (order included) under the plan's scores differs
    from the full model's, each document's score recomputed from the prefix it evaluated."""
    ev = thrifty.evaluate(plan, X, COSTS)
    score = np.array(
        [
            forest.subset(plan.order[: int(n)].tolist()).predict_raw(X[i : i + 1])[0]
            for i, n in enumerate(ev.exit)
        ]
    )
    full = forest.predict_raw(X)
    changed = []
    for q in np.unique(qid):
        d = np.flatnonzero(qid == q)
        lists = [d[np.argsort(-s[d], kind="stable")[:k]].tolist() for s in (score, full)]
        changed.append(lists[0] != lists[1])
    return np.array(changed), ev


@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.3])
def test_keep_order_bounds_the_queries_whose_top_k_list_changed(ranked, alpha):
    """keep="order": at most alpha of the queries see their top-k list change (checked on
    scores recomputed from each document's prefix), so NDCG@k is the full model's on the rest;
    the default (the set) changes lists of queries it does not count."""
    model, X, y, qid = ranked
    forest = thrifty.Forest.from_model(model)
    plan = qwyc_ranking(model, X, qid, k=5, alpha=alpha, costs=COSTS, keep="order")
    changed, ev = _lists_changed(plan, forest, X, qid, 5)
    assert changed.mean() <= alpha + 1e-12
    same = thrifty.metrics.ndcg_per_query(y, ev.raw, qid, k=5) == thrifty.metrics.ndcg_per_query(
        y, forest.predict_raw(X), qid, k=5
    )
    assert same[~changed].all()
    if alpha > 0:
        assert ev.cost.n_trees.mean() < model.n_estimators  # documents below the top still exit
    as_set = qwyc_ranking(model, X, qid, k=5, alpha=alpha, costs=COSTS)
    assert _lists_changed(as_set, forest, X, qid, 5)[0].mean() > alpha  # the order was not kept


def test_keep_is_checked(ranked):
    model, X, _, qid = ranked
    with pytest.raises(ValueError, match="keep"):
        qwyc_ranking(model, X, qid, keep="list")


def test_topk_changed_by_list_or_set():
    """Two documents of the top 2 swapped: the set is the same, the list is not."""
    from thrifty.exceptions import InputError
    from thrifty.order import topk_changed

    full = np.array([3.0, 2.0, 1.0, 0.0, 5.0, 4.0])
    pred = np.array([2.0, 3.0, 1.0, 0.0, 5.0, 4.0])
    qid = np.array([0, 0, 0, 0, 1, 1])
    np.testing.assert_array_equal(topk_changed(pred, full, qid, 2), [False, False])
    np.testing.assert_array_equal(topk_changed(pred, full, qid, 2, "order"), [True, False])
    with pytest.raises(InputError, match="keep"):
        topk_changed(pred, full, qid, 2, "list")
