"""Request rows of ``thrifty serve``: JSON objects checked and coded the way the plan reads them."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


class BadRequest(ValueError):
    """A request the client must fix; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


class RowReader:
    """Turns ``{"rows": [{key: ..., feature: value, ...}, ...]}`` into arrays.

    Parameters
    ----------
    names : list of str
        The model's feature names, in model order.
    categories : dict of int to list
        Stored categories of categorical features: a string value is coded by its position
        (an unseen category becomes NaN, as in LightGBM).
    key : str
        Field identifying a row's record in the feature provider.
    max_rows : int
        Most rows one request may hold.
    """

    def __init__(self, names: list[str], categories: dict[int, list], key: str, max_rows: int) -> None:
        self.names, self.key, self.max_rows = names, key, max_rows
        self.column = {n: j for j, n in enumerate(names)}
        self.codes = {j: {c: i for i, c in enumerate(cats)} for j, cats in categories.items()}

    def read(self, body: Any) -> tuple[list[Any], np.ndarray, np.ndarray]:
        """Keys (None when absent), values given (NaN elsewhere) and the mask of given values."""
        if not isinstance(body, dict) or not isinstance(body.get("rows"), list):
            raise BadRequest('the body must be a JSON object {"rows": [{...}, ...]}', 400)
        rows = body["rows"]
        if len(rows) > self.max_rows:
            raise BadRequest(f"{len(rows)} rows in one request; at most {self.max_rows} are accepted", 413)
        n, F = len(rows), len(self.names)
        values = np.full((n, F), np.nan)
        given = np.zeros((n, F), dtype=np.bool_)
        keys: list[Any] = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                raise BadRequest(f"row {i} must be a JSON object of feature: value, got {_kind(row)}")
            keys.append(row.get(self.key))
            if isinstance(keys[-1], (dict, list, bool)):
                raise BadRequest(
                    f"the {self.key!r} of row {i} must be a string or a number, got {_kind(keys[-1])}"
                )
            for name, value in row.items():
                if name == self.key:
                    continue
                j = self.column.get(name)
                if j is None:
                    more = "..." if len(self.names) > 10 else ""
                    raise BadRequest(
                        f"row {i} has unknown feature {name!r}; the model's features are "
                        f"{self.names[:10]}{more} (and the key {self.key!r})"
                    )
                values[i, j] = self._number(value, i, name, j)
                given[i, j] = True
        return keys, values, given

    def _number(self, value: Any, i: int, name: str, j: int) -> float:
        if value is None:
            return math.nan
        if isinstance(value, str) and j in self.codes:
            return float(self.codes[j].get(value, math.nan))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            what = "a number, a category or null" if j in self.codes else "a number or null"
            raise BadRequest(f"feature {name!r} of row {i} must be {what}, got {_kind(value)} {value!r:.40}")
        return float(value)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
