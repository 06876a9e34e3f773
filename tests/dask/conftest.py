"""One local Dask cluster of worker processes shared by the Dask tests (starting one costs seconds)."""

import pytest

pytest.importorskip("distributed", reason="the Dask tests need the extra thrifty[dask]")

import cloudpickle  # noqa: E402

import tests.dask as helpers  # noqa: E402

# Helpers defined in the test modules reach the workers by value (the workers need not import
# the tests package).
cloudpickle.register_pickle_by_value(helpers)


@pytest.fixture(scope="session")
def client():
    """A client of a LocalCluster: 2 worker processes of 1 thread each, on 127.0.0.1."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        memory_limit="1GiB",
    )
    with cluster, Client(cluster) as c:
        yield c
