"""`thrifty serve` under load on loopback: latency percentiles, throughput and rounds per row.

Two parts. **flights** (issue 26): a LightGBM model of nycflights13 (300 trees of 31 leaves; 60
with --quick) served as a Full plan and as a QWYC plan (alpha 0.005), each round policy (in order;
parallel; a prefetch of what half the calibration rows use, once lazy_rounds takes rounds=, else
parallel for Full only), its features in three tables joined by keys (flights; hourly weather at the
origin; the aircraft) in SQLite and in Redis, read with ``joined_provider``: the weather and
aircraft tables are read only for rows whose trees need them. Each server is its own process;
each request is one row given by its flight id only; 1, 8, 32 and 128 clients (keep-alive
connections, a minimal HTTP/1.1 client so that the client costs little CPU beside the server),
each sending until its share of a fixed number of requests is sent or a time limit passes.
Rounds per row are counted in-process on the same rows; the server's CPU time per request
(``*_server_cpu_us``, from /proc) is recorded beside the wall figures. The part also records, from
benchmarks/lazy.py's functions run in the same process, thrifty's own time per one-row request
and per round (``overhead_us_per_request``, ``overhead_us_per_round``) and the recommended round
policy on flights (``flights_policy``, ``flights_rounds_p95``, ``flights_extra_cost_frac``).
**adult** (the figures recorded
before): a 500-tree Adult model (100 with --quick), Full and QWYC, from a SQLite store through
`thrifty serve`'s command line, sequential and 8 clients (httpx), as before.

Writes benchmarks/results/serve.csv; the last stdout line is one JSON object.

    python benchmarks/serve.py [--quick] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
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
    return {**summary(latencies, errors, wall), "mean_cost": float(np.mean(costs)) if costs else float("nan")}


def summary(latencies: list[float], errors: int, wall: float) -> dict:
    """Requests, errors, p50 and p99 latency (ms) and requests per second of one run."""
    lat = np.asarray(latencies) * 1e3
    return {
        "requests": len(lat),
        "errors": errors,
        "p50_ms": float(np.percentile(lat, 50)),
        "p99_ms": float(np.percentile(lat, 99)),
        "rps": len(lat) / wall,
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


# --- flights: three tables joined by keys, in SQLite and in Redis -----------------------------

WEATHER = ["temp", "dewp", "humid", "wind_dir", "wind_speed", "wind_gust", "precip", "pressure", "visib"]
PLANE = ["plane_year", "type", "manufacturer", "engines", "seats", "engine"]
FLIGHT_CLIENTS = (1, 8, 32, 128)


def link(block: np.ndarray) -> np.ndarray:
    """An integer id per distinct record of ``block`` (NaN where the record is all missing)."""
    filled = np.where(np.isnan(block), -1e300, block)
    _, ids = np.unique(filled, axis=0, return_inverse=True)
    return np.where(np.isnan(block).all(axis=1), np.nan, ids.reshape(-1).astype(float))


def flights_tables(M: np.ndarray, names: list[str]) -> dict[str, tuple[str, list[str], np.ndarray]]:
    """The joined test rows split back into three tables: ``{table: (key, columns, records)}``.

    A weather record is one origin and hour (nycflights13's key), an aircraft one distinct
    registry entry (the shared copy has no tail numbers); the flights table holds their ids.
    """
    col = {n: j for j, n in enumerate(names)}
    w, p = [col[n] for n in WEATHER], [col[n] for n in PLANE]
    place = M[:, [col["origin"], col["month"], col["day"]]]
    key = np.column_stack([place, M[:, col["sched_dep_time"]] // 100, M[:, w]])
    w_id, p_id = link(key), link(M[:, p])
    w_id[np.isnan(M[:, w]).all(axis=1)] = np.nan
    own = [j for j, n in enumerate(names) if n not in WEATHER + PLANE]
    flights = np.column_stack([np.arange(len(M)), M[:, own], w_id, p_id])
    out = {"flights": ("id", [names[j] for j in own] + ["weather_id", "plane_id"], flights)}
    for table, ids, cols, kname in (("weather", w_id, w, "weather_id"), ("planes", p_id, p, "plane_id")):
        first = {int(i): r for r, i in reversed(list(enumerate(ids))) if not np.isnan(i)}
        records = np.array([[i, *M[r, cols]] for i, r in sorted(first.items())])
        out[table] = (kname, [names[j] for j in cols], records)
    return out


def write_sqlite(path: Path, tables: dict) -> None:
    import sqlite3

    conn = sqlite3.connect(path)
    for table, (key, cols, records) in tables.items():
        columns = ", ".join(f'"{c}" REAL' for c in cols)
        conn.execute(f'CREATE TABLE "{table}" ("{key}" INTEGER PRIMARY KEY, {columns})')
        values = [[int(r[0]), *(None if np.isnan(v) else float(v) for v in r[1:])] for r in records]
        conn.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * (len(cols) + 1))})', values)
    conn.commit()
    conn.close()


def write_redis(url: str, tables: dict) -> None:
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    prefix = {"flights": "flight:", "weather": "weather:", "planes": "plane:"}
    with client.pipeline(transaction=False) as pipe:
        for table, (_, cols, records) in tables.items():
            for r in records:
                fields = {c: float(v) for c, v in zip(cols, r[1:]) if not np.isnan(v)}
                pipe.hset(f"{prefix[table]}{int(r[0])}", mapping=fields or {"_": 0})
        pipe.execute()


def flights_provider(store: str, url: str, tables: dict, names: list[str]):
    """``joined_provider`` over the three tables in SQLite or Redis."""
    from thrifty.providers import joined_provider, redis_provider, sql_provider

    def table(name: str):
        key, cols, _ = tables[name]
        if store == "sqlite":
            return sql_provider(url, name, key, [], columns=cols)
        prefix = {"flights": "flight:", "weather": "weather:", "planes": "plane:"}[name]
        return redis_provider(url, prefix=prefix, columns=cols)

    lookups = [("weather_id", table("weather")), ("plane_id", table("planes"))]
    return joined_provider(table("flights"), lookups, features=names)


def policies(plan) -> list[str]:
    """The round policies measured: in order; parallel (every tree up to the next exit); and a
    prefetch of the features half the calibration rows use."""
    return ["in_order", "parallel", "prefetch"]


def policy(name: str, plan, M_cal: np.ndarray, costs):
    """The ``rounds=`` value of a policy's name (a Prefetch fitted on calibration rows)."""
    if name != "prefetch":
        return name
    import thrifty

    return thrifty.prefetch_plan(plan, M_cal, costs, p=0.5, progress=False)


def serve_flights(folder: str, store: str, plan_name: str, rounds: str, port: str) -> dict:
    """The child process: one server for one store, plan and policy."""
    import pickle

    from thrifty import CostModel, load
    from thrifty.serve import create_app, run

    d = Path(folder)
    plan = load(d / f"{plan_name}.json")
    tables = pickle.loads((d / "tables.pickle").read_bytes())
    url = (d / f"{store}.url").read_text()
    provider = flights_provider(store, url, tables, plan.feature_names)
    costs = CostModel.from_file(d / "costs.json")
    chosen = policy(rounds, plan, np.load(d / "calibration.npy"), costs)
    app = create_app(plan, provider, costs=costs, rounds=chosen, timeout=30.0)
    run(app, host="127.0.0.1", port=int(port))
    return {}


def raw_load(port: int, ids: list[int], clients: int, time_limit: float) -> dict:
    """One-row requests from ``clients`` keep-alive connections (a minimal HTTP/1.1 client)."""

    async def run() -> tuple[list[float], int, float]:
        latencies: list[float] = []
        errors = 0
        queue = list(reversed(ids))
        deadline = time.monotonic() + time_limit

        async def client() -> None:
            nonlocal errors
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            while queue and time.monotonic() < deadline:
                body = b'{"rows": [{"id": %d}]}' % queue.pop()
                head = b"POST /predict HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
                t0 = time.perf_counter()
                writer.write(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
                answer = await reader.readuntil(b"\r\n\r\n")
                length = int(answer.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                latencies.append(time.perf_counter() - t0)
                errors += not answer.startswith(b"HTTP/1.1 200")
            writer.close()

        t0 = time.perf_counter()
        await asyncio.gather(*(client() for _ in range(clients)))
        return latencies, errors, time.perf_counter() - t0

    return summary(*asyncio.run(run()))


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system, every thread) process ``pid`` has used; NaN off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rounds_per_row(plan, M: np.ndarray, costs, rounds) -> tuple[np.ndarray, float]:
    """Rounds each row waits in lazy evaluation (the store round trips of a one-row request),
    and the mean feature cost paid (a prefetch pays for what it fetches)."""
    from thrifty.runtime.lazy import lazy_rounds

    gen = lazy_rounds(plan, costs, n_rows=len(M), n_threads=1, rounds=rounds)
    count = np.zeros(len(M), dtype=int)
    try:
        requests = next(gen)
        while True:
            for r in np.unique(np.concatenate([rows for _, rows in requests])):
                count[r] += 1
            requests = gen.send([M[rows, f] for f, rows in requests])
    except StopIteration as stop:
        return count, float(stop.value.cost.feature.mean())


def flights(args: argparse.Namespace, figures: dict, rows: list[dict]) -> None:
    """Flights in SQLite and Redis; Full (in order, parallel) and QWYC; 1 to 128 clients."""
    import pickle
    import shutil

    import lightgbm as lgb

    from thrifty import Forest, Full, qwyc, save
    from thrifty.datasets import load as load_data

    quick = args.quick
    n_trees, n_train, n_fit = (60, 30000, 4000) if quick else (300, 120000, 16000)
    n_requests, limit = (300, 5.0) if quick else (4000, 20.0)
    clients = (1, 32) if quick else FLIGHT_CLIENTS
    data = load_data("flights", data_home=args.data_home)
    X_tr, y_tr, _ = data.subset("train")
    X_te, _, _ = data.subset("test")
    pick = np.random.default_rng(0).choice(len(X_tr), n_train, replace=False)
    gbm = lgb.LGBMClassifier(n_estimators=n_trees, num_leaves=31, verbose=-1, random_state=0, n_jobs=1)
    forest = Forest.from_model(gbm.fit(X_tr.iloc[pick], y_tr[pick]))
    M_tr, M_te = forest._as_matrix(X_tr.iloc[pick[:n_fit]]), forest._as_matrix(X_te)
    plans = {"full": Full(forest), "qwyc": qwyc(forest, M_tr, alpha=0.005)}
    names = list(forest.feature_names)
    tables = flights_tables(M_te, names)
    ids = np.random.default_rng(1).permutation(len(M_te)).tolist()
    sample = np.asarray(ids[:2000])
    print(
        f"flights: {n_trees} trees of 31 leaves trained on {n_train} rows; QWYC alpha 0.005 on "
        f"{n_fit}; {len(M_te)} test flights, {len(tables['weather'][2])} weather and "
        f"{len(tables['planes'][2])} aircraft records; {n_requests} one-row requests per run, "
        f"{limit:g} s limit; clients {clients}"
    )
    redis_binary = shutil.which("redis-server")
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "tables.pickle").write_bytes(pickle.dumps(tables))
        np.save(d / "calibration.npy", M_tr)
        (d / "costs.json").write_text(json.dumps(data.costs.for_features(names, len(names)).to_dict()))
        write_sqlite(d / "flights.db", tables)
        (d / "sqlite.url").write_text(f"sqlite:///{d / 'flights.db'}")
        stores, redis_proc = ["sqlite"], None
        if redis_binary:
            redis_port = free_port()
            redis_proc = subprocess.Popen(
                [
                    redis_binary,
                    "--port",
                    str(redis_port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            (d / "redis.url").write_text(f"redis://127.0.0.1:{redis_port}/0")
            time.sleep(0.5)
            write_redis((d / "redis.url").read_text(), tables)
            stores.append("redis")
        else:
            print("  redis-server is not installed: Redis is not measured")
        try:
            for name, plan in plans.items():
                save(plan, d / f"{name}.json")
                base = None
                for rounds in policies(plan):
                    chosen = policy(rounds, plan, M_tr, data.costs)
                    count, cost = rounds_per_row(plan, M_te[sample], data.costs, chosen)
                    base = cost if base is None else base
                    tag = name if rounds == "in_order" else f"{name}_{rounds}"
                    figures[f"{tag}_rounds_per_row_mean"] = round(float(count.mean()), 3)
                    figures[f"{tag}_rounds_per_row_p95"] = float(np.percentile(count, 95))
                    figures[f"{tag}_extra_cost_frac"] = round(cost / base - 1, 4)
                    for store in stores:
                        measure_flights(
                            d, store, name, rounds, tag, clients, ids, n_requests, limit, figures, rows
                        )
        finally:
            if redis_proc is not None:
                redis_proc.terminate()
                redis_proc.wait(10)
    figures["errors"] = sum(v for k, v in figures.items() if k.endswith("_errors"))
    lazy_figures(args, figures)


def lazy_figures(args: argparse.Namespace, figures: dict) -> None:
    """thrifty's own time per one-row lazy request and per round (in-process, Adult, compiled
    plan) and the recommended round policy's rounds and extra cost on flights, measured in this
    run by benchmarks/lazy.py's functions (see there)."""
    import lazy

    overhead, _ = lazy.adult_overhead(args)
    rounds, _ = lazy.flights_rounds(args)
    for k in ("overhead_us_per_request", "overhead_us_per_round", "rounds_per_request", "overhead_target_us"):
        figures[k] = overhead[k]
    figures.update(rounds)
    print(
        f"  in-process: {figures['overhead_us_per_request']} µs per request, "
        f"{figures['overhead_us_per_round']} µs per round; flights policy {figures['flights_policy']}: "
        f"p95 {figures['flights_rounds_p95']} rounds, extra cost {figures['flights_extra_cost_frac']:.1%}"
    )


def measure_flights(d, store, name, rounds, tag, clients, ids, n_requests, limit, figures, rows) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    child = [sys.executable, str(Path(__file__).resolve()), "--child", str(d), store, name, rounds, str(port)]
    proc = subprocess.Popen(child, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_ready(f"http://127.0.0.1:{port}", proc)
        raw_load(port, ids[:200], 8, 5.0)  # warm-up: connections, caches
        for n in clients:
            cpu = process_cpu(proc.pid)
            r = raw_load(port, ids[:n_requests], n, limit)
            # The server's CPU seconds per request: steadier than wall figures on a loaded machine.
            r["server_cpu_us"] = (process_cpu(proc.pid) - cpu) / max(1, r["requests"]) * 1e6
            mode = f"{n}_client" if n == 1 else f"{n}_clients"
            rows.append(
                {
                    "data": "flights",
                    "plan": tag,
                    "store": store,
                    "mode": mode,
                    **{k: round(v, 3) for k, v in r.items()},
                }
            )
            print(
                f"  {tag:13s} {store:6s} {n:3d} clients: {r['requests']:5d} requests, {r['errors']} errors: "
                f"p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms  {r['rps']:7.1f} req/s  "
                f"server CPU {r['server_cpu_us']:6.0f} µs/request",
                flush=True,
            )
            for k in ("p50_ms", "p99_ms", "rps", "errors", "server_cpu_us"):
                figures[f"{tag}_{store}_{mode}_{k}"] = round(r[k], 2)
    finally:
        proc.terminate()
        proc.wait(10)


def adult(args: argparse.Namespace, figures: dict, rows: list[dict]) -> None:
    """The figures recorded before issue 26: Adult through `thrifty serve`'s command line."""
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
    figures.update(trees=n_trees, clients=CLIENTS)
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
                rows.append(
                    {"data": "adult", "plan": name, "mode": mode, **{k: round(v, 3) for k, v in r.items()}}
                )
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


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a smaller model and fewer requests (< 1 min)")
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home, help="folder of the shared datasets")
    ap.add_argument("--part", choices=["all", "flights", "adult"], default="all", help="what to measure")
    ap.add_argument(
        "--child", nargs=5, metavar=("DIR", "STORE", "PLAN", "ROUNDS", "PORT"), help=argparse.SUPPRESS
    )
    args = ap.parse_args(argv)
    if args.child:
        return serve_flights(*args.child)
    rows: list[dict] = []
    figures: dict = {"bench": "serve"}
    for part, measure in (("flights", flights), ("adult", adult)):
        if args.part in ("all", part):
            start = len(rows)
            measure(args, figures, rows)
            for row in rows[start:]:
                row["part"] = part
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = "serve_quick" if args.quick else "serve"
    if args.part != "all":
        # One part measured: the other part's figures and rows, from an earlier run, are kept.
        figures, rows = _keep_other_part(stem, args.part, figures, rows)
    with open(RESULTS / f"{stem}.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    emit(figures, args.quick)
    return figures


def _keep_other_part(stem: str, part: str, figures: dict, rows: list[dict]) -> tuple[dict, list[dict]]:
    """``figures`` and ``rows`` of the part just measured, with those of the other part kept
    from the results files (each figure and row names its part: ``parts``, ``part``)."""
    old: dict = {}
    if (RESULTS / f"{stem}.json").exists():
        old = json.loads((RESULTS / f"{stem}.json").read_text())
    parts = {k: v for k, v in old.get("parts", {}).items() if v != part}
    parts.update({k: part for k in figures if k != "bench"})
    kept = {k: old[k] for k in parts if parts[k] != part and k in old}
    old_rows = []
    if (RESULTS / f"{stem}.csv").exists():
        with open(RESULTS / f"{stem}.csv", newline="") as fh:
            old_rows = [r for r in csv.DictReader(fh) if r.get("part") and r["part"] != part]
    return {**kept, **figures, "parts": parts}, old_rows + rows


if __name__ == "__main__":
    main()
