"""The provider protocol of lazy evaluation: what a round asks for, the providers that answer it
(a plain callable per feature, or a ``fetch`` per round, sync or async), and the checks on what
they return; shared by the drivers and ``thrifty.providers``."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest import to_matrix
from thrifty.runtime.plans import as_plan

# One round of lazy evaluation: (feature_id, row_ids) pairs, each fetchable concurrently.
Requests = list[tuple[int, np.ndarray]]
# A plain provider: provider(feature_ids, row_ids) -> values of shape (len(row_ids), len(feature_ids)).
Provider = Callable[[np.ndarray, np.ndarray], Any]


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


def async_fetcher(provider: Any) -> Callable[[Requests], Awaitable[Any]]:
    """An ``async fetch(requests)`` for an async round provider or any provider callable.

    A plain callable is called once per feature of the round, concurrently (a synchronous
    one in worker threads).
    """
    if hasattr(provider, "fetch"):
        if not inspect.iscoroutinefunction(provider.fetch):
            raise TypeError(
                "this driver needs an async fetch(requests); run a synchronous round "
                "provider in one worker thread instead"
            )
        return provider.fetch
    if not callable(provider):
        raise TypeError(
            f"provider must have a fetch(requests) method or be a callable "
            f"provider(feature_ids, row_ids), got {type(provider).__name__}"
        )
    # An object whose __call__ is a coroutine function is async too.
    is_async = inspect.iscoroutinefunction(provider) or inspect.iscoroutinefunction(type(provider).__call__)

    async def one(f: int, rows: np.ndarray) -> np.ndarray:
        ids = np.array([f], dtype=np.int64)
        values = await provider(ids, rows) if is_async else await asyncio.to_thread(provider, ids, rows)
        return provider_column(values, len(rows))

    async def per_feature(requests: Requests) -> list[np.ndarray]:
        return list(await asyncio.gather(*(one(f, rows) for f, rows in requests)))

    return per_feature


def provider_column(values: Any, n_rows: int) -> np.ndarray:
    """One feature's answer of a plain provider, checked to be ``(n_rows, 1)`` or ``(n_rows,)``
    (``lazy_rounds`` converts it to float64)."""
    values = np.asarray(values)
    if values.ndim == 1:
        values = values.reshape(-1, 1)
    if values.shape != (n_rows, 1):
        raise InputError(
            f"the feature provider returned shape {values.shape} for {n_rows} rows "
            "and 1 feature(s); it must return (len(row_ids), len(feature_ids))"
        )
    return values[:, 0]


def check_answer(values: Any, asked: int) -> None:
    """Refuse a round's answer that is not one array of values per requested (feature, rows)
    pair (``asked`` pairs): a generator driven by ``lazy_rounds`` was sent nothing, or too few
    or too many arrays."""
    if values is None or len(values) != asked:
        got = "none" if values is None else len(values)
        raise InputError(
            "send one array of values per requested (feature, rows) pair: "
            f"{asked} {'was' if asked == 1 else 'were'} requested, got {got}"
        )


def column(values: Any, n: int, feature: int) -> np.ndarray:
    """The values sent for one feature as a float64 vector of length ``n``."""
    try:
        v = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(
            "the feature provider returned non-numeric values; return numbers "
            "(category codes for categorical features)"
        ) from exc
    if v.size != n or (v.ndim > 1 and v.shape[0] != n):
        raise InputError(
            f"got {v.shape} values for feature {feature} on {n} rows; send one value "
            "per requested row, in the order of row_ids"
        )
    return v.reshape(n)


def array_provider(X: Any, model: Any = None) -> Provider:
    """A feature provider serving a matrix or DataFrame already in memory.

    Useful to test a deployment and to measure lazy evaluation. With ``model``, a DataFrame is
    coded the way the model reads it (column order, category codes).
    """
    if model is not None:
        plan = as_plan(model)
        M = to_matrix(X, plan.n_features, plan.feature_names, plan.categories)
    else:
        M = to_matrix(X, np.shape(X)[1])

    def provider(feature_ids: np.ndarray, row_ids: np.ndarray) -> np.ndarray:
        return M[np.ix_(row_ids, feature_ids)]

    return provider


def rows_served(provider: Any, n_rows: int | None) -> int:
    """The number of examples a lazy evaluation serves: ``n_rows``, checked against a provider
    that holds one key per row (the stores of ``thrifty.providers``), where None means all of
    its rows; another count than its keys' is an error, since rows past its keys would have
    none and keys past the rows would go unused."""
    keys = getattr(provider, "keys", None)
    if keys is not None and not callable(keys) and hasattr(keys, "__len__"):
        if n_rows is None:
            return len(keys)
        if int(n_rows) != len(keys):
            raise InputError(
                f"n_rows={n_rows}, but the provider has keys for {len(keys)} rows; leave n_rows out "
                "to evaluate every row it has a key for, or give it the keys of the rows to "
                "evaluate (provider.with_keys(keys))"
            )
    if n_rows is None:
        raise InputError("lazy evaluation needs n_rows= (the number of examples the provider serves)")
    n = int(n_rows)
    if n < 0:
        raise InputError(f"n_rows must be >= 0, got {n}")
    return n
