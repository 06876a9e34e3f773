"""The protocol of lazy evaluation's rounds, shared by its drivers and the feature providers."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from thrifty.runtime.lazy import provider_column

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
