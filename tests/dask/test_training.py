"""CEGB and GreedyMiser fitted on Dask collections through lightgbm.dask, checked against in-memory fits."""

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe", reason="the Dask tests need the extra thrifty[dask]")
distributed = pytest.importorskip("distributed", reason="the Dask tests need the extra thrifty[dask]")

import thrifty  # noqa: E402
from thrifty.costs import CostModel  # noqa: E402
from thrifty.train.cegb import CEGBClassifier, CEGBRegressor, cegb_params  # noqa: E402
from thrifty.train.greedymiser import GreedyMiserClassifier  # noqa: E402

FAST = {"n_estimators": 15, "num_leaves": 8, "n_jobs": 1, "progress": False, "random_state": 0}


def _data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 6)), columns=[f"f{i}" for i in range(6)])
    score = X.f0 + 0.8 * X.f1 + 0.6 * X.f2 + 0.5 * X.f3 + 0.4 * X.f4
    y = (score + rng.normal(scale=0.5, size=n) > 0).astype(int)
    return X, pd.Series(y, name="y")


COSTS = CostModel([1, 2, 4, 8, 16, 32])


def test_one_worker_dask_cegb_is_the_in_memory_model():
    # One worker: LightGBM's data-parallel learner sees every row, so the lazy penalty needs no
    # scaling and the model is the one trained in memory (same trees, same costs).
    X, y = _data()
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster),
    ):
        on_dask = CEGBClassifier(costs=COSTS, tradeoff=0.003, **FAST).fit(
            dd.from_pandas(X, npartitions=2), dd.from_pandas(y, npartitions=2)
        )
    local = CEGBClassifier(costs=COSTS, tradeoff=0.003, **FAST).fit(X, y)
    np.testing.assert_array_equal(on_dask.forest_.feature, local.forest_.feature)
    np.testing.assert_allclose(on_dask.predict_proba(X), local.predict_proba(X), rtol=1e-9)
    assert on_dask.calibration_cost_ == pytest.approx(local.calibration_cost_, rel=1e-12)
    np.testing.assert_array_equal(on_dask.classes_, local.classes_)


def test_two_workers_train_with_the_same_penalties_and_budget_is_measured_on_the_cluster(client):
    X, y = _data()
    X_cal, y_cal = _data(1500, seed=1)
    dX, dy = dd.from_pandas(X, npartitions=4), dd.from_pandas(y, npartitions=4)
    clf = CEGBClassifier(costs=COSTS, budget=8.0, max_fits=4, tolerance=0.3, **FAST)
    with pytest.warns(UserWarning, match="per-example feature costs trained on 2 Dask workers"):
        clf.fit(
            dX, dy, calibration=(dd.from_pandas(X_cal, npartitions=3), dd.from_pandas(y_cal, npartitions=3))
        )
    assert clf.tradeoff_ > 0  # the unpenalised model costs more than the budget
    lazy = cegb_params(COSTS, clf.tradeoff_)["cegb_penalty_feature_lazy"]
    # the parameters LightGBM trained with, as its model file records them
    line = next(
        t for t in clf.booster_.model_to_string().splitlines() if t.startswith("[cegb_penalty_feature_lazy:")
    )
    trained = [float(v) for v in line.split(":", 1)[1].strip(" ]").split(",")]
    np.testing.assert_allclose(trained, lazy)
    # the budget search measured what thrifty.evaluate measures on the same rows
    assert clf.calibration_cost_ == pytest.approx(thrifty.evaluate(clf.forest_, X_cal, COSTS).cost.mean)
    assert clf.calibration_cost_ <= 8.0
    assert list(clf.feature_names_in_) == list(X.columns)
    # (no accuracy bound: a cluster-trained CEGB model varies from run to run, docs/scale.md)


def test_dask_regressor_and_greedymiser(client):
    X, y = _data()
    dX = dd.from_pandas(X, npartitions=4)
    target = X.f0 * 2 + X.f1
    reg = CEGBRegressor(costs=COSTS, tradeoff=0.001, **FAST).fit(dX, dd.from_pandas(target, npartitions=4))
    assert np.corrcoef(reg.predict(X), target)[0, 1] > 0.9
    with pytest.warns(UserWarning, match="once-per-model feature costs"):
        gm = GreedyMiserClassifier(
            costs=COSTS, tradeoff=1e-4, n_estimators=15, n_jobs=1, progress=False, random_state=0
        ).fit(dX, dd.from_pandas(y, npartitions=4))
    raw = gm.booster_.predict(X, raw_score=True) + gm.init_score_[0]
    np.testing.assert_allclose(gm.forest_.predict_raw(X).reshape(-1), raw, rtol=1e-9, atol=1e-9)
    assert gm.init_score_[0] == pytest.approx(np.log(y.mean() / (1 - y.mean())))
    assert np.mean(gm.predict(X) == y) > 0.75


def test_dask_fit_input_errors(client):
    X, y = _data(200)
    dX = dd.from_pandas(X, npartitions=2)
    with pytest.raises(TypeError, match="y is not"):
        CEGBClassifier(**FAST).fit(dX, y)
    with pytest.raises(TypeError, match="calibration X is not"):
        CEGBClassifier(**FAST).fit(dX, dd.from_pandas(y, npartitions=2), calibration=(X, y))
