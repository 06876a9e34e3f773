"""What every feature provider shares: the round protocol, keys per row, feature columns."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

# One round of lazy evaluation: (feature_id, row_ids) pairs, each fetchable concurrently.
Requests = list[tuple[int, np.ndarray]]


@runtime_checkable
class RoundProvider(Protocol):
    """A provider that fetches a whole round of lazy evaluation in one call.

    ``fetch(requests)`` receives a list of ``(feature_id, row_ids)`` pairs (``row_ids`` are the
    rows blocked on that feature) and returns one float64 array per pair, aligned with its
    ``row_ids``. It may be ``async``; ``thrifty.evaluate_async`` awaits it, ``thrifty.evaluate``
    needs a synchronous one. Plain callables ``provider(feature_ids, row_ids)`` are still
    accepted everywhere and are asked one feature at a time.
    """

    def fetch(self, requests: Requests) -> Any: ...


def missing_extra(package: str, extra: str) -> ImportError:
    """The error raised when an optional dependency is not installed."""
    return ImportError(f"{package} is not installed; install it with: pip install 'thrifty[{extra}]'")


def feature_columns(columns: Sequence[str] | None, model: Any) -> list[str]:
    """The store's column (or feature-service name) of each model feature, in model order."""
    if columns is not None:
        return [str(c) for c in columns]
    if model is None:
        raise ValueError("give columns=[...] (the store's name of each model feature, in model order) "
                         "or model= (a model whose feature names are the store's column names)")
    from thrifty.runtime.plans import as_plan

    names = as_plan(model).feature_names
    if names is None:
        raise ValueError("the model has no feature names; give columns=[...] (the store's name of "
                         "each model feature, in model order)")
    return list(names)


def as_keys(keys: Any) -> np.ndarray:
    """Keys of the rows, position ``i`` for row ``i`` (any values JSON and SQL can carry)."""
    out = np.asarray(keys, dtype=object).reshape(-1)
    if any(k is None for k in out):
        raise ValueError("keys must not contain None; every row needs the key of its record")
    return out


def plain_key(key: Any) -> Any:
    """A key as a plain Python value (drivers and JSON reject numpy scalars)."""
    return key.item() if isinstance(key, np.generic) else key


def check_answers(answers: Sequence[Any], requests: Requests) -> list[np.ndarray]:
    """A round provider's answers as float64 arrays, one per request, with the right lengths."""
    if len(answers) != len(requests):
        raise ValueError(f"the feature provider answered {len(answers)} request(s) for a round of "
                         f"{len(requests)}; return one array per (feature, rows) request")
    out = []
    for (f, rows), values in zip(requests, answers):
        try:
            v = np.asarray(values, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"the feature provider returned non-numeric values for feature {f}; "
                             "return numbers (category codes for categorical features)") from exc
        if len(v) != len(rows):
            raise ValueError(f"the feature provider returned {len(v)} values of feature {f} for "
                             f"{len(rows)} rows; return one value per row asked")
        out.append(v)
    return out
