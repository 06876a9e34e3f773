"""The HTTP API fuzzed with hypothesis: 5,000 requests in-process and 500 over loopback sockets.

Whatever the body, the method or the path, the answer is JSON, its status is one docs/deploy.md
documents (no 500), an error is one line telling nothing internal, and ``/health`` keeps
answering. The rows' keys are the store's (0 to 299) or not, their values numbers or not.
"""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests._helpers.stores import NAMES

httpx = pytest.importorskip("httpx")
pytest.importorskip("starlette")
pytest.importorskip("sqlalchemy")

# Every status the server documents; 502, 503 and 504 only for a failing store, a full server
# or a slow evaluation, which a healthy store and one client never cause.
DOCUMENTED = {200, 400, 404, 405, 408, 413, 422, 502, 503, 504}
INTERNAL = ("Traceback", "SELECT", "sqlite", "features WHERE", "store.db", "pid")
RESULT = {"id", "prediction", "probabilities", "cost", "feature_cost", "latency", "trees", "exit", "acquired"}
SETTINGS = settings(
    deadline=None,
    derandomize=True,  # the same requests in every CI run
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
    ],
)

numbers = (
    st.integers(-5, 400)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.integers(min_value=-(10**500), max_value=10**500)
)
scalars = st.none() | st.booleans() | numbers | st.text(max_size=12)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
fields = st.sampled_from([*NAMES, "id"]) | st.text(max_size=8)
# Rows a client means well with (a key, some features), and anything else.
good_rows = st.fixed_dictionaries(
    {"id": st.integers(-3, 320)},
    optional={name: st.none() | st.floats(-1e6, 1e6) for name in NAMES},
)
wild_rows = st.dictionaries(fields, st.one_of(st.integers(-3, 320), scalars, values), max_size=8)
rows = st.lists(good_rows | wild_rows, max_size=25) | st.lists(good_rows, max_size=20)
bodies = (
    st.builds(lambda r: {"rows": r}, rows)
    | st.builds(
        lambda r, extra: {"rows": r, **extra}, rows, st.dictionaries(st.text(max_size=5), values, max_size=2)
    )
    | values
)
raw_bodies = st.one_of(
    st.binary(max_size=200),
    st.builds(lambda b, cut: json.dumps(b).encode()[:cut], bodies, st.integers(0, 400)),  # truncated
    st.builds(lambda n: b"[" * n + b"]" * n, st.integers(0, 60_000)),  # nesting
    st.builds(lambda n: b'{"rows": [{"id": ' + b"9" * n + b"}]}", st.integers(1, 6000)),  # long integers
    st.sampled_from([b'{"rows": [{"id": NaN}]}', b'{"rows": [{"age": Infinity}]}', b"\xff", b"", b"null"]),
    st.builds(lambda n: b'{"rows": [' + b'{"id": 1},' * n + b'{"id": 2}]}', st.integers(0, 3000)),  # size
)
requests = st.tuples(
    st.sampled_from(["POST"] * 6 + ["GET", "PUT", "DELETE", "PATCH"]),
    st.sampled_from(["/predict"] * 6 + ["/health", "/", "/predict/", "/x"]),
)


def check(response, sent) -> None:
    """One answer is what the documentation says it is."""
    assert response.status_code in DOCUMENTED and response.status_code not in (502, 503, 504), response.text
    assert response.headers["content-type"] == "application/json", response.text
    body = response.json()
    # An error may quote the client's own words (an unknown feature named "SELECT"): only
    # what the request did not contain is internal.
    asked = response.request.content.decode("utf-8", "replace")
    for text in INTERNAL:
        assert text in asked or text not in response.text, response.text
    if response.status_code != 200:
        assert list(body) == ["error"] and isinstance(body["error"], str) and "\n" not in body["error"]
    elif "results" in body:
        assert len(body["results"]) == len(sent["rows"])
        for result, row in zip(body["results"], sent["rows"]):
            assert set(result) == RESULT and math.isfinite(result["cost"])
            assert result["id"] == row.get("id")
    else:
        assert body["status"] == "ok"


class Counter:
    """Requests sent by the fuzz, and the statuses seen (printed with ``-s``)."""

    def __init__(self) -> None:
        self.statuses: dict[int, int] = {}

    def __call__(self, response, sent, health) -> None:
        check(response, sent)
        self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1
        if sum(self.statuses.values()) % 100 == 0:
            assert health().status_code == 200

    def __str__(self) -> str:
        return f"{sum(self.statuses.values())} requests, statuses {sorted(self.statuses.items())}"


@pytest.fixture(scope="module")
def fuzzed(make_app, in_process):
    """The app in-process (no sockets), as ``thrifty serve`` would run it with small limits."""
    counter = Counter()
    with in_process(make_app(max_rows=20, max_body=20_000)) as client:
        yield client, counter
    print(f"in-process fuzz: {counter}")


@given(body=bodies)
@settings(SETTINGS, max_examples=2500)
def test_fuzz_json_bodies(fuzzed, body):
    client, counter = fuzzed
    counter(
        client.post("/predict", json=body), body if _is_rows(body) else None, lambda: client.get("/health")
    )


@given(raw=raw_bodies)
@settings(SETTINGS, max_examples=1500)
def test_fuzz_raw_bodies(fuzzed, raw):
    client, counter = fuzzed
    counter(client.post("/predict", content=raw), _parsed_rows(raw), lambda: client.get("/health"))


@given(request=requests, body=bodies)
@settings(SETTINGS, max_examples=1000)
def test_fuzz_methods_and_paths(fuzzed, request, body):
    _send(*fuzzed, request, body)


@pytest.fixture(scope="module")
def over_sockets(make_app, serve_live):
    counter = Counter()
    with (
        serve_live(make_app(max_rows=20, max_body=20_000)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield client, counter
    print(f"socket fuzz: {counter}")


@given(request=requests, body=bodies)
@settings(SETTINGS, max_examples=500)
def test_fuzz_over_loopback_sockets(over_sockets, request, body):
    _send(*over_sockets, request, body)


def _send(client, counter, request, body) -> None:
    method, path = request
    sent = body if _is_rows(body) and (method, path) == ("POST", "/predict") else None
    response = client.request(method, path, content=json.dumps(body).encode())
    counter(response, sent, lambda: client.get("/health"))


def _is_rows(body) -> bool:
    return isinstance(body, dict) and isinstance(body.get("rows"), list)


def _parsed_rows(raw: bytes):
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return body if _is_rows(body) else None
