"""RowReader: request rows checked and coded the way the plan reads them."""

from __future__ import annotations

import numpy as np
import pytest

from thrifty.serve.rows import BadRequest, RowReader

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
