"""Every plan the methods produce (QWYC, Fan, margin exits, Cronus, ADAPT-GBRT, ADAPT-LIN, the L1
baseline, BudgetPrune, BudgetRF, CEGB, GreedyMiser and compare's compositions) compiles to native
code only, and gives the interpreter's predictions and per-row costs bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import thrifty
from tests._helpers.compiled_plans import assert_same
from thrifty import (
    ADAPTClassifier,
    ADAPTRegressor,
    BudgetPrunedClassifier,
    BudgetRFClassifier,
    CEGBClassifier,
    CostModel,
    CronusClassifier,
    CronusRanker,
    GreedyMiserClassifier,
    QWYCClassifier,
    QWYCRanker,
    datasets,
    evaluate,
)
from thrifty.order import fan, margin_early_exit
from thrifty.runtime import Cascade, Gated, Linear, Sequential
from thrifty.runtime.plans import as_plan

lightgbm = pytest.importorskip("lightgbm")

_RNG = np.random.default_rng(4)
X = _RNG.normal(size=(400, 8))
X[_RNG.random(X.shape) < 0.05] = np.nan
Y = ((np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) - np.nan_to_num(X[:, 5])) > 0).astype(int)
# ADAPT-LIN and the L1 baseline fit on complete data (their plans are evaluated on NaN too).
XC = np.nan_to_num(X)
Y3 = np.digitize(np.nan_to_num(X[:, 0] + X[:, 2]), [-0.5, 0.5])
COSTS = CostModel([1.0, 2.0, 4.0, 0.5, 8.0, 1.0, 3.0, 16.0], groups={"g": [2, 3]}, tree_cost=0.25)
# Rows the plans are checked on: the data, infinities and an all-NaN row.
ROWS = np.vstack([X[:120], np.full((1, 8), np.nan), np.full((1, 8), np.inf), -np.full((1, 8), np.inf)])

_FIT = {"progress": False}


def _gbdt(y: np.ndarray = Y) -> object:
    return lightgbm.LGBMClassifier(n_estimators=30, num_leaves=8, verbose=-1, n_jobs=1, random_state=0).fit(
        X, y
    )


def _rf() -> object:
    return RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0).fit(XC, Y)


def _cegb() -> object:
    return CEGBClassifier(costs=COSTS, n_estimators=12, **_FIT).fit(X, Y)


# name -> the fitted method (or its plan); one row per method and composition.
METHODS = {
    "cegb": lambda: _cegb(),
    "greedymiser": lambda: GreedyMiserClassifier(costs=COSTS, n_estimators=8, **_FIT).fit(X, Y),
    "budgetrf": lambda: BudgetRFClassifier(6, costs=COSTS, max_depth=4, random_state=0, **_FIT).fit(X, Y),
    "budgetprune": lambda: BudgetPrunedClassifier(_rf(), costs=COSTS, lam=0.01, **_FIT).fit(XC, Y),
    "qwyc": lambda: QWYCClassifier(_gbdt(), costs=COSTS, **_FIT).fit(X, Y),
    "qwyc-multiclass": lambda: QWYCClassifier(_gbdt(Y3), costs=COSTS, **_FIT).fit(X, Y3),
    "fan": lambda: fan(_gbdt(), X),
    "margin": lambda: margin_early_exit(_gbdt(), 1.0, every=5),
    "cronus": lambda: CronusClassifier(_gbdt(), costs=COSTS, n_stages=3, n_lams=2, **_FIT).fit(X, Y),
    "adapt-gbrt": lambda: ADAPTClassifier(_gbdt(), costs=COSTS, n_estimators=8, **_FIT).fit(X, Y),
    "adapt-lin": lambda: ADAPTClassifier(_gbdt(), costs=COSTS, method="lin", **_FIT).fit(XC, Y),
    "adapt-lin-multiclass": lambda: ADAPTClassifier(_gbdt(Y3), costs=COSTS, method="lin", **_FIT).fit(XC, Y3),
    "adapt-l1": lambda: ADAPTClassifier(_gbdt(), costs=COSTS, method="l1", **_FIT).fit(XC, Y),
    "adapt-lin-regression": lambda: ADAPTRegressor(
        lightgbm.LGBMRegressor(n_estimators=20, num_leaves=8, verbose=-1, n_jobs=1).fit(
            XC, XC[:, 0] - XC[:, 4]
        ),
        costs=COSTS,
        method="lin",
        **_FIT,
    ).fit(XC, XC[:, 0] - XC[:, 4]),
    # compare's compositions: CEGB ordered by QWYC, a Cronus cascade of a CEGB model, ADAPT in
    # front of a pruned random forest.
    "cegb+qwyc": lambda: QWYCClassifier(_cegb(), costs=COSTS, **_FIT).fit(X, Y),
    "cegb+cronus": lambda: CronusClassifier(_cegb(), costs=COSTS, n_stages=2, n_lams=2, **_FIT).fit(X, Y),
    "budgetprune+adapt": lambda: ADAPTClassifier(
        BudgetPrunedClassifier(_rf(), costs=COSTS, lam=0.01, **_FIT).fit(XC, Y),
        costs=COSTS,
        method="lin",
        **_FIT,
    ).fit(XC, Y),
}


def _check(model: object) -> thrifty.runtime.Plan:
    plan = as_plan(model)
    compiled = thrifty.compile(plan, COSTS)
    assert compiled.native, f"{plan!r} runs partly on the interpreter"
    for rows in (ROWS, ROWS[:1], ROWS[:0]):
        assert_same(compiled.evaluate(rows), evaluate(plan, rows, COSTS))
    return plan


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_compiles_to_native_code(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and data-size warnings of tiny fits
        model = METHODS[name]()
    plan = _check(model)
    expected = {"cronus": Cascade, "cegb+cronus": Cascade, "qwyc": Sequential, "adapt-lin": Gated}
    if name in expected:
        assert isinstance(plan, expected[name])
    if name.startswith("adapt-lin"):
        assert isinstance(plan.gate, Linear) and isinstance(plan.low, Linear)


def test_ranking_plans_on_a_lambdamart_ranker_run_natively(data_home):
    """Cronus and QWYC on a LambdaMART ranker of rank_small (300 features), fitted with ``qid``."""
    ds = datasets.load("rank_small", data_home=data_home)
    X_tr, y_tr, q_tr = ds.subset("train")
    X_te, _, _ = ds.subset("test")
    costs = CostModel(datasets.yahoo_costs(300, seed=0, data_home=data_home), tree_cost=1.0)
    _, sizes = np.unique(q_tr, return_counts=True)  # the rows of each query are consecutive
    model = lightgbm.LGBMRanker(
        n_estimators=30, num_leaves=8, learning_rate=0.1, verbose=-1, n_jobs=1, random_state=0
    ).fit(X_tr, y_tr, group=sizes)
    cronus = CronusRanker(model, costs=costs, n_stages=3, max_cycles=1, n_lams=2, **_FIT).fit(
        X_tr, y_tr, qid=q_tr
    )
    qwyc = QWYCRanker(model, costs=costs, **_FIT).fit(X_tr, qid=q_tr)
    for est in (cronus, qwyc):
        plan = as_plan(est)
        compiled = thrifty.compile(plan, costs)
        assert compiled.native
        for rows in (X_te, X_te[:1]):
            assert_same(compiled.evaluate(rows), evaluate(plan, rows, costs))
    assert isinstance(as_plan(cronus), Cascade) and isinstance(as_plan(qwyc), Sequential)


def test_ranking_plans_on_synthetic_queries_run_natively():
    """The same without the shared data: a LambdaMART ranker of 70 features on 40 queries."""
    rng = np.random.default_rng(6)
    Xr = rng.normal(size=(400, 70))
    Xr[rng.random(Xr.shape) < 0.05] = np.nan
    qid = np.repeat(np.arange(40), 10)
    y = np.clip(np.round(np.nan_to_num(Xr[:, 0] + Xr[:, 65]) + 2), 0, 4).astype(int)
    costs = CostModel(rng.uniform(0.5, 3, 70), tree_cost=0.5)
    model = lightgbm.LGBMRanker(n_estimators=20, num_leaves=8, min_child_samples=5, verbose=-1, n_jobs=1)
    model.fit(Xr, y, group=np.full(40, 10))
    cronus = CronusRanker(model, costs=costs, n_stages=3, max_cycles=1, n_lams=2, **_FIT).fit(Xr, y, qid=qid)
    qwyc = QWYCRanker(model, costs=costs, **_FIT).fit(Xr, qid=qid)
    for est in (cronus, qwyc):
        plan = as_plan(est)
        compiled = thrifty.compile(plan, costs)
        assert compiled.native
        for rows in (Xr, Xr[:1], Xr[:0]):
            assert_same(compiled.evaluate(rows), evaluate(plan, rows, costs))
    assert isinstance(as_plan(cronus), Cascade) and len(as_plan(cronus).stage_trees) > 0
