"""Tests of ``thrifty.cascade.margin``: the margin (IDK) cascade of a cheap model into an
expensive one, against a plain NumPy computation from LightGBM's own predictions and trees."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thrifty
from thrifty import CostModel, Forest, evaluate
from thrifty.cascade import margin_band, margin_cascade
from thrifty.exceptions import InputError
from thrifty.runtime.lazy import array_provider
from thrifty.runtime.plans import plan_from_dict

lgb = pytest.importorskip("lightgbm")

PRICES = np.array([1.0, 2.0, 3.0, 5.0, 8.0, 13.0])
CHEAP = [0, 1, 2]  # the columns the cheap model reads (the others blanked, as compare does)
CAT = 5  # a categorical column of the expensive model


def _data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[:, CAT] = rng.integers(0, 5, n)
    X[rng.random(X.shape) < 0.05] = np.nan
    score = np.nan_to_num(X[:, 0] + 0.6 * X[:, 1] - 0.8 * X[:, 3] + 0.5 * (X[:, CAT] == 2))
    y = (score + 0.4 * rng.normal(size=n) > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def models():
    """(cheap LightGBM model, expensive one, their Forests, calibration rows)."""
    X, y = _data(600, 0)
    params = {"n_estimators": 15, "num_leaves": 6, "min_child_samples": 5, "verbose": -1}
    blank = X.copy()
    blank[:, [c for c in range(6) if c not in CHEAP]] = np.nan
    cheap = lgb.LGBMClassifier(**params).fit(blank, y)
    full = lgb.LGBMClassifier(**params).fit(X, y, categorical_feature=[CAT])
    X_cal, _ = _data(300, 1)
    return cheap, full, Forest.from_model(cheap), Forest.from_model(full), X_cal


def _path_features(booster):
    """Per tree, per leaf index: the features tested on the way to it (LightGBM's own dump)."""
    out = []
    for tree in booster.dump_model()["tree_info"]:
        leaves = {}

        def walk(node, seen, leaves=leaves):
            if "leaf_index" in node:
                leaves[node["leaf_index"]] = seen
                return
            here = seen | {node["split_feature"]}
            walk(node["left_child"], here)
            walk(node["right_child"], here)

        walk(tree["tree_structure"], frozenset())
        out.append(leaves)
    return out


def _acquired(model, X):
    """Boolean (rows, features): the features the model's trees test on each row's paths."""
    paths = _path_features(model.booster_)
    leaf = model.predict(X, pred_leaf=True).reshape(len(X), -1)
    acq = np.zeros(X.shape, dtype=bool)
    for i in range(len(X)):
        for t, leaves in enumerate(paths):
            acq[i, list(leaves[int(leaf[i, t])])] = True
    return acq


def _reference(cheap, full, X, lo, hi):
    """(routed, proba, labels, feature cost) computed from the two LightGBM models alone."""
    if len(X) == 0:
        return np.zeros(0, bool), np.zeros((0, 2)), np.zeros(0), np.zeros(0)
    f = cheap.predict(X, raw_score=True)
    routed = (lo < f) & (f < hi)
    proba = np.where(routed[:, None], full.predict_proba(X), cheap.predict_proba(X))
    labels = np.where(routed, full.predict(X), cheap.predict(X))
    acquired = _acquired(cheap, X) | (routed[:, None] & _acquired(full, X))
    return routed, proba, labels, acquired.astype(float) @ PRICES


value = st.one_of(
    st.floats(-3, 3), st.just(np.nan), st.just(np.inf), st.just(-np.inf), st.sampled_from([0.0, -0.5, 1.0])
)
category = st.sampled_from([0.0, 1.0, 2.0, 3.0, 4.0, 7.0, np.nan])
row = st.tuples(*([value] * 5), category)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(row, min_size=0, max_size=25), share=st.floats(0, 1))
def test_predictions_and_costs_equal_the_two_models_own(models, rows, share):
    """The route, probabilities, labels and per-example feature costs equal a NumPy
    computation from each LightGBM model's own predictions and trees (NaN, infinities, an
    unseen category, empty and one-row batches); compiled code gives the same."""
    cheap, full, low, high, X_cal = models
    lo, hi = margin_band(low, X_cal, share)
    plan = margin_cascade(low, high, lo, hi)
    X = np.array(rows, dtype=float).reshape(-1, 6)
    costs = CostModel(PRICES)
    ev = evaluate(plan, X, costs)
    routed, proba, labels, cost = _reference(cheap, full, X, lo, hi)
    np.testing.assert_allclose(ev.proba, proba, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ev.labels, labels)
    np.testing.assert_allclose(ev.cost.feature, cost)
    np.testing.assert_allclose(ev.cost.total, cost)


def test_compiled_lazy_and_json_evaluate_alike(models):
    """``thrifty.compile`` runs the nested gates (natively), a feature provider fetches only
    what the route needs, and the plan's JSON reads back the same: every engine gives the
    interpreter's predictions and costs."""
    _, _, low, high, X_cal = models
    X, _ = _data(200, 7)
    costs = CostModel(PRICES)
    plan = margin_cascade(low, high, *margin_band(low, X_cal, 0.3))
    ref = evaluate(plan, X, costs)
    compiled = thrifty.compile(plan, costs)
    assert compiled.native
    back = plan_from_dict(json.loads(plan.to_json()))
    lazy = evaluate(plan, array_provider(X), costs, n_rows=len(X))
    for other in (evaluate(compiled, X), evaluate(back, X, costs), lazy):
        np.testing.assert_array_equal(other.raw, ref.raw)
        np.testing.assert_array_equal(other.labels, ref.labels)
        np.testing.assert_array_equal(other.cost.total, ref.cost.total)


