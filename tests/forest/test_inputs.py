"""What the runtime accepts as rows (``thrifty/forest/_inputs.py``): the errors name what is wrong."""

import lightgbm
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


STORED = ["a", "b", "c", "d"]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.sampled_from(["a", "b", "c", "d", "e", None]), min_size=0, max_size=30),
    order=st.permutations(["a", "b", "c", "d", "e"]),
    keep=st.integers(1, 5),
    as_category=st.booleans(),
)
def test_categories_are_coded_by_the_stored_list_row_by_row(values, order, keep, as_category):
    """A categorical column's codes are each row's position among the stored categories (NaN
    when missing or unseen), whatever the column's own categories and their order: the same as
    looking every row's value up (the reference below), for text columns too."""
    given = order[:keep]
    values = [v if v in given else None for v in values]
    col = pd.Series(values, dtype=object)
    if as_category:
        col = pd.Series(pd.Categorical(values, categories=given))
    frame = pd.DataFrame({"x": np.arange(len(values), dtype=float), "colour": col})
    M = to_matrix(frame, 2, ["x", "colour"], {1: STORED})
    reference = pd.Index(STORED).get_indexer(pd.Series(values, dtype=object)).astype(float)
    reference[reference < 0] = np.nan
    np.testing.assert_array_equal(M[:, 1], reference)
    np.testing.assert_array_equal(M[:, 0], np.arange(len(values), dtype=float))
