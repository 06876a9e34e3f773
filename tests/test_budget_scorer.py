"""thrifty.metrics.make_budget_scorer against brute-force computations and inside GridSearchCV."""

from __future__ import annotations

import math
import warnings

import lightgbm
import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from thrifty import CEGBClassifier, CostModel
from thrifty.exceptions import InputError, InvalidParameterError
from thrifty.metrics import make_budget_scorer

PRICES = np.array([1.0, 2.0, 4.0, 8.0, 0.5, 3.0])


def _data(n=400, seed=0):
    """Binary labels that the expensive features (3, 5) predict well and the cheap ones poorly."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(PRICES)))
    logit = 0.6 * X[:, 0] + 0.4 * X[:, 4] + 2.5 * X[:, 3] + 2.0 * X[:, 5]
    y = (logit + rng.logistic(size=n) * 0.5 > 0).astype(int)
    return X, y


def _booster_row_costs(booster, X, prices):
    """Per row: the prices of the distinct features on the paths it takes, read from
    LightGBM's own tree dump and leaf assignment (no thrifty code involved)."""
    trees = booster.trees_to_dataframe()
    names = booster.feature_name()
    parent = dict(zip(trees["node_index"], trees["parent_index"]))
    feature = dict(zip(trees["node_index"], trees["split_feature"]))
    leaves = booster.predict(X, pred_leaf=True).reshape(len(X), -1)
    out = np.empty(len(X))
    for i in range(len(X)):
        used = set()
        for t, leaf in enumerate(leaves[i]):
            node = parent.get(f"{t}-L{leaf}")
            while isinstance(node, str):  # the root's parent is None/NaN
                used.add(names.index(feature[node]))
                node = parent[node]
        out[i] = sum(prices[f] for f in used)
    return out


@pytest.fixture(scope="module")
def lgbm_fit():
    X, y = _data()
    model = lightgbm.LGBMClassifier(n_estimators=8, num_leaves=6, verbose=-1, random_state=0).fit(
        X[:300], y[:300]
    )
    return model, X[300:], y[300:]


def test_budget_and_penalty_match_brute_force(lgbm_fit):
    model, X, y = lgbm_fit
    row_cost = _booster_row_costs(model.booster_, X, PRICES)
    mean_cost = row_cost.mean()
    acc = float(np.mean(model.predict(X) == y))
    assert mean_cost > 0

    assert make_budget_scorer("accuracy", PRICES, budget=mean_cost)(model, X, y) == pytest.approx(acc)
    assert make_budget_scorer("accuracy", PRICES, budget=mean_cost * 0.99)(model, X, y) == -math.inf
    penalised = make_budget_scorer("accuracy", PRICES, cost_weight=0.01)(model, X, y)
    assert penalised == pytest.approx(acc - 0.01 * mean_cost)
    both = make_budget_scorer("accuracy", PRICES, budget=mean_cost + 1, cost_weight=0.5)(model, X, y)
    assert both == pytest.approx(acc - 0.5 * mean_cost)
    # A CostModel with the same prices measures the same; uniform prices count features.
    scorer = make_budget_scorer("accuracy", CostModel(PRICES), cost_weight=1.0)
    assert scorer.mean_cost(model, X) == pytest.approx(mean_cost)
    counted = _booster_row_costs(model.booster_, X, np.ones(len(PRICES))).mean()
    assert make_budget_scorer("accuracy", cost_weight=1.0).mean_cost(model, X) == pytest.approx(counted)
    # Prices by column name, matched to a DataFrame's columns whatever their order.
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(len(PRICES))])
    named = make_budget_scorer(
        "accuracy", {f"f{j}": p for j, p in reversed(list(enumerate(PRICES)))}, cost_weight=1
    )
    assert named.mean_cost(model, frame) == pytest.approx(mean_cost)


def test_named_and_callable_metrics_and_sample_weight(lgbm_fit):
    model, X, y = lgbm_fit
    row_cost = _booster_row_costs(model.booster_, X, PRICES)
    auc = roc_auc_score(y, model.predict_proba(X)[:, 1])
    scorer = make_budget_scorer("roc_auc", PRICES, budget=1e9)
    assert scorer(model, X, y) == pytest.approx(auc)

    def balanced_hits(y_true, y_pred, sample_weight=None):
        return float(np.average(y_true == y_pred, weights=sample_weight))

    w = np.random.default_rng(1).integers(1, 4, size=len(y)).astype(float)
    weighted_cost = float(np.sum(w * row_cost) / np.sum(w))
    weighted_acc = float(np.sum(w * (model.predict(X) == y)) / np.sum(w))
    scorer = make_budget_scorer(balanced_hits, PRICES, cost_weight=0.1)
    assert scorer(model, X, y, sample_weight=w) == pytest.approx(weighted_acc - 0.1 * weighted_cost)
    # Integer weights are repeated rows.
    Xr, yr = np.repeat(X, w.astype(int), axis=0), np.repeat(y, w.astype(int))
    assert scorer(model, Xr, yr) == pytest.approx(weighted_acc - 0.1 * weighted_cost)


