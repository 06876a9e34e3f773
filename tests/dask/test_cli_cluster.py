"""Scoring through a real `dask scheduler` and `dask worker` started as separate processes on
127.0.0.1, and a worker killed in the middle of scoring."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

distributed = pytest.importorskip("distributed", reason="the Dask tests need the extra thrifty[dask]")
dd = pytest.importorskip("dask.dataframe", reason="the Dask tests need the extra thrifty[dask]")

import lightgbm  # noqa: E402

import thrifty  # noqa: E402
from thrifty.dask import PartitionInfo, evaluate  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# The `dask` command installed next to this Python (`dask scheduler`, `dask worker`).
DASK = str(Path(sys.executable).with_name("dask"))
START_TIMEOUT = 60


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    # Own process group: the cleanup stops the process and anything it started.
    return subprocess.Popen(
        args, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env, start_new_session=True
    )


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)


def _worker(address: str, name: str, log: Path) -> subprocess.Popen:
    # No nanny: the process started here is the worker itself (killing it kills the worker).
    return _start(
        [
            DASK,
            "worker",
            address,
            "--nthreads",
            "1",
            "--no-nanny",
            "--name",
            name,
            "--host",
            "127.0.0.1",
            "--no-dashboard",
        ],
        log,
    )


@pytest.fixture(scope="module")
def cli_cluster(tmp_path_factory):
    """A `dask scheduler` and one `dask worker` process on free loopback ports."""
    logs = tmp_path_factory.mktemp("dask-cli")
    address = f"tcp://127.0.0.1:{_free_port()}"
    procs = [
        _start(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1], "--no-dashboard"],
            logs / "scheduler.log",
        )
    ]
    try:
        procs.append(_worker(address, "w0", logs / "w0.log"))
        with distributed.Client(address, timeout=START_TIMEOUT) as client:
            client.wait_for_workers(1, timeout=START_TIMEOUT)
            yield client, address, logs
    finally:
        for proc in reversed(procs):
            _stop(proc)


@pytest.fixture(scope="module")
def model_and_data():
    rng = np.random.default_rng(5)
    X = pd.DataFrame(rng.normal(size=(1600, 5)), columns=[f"f{i}" for i in range(5)])
    y = (X.f0 + X.f1 * X.f2 + rng.normal(scale=0.3, size=1600) > 0).astype(int)
    model = lightgbm.LGBMClassifier(n_estimators=20, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
    return model, X


def test_scores_through_cli_scheduler_and_worker(cli_cluster, model_and_data):
    client, address, _ = cli_cluster
    model, X = model_and_data
    assert client.scheduler.address == address
    workers = client.scheduler_info()["workers"]
    assert [w["name"] for w in workers.values()] == ["w0"]
    table = client.compute(evaluate(model, dd.from_pandas(X, npartitions=4))).result(timeout=120)
    ev = thrifty.evaluate(model, X)
    np.testing.assert_array_equal(table["prediction"].to_numpy(), ev.labels)
    np.testing.assert_array_equal(table["cost"].to_numpy(), ev.cost.total)


def test_worker_killed_mid_scoring_is_retried(cli_cluster, model_and_data):
    client, address, logs = cli_cluster
    model, X = model_and_data
    victim = _worker(address, "victim", logs / "victim.log")
    try:
        client.wait_for_workers(2, timeout=START_TIMEOUT)
        workers = client.scheduler_info()["workers"]
        victim_address = next(a for a, w in workers.items() if w["name"] == "victim")
        keys = dd.from_pandas(pd.DataFrame({"row": np.arange(len(X))}), npartitions=16)
        scored = evaluate(model, keys, provider_factory=SlowFrameProvider(X.to_numpy(), 0.3))
        future = client.compute(scored)
        deadline = time.monotonic() + 60
        # Kill the victim while it runs a partition and the scoring is not finished.
        while not client.processing(workers=[victim_address]).get(victim_address):
            assert time.monotonic() < deadline, "the scheduler never gave the victim a partition"
            time.sleep(0.05)
        assert not future.done()
        victim.kill()
        victim.wait(timeout=15)
        table = future.result(timeout=120)
        assert [w["name"] for w in client.scheduler_info()["workers"].values()] == ["w0"]
    finally:
        _stop(victim)
    ev = thrifty.evaluate(model, X)
    assert len(table) == len(X) and table.index.equals(pd.RangeIndex(len(X)))
    np.testing.assert_array_equal(table["prediction"].to_numpy(), ev.labels)
    np.testing.assert_array_equal(table["cost"].to_numpy(), ev.cost.total)
    np.testing.assert_allclose(table["proba_1"].to_numpy(), ev.proba[:, 1])


class SlowFrameProvider:
    """A provider factory serving an in-memory matrix slowly (each partition takes ``delay`` s)."""

    def __init__(self, X, delay):
        self.X, self.delay = X, delay

    def __call__(self, info: PartitionInfo):
        time.sleep(self.delay)
        rows_global = info.rows["row"].to_numpy()
        return lambda features, rows: self.X[np.ix_(rows_global[rows], features)]
