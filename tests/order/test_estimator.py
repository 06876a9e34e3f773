"""QWYCClassifier: the scikit-learn meta-estimator around QWYC."""

import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.ensemble import RandomForestClassifier

import thrifty
from thrifty.order import QWYCClassifier, qwyc

lightgbm = pytest.importorskip("lightgbm")


@pytest.fixture(scope="module")
def data():
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=1200, n_features=6, n_informative=4, random_state=11)
    X_fit, X_test, y_fit = X[:800], X[800:], y[:800]
    m = lightgbm.LGBMClassifier(n_estimators=30, num_leaves=8, learning_rate=0.2, verbose=-1)
    return m.fit(X_fit, y_fit), X_fit, y_fit, X_test


@pytest.mark.parametrize("alpha", [0.0, 0.01, 0.05])
@pytest.mark.parametrize(
    "mode,ordering",
    [
        ("both", "optimize"),  # QWYC*
        ("negative", "optimize"),  # filter-and-score
        ("both", "given"),
    ],
)  # GBT order, Algorithm 2
def test_fit_without_labels_within_alpha(data, alpha, mode, ordering):
    model, X, _, _ = data
    clf = QWYCClassifier(model, alpha=alpha, mode=mode, ordering=ordering, progress=False).fit(X)
    assert clf.disagreement(X) <= alpha
    assert clf.disagreement(X) * len(X) == clf.result_.n_disagree
    full = model.predict(X)
    if alpha == 0:
        assert np.array_equal(clf.predict(X), full)
    assert isinstance(clf.plan_, thrifty.Sequential)
    report = clf.cost_report(X)
    assert report.n_trees.mean() == pytest.approx(clf.mean_models_)
    assert clf.mean_models_ == pytest.approx(clf.result_.mean_cost)  # unit tree costs
    assert clf.mean_models_ < clf.forest_.n_trees
    np.testing.assert_array_equal(clf.classes_, model.classes_)
    assert clf.n_features_in_ == X.shape[1] and not hasattr(clf, "feature_names_in_")


def test_outputs_agree_with_the_plan(data):
    model, X, _, X_test = data
    clf = QWYCClassifier(model, alpha=0.02, progress=False).fit(X)
    ev = thrifty.evaluate(clf.plan_, X_test)
    np.testing.assert_array_equal(clf.predict(X_test), ev.labels)
    np.testing.assert_allclose(clf.predict_proba(X_test), ev.proba)
    dec = clf.decision_function(X_test)
    assert dec.shape == (len(X_test),)
    np.testing.assert_allclose(dec, ev.raw.reshape(-1))
    # an exit decides by the threshold it crossed, not by the sign of the partial score
    exited = ev.exit < clf.forest_.n_trees
    crossed_up = dec[exited] > clf.plan_.eps_pos[ev.exit[exited] - 1]
    np.testing.assert_array_equal(clf.predict(X_test)[exited], clf.classes_[crossed_up.astype(int)])
    held_out = clf.disagreement(X_test)
    assert held_out == np.mean(clf.predict(X_test) != model.predict(X_test))
    assert clf.score(X_test, model.predict(X_test)) == pytest.approx(1 - held_out)


def test_mse_orderings_need_labels(data):
    model, X, y, _ = data
    for ordering in ("individual_mse", "greedy_mse"):
        with pytest.raises(ValueError, match="needs labels"):
            QWYCClassifier(model, ordering=ordering, progress=False).fit(X)
        clf = QWYCClassifier(model, ordering=ordering, alpha=0.01, progress=False).fit(X, y)
        assert np.array_equal(clf.plan_.order, thrifty.order.fixed_order(model, X, y, kind=ordering))
        assert clf.disagreement(X) <= 0.01


def test_unfitted_estimator(data):
    _, X, y, X_test = data
    unfitted = lightgbm.LGBMClassifier(n_estimators=10, num_leaves=4, verbose=-1)
    with pytest.raises(ValueError, match="not fitted.*fit\\(X, y\\)"):
        QWYCClassifier(unfitted, progress=False).fit(X)
    clf = QWYCClassifier(unfitted, alpha=0.0, progress=False).fit(X, y)
    assert clf.estimator_ is not unfitted and not hasattr(unfitted, "booster_")
    np.testing.assert_array_equal(clf.predict(X), clf.estimator_.predict(X))  # alpha=0 on fit data


