"""RowReader: request rows checked and coded the way the plan reads them."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thrifty.serve.rows import BadRequest, RowReader, nesting, read_json

READER = RowReader(["age", "thal", "chol"], {1: ["fd", "normal", "rd"]}, "id", max_rows=3)


def test_rows_are_coded_and_marked_given():
    keys, values, given = READER.read(
        {
            "rows": [
                {"id": "a", "age": 61, "thal": "rd"},
                {"id": 7, "thal": "unseen", "chol": None},
                {"thal": 1},
            ]
        }
    )
    assert keys == ["a", 7, None]
    np.testing.assert_array_equal(given, [[1, 1, 0], [0, 1, 1], [0, 1, 0]])
    np.testing.assert_array_equal(values[0], [61.0, 2.0, np.nan])
    assert np.isnan(values[1]).all()  # an unseen category is missing, as in LightGBM
    assert values[2, 1] == 1.0  # a category code is taken as is


@pytest.mark.parametrize(
    "body, status, message",
    [
        ({"rows": {"id": 1}}, 400, '{"rows": [{...}, ...]}'),
        ({"rows": [{}] * 4}, 413, "at most 3"),
        ({"rows": [{"id": [1]}]}, 422, "'id' of row 0 must be a string or a number, got a list"),
        ({"rows": [{"chol": "high"}]}, 422, "feature 'chol' of row 0 must be a number or null, got a string"),
        ({"rows": [{"thal": {"x": 1}}]}, 422, "feature 'thal' of row 0 must be a number, a category or null"),
        ({"rows": [{"id": 1}, {"id": 2, "bmi": 3}]}, 422, "row 1 has unknown feature 'bmi'"),
    ],
)
def test_bad_rows(body, status, message):
    with pytest.raises(BadRequest) as info:
        READER.read(body)
    assert info.value.status == status and message in str(info.value)


@pytest.mark.parametrize(
    "body, depth",
    [
        (b'{"rows": [{"id": 1}]}', 3),
        (b'{"rows": [{"id": "[[[{{{"}]}', 3),  # brackets inside a string do not nest
        (b'{"a": "say \\"[[\\" twice", "b": [[1]]}', 3),  # nor do they after an escaped quote
        (b"[" * 100_000 + b"]" * 100_000, 100_000),
        (b"", 0),
    ],
)
def test_nesting_is_counted_outside_strings(body, depth):
    assert nesting(body) == depth


def _depth(value) -> int:
    if isinstance(value, dict):
        value = list(value.values())
    return 1 + max(map(_depth, value), default=0) if isinstance(value, list) else 0


# Strings full of what could fool a scan: brackets, quotes, backslashes (escaped by json.dumps).
_TRICKY = st.text(alphabet='[]{}"\\ab', max_size=8)


@given(
    st.recursive(
        st.none() | st.integers() | _TRICKY,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY, inner, max_size=3),
        max_leaves=30,
    )
)
@settings(max_examples=300, deadline=None)
def test_nesting_of_any_json_is_its_depth(value):
    # Exact on JSON; on a malformed body too up to where the parser stops (it reads no further).
    assert nesting(json.dumps(value).encode()) == _depth(value)


@given(
    st.recursive(
        st.none() | st.integers() | _TRICKY,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY, inner, max_size=3),
        max_leaves=30,
    ),
    st.integers(3, 8),
)
@settings(max_examples=300, deadline=None)
def test_a_body_is_refused_exactly_when_it_nests_deeper_than_allowed(value, max_depth):
    # Bodies with few brackets skip the count: the decision must be the count's all the same.
    body = json.dumps(value).encode()
    if _depth(value) > max_depth:
        with pytest.raises(BadRequest, match=f"nests {_depth(value)} levels deep"):
            read_json(body, max_depth)
    else:
        assert read_json(body, max_depth) == value


@pytest.mark.parametrize(
    "body, message",
    [
        (b"[" * 100_000, "nests 100000 levels deep; at most 16"),  # json.loads: RecursionError
        (b'{"rows": [{"id": NaN}]}', "NaN is not JSON"),  # echoed back: JSONResponse refuses NaN
        (b'{"rows": [{"age": -Infinity}]}', "-Infinity is not JSON"),
        (b'{"rows": [{"id": ' + b"9" * 5000 + b"}]}", "malformed JSON: Exceeds the limit"),
        (b"\xff\xfe", "malformed JSON"),
    ],
)
def test_json_that_python_would_choke_on_is_a_400(body, message):
    with pytest.raises(BadRequest) as info:
        read_json(body, max_depth=16)
    assert info.value.status == 400 and message in str(info.value)


@pytest.mark.parametrize(
    "row, message",
    [
        ({"age": 10**400}, "feature 'age' of row 0 is 1000"),  # float(): OverflowError
        ({"age": 1e308 * 10}, "feature 'age' of row 0 is inf, beyond the range of a float64"),
        ({"id": 10**30}, "'id' of row 0 is 1000000000000000000000000000000, beyond the 64-bit"),
        ({"id": -(2**63) - 1}, "beyond the 64-bit integers"),
        ({"id": float("inf")}, "'id' of row 0 is inf"),
        ({"id": True}, "'id' of row 0 must be a string or a number, got a boolean"),
        ({"x" * 1000: 1}, "unknown feature 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."),
    ],
)
def test_out_of_range_values_and_keys_are_named(row, message):
    with pytest.raises(BadRequest) as info:
        READER.read({"rows": [row]})
    assert info.value.status == 422 and message in str(info.value)
    assert len(str(info.value)) < 300  # a client's long value is not echoed whole


def test_keys_at_the_edges_of_64_bits_are_kept():
    keys, _, _ = READER.read({"rows": [{"id": 2**63 - 1}, {"id": -(2**63)}, {"id": 1.5}]})
    assert keys == [2**63 - 1, -(2**63), 1.5]
