"""The application in-process: every status is JSON, documented, and tells nothing internal."""

from __future__ import annotations

import asyncio
import copy
import logging
import shutil
import sqlite3
import time

import numpy as np
import pytest

from tests._helpers.stores import NAMES
from thrifty import evaluate
from thrifty.exceptions import InputError, MissingKeyError

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
sa = pytest.importorskip("sqlalchemy")

from thrifty.providers import sql_provider  # noqa: E402
from thrifty.serve import create_app, store_provider  # noqa: E402


class Store:
    """A store provider over ``X`` (key = row number) that can wait, fail, or be held by a gate.

    ``rounds`` lists the rows of every round it answered and ``waiting`` the rounds held at the
    gate; copies made by ``with_keys`` share both.
    """

    def __init__(self, X, *, delay=0.0, error=None):
        self.X, self.delay, self.error = X, delay, error
        self.keys, self.rounds, self.waiting = np.arange(len(X)), [], []

    def with_keys(self, keys):
        other = copy.copy(self)
        other.keys = np.asarray(keys)
        return other

    def fetch(self, requests):
        time.sleep(self.delay)
        if self.error is not None:
            raise self.error
        self.rounds.append(sorted({int(r) for _, rows in requests for r in rows}))
        return [self.X[self.keys[rows], f] for f, rows in requests]


class GatedStore(Store):
    """An async store whose answers wait until ``gate`` is set (created in the test's loop)."""

    async def fetch(self, requests):
        self.waiting.append(requests)
        await self.gate.wait()
        return Store.fetch(self, requests)


