"""QWYCClassifier: the scikit-learn meta-estimator around QWYC."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

import thrifty
from tests._helpers.data import categorical_frame
from thrifty.exceptions import BudgetError
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
    dec = clf.decision_function(X_test)
    assert dec.shape == (len(X_test),)
    # an exit decides by the threshold it crossed: the decision is the partial score past it
    raw = ev.raw.reshape(-1)
    exited = ev.exit < clf.forest_.n_trees
    at = ev.exit[exited] - 1
    up = raw[exited] > clf.plan_.eps_pos[at]
    past = np.where(up, clf.plan_.eps_pos[at], clf.plan_.eps_neg[at])
    np.testing.assert_array_equal(dec[exited], raw[exited] - past)
    np.testing.assert_array_equal(dec[~exited], raw[~exited])  # the full score, threshold 0
    assert exited.any() and (raw[exited] * dec[exited] < 0).any()  # some exits cross the other way
    np.testing.assert_array_equal(clf.predict(X_test), clf.classes_[(dec > 0).astype(int)])
    proba = clf.predict_proba(X_test)
    np.testing.assert_array_equal(clf.classes_[proba.argmax(axis=1)], clf.predict(X_test))
    if (~exited).any():
        np.testing.assert_allclose(proba[~exited], model.predict_proba(X_test[~exited]))
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


def test_clone_of_a_forest_needs_no_labels(data):
    model, X, _, _ = data
    clf = QWYCClassifier(thrifty.Forest.from_model(model), alpha=0.01, progress=False).fit(X)
    # clone keeps the parameters, drops the fitted state; a Forest stays usable without labels
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
    with pytest.raises(ValueError, match=r"alpha must be a float in the range \[0, 1\), got 1.5"):
        QWYCClassifier(model, alpha=1.5, progress=False).fit(X)
    with pytest.raises(ValueError, match="mode must be"):
        QWYCClassifier(model, mode="positive", progress=False).fit(X)
    with pytest.raises(ValueError, match="ordering must be"):
        QWYCClassifier(model, ordering="best", progress=False).fit(X)
    with pytest.raises(ValueError, match="progress must be a bool"):
        QWYCClassifier(model, progress="yes").fit(X)
    with pytest.raises(ValueError, match="alphas must be"):
        QWYCClassifier(model, budget=3.0, alphas=[0.1, 1.0], progress=False).fit(X)
    with pytest.raises(ValueError, match="X has 5 features"):
        QWYCClassifier(model, progress=False).fit(X[:, :5])
    one_class = lightgbm.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, np.zeros(len(X), dtype=int))
    with pytest.raises(ValueError, match=r"fitted on one class only \(0\)"):
        QWYCClassifier(one_class, progress=False).fit(X)
    with pytest.raises(TypeError, match="cannot import"):
        QWYCClassifier(object(), progress=False).fit(X)
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        QWYCClassifier(model).predict(X)
    with pytest.raises(ValueError, match="X has 5 features"):
        QWYCClassifier(model, progress=False).fit(X).predict(X[:, :5])


def test_budget_search_over_alpha(data):
    model, X, _, X_test = data
    costs = thrifty.CostModel([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    full_cost = thrifty.evaluate(model, X_test, costs).cost.mean
    clf = QWYCClassifier(model, costs=costs, budget=0.9 * full_cost, alphas=[0.0, 0.01, 0.05, 0.2])
    clf.set_params(progress=False).fit(X, calibration=(X_test, np.zeros(len(X_test))))
    table = clf.budget_search_
    assert table["alpha"].tolist() == [0.0, 0.01, 0.05, 0.2]
    # the rule, recomputed: the least disagreement within the budget on the calibration rows
    ok = table[table["cost"] <= clf.budget]
    assert clf.alpha_ == table.loc[table["chosen"], "alpha"].item() == ok.loc[ok["metric"].idxmax(), "alpha"]
    assert -table.loc[table["chosen"], "metric"].item() == clf.disagreement(X_test) <= clf.alpha_
    assert clf.cost_report(X_test).mean <= clf.budget
    with pytest.raises(BudgetError, match="Raise budget to at least"):
        clf.set_params(budget=0.01).fit(X)


def test_sample_weight(data):
    model, X, _, _ = data
    X, w = X[:400], np.random.default_rng(3).integers(0, 3, size=400)
    weighted = QWYCClassifier(model, alpha=0.05, progress=False).fit(X, sample_weight=w)
    repeated = QWYCClassifier(model, alpha=0.05, progress=False).fit(np.repeat(X, w, axis=0))
    for name in ("order", "eps_pos", "eps_neg"):
        np.testing.assert_array_equal(getattr(weighted.plan_, name), getattr(repeated.plan_, name))
    assert weighted.mean_models_ == pytest.approx(repeated.mean_models_)
    assert weighted.budget_search_["cost"].item() == pytest.approx(repeated.budget_search_["cost"].item())


def test_unfitted_estimator_gets_the_weights(data):
    _, X, y, _ = data
    w = np.random.default_rng(4).uniform(0.5, 2.0, size=len(y))
    unfitted = lightgbm.LGBMClassifier(n_estimators=10, num_leaves=4, verbose=-1)
    clf = QWYCClassifier(unfitted, alpha=0.0, progress=False).fit(X, y, sample_weight=w)
    ref = clone(unfitted).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(clf.predict(X), ref.predict(X))  # alpha=0 on the fit rows


def test_multiclass_estimator():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.digitize(X[:, 0] + 0.3 * rng.normal(size=300), [-0.5, 0.5])
    m = lightgbm.LGBMClassifier(n_estimators=8, num_leaves=4, verbose=-1).fit(X, y)
    est = QWYCClassifier(m, alpha=0.01, progress=False).fit(X)
    assert est.disagreement(X) <= 0.01
    assert set(est.predict(X)) <= set(m.classes_)
    # the partial scores at exit: their argmax is the prediction
    dec, proba = est.decision_function(X), est.predict_proba(X)
    assert dec.shape == proba.shape == (300, 3)
    np.testing.assert_array_equal(est.classes_[dec.argmax(axis=1)], est.predict(X))
    np.testing.assert_array_equal(est.classes_[proba.argmax(axis=1)], est.predict(X))


def test_progress_bar_runs(data, capsys):
    model, X, _, _ = data
    clf = QWYCClassifier(model, alpha=0.01, progress=True).fit(X)  # not a TTY under pytest: silent
    assert clf.plan_ is not None
    assert "QWYC positions" not in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow"])
def test_categorical_frames(kind):
    X, y, X_in = categorical_frame(kind)
    model = lightgbm.LGBMClassifier(n_estimators=20, num_leaves=4, verbose=-1).fit(X, y)
    clf = QWYCClassifier(model, alpha=0.0, costs={"age": 1, "colour": 5, "blood pressure": 2}, progress=False)
    clf.fit(X_in, y)
    assert clf.feature_names_in_.tolist() == ["age", "colour", "blood pressure"]
    assert clf.forest_.feature_names == ["age", "colour", "blood pressure"]  # not LightGBM's blood_pressure
    np.testing.assert_array_equal(clf.predict(X_in), model.predict(X))  # alpha=0 on the fit rows
    assert clf.cost_report(X_in).feature.max() <= 8.0


_SMALL_GBT = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1)
# Not QWYC's weighting (tested exactly above and in test_qwyc.py) but the wrapped LightGBM's: its
# min_child_samples and histogram bins count rows, so a weighted fit is not the fit of repeated rows.
_WRAPPED_WEIGHTS = {
    "check_sample_weight_equivalence_on_dense_data": "the wrapped LightGBM model counts rows, not weights"
}


@parametrize_with_checks(
    [QWYCClassifier(_SMALL_GBT, progress=False)], expected_failed_checks=lambda e: _WRAPPED_WEIGHTS
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@parametrize_with_checks(
    [QWYCClassifier(GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0), progress=False)],
    expected_failed_checks=lambda e: {
        "check_sample_weight_equivalence_on_dense_data": "GradientBoostingClassifier's own weighted fit"
    },
)
def test_sklearn_compatible_around_gradient_boosting(estimator, check):
    """The wrapper takes the model's tags: GradientBoostingClassifier refuses NaN, so does QWYC."""
    check(estimator)