def test_forest_dataframe_and_random_forest():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    y = np.where(X["a"] - X["b"] > 0, "pos", "neg")
    rf = RandomForestClassifier(n_estimators=10, max_depth=4, random_state=0).fit(X, y)
    clf = QWYCClassifier(thrifty.Forest.from_model(rf), alpha=0.0, progress=False).fit(X)
    assert clf.feature_names_in_.tolist() == ["a", "b", "c"]
    assert clf.classes_.tolist() == ["neg", "pos"]
    np.testing.assert_array_equal(clf.predict(X), rf.predict(X))
    assert clf.mean_models_ < 10


def test_clone_and_pickle(data):
    model, X, _, X_test = data
    forest = thrifty.Forest.from_model(model)
    clf = QWYCClassifier(forest, alpha=0.01, progress=False).fit(X)
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict(X_test), clf.predict(X_test))
    np.testing.assert_array_equal(again.plan_.order, clf.plan_.order)
    # clone keeps the parameters, drops the fitted state; a Forest (or a FrozenEstimator)
    # stays usable without labels
    c = clone(clf)
    assert not hasattr(c, "plan_") and c.get_params()["alpha"] == 0.01
    np.testing.assert_array_equal(c.fit(X).plan_.order, clf.plan_.order)


def test_clone_of_frozen_estimator_stays_fitted(data):
    frozen_module = pytest.importorskip("sklearn.frozen")  # scikit-learn >= 1.6
    model, X, _, _ = data
    ref = QWYCClassifier(model, alpha=0.01, progress=False).fit(X)
    clf = QWYCClassifier(frozen_module.FrozenEstimator(model), alpha=0.01, progress=False)
    fitted = clone(clf).fit(X)  # no labels: the wrapped model survived the clone
    np.testing.assert_array_equal(fitted.plan_.order, ref.plan_.order)
    np.testing.assert_array_equal(fitted.plan_.eps_pos, ref.plan_.eps_pos)
    # a bare fitted model is cloned unfitted by scikit-learn: then labels are needed
    with pytest.raises(ValueError, match="not fitted"):
        clone(QWYCClassifier(model, progress=False)).fit(X)


def test_same_plan_as_qwyc(data):
    model, X, _, _ = data
    clf = QWYCClassifier(model, alpha=0.02, ordering="random", random_state=4, progress=False).fit(X)
    plan = qwyc(model, X, alpha=0.02, ordering="random", random_state=4)
    np.testing.assert_array_equal(clf.plan_.order, plan.order)
    np.testing.assert_array_equal(clf.plan_.eps_neg, plan.eps_neg)


def test_errors(data):
    model, X, _, _ = data
    with pytest.raises(ValueError, match="alpha"):
        QWYCClassifier(model, alpha=1.5, progress=False).fit(X)
    with pytest.raises(ValueError, match="mode"):
        QWYCClassifier(model, mode="positive", progress=False).fit(X)
    with pytest.raises(ValueError, match="unknown ordering"):
        QWYCClassifier(model, ordering="best", progress=False).fit(X)
    with pytest.raises(ValueError, match="progress"):
        QWYCClassifier(model, progress="yes").fit(X)
    with pytest.raises(ValueError, match="X has 5 features"):
        QWYCClassifier(model, progress=False).fit(X[:, :5])
    with pytest.raises(TypeError, match="cannot import"):
        QWYCClassifier(object(), progress=False).fit(X)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        QWYCClassifier(model).predict(X)


def test_multiclass_estimator():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=300), [-0.5, 0.5])
    m = lightgbm.LGBMClassifier(n_estimators=8, num_leaves=4, verbose=-1).fit(X, y)
    est = QWYCClassifier(m, alpha=0.01, progress=False).fit(X)
    assert est.disagreement(X) <= 0.01
    assert est.predict_proba(X).shape == (300, 3)
    assert set(est.predict(X)) <= set(m.classes_)


def test_progress_bar_runs(data, capsys):
    model, X, _, _ = data
    clf = QWYCClassifier(model, alpha=0.01, progress=True).fit(X)  # not a TTY under pytest: silent
    assert clf.plan_ is not None
    assert "QWYC positions" not in capsys.readouterr().err