def assert_error(response, status, *fragments, hidden=()):
    """``response`` is ``{"error": one line}`` with ``status``, says each fragment, hides the rest."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert list(body) == ["error"] and "\n" not in body["error"], body
    for text in fragments:
        assert text in body["error"], body
    for text in (*hidden, "Traceback", "SELECT", "sqlite"):
        assert text not in response.text, body


def post(client, body):
    data = body if isinstance(body, bytes) else None
    return client.post("/predict", content=data, json=None if data else body)


@pytest.fixture(scope="module")
def client(make_app, in_process):
    with in_process(make_app()) as c:
        yield c


@pytest.mark.parametrize(
    "body, status, message",
    [
        # each of these answered 500, or 502 without asking a provider, before
        (b"[" * 100_000 + b"]" * 100_000, 400, "nests 100000 levels deep"),  # RecursionError
        ({"rows": [{"id": 1, "age": 10**400}]}, 422, "beyond the range of a float64"),  # OverflowError
        ({"rows": [{"id": 10**30}]}, 422, "beyond the 64-bit integers"),  # OverflowError in the driver
        (b'{"rows": [{"id": ' + b"7" * 5000 + b"}]}", 400, "malformed JSON"),  # was 502
        (
            b'{"rows": [{"id": NaN, "age": 1, "bp": 1, "chol": 1, "hr": 1, "st": 1, "ca": 1}]}',
            400,
            "NaN is not JSON",
        ),  # was 502: the NaN key could not be echoed
    ],
)
def test_bodies_that_broke_the_server_are_client_errors(client, body, status, message):
    assert_error(post(client, body), status, message)
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize(
    "method, path, status, message",
    [
        ("GET", "/predict", 405, "GET is not allowed on /predict; use POST"),
        ("DELETE", "/health", 405, "DELETE is not allowed on /health; use GET or HEAD"),
        ("POST", "/nope", 404, "no such path '/nope'; this server answers POST /predict and GET /health"),
        ("GET", "/", 404, "no such path '/'"),
    ],
)
def test_refusals_of_the_router_are_json(client, method, path, status, message):
    assert_error(client.request(method, path), status, message)


def test_health_reports_the_load(client):
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["features"] == NAMES
    assert health["requests"] == {"at_work": 0, "waiting": 0}


def test_a_full_server_answers_503_at_once_and_health_still_answers(small_model):
    plan, X, costs = small_model
    store = GatedStore(X)
    app = create_app(plan, store, costs=costs, max_concurrency=1, max_queue=1, timeout=20)

    async def scenario():
        store.gate = asyncio.Event()
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
            request = {"rows": [{"id": 3}]}
            at_work = asyncio.create_task(client.post("/predict", json=request))
            while not store.waiting:
                await asyncio.sleep(0.01)
            queued = asyncio.create_task(client.post("/predict", json=request))
            while (await client.get("/health")).json()["requests"]["waiting"] < 1:
                await asyncio.sleep(0.01)
            start = time.monotonic()
            refused = await client.post("/predict", json=request)
            seconds = time.monotonic() - start
            health = await client.get("/health")
            store.gate.set()
            return refused, seconds, health, await at_work, await queued

    refused, seconds, health, *served = asyncio.run(scenario())
    assert_error(refused, 503, "the server is busy (1 requests at work, 1 waiting)")
    assert refused.headers["retry-after"] == "1" and seconds < 1.0
    assert health.status_code == 200 and health.json()["requests"] == {"at_work": 1, "waiting": 1}
    assert [r.status_code for r in served] == [200, 200]


def _deepest_row(plan, X):
    """The row whose lazy evaluation takes the most rounds, and that number."""
    store = Store(X)
    evaluate(plan, store, n_rows=len(X))
    counts = np.bincount([r for rows in store.rounds for r in rows], minlength=len(X))
    return int(counts.argmax()), int(counts.max())


def test_a_request_past_its_deadline_stops_fetching(small_model, in_process):
    plan, X, costs = small_model
    row, rounds = _deepest_row(plan, X)
    assert rounds >= 4
    store = Store(X, delay=0.3)
    app = create_app(plan, store, costs=costs, timeout=0.5)
    with in_process(app) as client:
        start = time.monotonic()
        assert_error(post(client, {"rows": [{"id": row}]}), 504, "did not finish within 0.5 s")
        assert time.monotonic() - start < 2.0
        time.sleep(1.5)  # what a worker thread left running would have fetched by now
    # The round under way at the deadline ends; no other starts.
    assert len(store.rounds) <= 2, store.rounds


@pytest.mark.parametrize(
    "error, status, message",
    [
        (RuntimeError("bug near /srv/secret/path"), 500, "internal error (reference"),
        (InputError("column 'chol' holds 'abc' (for key 7)"), 502, "the feature provider failed (reference"),
        (ConnectionError("http://10.0.0.5:9000 refused"), 502, "the feature provider failed"),
        (LookupError("no record with pid in [3] in table 'patients'"), 404, "no record in the feature store"),
        (
            MissingKeyError("no record with pid in [3] in table 'patients'", [3]),
            404,
            "no record in the feature",
        ),
        (KeyError("patients"), 500, "internal error (reference"),
        (TimeoutError("http://10.0.0.5:9000 did not answer"), 504, "did not finish within 10 s"),
    ],
)
def test_provider_failures_tell_the_log_not_the_client(
    small_model, in_process, caplog, error, status, message
):
    plan, X, costs = small_model
    app = create_app(plan, Store(X, error=error), costs=costs)
    with in_process(app) as client, caplog.at_level(logging.ERROR, logger="thrifty.serve"):
        response = post(client, {"rows": [{"id": 3}]})
    assert_error(response, status, message, hidden=("secret", "chol", "10.0.0.5", "patients", "pid"))
    if "reference" in message:
        reference = response.json()["error"].split("reference ")[1].split()[0]
        assert reference in caplog.text and str(error) in caplog.text


@pytest.fixture
def store_copy(files, tmp_path):
    path = tmp_path / "copy.db"
    shutil.copy(files / "store.db", path)
    return path


def test_a_locked_database_is_a_503_without_sql(small_model, store_copy, in_process):
    plan, _, costs = small_model
    engine = sa.create_engine(f"sqlite:///{store_copy}", connect_args={"timeout": 0.1})
    app = create_app(plan, sql_provider(engine, "features", "pid", [], model=plan), costs=costs)
    lock = sqlite3.connect(store_copy)
    with in_process(app) as client:
        lock.execute("BEGIN EXCLUSIVE")
        response = post(client, {"rows": [{"id": 3}, {"id": 4}]})
        assert_error(
            response, 503, "the feature store cannot be read now", hidden=("features", "pid", "copy.db")
        )
        assert response.headers["retry-after"] == "5"
        lock.rollback()
        assert post(client, {"rows": [{"id": 3}]}).status_code == 200
    lock.close()


def test_a_database_deleted_while_serving_is_a_503_and_is_not_created_again(
    small_model, store_copy, in_process
):
    plan, _, costs = small_model
    provider = store_provider(f"sqlite:///{store_copy}", plan, table="features", key_column="pid")
    with in_process(create_app(plan, provider, costs=costs)) as client:
        assert post(client, {"rows": [{"id": 3}]}).status_code == 200  # a connection is open
        store_copy.unlink()
        # The open connection could still read the deleted file: the client checks it first.
        response = post(client, {"rows": [{"id": 3}]})
        assert_error(response, 503, "the feature store cannot be read now", hidden=("copy.db",))
        assert client.get("/health").status_code == 200
    assert not store_copy.exists()


def test_a_feature_given_in_the_request_costs_no_latency(client, small_model):
    plan, X, _ = small_model
    row = next(i for i in range(len(X)) if 0 < evaluate(plan, X[[i]]).cost.acquired.sum() < len(NAMES))
    fetched = post(client, {"rows": [{"id": row}]}).json()["results"][0]
    assert fetched["latency"] > 0
    given = {name: X[row, NAMES.index(name)] for name in fetched["acquired"]}
    given = {name: None if np.isnan(v) else float(v) for name, v in given.items()}
    answer = post(client, {"rows": [{"id": row, **given}]}).json()["results"][0]
    # The same prediction and price (the features were used), but nothing was waited for.
    assert answer["prediction"] == fetched["prediction"] and answer["cost"] == fetched["cost"]
    assert answer["latency"] == 0.0


def test_what_lives_as_long_as_the_server_is_left_out_of_garbage_collection(make_app):
    """The plan, its compiled code and the libraries are frozen after the warm-up (a full
    collection walked them all, a pause every request in flight waited for), and unfrozen when
    the app stops."""
    import gc

    app = make_app()

    async def serving() -> int:
        async with app.router.lifespan_context(app):
            return gc.get_freeze_count()

    frozen = asyncio.run(serving())
    assert frozen > 10_000  # the model's objects and the modules', frozen
    assert gc.get_freeze_count() == 0
