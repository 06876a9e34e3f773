"""`thrifty serve` under hostile clients on loopback: /health latency and good requests.

A LightGBM model (100 trees of depth 5 on 20 synthetic features) is served as a Full plan
fetching every feature from a SQLite store of 5,000 rows, by its own process running
`thrifty.serve.run` (what `thrifty serve` runs). Phases, each a fixed time:

- baseline: 32 clients send one-row requests in a loop;
- attacked: the same while 200 idle connections, 20 clients stalled inside a request head and
  20 stalled inside a body are held open (for less than the 10 s header and request timeouts,
  so none is closed during the phase);
- burst: 100 requests at once, each on a new connection.

`/health` is asked every 20 ms during the first two phases by a separate process (one keep-alive
connection), so its latency is the server's and not the load generator's. The clients share
the machine (2 shared cores here) with the server: the figures are what this machine measured
in one run. Writes benchmarks/results/serve_faults.json; the last stdout line is one JSON object.

    python benchmarks/serve_faults.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _figures import emit
from serve import free_port, wait_ready

HERE = Path(__file__).resolve().parent
CLIENTS = 32
N_ROWS = 5000
IDLE, STALLED_HEADS, STALLED_BODIES, BURST = 200, 20, 20, 100


def run_server(plan: str, store: str, port: int) -> None:
    """The server process: the plan from the SQLite store, as `thrifty serve` builds it."""
    from thrifty import load
    from thrifty.serve import create_app, run, store_provider

    model = load(plan)
    provider = store_provider(f"sqlite:///{store}", model, table="rows", key_column="id")
    run(create_app(model, provider), port=port)


def probe(port: int, seconds: float) -> None:
    """The prober process: GET /health every 20 ms on one connection; prints latencies (ms)."""
    request = b"GET /health HTTP/1.1\r\nHost: bench\r\n\r\n"
    latencies: list[float] = []
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            body += sock.recv(65536)
        latencies.append(1000 * (time.perf_counter() - start))
        if not head.startswith(b"HTTP/1.1 200"):
            latencies[-1] = float("inf")
        time.sleep(0.02)
    print(json.dumps(latencies))


def start(mode: str, *args: object, stdout: int | None = subprocess.DEVNULL) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    return subprocess.Popen(
        [sys.executable, __file__, mode, *map(str, args)],
        env=env,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
    )


async def good_clients(port: int, seconds: float) -> dict:
    """``CLIENTS`` clients sending one-row requests in a loop for ``seconds``."""
    import httpx

    latencies: list[float] = []
    statuses: dict[int, int] = {}
    end = time.monotonic() + seconds
    rng = np.random.default_rng(0)

    async def client(http: httpx.AsyncClient) -> None:
        while time.monotonic() < end:
            start = time.perf_counter()
            r = await http.post("/predict", json={"rows": [{"id": int(rng.integers(N_ROWS))}]})
            latencies.append(1000 * (time.perf_counter() - start))
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1

    limits = httpx.Limits(max_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30, limits=limits) as http:
        await asyncio.gather(*(client(http) for _ in range(CLIENTS)))
    return {"requests": len(latencies), "statuses": statuses, **percentiles(latencies)}


async def burst(port: int) -> dict:
    """``BURST`` requests at once, each on its own new connection."""
    import httpx

    async def one() -> int:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            return (await http.post("/predict", json={"rows": [{"id": 1}]})).status_code

    start = time.perf_counter()
    statuses = await asyncio.gather(*(one() for _ in range(BURST)))
    return {
        "requests": BURST,
        "ok": statuses.count(200),
        "seconds": time.perf_counter() - start,
    }


def hostile(port: int) -> list[socket.socket]:
    """Idle connections, and clients stalled inside a request head or a body, held open."""
    sockets = [
        socket.create_connection(("127.0.0.1", port)) for _ in range(IDLE + STALLED_HEADS + STALLED_BODIES)
    ]
    for s in sockets[IDLE : IDLE + STALLED_HEADS]:
        s.sendall(b"POST /predict HTTP/1.1\r\nHost: bench\r\nContent-")
    for s in sockets[IDLE + STALLED_HEADS :]:
        s.sendall(b'POST /predict HTTP/1.1\r\nHost: bench\r\nContent-Length: 100\r\n\r\n{"rows": [')
    return sockets


def percentiles(ms: list[float]) -> dict:
    a = np.asarray(ms)
    return {
        "p50_ms": float(np.percentile(a, 50)),
        "p99_ms": float(np.percentile(a, 99)),
        "max_ms": float(a.max()),
    }


def phase(port: int, seconds: float) -> dict:
    """Good clients for ``seconds`` with the prober running; their figures and /health's."""
    prober = start("--probe", port, seconds, stdout=subprocess.PIPE)
    good = asyncio.run(good_clients(port, seconds))
    out, err = prober.communicate(timeout=60)
    if prober.returncode:
        raise RuntimeError(f"the prober failed: {err[-2000:]}")
    health = json.loads(out)
    return {"good": good, "health": {"probes": len(health), **percentiles(health)}}


def build(tmp: Path) -> tuple[Path, Path]:
    """The plan and the SQLite store of its rows."""
    import lightgbm as lgb
    import pandas as pd
    import sqlalchemy as sa

    from thrifty import Forest, Full, save

    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, 20))
    y = (X[:, :5].sum(axis=1) + 0.5 * rng.normal(size=N_ROWS) > 0).astype(int)
    names = [f"f{j}" for j in range(20)]
    gbm = lgb.LGBMClassifier(n_estimators=100, max_depth=5, num_leaves=32, verbose=-1, n_jobs=1)
    gbm.fit(pd.DataFrame(X, columns=names), y)
    plan = save(Full(Forest.from_model(gbm)), tmp / "plan.json")
    frame = pd.DataFrame(X, columns=names)
    frame.insert(0, "id", np.arange(N_ROWS))
    engine = sa.create_engine(f"sqlite:///{tmp / 'store.db'}")
    frame.to_sql("rows", engine, index=False)
    engine.dispose()
    return plan, tmp / "store.db"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 s phases instead of 8 s")
    args = ap.parse_args(argv)
    seconds = 4.0 if args.quick else 8.0
    with tempfile.TemporaryDirectory() as tmp:
        plan, store = build(Path(tmp))
        port = free_port()
        server = start("--serve", plan, store, port)
        try:
            wait_ready(f"http://127.0.0.1:{port}", server)
            figures: dict = {"bench": "serve_faults", "clients": CLIENTS, "phase_seconds": seconds}
            figures["baseline"] = phase(port, seconds)
            sockets = hostile(port)
            try:
                figures["attacked"] = {
                    "idle": IDLE,
                    "stalled_heads": STALLED_HEADS,
                    "stalled_bodies": STALLED_BODIES,
                    **phase(port, seconds),
                }
            finally:
                for s in sockets:
                    s.close()
            figures["burst"] = asyncio.run(burst(port))
        finally:
            server.terminate()
            server.wait(30)
    emit(figures, args.quick)
    return figures


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        run_server(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1:2] == ["--probe"]:
        probe(int(sys.argv[2]), float(sys.argv[3]))
    else:
        main()
