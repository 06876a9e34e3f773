"""The provider tests' fixtures: a real redis-server for the module."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest


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
