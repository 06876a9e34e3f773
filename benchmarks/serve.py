"""`thrifty serve` under load on loopback: latency percentiles and throughput for Adult plans.

A LightGBM model of Adult (500 trees of depth 5; 100 with --quick) is served as a Full plan and
as a QWYC plan (alpha 0.005, fitted on train rows). Each server runs as its own process
(`python -m thrifty serve`) and fetches every feature lazily from a SQLite store holding the
test rows; each request is one row given by its id only. A fixed number of requests is sent
sequentially and then by 8 concurrent clients (each waits for its answer before sending the
next), within a time limit; the clients share the machine with the server. Also measured
in-process, without HTTP: one-row `evaluate` on the same SQLite provider (one kernel thread,
as the server uses). Writes
benchmarks/results/serve.csv; the last stdout line is one JSON object.

    python benchmarks/serve.py [--quick] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _figures import emit

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CLIENTS = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(plan_path: Path, store: Path, port: int) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "thrifty",
            "serve",
            str(plan_path),
            "--provider",
            f"sqlite:///{store}",
            "--table",
            "adult",
            "--key-column",
            "id",
            "--port",
            str(port),
            "--timeout",
            "30",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_ready(url: str, proc: subprocess.Popen, limit: float = 120.0) -> None:
    import httpx

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"thrifty serve exited: {proc.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("thrifty serve did not start in time")


async def load(url: str, ids: list[int], clients: int, time_limit: float) -> dict:
    """Send one request per id (one row each) from ``clients`` concurrent clients."""
    import httpx

    latencies: list[float] = []
    costs: list[float] = []
    errors = 0
    queue = list(reversed(ids))
    deadline = time.monotonic() + time_limit

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal errors
        while queue and time.monotonic() < deadline:
            i = queue.pop()
            t0 = time.perf_counter()
            r = await http.post(f"{url}/predict", json={"rows": [{"id": i}]})
            latencies.append(time.perf_counter() - t0)
            if r.status_code != 200:
                errors += 1
            else:
                costs.append(r.json()["results"][0]["cost"])

    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(timeout=30.0, limits=limits) as http:
        await http.post(f"{url}/predict", json={"rows": [{"id": ids[0]}]})  # warm-up: connection, caches
        t0 = time.perf_counter()
        await asyncio.gather(*(client(http) for _ in range(clients)))
        wall = time.perf_counter() - t0
    lat = np.asarray(latencies) * 1e3
    return {
        "requests": len(lat),
        "errors": errors,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "rps": len(lat) / wall,
        "mean_cost": float(np.mean(costs)) if costs else float("nan"),
    }


def in_process(plan, store: Path, ids: list[int], costs) -> dict:
    """One-row lazy evaluations on the same store, without HTTP."""
    from thrifty import evaluate
    from thrifty.providers import sql_provider

    provider = sql_provider(f"sqlite:///{store}", "adult", "id", [], model=plan)
    lat = []
    for i in ids:
        t0 = time.perf_counter()
        evaluate(plan, provider.with_keys([i]), costs, n_rows=1, n_threads=1)
        lat.append(time.perf_counter() - t0)
    lat = np.asarray(lat[1:]) * 1e3
    return {"p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99))}


def write_store(path: Path, names: list[str], M: np.ndarray) -> None:
    """The test rows as a SQLite table ``adult`` keyed by ``id`` (NaN stored as NULL)."""
    import pandas as pd
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{path}")
    frame = pd.DataFrame(M, columns=names)
    frame.insert(0, "id", np.arange(len(M)))
    frame.to_sql("adult", engine, index=False)
    engine.dispose()


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller model and fewer requests (< 1 min)")
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home, help="folder of the shared datasets")
    args = ap.parse_args(argv)

    import lightgbm as lgb

    from thrifty import Forest, Full, qwyc, save
    from thrifty.datasets import load as load_data

    quick = args.quick
    n_trees, n_fit = (100, 4000) if quick else (500, 16000)
    n_seq, n_conc, limit = (150, 400, 10.0) if quick else (1000, 4000, 60.0)
    data = load_data("adult", data_home=args.data_home)
    X_tr, y_tr, _ = data.subset("train")
    X_te, _, _ = data.subset("test")
    gbm = lgb.LGBMClassifier(
        n_estimators=n_trees,
        max_depth=5,
        num_leaves=32,
        learning_rate=0.1,
        verbose=-1,
        random_state=0,
        n_jobs=1,
    ).fit(X_tr, y_tr)
    forest = Forest.from_model(gbm)
    M_tr, M_te = forest._as_matrix(X_tr), forest._as_matrix(X_te)
    fit = np.random.default_rng(0).choice(len(M_tr), n_fit, replace=False)
    plans = {"full": Full(forest), "qwyc": qwyc(forest, M_tr[fit], alpha=0.005)}
    print(
        f"adult: {n_trees} trees, depth 5; QWYC alpha 0.005 fitted on {n_fit} train rows; "
        f"{len(M_te)} test rows in a SQLite store; {n_seq} sequential and {n_conc} concurrent "
        f"requests ({CLIENTS} clients), {limit:g} s limit each"
    )
    ids = np.random.default_rng(1).permutation(len(M_te)).tolist()
    rows, figures = [], {"bench": "serve", "trees": n_trees, "clients": CLIENTS}
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "adult.db"
        write_store(store, forest.feature_names, M_te)
        for name, plan in plans.items():
            path = save(plan, Path(tmp) / f"{name}.json")
            port = free_port()
            proc = start_server(path, store, port)
            try:
                url = f"http://127.0.0.1:{port}"
                wait_ready(url, proc)
                seq = asyncio.run(load(url, ids[:n_seq], 1, limit))
                conc = asyncio.run(load(url, ids[n_seq : n_seq + n_conc], CLIENTS, limit))
            finally:
                proc.terminate()
                proc.wait(10)
            local = in_process(plan, store, ids[: min(200, n_seq)], data.costs)
            for mode, r in (("sequential", seq), (f"{CLIENTS}_clients", conc)):
                rows.append({"plan": name, "mode": mode, **{k: round(v, 3) for k, v in r.items()}})
                print(
                    f"  {name:5s} {mode:11s} {r['requests']:5d} requests, {r['errors']} errors: "
                    f"p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  {r['rps']:7.1f} req/s  "
                    f"mean cost {r['mean_cost']:.2f}"
                )
                for k in ("p50_ms", "p99_ms", "rps", "errors", "requests"):
                    figures[f"{name}_{mode}_{k}"] = round(r[k], 2)
            figures[f"{name}_mean_features_cost"] = round(seq["mean_cost"], 3)
            figures[f"{name}_in_process_p50_ms"] = round(local["p50_ms"], 3)
            print(
                f"  {name:5s} in-process one-row lazy evaluate: p50 {local['p50_ms']:.2f} ms, "
                f"p99 {local['p99_ms']:.2f} ms"
            )
    figures["qwyc_over_full_p50_sequential"] = round(
        figures["qwyc_sequential_p50_ms"] / figures["full_sequential_p50_ms"], 3
    )
    RESULTS.mkdir(parents=True, exist_ok=True)
    with open(RESULTS / ("serve_quick.csv" if quick else "serve.csv"), "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    emit(figures, quick)
    return figures


if __name__ == "__main__":
    main()
