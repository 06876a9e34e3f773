"""What the runtime accepts as rows (``thrifty/forest/_inputs.py``): the errors name what is wrong."""

import lightgbm
import numpy as np
import pandas as pd
import pytest

import thrifty
from thrifty.forest import to_matrix

NAMES = ["glucose", "mass", "age", "bp"]


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(120, 4)), columns=NAMES)
    y = (X["glucose"] + X["age"] > 0).astype(int)
    return thrifty.Forest.from_model(lightgbm.LGBMClassifier(n_estimators=5, verbose=-1).fit(X, y)), X


@pytest.mark.parametrize(
    "drop, extra",
    [
        # one column fewer than the model's: was "X has 3 columns, but the model expects 4"
        (["age"], {}),
        # as many columns, one of them another
        (["age"], {"weight": 1.0}),
    ],
)
def test_a_missing_column_is_named(forest, drop, extra):
    model, X = forest
    with pytest.raises(ValueError, match=r"lacks the model's feature\(s\) \['age'\]"):
        thrifty.evaluate(model, X.drop(columns=drop).assign(**extra))


@pytest.mark.parametrize("given", ["data.csv", np.asarray("data.csv")])
def test_a_file_name_is_refused_with_the_fix(forest, given):
    model, _ = forest
    # np.asarray of a path is a 0-d array of text (what evaluate's dense loop makes of it).
    with pytest.raises(ValueError, match=r"X is a file name \('data.csv'\), not rows; read the file first"):
        to_matrix(given, 4)
    with pytest.raises(ValueError, match="read the file first"):
        model.predict("data.csv")
