"""ADAPT on the paper's synthetic data sets (section 5) and on a multiclass problem."""

import warnings

import numpy as np
import pytest
from sklearn.svm import SVC

from thrifty.costs import CostModel
from thrifty.runtime import evaluate
from thrifty.train.adapt import ADAPTClassifier


def _svc(X, y, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # SVC(probability=True) deprecated in 1.9
        return SVC(probability=True, random_state=0, **kw).fit(X, y)


# ----------------------------------------------------------------------------- Synthetic-1
def synthetic1(n, seed):
    """2-d, no feature costs: a linear rule outside, a fine checkerboard in the central disk."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-3, 3, (n, 2))
    centre = np.hypot(X[:, 0], X[:, 1]) < 1.5
    inner = np.sin(3 * X[:, 0]) * np.sin(3 * X[:, 1]) > 0
    y = np.where(centre, inner, X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    return X, y, centre


def test_synthetic1_gate_sends_the_ambiguous_centre_to_f0():
    X, y, _ = synthetic1(2000, 0)
    Xt, yt, centre = synthetic1(2000, 1)
    f0 = _svc(X, y, C=10, gamma=2.0)
    est = ADAPTClassifier(
        f0,
        costs=CostModel([0.0, 0.0]),
        p_full=0.3,
        n_estimators=60,
        max_depth=3,
        learning_rate=0.15,
        n_iter=8,
        progress=False,
    ).fit(X, y)
    route = est.route(Xt)
    assert route[centre].mean() > 0.85  # the centre goes to f0
    assert route[~centre].mean() < 0.1  # the easy outside stays with f1
    f0_acc = np.mean(f0.predict(Xt) == yt)
    assert np.mean(est.predict(Xt) == yt) >= f0_acc - 0.01
    # f1 alone is far worse: the gate is doing the work
    assert np.mean(evaluate(est.low_, Xt).labels == yt) < f0_acc - 0.05


# ----------------------------------------------------------------------------- Synthetic-2
def synthetic2(n=100, seed=0):
    """Four clusters, two unit-cost features (section 5, Figure 3).

    Cluster 1 (left, top) is the only one a vertical line (feature 1) separates, so L1 selects
    feature 1; clusters 3 and 4 (bottom) are told apart by feature 2 alone, which also
    separates them from the top clusters 1 and 2.
    """
    rng = np.random.default_rng(seed)
    centres = np.array([[-3.0, 3.0], [1.0, 3.0], [1.0, 0.0], [1.0, -3.0]])
    labels = np.array([1, 0, 1, 0])
    X = np.vstack([c + 0.3 * rng.standard_normal((n, 2)) for c in centres])
    return X, np.repeat(labels, n)


def _best_cost_at_full_accuracy(method, X, y, f0, gammas, p_fulls, **kw):
    best = np.inf
    for p_full in p_fulls:
        for gamma in gammas:
            est = ADAPTClassifier(
                f0, costs=[1.0, 1.0], method=method, p_full=p_full, gamma=gamma, progress=False, **kw
            ).fit(X, y)
            ev = evaluate(est.plan_, X, est.costs_)
            if np.mean(ev.labels == y) >= 0.995:
                best = min(best, ev.cost.mean)
    return best


@pytest.fixture(scope="module")
def syn2():
    X, y = synthetic2()
    return X, y, _svc(X, y)


def test_synthetic2_l1_baseline_cannot_beat_1_75(syn2):
    X, y, f0 = syn2
    assert np.mean(f0.predict(X) == y) == 1.0
    cost = _best_cost_at_full_accuracy("l1", X, y, f0, (0.3, 0.1, 0.01, 1e-3), (0.25, 0.5, 0.75, 0.9))
    assert cost >= 1.75 - 0.01
    assert cost < 2.0  # it does save on cluster 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_synthetic2_adapt_lin_reaches_1_5(seed):
    # A weak penalty and the authors' 50 outer iterations let the gate and f1 settle on what
    # they jointly need (feature 2 carries both); the support cut to one feature then finds
    # the paper's system: clusters 1-2 to f0 (cost 2), clusters 3-4 to f1 (cost 1).
    X, y = synthetic2(seed=seed)
    f0 = _svc(X, y)
    est = ADAPTClassifier(
        f0, costs=[1.0, 1.0], method="lin", p_full=0.5, gamma=1e-4, n_iter=50, max_features=1, progress=False
    ).fit(X, y)
    assert np.all(est.gate_.coef[0] == 0.0) and np.all(est.low_.coef[0] == 0.0)  # feature 1 never bought
    for Xe, ye in ((X, y), synthetic2(seed=seed + 10)):
        ev = evaluate(est.plan_, Xe, est.costs_)
        assert np.mean(est.predict(Xe) == ye) == 1.0
        assert ev.cost.mean == pytest.approx(1.5, abs=0.01)


def test_synthetic2_adapt_lin_sweep_beats_l1(syn2):
    X, y, f0 = syn2
    lin = _best_cost_at_full_accuracy("lin", X, y, f0, (1e-4, 0.01), (0.5,), n_iter=50, max_features=1)
    l1 = _best_cost_at_full_accuracy("l1", X, y, f0, (0.3, 0.1, 0.01, 1e-3), (0.25, 0.5, 0.75, 0.9))
    assert lin <= 1.5 + 0.01 < 1.75 - 0.01 <= l1


def test_synthetic2_adapt_lin_matches_l1(syn2):
    X, y, f0 = syn2
    cost = _best_cost_at_full_accuracy("lin", X, y, f0, (0.1, 0.03), (0.5,))
    assert cost <= 1.75 + 0.01


# ------------------------------------------------------------------------------- multiclass
@pytest.mark.parametrize("method", ["gbrt", "lin", "l1"])
def test_multiclass_low_model_is_multinomial_gate_binary(method):
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    X, y = make_classification(
        n_samples=600, n_features=6, n_informative=4, n_classes=3, n_clusters_per_class=1, random_state=2
    )
    labels = np.array(["a", "b", "c"])[y]
    f0 = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0, n_jobs=1).fit(X, labels)
    est = ADAPTClassifier(f0, method=method, p_full=0.3, n_estimators=10, n_iter=3, progress=False).fit(
        X, labels
    )
    assert est.low_.n_outputs == 3 and est.gate_.n_outputs == 1
    proba = est.predict_proba(X)
    assert proba.shape == (600, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    pred = est.predict(X)
    assert set(pred) <= {"a", "b", "c"}
    assert np.mean(pred == labels) > 0.8


# ------------------------------------------------------------------------------- real data
def test_thyroid_real_costs_derived_feature_priced(data_home):
    """thyroid (3 classes, dollar costs, FTI derived from TT4 and T4U): ADAPT-GBRT keeps the
    random forest's accuracy within 1 point for a fraction of its cost, and every example that
    acquired FTI paid for TT4 and T4U."""
    from sklearn.ensemble import RandomForestClassifier

    from thrifty.datasets import load

    ds = load("thyroid", data_home=data_home)
    X, y, _ = ds.subset("train")
    Xt, yt, _ = ds.subset("test")
    X, Xt = X.to_numpy(float), Xt.to_numpy(float)
    f0 = RandomForestClassifier(n_estimators=50, random_state=0, n_jobs=1).fit(X, y)
    ev0 = evaluate(f0, Xt, ds.costs)
    # the benchmark's settings: with fewer rounds and iterations q stays soft, no split repays a
    # lab test and the model stays constant (the majority class)
    est = ADAPTClassifier(
        f0, costs=ds.costs, p_full=0.35, gamma=1e-3, n_estimators=100, max_depth=4, n_iter=6, progress=False
    ).fit(X, y)
    ev = evaluate(est.plan_, Xt, ds.costs)
    assert np.mean(est.predict(Xt) == yt) >= np.mean(ev0.labels == yt) - 0.01
    assert ev.cost.mean < 0.6 * ev0.cost.mean
    names = ds.feature_names
    fti, tt4, t4u = (names.index(n) for n in ("FTI", "TT4", "T4U"))
    got_fti = ev.cost.acquired[:, fti]
    assert np.all(ev.cost.acquired[got_fti][:, [tt4, t4u]])
