"""A real HTTP feature service for tests: Starlette on uvicorn, in a thread, on 127.0.0.1."""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Iterator, Mapping

import numpy as np


class FeatureService:
    """Serves ``POST /`` ``{"feature", "keys"}`` -> ``{"values"}`` from a matrix, with per-feature delays.

    Logs every (feature, key) it was asked for and the most requests it had in flight at once.
    A feature listed in ``fail`` answers 500; one in ``answers`` answers that body (text, as a
    broken service might). ``delays``, ``fail`` and ``answers`` may be changed while it runs.
    """

    def __init__(
        self,
        X: np.ndarray,
        names: list[str],
        keys: list,
        delays: Mapping[str, float] | None = None,
        fail: tuple[str, ...] = (),
    ) -> None:
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        self.columns = {n: dict(zip(keys, X[:, j].tolist())) for j, n in enumerate(names)}
        self.delays = dict(delays or {})
        self.fail = tuple(fail)
        self.answers: dict[str, str] = {}
        self.asked: list[tuple[str, object]] = []
        self.in_flight = self.most_in_flight = 0

        async def features(request):
            body = await request.json()
            name = body["feature"]
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                await asyncio.sleep(self.delays.get(name, 0.0))
                if name in self.fail:
                    return JSONResponse({"error": "extractor crashed"}, status_code=500)
                if name in self.answers:
                    return Response(self.answers[name], media_type="application/json")
                self.asked.extend((name, k) for k in body["keys"])
                column = self.columns[name]
                return JSONResponse(
                    {"values": [None if math.isnan(column[k]) else column[k] for k in body["keys"]]}
                )
            finally:
                self.in_flight -= 1

        self.app = Starlette(routes=[Route("/", features, methods=["POST"])])


@contextlib.contextmanager
def threaded(server, timeout: float = 10.0) -> Iterator[int]:
    """Run a ``uvicorn.Server`` (bound to port 0 on loopback) in a thread; yields the port it
    got; always stops it."""
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            raise RuntimeError("the test HTTP server did not start")
        time.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout)


@contextlib.contextmanager
def serving(app, timeout: float = 10.0) -> Iterator[str]:
    """Run ``app`` on a free loopback port in a thread; yields its URL; always stops it."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    with threaded(server, timeout) as port:
        yield f"http://127.0.0.1:{port}/"
