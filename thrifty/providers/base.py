"""What every feature provider shares: keys per row, checked and matched to the store's key type,
and the store's name of each feature."""

from __future__ import annotations

import copy
import math
import re
import uuid
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Self

import numpy as np

from thrifty.exceptions import InputError, MissingKeyError
from thrifty.runtime.lazy import Requests
from thrifty.runtime.plans import as_plan

# The kinds of key a store compares by: `store_key` turns a row's key into the store's type.
INTEGER, TEXT = "integer", "text"

# A row's key is one scalar; anything else (a list, a dict, a date) is refused by name.
_KEY_TYPES = (str, bytes, int, float, Decimal, uuid.UUID, np.integer, np.floating)
# Integer keys as databases store them (BIGINT); a larger number can be no record's key.
_INT64 = (-(2**63), 2**63 - 1)
_DECIMAL_INTEGER = re.compile(r"[+-]?[0-9]{1,19}")


class StoreUnavailable(ConnectionError):
    """The store cannot be read now (locked, deleted, unreachable): the request was fine and may
    be retried later."""


class KeyedProvider:
    """A provider of a store's records: row ``i`` is the record whose key is ``keys[i]``."""

    keys: np.ndarray

    def with_keys(self, keys: Any) -> Self:
        """The same store for other rows: row ``i`` is the record whose key is ``keys[i]``."""
        other = copy.copy(self)
        other.keys = as_keys(keys)
        return other


class SyncKeyedProvider(KeyedProvider):
    """A keyed provider answering a round synchronously; also callable as
    ``provider(feature_ids, row_ids)``, one column per feature."""

    def fetch(self, requests: Requests) -> list[np.ndarray]:
        raise NotImplementedError

    def __call__(self, feature_ids: np.ndarray, row_ids: np.ndarray) -> np.ndarray:
        values = self.fetch([(int(f), row_ids) for f in np.asarray(feature_ids).reshape(-1)])
        return np.column_stack(values) if values else np.zeros((len(row_ids), 0))


def missing_extra(package: str, extra: str) -> ImportError:
    """The error raised when an optional dependency is not installed."""
    return ImportError(f"{package} is not installed; install it with: pip install 'thrifty[{extra}]'")


def feature_columns(columns: Sequence[str] | None, model: Any) -> list[str]:
    """The store's column (or feature-service name) of each model feature, in model order."""
    if columns is not None:
        return [str(c) for c in columns]
    if model is None:
        raise InputError(
            "give columns=[...] (the store's name of each model feature, in model order) "
            "or model= (a model whose feature names are the store's column names)"
        )

    names = as_plan(model).feature_names
    if names is None:
        raise InputError(
            "the model has no feature names; give columns=[...] (the store's name of "
            "each model feature, in model order)"
        )
    return list(names)


def as_keys(keys: Any) -> np.ndarray:
    """Keys of the rows, position ``i`` for row ``i``: a flat sequence of strings or numbers.

    Raises InputError naming the first key that cannot identify a record: None, a boolean
    (``True`` would otherwise read the record of key 1), NaN or an infinity, or a list (nested
    key lists are refused, not flattened).
    """
    if getattr(keys, "dtype", None) is not None and np.asarray(keys).dtype.kind in "iuUS":
        # Integer or string arrays (a DataFrame's key column) hold valid keys only.
        typed = np.asarray(keys)
        if typed.ndim == 1:
            return typed.astype(object)
    out = np.asarray(keys, dtype=object)
    if out.ndim != 1:
        if out.ndim == 0:
            raise InputError(f"keys must be a sequence of one key per row, got the single key {_short(keys)}")
        raise InputError(
            f"keys must be a flat sequence of one key per row, got an array of shape {out.shape} "
            "(nested key lists are refused, not flattened)"
        )
    for i, k in enumerate(out):
        problem = _key_problem(k)
        if problem is not None:
            raise InputError(
                f"keys[{i}] is {problem}; each row's key must be a string or a number "
                "(the key of its record in the store)"
            )
    return out


def _key_problem(key: Any) -> str | None:
    """What makes ``key`` no key at all (None when it is one)."""
    if key is None:
        return "None"
    if isinstance(key, (bool, np.bool_)):
        return f"the boolean {key}"
    if not isinstance(key, _KEY_TYPES):
        return f"a {type(key).__name__} ({_short(key)})"
    if isinstance(key, (float, np.floating, Decimal)) and not math.isfinite(key):
        return f"{key}, not a value any record can have"
    return None


def keys_of(keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The keys of ``rows``: InputError when a row has no key (the evaluation has more rows
    than the provider has keys)."""
    rows = np.asarray(rows, dtype=np.int64)
    outside = (rows < 0) | (rows >= len(keys))
    if outside.any():
        raise InputError(
            f"row {int(rows[outside][0])} was asked for, but the provider has keys for "
            f"{len(keys)} rows; evaluate with n_rows=len(keys) (one key per row)"
        )
    return keys[rows]


def store_key(key: Any, kind: str | None) -> Any:
    """``key`` as the store compares it, or None when no record can have it.

    For an ``INTEGER`` key column: an int (from an int, an integral float, or a string of
    decimal digits), None for a fraction, any other string or a number beyond 64 bits. For a
    ``TEXT`` one: a str (an integer of up to 64 bits written in decimal), None for a fraction or
    bytes. Otherwise the key as given. A key the store would convert itself (SQLite matches
    ``'1000'`` to ``1000``) is converted here, so that the records read back are matched to the
    rows by value.
    """
    key = plain_key(key)
    if kind is None:
        return key
    if isinstance(key, (float, Decimal)):
        if key != int(key):
            return None
        key = int(key)
    if kind == TEXT:
        if isinstance(key, str):
            return key
        if isinstance(key, uuid.UUID) or (isinstance(key, int) and key.bit_length() <= 64):
            return str(key)
        return None
    if isinstance(key, str) and _DECIMAL_INTEGER.fullmatch(key):
        key = int(key)
    return key if isinstance(key, int) and _INT64[0] <= key <= _INT64[1] else None


def missing_keys(keys: list[Any], name: str, where: str, kind: str | None) -> MissingKeyError:
    """The error for ``keys`` of which no record has the ``name`` (``"pid"``) ``where``
    (``"in table 'patients'"``)."""
    keys = list(dict.fromkeys(keys))
    shown = ", ".join(_short(k) for k in keys[:5]) + (f", and {len(keys) - 5} more" if len(keys) > 5 else "")
    compared = f"; keys are compared as {kind} values" if kind else ""
    return MissingKeyError(
        f"no record with {name} in [{shown}] {where}{compared}; every row needs the key of a record", keys
    )


def plain_key(key: Any) -> Any:
    """A key as a plain Python value (drivers and JSON reject numpy scalars)."""
    return key.item() if isinstance(key, np.generic) else key


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
