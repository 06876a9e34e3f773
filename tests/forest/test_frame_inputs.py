"""DataFrames and lists of rows become the matrix today's conversion made (a frozen copy in
``tests/_helpers/frozen_inputs``), bit for bit, with its errors word for word, whatever the
caches of the faster conversion hold; and a compiled plan serves them as it serves arrays."""

from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thrifty
from tests._helpers import frozen_inputs
from thrifty import Forest, Full
from thrifty.exceptions import InputError
from thrifty.forest import to_matrix

NAMES = ["age", "colour", "income", "shape", "flag"]
STORED = {1: ["red", "green", "blue"], 3: ["round", "square"]}
POOL = {1: ["red", "green", "blue", "mauve"], 3: ["round", "square", "oval"]}
NUMBERS = st.sampled_from([0.0, -0.0, 1.5, -3.0, 1e30, np.inf, -np.inf, np.nan, 7.0])


def outcome(convert, X, names=NAMES, categories=STORED, n_features=5):
    """The matrix ``convert`` makes of ``X``, or the text of the error it raises."""
    try:
        return convert(X, n_features, names, categories)
    except InputError as exc:
        return f"{type(exc).__name__}: {exc}"


def assert_same(X, **kwargs) -> None:
    want = outcome(frozen_inputs.to_matrix, X, **kwargs)
    got = outcome(to_matrix, X, **kwargs)
    if isinstance(want, str):
        assert got == want
    else:
        assert isinstance(got, np.ndarray) and got.dtype == np.float64 and got.flags.c_contiguous
        assert got.shape == want.shape
        assert np.array_equal(got.view(np.int64), want.view(np.int64))  # bit for bit


@st.composite
def frames(draw) -> pd.DataFrame:
    n = draw(st.sampled_from([0, 1, 2, 3, 40]))
    cols = {}
    for j, name in enumerate(NAMES):
        if j in POOL:
            values = draw(st.lists(st.sampled_from([*POOL[j], None]), min_size=n, max_size=n))
            kind = draw(st.sampled_from(["category", "reordered", "object", "string", "subset"]))
            if kind in ("object", "string"):
                cols[name] = pd.Series(values, dtype=object if kind == "object" else "string")
            else:
                cats = [c for c in POOL[j] if kind != "subset" or c in values]
                cats = draw(st.permutations(cats)) if kind == "reordered" else cats
                cols[name] = pd.Series(pd.Categorical(values, categories=cats))
        else:
            values = draw(st.lists(NUMBERS, min_size=n, max_size=n))
            dtype = draw(st.sampled_from(["float64", "float32", "int", "bool", "Float64"]))
            s = pd.Series(values, dtype=np.float64)
            if dtype == "int":
                s = s.fillna(0).clip(-5, 5).astype(np.int64)
            elif dtype == "bool":
                s = s.fillna(0) > 0
            elif dtype == "Float64":
                s = s.astype("Float64")
            else:
                s = s.astype(dtype)
            cols[name] = s
    df = pd.DataFrame(cols)
    order = draw(st.permutations(list(range(len(NAMES)))))
    df = df.iloc[:, order]
    change = draw(st.sampled_from(["none", "none", "drop", "extra", "duplicate", "spaces"]))
    if change == "drop":
        df = df.drop(columns=[draw(st.sampled_from(NAMES))])
    elif change == "extra":
        df = df.assign(other=1.0)
    elif change == "duplicate":
        df.columns = [*df.columns[:-1], df.columns[0]]
    elif change == "spaces":
        df = df.rename(columns={"income": "in come"})
    return df


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.sampled_from(["named", "unnamed", "generic"]))
def test_frames_convert_as_before(df, naming) -> None:
    names = {"named": NAMES, "unnamed": None, "generic": [f"Column_{j}" for j in range(5)]}[naming]
    if naming == "named" and "in come" in df.columns:
        names = [n.replace("income", "in_come") for n in NAMES]
    # Twice: the second call reads what the first left in the caches.
    assert_same(df, names=names)
    assert_same(df, names=names)
    assert_same(df.iloc[:1], names=names)


def test_same_names_other_categories_get_their_own_codes() -> None:
    """The caches never answer for a frame whose categories differ under the same column, even
    when pandas calls the dtypes equal (unordered, same categories in another order)."""
    rows = ["red", "green", "blue", None]
    variants = [
        ["red", "green", "blue"],
        ["blue", "red", "green"],
        ["red", "green", "blue", "mauve"],
        ["green"],
        ["red", "green", "blue"],
    ]
    for cats in variants + variants[::-1]:
        col = pd.Categorical([r if r in cats else None for r in rows], categories=cats)
        df = pd.DataFrame({n: (col if j == 1 else np.arange(4.0)) for j, n in enumerate(NAMES)})
        df["shape"] = pd.Categorical(["round"] * 4)
        got = to_matrix(df, 5, NAMES, STORED)
        assert_same(df)
        want = [{"red": 0.0, "green": 1.0, "blue": 2.0}.get(r) if r in cats else None for r in rows]
        assert np.array_equal(got[:, 1], np.array(want, dtype=np.float64), equal_nan=True)


