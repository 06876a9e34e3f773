"""The wrapping estimators around each supported library's models pass scikit-learn's checks:
a wrapper takes its tags from the model it wraps (a model refusing NaN makes the wrapper refuse
it too), so the checks test what the wrapped model promises (LightGBM alone is checked beside
each wrapper's own module)."""

import warnings

import pytest
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.utils.estimator_checks import parametrize_with_checks

from thrifty.cascade import CronusClassifier, CronusRanker
from thrifty.order import QWYCClassifier, QWYCRegressor
from thrifty.train import ADAPTClassifier, ADAPTRegressor

xgboost = pytest.importorskip("xgboost")
lightgbm = pytest.importorskip("lightgbm")

_GBC = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0)
_GBR = GradientBoostingRegressor(n_estimators=5, max_depth=2, random_state=0)
_RFC = RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0)
_RFR = RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0)
_XGBC = xgboost.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1)
_XGBR = xgboost.XGBRegressor(n_estimators=5, max_depth=2, n_jobs=1)
_LGBC = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1)
_LGBR = lightgbm.LGBMRegressor(n_estimators=5, num_leaves=4, min_child_samples=2, verbose=-1, n_jobs=1)
_CRONUS = dict(n_stages=2, max_cycles=1, progress=False, n_threads=1)
_ADAPT = dict(n_estimators=3, n_iter=1, progress=False)

WRAPPERS = [
    QWYCClassifier(_XGBC, progress=False),
    QWYCClassifier(_RFC, progress=False),
    QWYCRegressor(_XGBR, progress=False),
    # lam given: on the checks' tiny data XGBoost grows trees without a split, which cost
    # nothing, and the default lam (scaled by the trees' costs) has no scale
    CronusClassifier(_XGBC, lam=1e-3, **_CRONUS),
    CronusClassifier(_GBC, **_CRONUS),
    CronusClassifier(_RFC, **_CRONUS),
    CronusRanker(_GBR, relevant_min=1, **_CRONUS),
    CronusRanker(_RFR, relevant_min=1, **_CRONUS),
    ADAPTClassifier(_LGBC, **_ADAPT),
    ADAPTClassifier(_XGBC, **_ADAPT),
    ADAPTClassifier(_GBC, **_ADAPT),
    ADAPTClassifier(_RFC, **_ADAPT),
    # enough rounds for f1's trees to pass check_regressors_train's R^2 > 0.5
    ADAPTRegressor(_LGBR, n_estimators=20, learning_rate=0.3, n_iter=1, progress=False),
    ADAPTRegressor(_GBR, n_estimators=20, learning_rate=0.3, n_iter=1, progress=False),
]

# The wrapped model's weighted fit is not the fit on repeated rows (boosting's and bagging's
# own sampling), so the wrapper's cannot be either.
_WEIGHTS = {"check_sample_weight_equivalence_on_dense_data": "the wrapped model's weighted fit"}


# QWYC's multiclass exits are margins of boosted classes: a random forest's trees vote for
# every class at once (vector leaves), so multiclass QWYC refuses it.
_MULTICLASS = {
    check: "multiclass QWYC needs boosted trees, one class each; a random forest's leaves are vectors"
    for check in (
        "check_fit_score_takes_y",
        "check_estimators_overwrite_params",
        "check_dont_overwrite_parameters",
        "check_estimators_fit_returns_self",
        "check_readonly_memmap_input",
        "check_n_features_in_after_fitting",
        "check_positive_only_tag_during_fit",
        "check_sample_weights_list",
        "check_dtype_object",
        "check_f_contiguous_array_estimator",
        "check_classifiers_classes",
        "check_classifiers_train",
        "check_classifiers_train(readonly_memmap=True)",
        "check_classifiers_train(readonly_memmap=True,X_dtype=float32)",
        "check_supervised_y_2d",
        "check_methods_sample_order_invariance",
        "check_methods_subset_invariance",
        "check_dict_unchanged",
        "check_fit2d_predict1d",
    )
}


# ADAPT fits an unfitted hpc on y as given, and XGBoost's classifiers take only the labels
# 0..K-1: the bare XGBClassifier fails these checks too (QWYC and Cronus fit it on codes).
_XGB_LABELS = {
    check: "XGBClassifier takes only labels 0..K-1 and ADAPT fits its hpc on y as given"
    for check in (
        "check_estimators_dtypes",
        "check_sample_weights_pandas_series",
        "check_sample_weights_not_an_array",
        "check_sample_weights_shape",
        "check_sample_weights_not_overwritten",
        "check_classifier_data_not_an_array",
        "check_classifiers_classes",
    )
}


def _expected(est):
    wrapped = getattr(est, "estimator", None)
    if isinstance(est, QWYCClassifier) and isinstance(wrapped, RandomForestClassifier):
        return {**_WEIGHTS, **_MULTICLASS}
    if isinstance(est, ADAPTClassifier) and isinstance(est.hpc, xgboost.XGBClassifier):
        return _XGB_LABELS
    # ADAPT's gate and low-cost model weigh rows exactly, and so do its boosted hpcs and
    # XGBoost's regressor here (a random forest's bootstrap does not)
    adapt = isinstance(est, (ADAPTClassifier, ADAPTRegressor))
    adapt = adapt and not isinstance(est.hpc, RandomForestClassifier)
    exact = adapt or isinstance(wrapped, xgboost.XGBRegressor)
    return {} if exact else _WEIGHTS


@parametrize_with_checks(WRAPPERS, expected_failed_checks=_expected)
def test_wrappers_pass_sklearn_checks(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(estimator)