def test_pipeline_prices_the_last_step_on_transformed_rows():
    X, y = _data()
    pipe = make_pipeline(
        StandardScaler(), lightgbm.LGBMClassifier(n_estimators=5, num_leaves=4, verbose=-1, random_state=0)
    ).fit(X, y)
    expected = _booster_row_costs(pipe[-1].booster_, pipe[0].transform(X), PRICES).mean()
    assert make_budget_scorer("accuracy", PRICES, cost_weight=1.0).mean_cost(pipe, X) == pytest.approx(
        expected
    )


def test_thrifty_estimator_cost_is_its_cost_report():
    X, y = _data(200)
    est = CEGBClassifier(costs=PRICES, tradeoff=0.05, n_estimators=10, num_leaves=4, progress=False).fit(X, y)
    scorer = make_budget_scorer("accuracy", cost_weight=1.0)  # costs=None: the fitted costs_
    assert scorer.mean_cost(est, X) == pytest.approx(est.cost_report(X).mean)
    doubled = make_budget_scorer("accuracy", PRICES * 2, cost_weight=1.0)
    assert doubled.mean_cost(est, X) == pytest.approx(2 * est.cost_report(X).mean)


def test_bad_arguments_are_refused_with_the_fix():
    with pytest.raises(InvalidParameterError, match="budget= .* or cost_weight="):
        make_budget_scorer("accuracy")
    with pytest.raises(InvalidParameterError, match="budget must be a finite number >= 0"):
        make_budget_scorer("accuracy", budget=-1)
    with pytest.raises(InvalidParameterError, match="cost_weight must be a finite number"):
        make_budget_scorer("accuracy", cost_weight=float("nan"))
    with pytest.raises(InputError, match="unknown metric 'acuracy'"):
        make_budget_scorer("acuracy", budget=1)
    with pytest.raises(InvalidParameterError, match="metric must be"):
        make_budget_scorer(3, budget=1)


def test_grid_search_picks_the_best_model_within_budget():
    """GridSearchCV over CEGB's tradeoff: the budget scorer picks what a brute-force search over
    the same folds picks (the most accurate candidate within budget on every fold), not the most
    accurate candidate, which costs more."""
    X, y = _data(240)
    grid = {"tradeoff": [0.0, 0.01, 0.3]}
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    base = CEGBClassifier(costs=PRICES, n_estimators=10, num_leaves=4, random_state=0, progress=False)

    # Brute force: refit every candidate on every fold, measure cost and accuracy directly.
    acc = np.zeros((len(grid["tradeoff"]), 3))
    cost = np.zeros_like(acc)
    for j, lam in enumerate(grid["tradeoff"]):
        for k, (tr, te) in enumerate(cv.split(X, y)):
            est = CEGBClassifier(**{**base.get_params(), "tradeoff": lam}).fit(X[tr], y[tr])
            acc[j, k] = np.mean(est.predict(X[te]) == y[te])
            cost[j, k] = est.cost_report(X[te]).mean
    most_accurate = int(np.argmax(acc.mean(axis=1)))
    budget = 0.9 * float(cost[most_accurate].max())
    feasible = (cost <= budget).all(axis=1)
    assert feasible.any() and not feasible[most_accurate]
    expected = int(np.argmax(np.where(feasible, acc.mean(axis=1), -np.inf)))

    with warnings.catch_warnings():
        # scikit-learn warns about the -inf means, and computes their std as NaN
        warnings.filterwarnings("ignore", "One or more of the test scores are non-finite")
        warnings.filterwarnings("ignore", "invalid value encountered in subtract", RuntimeWarning)
        scorer = make_budget_scorer("accuracy", budget=budget)
        search = GridSearchCV(base, grid, scoring=scorer, cv=cv).fit(X, y)
    assert search.best_params_ == {"tradeoff": grid["tradeoff"][expected]}
    scores = search.cv_results_["mean_test_score"]
    np.testing.assert_allclose(scores[feasible], acc.mean(axis=1)[feasible])
    assert np.all(scores[~feasible] == -np.inf)
    assert np.all(search.cv_results_["rank_test_score"][~feasible] > feasible.sum())
