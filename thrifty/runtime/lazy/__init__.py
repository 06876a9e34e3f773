"""Lazy evaluation: features are fetched only when an evaluated tree needs them.

``rounds``: ``lazy_rounds``, the resumable core, a generator that yields each *round* of
feature requests and receives their values, and ``run_lazy``, which drives it with a
synchronous provider (what ``thrifty.evaluate(model, provider, n_rows=...)`` does).
``providers``: the provider protocol shared with ``thrifty.providers``. ``tree_rounds``: the
rounds of a Full plan whose trees advance independently. ``async_driver``:
``evaluate_async``, which awaits a provider and measures latency. Every driver runs the same
generator on the interpreter's executors, so every mode shares one exact semantics.
"""

from thrifty.runtime.lazy.async_driver import evaluate_async
from thrifty.runtime.lazy.providers import (
    Provider,
    Requests,
    RoundProvider,
    array_provider,
    async_fetcher,
    provider_column,
)
from thrifty.runtime.lazy.rounds import drive, lazy_rounds, run_lazy
from thrifty.runtime.lazy.tree_rounds import tree_rounds

__all__ = [
    "Provider",
    "Requests",
    "RoundProvider",
    "array_provider",
    "async_fetcher",
    "drive",
    "evaluate_async",
    "lazy_rounds",
    "provider_column",
    "run_lazy",
    "tree_rounds",
]
