"""scikit-learn's estimator checks for ADAPTClassifier, with an expensive model given."""

import warnings

from sklearn.linear_model import LogisticRegression
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

from thrifty.train.adapt import ADAPTClassifier

SMALL = {"n_estimators": 3, "n_iter": 1, "progress": False}


@parametrize_with_checks(
    [
        # an unfitted tree hpc, fitted (cloned) on each check's data and run by thrifty's runtime
        ADAPTClassifier(DecisionTreeClassifier(max_depth=3, random_state=0), **SMALL),
        # a black-box hpc charged every feature, with the linear gate and low-cost model
        ADAPTClassifier(LogisticRegression(max_iter=200), method="lin", **SMALL),
    ]
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(estimator)
