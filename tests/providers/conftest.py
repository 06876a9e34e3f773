"""A small real model, its QWYC plan and data, shared by the provider and serving tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import numpy as np
import pytest

from thrifty import CostModel
from thrifty.runtime.lazy import lazy_rounds

NAMES = ["age", "bp", "chol", "hr", "st", "ca"]
PRICES = [1.0, 2.0, 7.5, 3.0, 11.0, 40.0]


@pytest.fixture(scope="session")
def small_model():
    """(QWYC plan over a 12-tree LightGBM model, X with NaNs, costs).

    The plan exits after 1 to 10 trees; its rounds of lazy evaluation need up to 4 features.
    """
    lgb = pytest.importorskip("lightgbm")
    pd = pytest.importorskip("pandas")
    from thrifty import Forest, qwyc

    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, len(NAMES)))
    y = (
        X[:, 0]
        + 0.5 * X[:, 4]
        - 0.8 * X[:, 5]
        + 0.7 * X[:, 1] * X[:, 3]
        + 0.4 * X[:, 2]
        + 0.5 * rng.normal(size=300)
        > 0
    ).astype(int)
    X[rng.random(X.shape) < 0.05] = np.nan
    model = lgb.LGBMClassifier(n_estimators=12, num_leaves=8, min_child_samples=5, verbose=-1).fit(
        pd.DataFrame(X, columns=NAMES), y
    )
    plan = qwyc(Forest.from_model(model), X, alpha=0.002)
    costs = CostModel(dict(zip(NAMES, PRICES)), feature_names=NAMES, tree_cost=0.25)
    return plan, X, costs


def n_rounds(plan, X, costs) -> int:
    """Rounds of lazy evaluation of ``plan`` on ``X``: the queries (pipelines) a store answers."""
    gen, count = lazy_rounds(plan, costs, n_rows=len(X)), 0
    try:
        requests = next(gen)
        while True:
            count += 1
            requests = gen.send([X[rows, f] for f, rows in requests])
    except StopIteration:
        return count


def write_store(url: str, X: np.ndarray, keys: list, columns: list[str], table: str = "patients") -> object:
    """A SQL table of one record per row (in shuffled order): key ``pid``, the feature columns
    (NaN stored as NULL) and a text column ``note``. Returns the SQLAlchemy engine."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    meta = sa.MetaData()
    key_type = sa.String if isinstance(keys[0], str) else sa.Integer
    tbl = sa.Table(
        table,
        meta,
        sa.Column("pid", key_type, primary_key=True, autoincrement=False),
        *(sa.Column(c, sa.Double) for c in columns),
        sa.Column("note", sa.String),
    )
    meta.create_all(engine)
    order = np.random.default_rng(0).permutation(len(keys))
    records = [
        {"pid": keys[i], "note": "x", **{c: None if np.isnan(v) else float(v) for c, v in zip(columns, X[i])}}
        for i in order
    ]
    with engine.begin() as conn:
        conn.execute(tbl.insert(), records)
    return engine


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """URL of a real redis-server started for the module on a free 127.0.0.1 port, with
    persistence off; stopped afterwards. Skips without the binary or the redis client."""
    pytest.importorskip("redis", reason="the Redis provider's tests need the extra thrifty[redis]")
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed (Debian: apt-get install redis-server)")
    import redis

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    command += ["--dir", str(tmp_path_factory.mktemp("redis"))]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(url).ping()
                break
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("the test redis-server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def write_hashes(url: str, X: np.ndarray, keys: list, fields: list[str], prefix: str = "patient:") -> None:
    """One Redis hash per row, ``{prefix}{key}``, a field per feature (NaN left out)."""
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    with client.pipeline(transaction=False) as pipe:
        for key, row in zip(keys, X):
            values = {f: float(v) for f, v in zip(fields, row) if not np.isnan(v)}
            pipe.hset(f"{prefix}{key}", mapping=values or {"_": 0})
        pipe.execute()
