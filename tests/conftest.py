"""Shared pytest fixtures."""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests._helpers.stores import NAMES, PRICES
from thrifty import CostModel


@pytest.fixture
def data_home() -> Path:
    """The shared datasets folder given by $THRIFTY_DATA; skips the test when it is not set."""
    value = os.environ.get("THRIFTY_DATA")
    if not value or not Path(value).is_dir():
        pytest.skip("set THRIFTY_DATA to the shared datasets folder (../shared/data) to run this test")
    return Path(value)


@pytest.fixture(scope="session", autouse=True)
def compiled_code_cache(tmp_path_factory: pytest.TempPathFactory):
    """Compiled plans are cached in a folder of this test session, never the user's cache
    (where code of another thrifty version may sit under the same key); ``thrifty.compile``
    returns with every entry ready (``test_background.py`` tests the background compile)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("THRIFTY_CACHE_DIR", str(tmp_path_factory.mktemp("compiled-code")))
    mp.setenv("THRIFTY_BACKGROUND", "off")
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def agg(monkeypatch: pytest.MonkeyPatch):
    """Figures are drawn without a display (compare's reports, the CLI's plots)."""
    monkeypatch.setenv("MPLBACKEND", "Agg")


@pytest.fixture(scope="module")
def private_compile_cache(tmp_path_factory: pytest.TempPathFactory):
    """A compile cache of one test module, so its tests compile each plan afresh and then load
    it again (the session's cache would hand them objects other modules compiled)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("THRIFTY_CACHE_DIR", str(tmp_path_factory.mktemp("compiled")))
    yield
    mp.undo()


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
