"""Requests in flight are evaluated in batches: one store round for all of them, each answer
exactly what it would be alone, and a request past its deadline stops its work."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._helpers.counting_store import CountingStore
from tests._helpers.stores import NAMES
from thrifty import evaluate, evaluate_async

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")

from thrifty.serve import create_app  # noqa: E402
from thrifty.serve.batcher import Batcher  # noqa: E402


def body_of(rows, X, give=()):
    """A request for ``rows`` by key, giving the features named in ``give`` (NaN as null)."""
    out = []
    for r in rows:
        row = {"id": int(r)}
        for name in give:
            v = X[r, NAMES.index(name)]
            row[name] = None if np.isnan(v) else float(v)
        out.append(row)
    return {"rows": out}


async def alone(plan, X, costs, rows, give=()):
    """The answer of one request evaluated by itself (no batching): ``evaluate_async`` on the
    same store, with the same given values."""
    given = np.zeros((len(rows), len(NAMES)), dtype=bool)
    given[:, [NAMES.index(n) for n in give]] = True
    return await evaluate_async(
        plan, CountingStore(X).with_keys(rows), costs, n_rows=len(rows), given=given, n_threads=1
    )


async def concurrently(app, bodies):
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://serve") as client:
        async with app.router.lifespan_context(app):
            return await asyncio.gather(*(client.post("/predict", json=b) for b in bodies))


def test_batched_answers_equal_answers_alone_bit_for_bit(small_model, in_process):
    plan, X, costs = small_model
    store = CountingStore(X, delay=0.002)
    app = create_app(plan, store, costs=costs)
    rng = np.random.default_rng(0)
    # Requests of 1 to 5 rows, some giving features the store would otherwise be asked for.
    requests = [
        (rng.choice(len(X), size=rng.integers(1, 6), replace=False).tolist(), ("age", "chol")[: i % 3])
        for i in range(40)
    ]
    responses = asyncio.run(concurrently(app, [body_of(rows, X, give) for rows, give in requests]))
    for (rows, give), response in zip(requests, responses):
        assert response.status_code == 200, response.text
        ev = asyncio.run(alone(plan, X, costs, rows, give))
        got = response.json()["results"]
        assert [r["id"] for r in got] == rows
        assert [r["probabilities"] for r in got] == ev.proba.tolist()
        assert [r["prediction"] for r in got] == ev.labels.tolist()
        for name, values in (
            ("cost", ev.cost.total),
            ("feature_cost", ev.cost.feature),
            ("latency", ev.cost.latency),
            ("trees", ev.cost.n_trees),
            ("exit", ev.exit),
        ):
            assert [r[name] for r in got] == values.tolist(), name
        assert [r["acquired"] for r in got] == [
            [NAMES[j] for j in np.flatnonzero(a)] for a in ev.cost.acquired
        ]
    # Batched: far fewer store rounds than the requests' own rounds added up.
    per_request = 0
    for rows, give in requests:
        s = CountingStore(X)
        given = np.zeros((len(rows), len(NAMES)), dtype=bool)
        given[:, [NAMES.index(n) for n in give]] = True
        asyncio.run(evaluate_async(plan, s.with_keys(rows), costs, n_rows=len(rows), given=given))
        per_request += len(s.rounds)
    assert len(store.rounds) < per_request / 3, (len(store.rounds), per_request)
    with in_process(app) as client:
        assert client.get("/health").json()["store_rounds"] == len(store.rounds)


def test_a_request_past_its_deadline_frees_its_rows_and_the_others_finish(small_model):
    plan, X, costs = small_model
    # The rows needing the most rounds, so that the short request is cut in the middle.
    rounds = []
    for i in range(len(X)):
        s = CountingStore(X)
        evaluate(plan, s.with_keys([i]), costs, n_rows=1)
        rounds.append(len(s.rounds))
    deep = np.argsort(rounds)[::-1][:4].tolist()
    assert rounds[deep[-1]] >= 3
    short, long = deep[:2], deep[2:]
    store = CountingStore(X, delay=0.05)

    async def run():
        batcher = Batcher(plan, costs, store.with_keys, NAMES, "id")
        loop = asyncio.get_running_loop()
        nan = np.full((2, len(NAMES)), np.nan)
        unknown = np.zeros((2, len(NAMES)), dtype=bool)
        a = batcher.submit(nan, unknown, short, loop.time() + 0.08)
        b = batcher.submit(nan.copy(), unknown.copy(), long, loop.time() + 30)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout_at(a.deadline):
                await a.future
        a.future.cancel()  # as the handler does: 504, its slot freed
        after = len(store.rounds)
        ev, lo = await b.future
        return after, ev, lo

    after, ev, lo = asyncio.run(run())
    # The abandoned rows are never asked for again; the other request's answer is exact.
    assert not set(short) & {k for keys in store.rounds[after + 1 :] for k in keys}, store.rounds
    dense = evaluate(plan, X[long], costs)
    np.testing.assert_array_equal(ev.raw[lo : lo + 2], dense.raw)
    np.testing.assert_array_equal(ev.cost.total[lo : lo + 2], dense.cost.total)


def test_a_bad_key_fails_its_own_request_only(small_model):
    plan, X, costs = small_model
    store = CountingStore(X)
    app = create_app(plan, store, costs=costs)
    bodies = [body_of([3, 4], X), {"rows": [{"id": 10**6}]}, body_of([5], X), {"rows": [{"age": 1.0}]}]
    responses = asyncio.run(concurrently(app, bodies))
    assert [r.status_code for r in responses] == [200, 404, 200, 422], [r.text for r in responses]
    dense = evaluate(plan, X[[3, 4, 5]], costs)
    got = [r["probabilities"] for r in responses[0].json()["results"] + responses[2].json()["results"]]
    assert got == dense.proba.tolist()
    assert "has no 'id'" in responses[3].json()["error"]


def test_many_clients_on_a_real_server_are_answered_exactly(make_app, serve_live, small_model):
    plan, X, costs = small_model
    n_clients, per_client = 48, 5
    dense = evaluate(plan, X, costs)

    async def load(url):
        limits = httpx.Limits(max_connections=n_clients)
        async with httpx.AsyncClient(base_url=url, timeout=30, limits=limits) as client:

            async def one(c):
                out = []
                for i in range(per_client):
                    row = (c * per_client + i) % len(X)
                    r = await client.post("/predict", content=json.dumps({"rows": [{"id": row}]}))
                    out.append((row, r))
                return out

            return [
                x
                for xs in await asyncio.wait_for(asyncio.gather(*(one(c) for c in range(n_clients))), 60)
                for x in xs
            ]

    with serve_live(make_app()) as url:
        answers = asyncio.run(load(url))
    assert len(answers) == n_clients * per_client
    for row, r in answers:
        assert r.status_code == 200, r.text
        result = r.json()["results"][0]
        assert result["probabilities"] == dense.proba[row].tolist()
        assert result["cost"] == dense.cost.total[row]


@st.composite
def batches(draw, n_rows: int):
    """One to four requests of one to three rows each; each row gives some features itself
    (NaN, infinities and extreme values included) and leaves the others to the store."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        rows = draw(st.lists(st.integers(0, n_rows - 1), min_size=1, max_size=3))
        given = np.array(
            draw(
                st.lists(
                    st.lists(st.booleans(), min_size=6, max_size=6), min_size=len(rows), max_size=len(rows)
                )
            )
        )
        values = draw(
            st.lists(
                st.lists(
                    st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -1e300, 0.5, -2.0]), min_size=6, max_size=6
                ),
                min_size=len(rows),
                max_size=len(rows),
            )
        )
        out.append((rows, given.reshape(len(rows), 6), np.array(values, dtype=float).reshape(len(rows), 6)))
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_batch_answers_each_request_as_alone(small_model, data):
    plan, X, costs = small_model
    requests = data.draw(batches(len(X)))
    store = CountingStore(X)

    async def batched():
        batcher = Batcher(plan, costs, store.with_keys, NAMES, "id")
        deadline = asyncio.get_running_loop().time() + 60
        jobs = [
            batcher.submit(np.where(gives, values, np.nan), gives, list(rows), deadline)
            for rows, gives, values in requests
        ]
        return [await job.future for job in jobs]

    for (rows, gives, values), (ev, lo) in zip(requests, asyncio.run(batched())):
        # Alone: the same request over a store holding what it sees (its given values first).
        seen = X[rows].copy()
        seen[gives] = values[gives]
        alone = asyncio.run(
            evaluate_async(plan, CountingStore(seen), costs, n_rows=len(rows), given=gives, n_threads=1)
        )
        part = slice(lo, lo + len(rows))
        np.testing.assert_array_equal(ev.raw[part], alone.raw)
        np.testing.assert_array_equal(ev.cost.total[part], alone.cost.total)
        np.testing.assert_array_equal(ev.cost.latency[part], alone.cost.latency)
        np.testing.assert_array_equal(ev.cost.acquired[part], alone.cost.acquired)


