"""Fixtures of the serving tests: the shared small model's files, apps and live servers."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._helpers.feature_service import threaded
from tests._helpers.stores import NAMES, write_store
from thrifty import save

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def files(small_model, tmp_path_factory):
    """The plan saved as JSON, its costs as JSON, and a SQLite store of every row's features."""
    pytest.importorskip("sqlalchemy")
    plan, X, costs = small_model
    d = tmp_path_factory.mktemp("serve")
    save(plan, d / "plan.json")
    (d / "costs.json").write_text(json.dumps(costs.to_dict()))
    write_store(f"sqlite:///{d / 'store.db'}", X, list(range(len(X))), NAMES, table="features").dispose()
    return d


@pytest.fixture(scope="session")
def make_app(small_model, files):
    """``make_app(**create_app options)``: the plan served from the SQLite store, opened as
    ``thrifty serve`` opens it (read-only)."""
    pytest.importorskip("starlette")
    from thrifty.serve import create_app, store_provider

    plan, _, costs = small_model

    def make(store=files / "store.db", **options):
        provider = store_provider(f"sqlite:///{store}", plan, table="features", key_column="pid")
        return create_app(plan, provider, costs=costs, **options)

    return make


@contextlib.contextmanager
def live(app, timeout: float = 30.0, **options) -> Iterator[str]:
    """``app`` served by ``thrifty.serve.build_server(app, **options)`` on a free loopback port, in
    a thread (its lifespan run); yields its URL; always stops it."""
    from thrifty.serve import build_server

    with threaded(build_server(app, port=0, **options), timeout) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session")
def serve_live():
    """``with serve_live(app, **build_server options) as url``: a real server in a thread."""
    return live


class InProcess:
    """Synchronous requests to an ASGI app in this process (``httpx.ASGITransport``), on one event
    loop that runs while a request does; the app's lifespan runs on entering and leaving."""

    def __init__(self, app) -> None:
        import httpx

        self.app, self.runner = app, asyncio.Runner()
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://serve")
        self.stack = contextlib.AsyncExitStack()

    def __enter__(self) -> InProcess:
        self.runner.run(self.stack.enter_async_context(self.app.router.lifespan_context(self.app)))
        return self

    def __exit__(self, *exc) -> None:
        self.runner.run(self.stack.aclose())
        self.runner.run(self.client.aclose())
        self.runner.close()

    def request(self, method: str, path: str, **kwargs):
        return self.runner.run(self.client.request(method, path, **kwargs))

    def get(self, path: str, **kwargs):
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs):
        return self.request("POST", path, **kwargs)


@pytest.fixture(scope="session")
def in_process():
    """``with in_process(app) as client``: ``client.get`` / ``client.post`` without sockets."""
    pytest.importorskip("httpx")
    return InProcess


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def thrifty_serve(*args: str, startup: float = 90.0):
    """``python -m thrifty serve ...`` on a free port; yields its URL and process; always stops it."""
    import httpx

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "thrifty", "serve", *args, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + startup
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"thrifty serve exited: {proc.stderr.read()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("thrifty serve did not start in time")
            time.sleep(0.1)
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture(scope="session")
def serve_cli():
    """``with serve_cli(*arguments) as (url, process)``: ``thrifty serve`` in a subprocess."""
    pytest.importorskip("uvicorn")
    return thrifty_serve