def test_other_stored_categories_under_the_same_frame() -> None:
    """Two models' categories for the same frame: each model's own codes."""
    cols = {n: pd.Categorical(["blue", "red"]) if j in STORED else [1.0, 2.0] for j, n in enumerate(NAMES)}
    df = pd.DataFrame(cols)
    first = to_matrix(df, 5, NAMES, {1: ["red", "green", "blue"], 3: ["blue"]})
    second = to_matrix(df, 5, NAMES, {1: ["blue", "red"], 3: ["red"]})
    assert first[:, 1].tolist() == [2.0, 0.0] and second[:, 1].tolist() == [0.0, 1.0]
    assert np.isnan(first[1, 3]) and second[:, 3][1] == 0.0


class Duck:
    """A frame alike without pandas' column arrays: the conversion takes its ``items()``."""

    def __init__(self, df: pd.DataFrame, listed: bool) -> None:
        self.df, self.iloc, self.shape = df, df.iloc, df.shape
        self.columns = list(df.columns) if listed else df.columns

    def items(self):
        return self.df.items()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.booleans())
def test_frames_alike_convert_as_before(df, listed) -> None:
    assert_same(Duck(df, listed), names=NAMES)
    assert_same(Duck(df, listed), names=NAMES)


@pytest.mark.parametrize(
    ("change", "fails"),
    [
        (lambda df: df.drop(columns=["income"]), (NAMES, None)),
        (lambda df: df.assign(other=1.0), (None,)),  # named: the extra column is passed over
        (lambda df: df.set_axis([*df.columns[:-1], "age"], axis=1), (NAMES, None)),
        (lambda df: df.assign(age="text"), (NAMES, None)),
        (lambda df: df.set_axis(range(5), axis=1), (NAMES,)),
    ],
)
def test_errors_as_before(change, fails) -> None:
    df = change(pd.DataFrame({n: [1.0] for n in NAMES}))
    for names in fails:
        assert isinstance(outcome(to_matrix, df, names=names), str)
    for names in (NAMES, None):
        assert_same(df, names=names)


@pytest.fixture(scope="module")
def served():
    """A compiled LightGBM model with two categorical columns, and a frame of its inputs."""
    rng = np.random.default_rng(3)
    n = 400
    df = pd.DataFrame(
        {
            "age": rng.normal(size=n),
            "colour": pd.Categorical(rng.choice(["red", "green", "blue"], n)),
            "income": rng.integers(0, 9, n),
            "shape": pd.Categorical(rng.choice(["round", "square"], n)),
            "flag": rng.random(n) < 0.5,
        }
    )
    y = (df["age"] + (df["colour"] == "red") - (df["shape"] == "round") > 0).astype(int)
    model = lgb.LGBMClassifier(n_estimators=8, num_leaves=7, min_child_samples=5, verbose=-1).fit(df, y)
    forest = Forest.from_model(model.booster_)
    return thrifty.compile(Full(forest)), forest, df


@pytest.mark.parametrize("rows", [slice(0, 1), slice(0, 0), slice(5, 9), slice(0, 300)])
def test_compiled_plan_serves_frames_and_lists_as_arrays(served, rows) -> None:
    compiled, forest, df = served
    part = df.iloc[rows]
    M = forest._as_matrix(part)
    want = thrifty.evaluate(Full(forest), M)
    # An empty list is 1-d (an error either way): lists from one row on.
    for X in (part, part.iloc[:, ::-1], *([M.tolist()] if len(M) else [])):
        for ev in (compiled.evaluate(X, n_threads=1), thrifty.evaluate(compiled, X)):
            assert np.array_equal(ev.raw, want.raw) and np.array_equal(ev.exit, want.exit)
            assert np.array_equal(ev.cost.feature, want.cost.feature)


def test_compiled_plan_unseen_category_and_bad_lists(served) -> None:
    compiled, forest, df = served
    row = df.iloc[:1].copy()
    row["colour"] = pd.Categorical(["mauve"])
    assert np.isnan(forest._as_matrix(row)[0, 1])
    assert np.array_equal(compiled.evaluate(row).raw, thrifty.evaluate(Full(forest), row).raw)
    bad = [
        [[1.0, 2.0]],  # too narrow
        [1.0, 2.0, 3.0, 4.0, 5.0],  # one row, 1-d
        [["a", 1.0, 2.0, 3.0, 4.0]],  # text
    ]
    for X in bad:
        with pytest.raises(InputError) as served_error:
            compiled.evaluate(X)
        with pytest.raises(InputError) as general_error:
            thrifty.evaluate(Full(forest), X)
        assert str(served_error.value) == str(general_error.value)
    with pytest.raises(InputError, match="lacks the model's feature"):
        compiled.evaluate(df.iloc[:1, 1:])
