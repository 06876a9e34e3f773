"""Every estimator with names users write, and its one-line errors for bad X and y."""

import warnings

import lightgbm
import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier

import thrifty
from tests._helpers.names import LIGHTGBM_OK, NASTY
from thrifty import (
    ADAPTClassifier,
    BudgetPrunedClassifier,
    BudgetRFClassifier,
    CEGBClassifier,
    CostModel,
    CronusClassifier,
    GreedyMiserClassifier,
    QWYCClassifier,
)

rng = np.random.default_rng(0)
X_ARRAY = rng.normal(size=(160, len(NASTY)))
Y = (X_ARRAY[:, 0] + X_ARRAY[:, 1] - X_ARRAY[:, 6] > 0).astype(int)
X_FRAME = pd.DataFrame(X_ARRAY, columns=NASTY)
# Prices by name, listed in another order than the columns: a positional match would misprice.
PRICES = {n: float(i + 1) for i, n in enumerate(NASTY)}
COSTS = CostModel(dict(reversed(PRICES.items())), feature_names=NASTY[::-1])


_MODELS = {}


def _rf(X):
    key = ("rf", isinstance(X, pd.DataFrame))  # one fit per kind of input, shared by the tests
    if key not in _MODELS:
        _MODELS[key] = RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0).fit(X, Y)
    return _MODELS[key]


def _cegb(X):
    key = ("cegb", isinstance(X, pd.DataFrame))
    if key not in _MODELS:
        _MODELS[key] = CEGBClassifier(n_estimators=8, progress=False).fit(X, Y)
    return _MODELS[key]


# name -> (estimator given X and costs); one row per estimator.
ESTIMATORS = {
    "CEGB": lambda X, c: CEGBClassifier(costs=c, n_estimators=8, progress=False),
    "GreedyMiser": lambda X, c: GreedyMiserClassifier(costs=c, n_estimators=8, progress=False),
    "BudgetRF": lambda X, c: BudgetRFClassifier(6, costs=c, max_depth=4, random_state=0, progress=False),
    "ADAPT": lambda X, c: ADAPTClassifier(_rf(X), costs=c, n_estimators=8, progress=False),
    "BudgetPrune": lambda X, c: BudgetPrunedClassifier(_rf(X), costs=c, lam=0.01, progress=False),
    "Cronus": lambda X, c: CronusClassifier(_cegb(X), costs=c, n_stages=2, n_lams=2, progress=False),
    "QWYC": lambda X, c: QWYCClassifier(_cegb(X), costs=c, progress=False),
}


def _fit(make, X, y, costs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and data-size warnings of tiny fits
        return make(X, costs).fit(X, y)


@pytest.fixture(scope="module")
def fitted():
    """Each estimator fitted once on the frame with nasty names, shared by the tests."""
    return {name: _fit(make, X_FRAME, Y, COSTS) for name, make in ESTIMATORS.items()}


@pytest.mark.parametrize("name", ESTIMATORS)
def test_every_estimator_fits_predicts_and_prices_nasty_names(fitted, name):
    est = fitted[name]
    assert (est.predict(X_FRAME) == Y).mean() > 0.7
    report = thrifty.evaluate(est, X_FRAME, COSTS).cost
    assert report.feature_names is not None and set(report.feature_names) == set(NASTY)
    # Each feature's price was found by its name, not its position.
    prices = np.array([PRICES[n] for n in report.feature_names])
    np.testing.assert_allclose(report.feature, report.acquired @ prices)
    assert report.feature.max() > 0
    # Columns in another order are read by name.
    shuffled = X_FRAME[NASTY[::-1]]
    np.testing.assert_array_equal(
        thrifty.evaluate(est, shuffled, COSTS).labels, thrifty.evaluate(est, X_FRAME, COSTS).labels
    )


@pytest.mark.parametrize("name", ESTIMATORS)
def test_x_of_the_wrong_width_is_blamed_on_x(fitted, name):
    wide = np.c_[X_ARRAY, X_ARRAY[:, :1]]
    expected = rf"X has {len(NASTY) + 1} features.*{len(NASTY)}"
    with pytest.raises(ValueError, match=expected):
        ESTIMATORS[name](X_ARRAY, CostModel(np.ones(len(NASTY)))).fit(wide, Y)
    with pytest.raises(ValueError, match=expected), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an array after a frame: scikit-learn's name warning
        fitted[name].predict(wide)


@pytest.mark.parametrize("name", ESTIMATORS)
@pytest.mark.parametrize(
    ("labels", "match"),
    [
        (np.where(Y == 1, 1.0, np.nan), r"^Input y contains NaN\.$"),  # float labels with NaN
        (np.where(Y == 1, "yes", None), r"^Input y contains NaN\.$"),  # text labels with a None
        (np.zeros(len(Y), dtype=int), r"y has one class only \(0\); \w+ needs examples of at least 2"),
        (np.full(len(Y), "yes"), r"y has one class only \('yes'\)"),
    ],
)
def test_nan_and_one_class_labels_get_one_line_errors(name, labels, match):
    est = ESTIMATORS[name](X_ARRAY, None)
    with pytest.raises(ValueError, match=match):
        est.fit(X_ARRAY, labels)


def test_budget_prune_refuses_a_boosted_model_and_says_what_to_use():
    boosted = lightgbm.LGBMClassifier(n_estimators=10, verbose=-1).fit(X_ARRAY, Y)
    with pytest.raises(ValueError, match=r"lightgbm model is boosted \(its 10 trees.*QWYCClassifier"):
        BudgetPrunedClassifier(boosted, budget=3.0, progress=False).fit(X_ARRAY, Y)
    with pytest.raises(ValueError, match="boosted"):
        thrifty.budget_prune(boosted, X_ARRAY, Y, lam=0.1)


@pytest.mark.parametrize(
    "make",
    [
        # a LightGBM random forest, which BudgetPrune prunes
        lambda m, c: BudgetPrunedClassifier(m["rf"], costs=c, lam=0.01, progress=False),
        lambda m, c: CronusClassifier(m["gbdt"], costs=c, n_stages=2, n_lams=2, progress=False),
        lambda m, c: QWYCClassifier(m["gbdt"], costs=c, progress=False),
    ],
    ids=["BudgetPrune", "Cronus", "QWYC"],
)
def test_wrapped_lightgbm_models_report_the_names_users_wrote(make):
    X = X_FRAME.set_axis(LIGHTGBM_OK, axis=1)  # LightGBM stores "blood pressure" as blood_pressure
    costs = CostModel({n: float(i + 1) for i, n in enumerate(LIGHTGBM_OK)}, feature_names=LIGHTGBM_OK)
    models = {
        "gbdt": lightgbm.LGBMClassifier(n_estimators=8, verbose=-1).fit(X, Y),
        "rf": lightgbm.LGBMClassifier(
            boosting_type="rf", n_estimators=8, subsample=0.7, subsample_freq=1, verbose=-1
        ).fit(X, Y),
    }
    est = _fit(lambda X_, c: make(models, c), X, Y, costs)
    assert est.forest_.feature_names == LIGHTGBM_OK
    report = thrifty.evaluate(est, X, costs).cost
    assert report.feature_names == LIGHTGBM_OK
    np.testing.assert_allclose(report.feature, report.acquired @ np.arange(1.0, len(LIGHTGBM_OK) + 1))
