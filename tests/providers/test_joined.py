"""joined_provider over three tables (SQLite and a real Redis): equal to dense evaluation, and a
linked table is read only for the rows whose trees need it."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from tests._helpers.stores import NAMES
from thrifty import evaluate
from thrifty.exceptions import InputError
from thrifty.providers import joined_provider, redis_provider, sql_provider

ROOT, WEATHER, PLANE = NAMES[:2], NAMES[2:4], NAMES[4:]


@pytest.fixture(scope="module")
def tables(small_model):
    """The small model's rows split in three: a root record per row holding two links, weather
    records shared by three rows each, plane records by every seventh row (none for some)."""
    _, X, _ = small_model
    n = len(X)
    w_id = np.arange(n) // 3
    p_id = np.where(np.arange(n) % 5 == 0, np.nan, np.arange(n) % 7)
    joined = X.copy()
    joined[:, 2:4] = X[w_id * 3][:, 2:4]
    planes = {int(p): X[int(p)][4:] for p in np.unique(p_id[~np.isnan(p_id)])}
    joined[:, 4:] = [planes[int(p)] if not np.isnan(p) else [np.nan, np.nan] for p in p_id]
    return joined, w_id, p_id, planes


def sqlite_store(path, tables):
    joined, w_id, p_id, planes = tables
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE flights (fid INTEGER PRIMARY KEY, age REAL, bp REAL, w_id INTEGER, p_id INTEGER)"
    )
    conn.execute("CREATE TABLE weather (w_id INTEGER PRIMARY KEY, chol REAL, hr REAL)")
    conn.execute("CREATE TABLE planes (p_id INTEGER PRIMARY KEY, st REAL, ca REAL)")

    def v(x):
        return None if np.isnan(x) else float(x)

    conn.executemany(
        "INSERT INTO flights VALUES (?, ?, ?, ?, ?)",
        [
            (i, v(r[0]), v(r[1]), int(w_id[i]), None if np.isnan(p_id[i]) else int(p_id[i]))
            for i, r in enumerate(joined)
        ],
    )
    first = {int(w): i for i, w in reversed(list(enumerate(w_id)))}
    conn.executemany(
        "INSERT INTO weather VALUES (?, ?, ?)",
        [(w, v(joined[i, 2]), v(joined[i, 3])) for w, i in first.items()],
    )
    conn.executemany(
        "INSERT INTO planes VALUES (?, ?, ?)", [(p, v(x[0]), v(x[1])) for p, x in planes.items()]
    )
    conn.commit()
    conn.close()


def test_joined_sqlite_equals_dense_and_reads_linked_tables_only_where_needed(small_model, tables, tmp_path):
    plan, _, costs = small_model
    joined, w_id, _, _ = tables
    path = tmp_path / "flights.db"
    sqlite_store(path, tables)
    conn = sqlite3.connect(path, check_same_thread=False)
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    provider = joined_provider(
        sql_provider(conn, "flights", "fid", [], columns=[*ROOT, "w_id", "p_id"]),
        [
            ("w_id", sql_provider(conn, "weather", "w_id", [], columns=WEATHER)),
            ("p_id", sql_provider(conn, "planes", "p_id", [], columns=["st", "ca"])),
        ],
        keys=list(range(len(joined))),
        model=plan,
    )
    statements.clear()
    lazy = evaluate(plan, provider, costs, n_rows=len(joined))
    dense = evaluate(plan, joined, costs)
    np.testing.assert_array_equal(lazy.raw, dense.raw)
    np.testing.assert_array_equal(lazy.cost.total, dense.cost.total)
    np.testing.assert_array_equal(lazy.cost.acquired, dense.cost.acquired)
    # A row's weather link is read, and its weather looked up, only when it needs a weather feature.
    needing = set(np.flatnonzero(dense.cost.acquired[:, 2:4].any(axis=1)).tolist())
    linked, looked_up = set(), set()
    for text in statements:
        for select in text.split(" UNION ALL "):
            keys = {int(k) for k in select.split("json_each('[")[1].split("]")[0].split(",")}
            if '"w_id" AS v' in select:
                linked |= keys
            if 'FROM "weather"' in select:
                looked_up |= keys
    assert linked == needing and 0 < len(needing) < len(joined)
    assert looked_up == {int(w_id[r]) for r in needing}


def test_joined_redis_equals_dense(small_model, tables, redis_url):
    redis = pytest.importorskip("redis")
    plan, _, costs = small_model
    joined, w_id, p_id, planes = tables
    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    with client.pipeline(transaction=False) as pipe:
        for i, r in enumerate(joined):
            fields = {n: float(x) for n, x in zip(ROOT, r[:2]) if not np.isnan(x)} | {"w_id": int(w_id[i])}
            if not np.isnan(p_id[i]):
                fields["p_id"] = int(p_id[i])
            pipe.hset(f"flight:{i}", mapping=fields)
            pipe.hset(
                f"weather:{int(w_id[i])}",
                mapping={n: float(x) for n, x in zip(WEATHER, r[2:4]) if not np.isnan(x)} or {"_": 0},
            )
        for p, x in planes.items():
            pipe.hset(
                f"plane:{p}",
                mapping={n: float(v) for n, v in zip(["st", "ca"], x) if not np.isnan(v)} or {"_": 0},
            )
        pipe.execute()
    provider = joined_provider(
        redis_provider(client, prefix="flight:", columns=[*ROOT, "w_id", "p_id"]),
        [
            ("w_id", redis_provider(client, prefix="weather:", columns=WEATHER)),
            ("p_id", redis_provider(client, prefix="plane:", columns=["st", "ca"])),
        ],
        keys=list(range(len(joined))),
        model=plan,
    )
    lazy = evaluate(plan, provider, costs, n_rows=len(joined))
    dense = evaluate(plan, joined, costs)
    np.testing.assert_array_equal(lazy.raw, dense.raw)
    np.testing.assert_array_equal(lazy.cost.acquired, dense.cost.acquired)


def test_a_feature_no_table_has_is_named(small_model, tables, tmp_path):
    plan, *_ = small_model
    path = tmp_path / "f.db"
    sqlite_store(path, tables)
    url = f"sqlite:///{path}"
    root = sql_provider(url, "flights", "fid", [], columns=[*ROOT, "w_id"])
    weather = sql_provider(url, "weather", "w_id", [], columns=WEATHER)
    with pytest.raises(InputError, match="no table has the feature 'st'"):
        joined_provider(root, [("w_id", weather)], model=plan)
    with pytest.raises(InputError, match="has no column 'p_id'"):
        joined_provider(root, [("p_id", weather)], features=[*ROOT, *WEATHER])


def test_thrifty_serve_batches_a_joined_store(small_model, tables, tmp_path):
    # Concurrent one-row requests through the server: each table asked once a round for all.
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("starlette")
    import asyncio

    from thrifty.serve import create_app

    plan, _, costs = small_model
    joined, *_ = tables
    path = tmp_path / "flights.db"
    sqlite_store(path, tables)
    url = f"sqlite:///{path}"
    provider = joined_provider(
        sql_provider(url, "flights", "fid", [], columns=[*ROOT, "w_id", "p_id"]),
        [
            ("w_id", sql_provider(url, "weather", "w_id", [], columns=WEATHER)),
            ("p_id", sql_provider(url, "planes", "p_id", [], columns=["st", "ca"])),
        ],
        features=NAMES,
    )
    app = create_app(plan, provider, costs=costs)
    rows = list(range(0, len(joined), 3))

    async def ask():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            async with app.router.lifespan_context(app):
                answers = await asyncio.gather(
                    *(client.post("/predict", json={"rows": [{"id": r}]}) for r in rows)
                )
                return answers, (await client.get("/health")).json()["store_rounds"]

    answers, store_rounds = asyncio.run(ask())
    dense = evaluate(plan, joined[rows], costs)
    assert [a.json()["results"][0]["probabilities"] for a in answers] == dense.proba.tolist()
    assert [a.json()["results"][0]["cost"] for a in answers] == dense.cost.total.tolist()
    assert store_rounds < len(rows)
