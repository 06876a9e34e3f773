"""A ``distributed.Client`` for running independent tasks (e.g. ``thrifty compare``'s fits)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from distributed import Client, LocalCluster

from thrifty.exceptions import InputError


@contextmanager
def cluster_client(*, workers: int | None = None, scheduler: str | None = None) -> Iterator[Any]:
    """A client of an existing cluster (``scheduler``) or of a local one (``workers`` processes
    of one thread each, closed on exit).

    Parameters
    ----------
    workers : int, optional
        Worker processes of a ``LocalCluster`` started here (on 127.0.0.1).
    scheduler : str, optional
        Address of a running ``dask scheduler`` (e.g. ``tcp://10.0.0.5:8786``); its workers
        must have thrifty installed.

    Yields
    ------
    distributed.Client
    """
    if (workers is None) == (scheduler is None):
        raise InputError("give either workers= (a local cluster) or scheduler= (an address), not both")
    if scheduler is not None:
        with Client(scheduler, timeout=30) as client:
            yield client
        return
    if not (isinstance(workers, int) and workers >= 1):
        raise InputError(f"workers must be an integer >= 1, got {workers!r}")
    # One thread per worker: the fit tasks and LightGBM run one to a process.
    with (
        LocalCluster(
            n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client
