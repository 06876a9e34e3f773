"""Lazy evaluation: features are fetched only when an evaluated tree needs them.

``rounds``: ``lazy_rounds``, the resumable core, a generator that yields each *round* of
feature requests and receives their values, and ``run_lazy``, which drives it with a
synchronous provider (what ``thrifty.evaluate(model, provider, n_rows=...)`` does).
``providers``: the provider protocol shared with ``thrifty.providers``. ``policies``: the
``rounds=`` policies (in order, parallel up to the next exit, prefetch). ``frontier``: prefetch
sets from calibration rows and the frontier of feature cost against rounds. ``latency``: what
an example waits for its features, round by round. ``async_driver``:
``evaluate_async``, which awaits a provider and measures latency. Every driver runs the same
generator on the interpreter's executors (a compiled plan's native ones when given one), so
every mode shares one exact semantics.
"""

from thrifty.runtime.lazy.async_driver import evaluate_async
from thrifty.runtime.lazy.latency import RoundLatency
from thrifty.runtime.lazy.policies import Prefetch
from thrifty.runtime.lazy.providers import (
    Provider,
    Requests,
    RoundProvider,
    array_provider,
    async_fetcher,
    provider_column,
)
from thrifty.runtime.lazy.rounds import drive, lazy_rounds, run_lazy

__all__ = [
    "Prefetch",
    "Provider",
    "Requests",
    "RoundLatency",
    "RoundProvider",
    "array_provider",
    "async_fetcher",
    "drive",
    "evaluate_async",
    "lazy_rounds",
    "provider_column",
    "run_lazy",
]
