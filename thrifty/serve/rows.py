"""Request bodies of ``thrifty serve``: JSON checked before it is parsed, rows coded the way the
plan reads them."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

# +1 for a byte that opens an array or object, -1 for one that closes it.
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
# What an integer key may be: the range of the 64-bit integer columns databases key rows by.
_KEY_RANGE = (-(2**63), 2**63 - 1)


class BadRequest(ValueError):
    """A request the client must fix; ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


def nesting(body: bytes) -> int:
    """How deep the arrays and objects of a JSON text nest, found without parsing it.

    ``json.loads`` recurses once per level, so a body nested 100,000 deep raises
    ``RecursionError`` inside the parser. Brackets are counted outside string literals (a
    category may be named ``"[50, 60)"``): a bracket is inside one when an odd number of
    unescaped quotes precede it, and a quote is escaped when an odd number of backslashes
    precede it. A few vectorised passes: about 6 ms for a MiB of rows.
    """
    text = np.frombuffer(body, dtype=np.uint8)
    quotes = np.flatnonzero(text == ord('"'))
    after_backslash = quotes[(quotes > 0) & (text[quotes - 1] == ord("\\"))]
    if len(after_backslash):
        plain = np.flatnonzero(text != ord("\\"))
        last = np.searchsorted(plain, after_backslash) - 1
        run = after_backslash - 1 - np.where(last >= 0, plain[last], -1)
        quotes = np.setdiff1d(quotes, after_backslash[run % 2 == 1], assume_unique=True)
    step = _STEP[text]
    brackets = np.flatnonzero(step)
    outside = np.searchsorted(quotes, brackets) % 2 == 0
    return int(np.cumsum(step[brackets[outside]], dtype=np.int64).max(initial=0))


def read_json(body: bytes, max_depth: int) -> Any:
    """The body parsed as standard JSON, its nesting bounded by ``max_depth`` first.

    Raises
    ------
    BadRequest
        400 for a body nested deeper than ``max_depth``, one that is not JSON, one holding
        ``NaN`` or ``Infinity`` (Python's extensions, which no JSON client sends) and one holding
        an integer of more than 4,300 digits (Python's limit on converting them).
    """
    # Nesting is at most the number of brackets that open: a body with few (a request of a
    # few rows) needs no count (the vectorised count costs tens of microseconds per request).
    openers = body.count(b"[") + body.count(b"{")
    depth = nesting(body) if openers > max_depth else openers
    if depth > max_depth:
        raise BadRequest(
            f"the JSON body nests {depth} levels deep; at most {max_depth} are accepted "
            '(a request is {"rows": [{"feature": value, ...}, ...]}, 3 levels)',
            400,
        )
    try:
        return json.loads(body, parse_constant=_not_json)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, the integer-digits limit
        raise BadRequest(f"malformed JSON: {_clip(str(exc), 200)}", 400) from None


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON; send null for a missing value")


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
            keys.append(self._key(row.get(self.key), i))
            for name, value in row.items():
                if name == self.key:
                    continue
                j = self.column.get(name)
                if j is None:
                    more = "..." if len(self.names) > 10 else ""
                    raise BadRequest(
                        f"row {i} has unknown feature {_clip(repr(name))}; the model's features are "
                        f"{self.names[:10]}{more} (and the key {self.key!r})"
                    )
                values[i, j] = self._number(value, i, name, j)
                given[i, j] = True
        return keys, values, given

    def _key(self, key: Any, i: int) -> Any:
        # A key is looked up in a store and echoed in the answer: it must be a value both can carry.
        if isinstance(key, (dict, list, bool)):
            raise BadRequest(f"the {self.key!r} of row {i} must be a string or a number, got {_kind(key)}")
        if isinstance(key, int) and not _KEY_RANGE[0] <= key <= _KEY_RANGE[1]:
            raise BadRequest(
                f"the {self.key!r} of row {i} is {_clip(str(key))}, beyond the 64-bit integers "
                "a key column holds; send such a key as a string"
            )
        if isinstance(key, float) and not math.isfinite(key):
            raise BadRequest(f"the {self.key!r} of row {i} is {key}, beyond the range of a float64")
        return key

    def _number(self, value: Any, i: int, name: str, j: int) -> float:
        if value is None:
            return math.nan
        if isinstance(value, str) and j in self.codes:
            return float(self.codes[j].get(value, math.nan))
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            what = "a number, a category or null" if j in self.codes else "a number or null"
            raise BadRequest(
                f"feature {name!r} of row {i} must be {what}, got {_kind(value)} {_clip(repr(value))}"
            )
        try:
            number = float(value)
        except OverflowError:  # an integer of more than 308 digits
            number = math.inf
        if not math.isfinite(number):
            raise BadRequest(
                f"feature {name!r} of row {i} is {_clip(str(value))}, beyond the range of a float64 "
                "(about 1.8e308); send a finite number, or null for a missing value"
            )
        return number


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def _clip(text: str, most: int = 40) -> str:
    """Text of the client's echoed back at most ``most`` characters long."""
    return text if len(text) <= most else text[: most - 3] + "..."