@pytest.mark.parametrize("share", [0.0, 0.02, 0.1, 0.35, 0.5, 1.0])
def test_the_share_sent_on_is_the_one_asked(models, share):
    """On the calibration rows the band holds round(share * n) rows, within ties of the
    scores; share 1 sends every row on, 0 none."""
    cheap, _, low, high, X_cal = models
    lo, hi = margin_band(low, X_cal, share)
    ev = evaluate(margin_cascade(low, high, lo, hi), X_cal)
    f = cheap.predict(X_cal, raw_score=True)
    routed = (lo < f) & (f < hi)
    n = len(X_cal)
    # The counts a band symmetric about 0 can hold: rows of equal |score| go in together.
    d = np.sort(np.abs(f))
    reachable = np.r_[0, np.flatnonzero(np.diff(d) > 1e-9) + 1, n]
    want = reachable[np.argmin(np.abs(reachable - round(share * n)))]
    assert routed.sum() == want
    assert abs(want - share * n) <= 1 + np.max(np.diff(reachable))  # ties only move it
    assert lo == -hi
    # The rows sent on are those the plain model answers: the outer route and inner gate agree.
    np.testing.assert_array_equal(ev.labels, np.where(routed, high.predict(X_cal), low.predict(X_cal)))
    if share in (0.0, 1.0):
        assert routed.sum() == (0 if share == 0 else n)


def test_the_band_holds_the_share_within_one_row_without_ties():
    """Distinct scores: the band holds round(share * n) rows exactly."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 2))
    y = (X[:, 0] + rng.normal(size=500) > 0).astype(int)
    low = Forest.from_model(lgb.LGBMClassifier(n_estimators=40, num_leaves=15, verbose=-1).fit(X, y))
    f = low.predict_raw(X).ravel()
    assert len(np.unique(np.abs(f))) > 250
    for share in (0.02, 0.05, 0.1, 0.2, 0.35):
        lo, hi = margin_band(low, X, share)
        held = int(((lo < f) & (f < hi)).sum())
        assert abs(held - share * len(X)) <= 1 or len(np.unique(np.abs(f))) < len(X)


def test_evaluation_costs_count_each_pass_over_the_cheap_trees(models):
    """With a price per tree, the cheap model's trees are charged once per gate that reads
    them and once more when it answers (as the runtime evaluates them), the expensive model's
    for the rows sent on."""
    cheap, _, low, high, X_cal = models
    lo, hi = margin_band(low, X_cal, 0.3)
    ev = evaluate(margin_cascade(low, high, lo, hi), X_cal, CostModel(PRICES, tree_cost=1.0))
    f = cheap.predict(X_cal, raw_score=True)
    routed = (lo < f) & (f < hi)
    trees = np.where(routed, 2 * low.n_trees + high.n_trees, np.where(f >= hi, 2, 3) * low.n_trees)
    np.testing.assert_array_equal(ev.cost.n_trees, trees)


def test_bad_input_is_one_line_naming_the_fix(models):
    _, _, low, high, X_cal = models
    reg = Forest.from_model(lgb.LGBMRegressor(n_estimators=3, verbose=-1).fit(X_cal[:, :6], np.arange(300.0)))
    X3 = np.random.default_rng(0).normal(size=(60, 3))
    y3 = (X3[:, 0] > 0).astype(int)
    three = Forest.from_model(lgb.LGBMClassifier(n_estimators=3, verbose=-1).fit(X3, y3))
    multi = Forest.from_model(
        lgb.LGBMClassifier(n_estimators=3, verbose=-1).fit(X_cal[:60], np.arange(60) % 3)
    )
    cases = [
        (lambda: margin_cascade(low, three, -1, 1), "different features"),
        (lambda: margin_cascade(multi, high, -1, 1), "binary classifier"),
        (lambda: margin_cascade(reg, high, -1, 1), "binary classifier"),
        (lambda: margin_cascade(low, reg, -1, 1), "binary classifier"),
        (lambda: margin_cascade(low, high, 1, -1), "lo <= hi"),
        (lambda: margin_band(low, X_cal, 1.5), "share must be in [0, 1]"),
        (lambda: margin_band(low, X_cal, -0.1), "share must be in [0, 1]"),
        (lambda: margin_band(low, X_cal[:0], 0.1), "at least one"),
        (lambda: margin_band(multi, X_cal, 0.1), "binary classifier"),
    ]
    for call, words in cases:
        with pytest.raises(InputError, match=None) as info:
            call()
        assert words in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("scale", [0.5, -0.7])
def test_a_base_last_forest_is_gated_on_its_own_raw_score(models, scale):
    """A forest that adds its base after the scaled trees (CatBoost's form): the gates negate
    its scale, and the rows sent on are those whose own raw score lies in the band."""
    from dataclasses import replace

    _, _, low, high, X_cal = models
    last = replace(low, base_last=True, scale=scale)
    f = last.predict_raw(X_cal).ravel()
    lo, hi = margin_band(last, X_cal, 0.4)
    ev = evaluate(margin_cascade(last, high, lo, hi), X_cal)
    routed = (lo < f) & (f < hi)
    assert 0.3 < routed.mean() < 0.5
    np.testing.assert_array_equal(ev.raw.ravel(), np.where(routed, high.predict_raw(X_cal).ravel(), f))