def test_a_redis_store_answers_each_request_exactly(small_model, redis_url):
    """Served from a real Redis, the requests in flight share its rounds, and
    the answers are dense evaluation's; a key with no hash fails its own request only."""
    pytest.importorskip("redis")
    from tests._helpers.stores import write_hashes
    from thrifty.providers import redis_provider

    plan, X, costs = small_model
    write_hashes(redis_url, X, list(range(len(X))), NAMES, prefix="patient:")
    app = create_app(plan, redis_provider(redis_url, prefix="patient:", model=plan), costs=costs)
    rows = list(range(0, len(X), 3))
    bodies = [body_of([r], X) for r in rows] + [{"rows": [{"id": "ghost"}]}]
    responses = asyncio.run(concurrently(app, bodies))
    assert [r.status_code for r in responses] == [200] * len(rows) + [404]
    dense = evaluate(plan, X[rows], costs)
    got = [r.json()["results"][0]["probabilities"] for r in responses[:-1]]
    assert got == dense.proba.tolist()


def test_a_redis_store_is_awaited_on_the_event_loop(small_model, redis_url, monkeypatch):
    """Redis rounds go through the provider's own connection on the loop: no worker thread
    (to_thread refuses here), the same answers as dense evaluation."""
    pytest.importorskip("redis")
    from tests._helpers.stores import write_hashes
    from thrifty.providers import redis_provider

    plan, X, costs = small_model
    write_hashes(redis_url, X, list(range(len(X))), NAMES, prefix="patient:")
    app = create_app(plan, redis_provider(redis_url, prefix="patient:", model=plan), costs=costs)

    def no_thread(*args, **kwargs):
        raise AssertionError("a Redis round went to a worker thread")

    monkeypatch.setattr(asyncio, "to_thread", no_thread)
    rows = list(range(1, len(X), 5))
    responses = asyncio.run(concurrently(app, [body_of([r], X) for r in rows]))
    assert [r.status_code for r in responses] == [200] * len(rows)
    got = [r.json()["results"][0]["probabilities"] for r in responses]
    assert got == evaluate(plan, X[rows], costs).proba.tolist()
