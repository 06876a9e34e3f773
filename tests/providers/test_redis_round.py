"""The Redis round script against a real redis-server: one round trip per round, for one table
and for tables joined by keys, reading exactly what the table-by-table reads read."""

from __future__ import annotations

import numpy as np
import pytest

from thrifty.exceptions import MissingKeyError, ProviderError
from thrifty.providers import joined_provider, redis_provider

redis = pytest.importorskip("redis", reason="the Redis provider's tests need the extra thrifty[redis]")

ROOT = ["a", "b", "w_id", "p_id"]
WEATHER, PLANE = ["temp", "wind"], ["seats"]
FEATURES = ["a", "b", "temp", "wind", "seats"]


class Counting:
    """A client that counts its script calls that ran (round trips; the first call to a server
    without the script also loads it, once)."""

    def __init__(self, client):
        self.client, self.calls = client, 0
        self.connection_pool = client.connection_pool

    def ping(self):
        return self.client.ping()

    def script_load(self, script):
        return self.client.script_load(script)

    def evalsha(self, *args):
        answer = self.client.evalsha(*args)
        self.calls += 1
        return answer


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    c.flushdb()
    return c


def joined(client, keys):
    return joined_provider(
        redis_provider(client, prefix="f:", columns=ROOT),
        [
            ("w_id", redis_provider(client, prefix="w:", columns=WEATHER)),
            ("p_id", redis_provider(client, prefix="p:", columns=PLANE)),
        ],
        keys=keys,
        features=FEATURES,
    )


def table_by_table(provider):
    """The same provider reading one table after another (the reference)."""
    provider.one_redis = False
    return provider


def test_one_table_missing_fields_no_fields_nan_and_missing_keys(client):
    client.hset("h:1", mapping={"a": "1.5", "b": "nan"})
    client.hset("h:2", mapping={"_": 0})  # a hash with none of the features
    client.hset("h:3", mapping={"b": "-inf", "a": "1e3"})
    spy = Counting(client)
    provider = redis_provider(spy, [1, 2, 3, "1"], prefix="h:", columns=["a", "b"])
    a, b, b_again = provider.fetch([(0, np.arange(4)), (1, np.array([0, 1, 2])), (1, np.array([3]))])
    np.testing.assert_array_equal(a, [1.5, np.nan, 1000.0, 1.5])
    np.testing.assert_array_equal(b, [np.nan, np.nan, -np.inf])
    np.testing.assert_array_equal(b_again, [np.nan])
    assert spy.calls == 1
    assert provider.fetch([]) == [] and spy.calls == 1  # nothing asked: no round trip
    with pytest.raises(MissingKeyError, match="\\['ghost', 7\\]") as missing:
        provider.with_keys([1, "ghost", 7]).fetch([(0, np.arange(3))])
    assert missing.value.keys == ["ghost", 7]
    # Values are checked together: one that is two numbers on two lines is no number.
    client.hset("h:4", mapping={"a": "1\n2", "b": "1_000"})
    with pytest.raises(ProviderError, match=r"field 'a' of 'h:4' holds '1\\n2', not a number"):
        provider.with_keys([1, 4]).fetch([(0, np.arange(2))])
    with pytest.raises(ProviderError, match="field 'b' of 'h:4' holds '1_000', not a number"):
        provider.with_keys([4]).fetch([(1, np.arange(1))])


def test_the_script_is_loaded_again_after_a_flush_and_text_clients_work(client, redis_url):
    client.hset("h:1", mapping={"a": 2})
    provider = redis_provider(client, [1], prefix="h:", columns=["a"])
    assert provider.fetch([(0, np.array([0]))])[0][0] == 2
    client.script_flush()
    assert provider.fetch([(0, np.array([0]))])[0][0] == 2
    text = redis.Redis.from_url(redis_url, decode_responses=True)
    client.hset("h:2", mapping={"a": "x1"})
    as_text = redis_provider(text, [1, 2], prefix="h:", columns=["a"])
    assert as_text.fetch([(0, np.array([0]))])[0][0] == 2
    with pytest.raises(ProviderError, match="field 'a' of 'h:2' holds 'x1', not a number"):
        as_text.fetch([(0, np.array([0, 1]))])


def write_joined(client, rng, n):
    """``n`` root hashes linking to weather and plane records, with missing fields, missing and
    non-canonical links ("3.0", "+4", "007"; "1e1" is followed by Python), and no-field hashes."""
    for w in range(12):
        fields = {k: float(rng.normal()) for k in WEATHER if rng.random() < 0.8}
        client.hset(f"w:{w}", mapping=fields or {"_": 0})
    for p in range(5):
        client.hset(f"p:{p}", mapping={"seats": int(rng.integers(50, 300))} if p else {"_": 0})
    forms = [str, lambda v: f"{v}.0", lambda v: f"+{v}", lambda v: f"00{v}", lambda v: f"{v / 10:g}e1"]
    for i in range(n):
        fields = {k: float(rng.normal()) for k in ("a", "b") if rng.random() < 0.7}
        if rng.random() < 0.9:
            fields["w_id"] = forms[int(rng.integers(len(forms)))](int(rng.integers(12)))
        if rng.random() < 0.6:
            fields["p_id"] = str(int(rng.integers(5)))
        client.hset(f"f:{i}", mapping=fields or {"_": 0})


def test_joined_tables_in_one_round_trip_equal_table_by_table(client):
    rng = np.random.default_rng(0)
    write_joined(client, rng, 60)
    spy = Counting(client)
    fast = joined(spy, list(range(60)))
    reference = table_by_table(joined(client, list(range(60))))
    assert fast.one_redis
    for _ in range(30):  # random rounds: several features and tables, rows repeated
        requests = [
            (int(f), rng.choice(60, size=int(rng.integers(1, 12))))
            for f in rng.choice(len(FEATURES), size=int(rng.integers(1, 6)), replace=False)
        ]
        before = spy.calls
        got = fast.fetch(requests)
        want = reference.fetch(requests)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
        # One round trip, and one more only when a link the round follows is "1e1"-like text.
        assert spy.calls - before in (1, 2)
    # Plain links: exactly one round trip for the whole round.
    client.hset("f:0", mapping={"a": 1, "w_id": "3", "p_id": "2"})
    before = spy.calls
    fast.fetch([(0, np.array([0])), (2, np.array([0])), (4, np.array([0, 0]))])
    assert spy.calls == before + 1


def test_joined_errors_are_the_table_by_table_errors(client):
    client.hset("f:0", mapping={"a": 1, "w_id": "2.5"})
    client.hset("f:1", mapping={"a": 1, "w_id": "9"})
    client.hset("f:2", mapping={"a": 1, "w_id": "1"})
    client.set("w:1", "a string, not a hash")
    client.hset("f:3", mapping={"a": 1, "w_id": "12345678901234567"})  # 17 digits: Python follows it
    client.hset("w:12345678901234568", mapping={"temp": 4})  # the float the link reads as
    client.hset("f:4", mapping={"w_id": "5.0"})
    client.hset("w:5", mapping={"temp": "hot"})
    keys = [0, 1, 2, 3, "ghost", 4]
    for provider in (joined(client, keys), table_by_table(joined(client, keys))):
        with pytest.raises(ProviderError, match="a link column holds 2.5"):
            provider.fetch([(2, np.array([0]))])
        with pytest.raises(MissingKeyError, match="no record with key in \\[9\\].*'w:<key>'"):
            provider.fetch([(2, np.array([1]))])
        with pytest.raises(ProviderError, match="refused to read 'w:1'.*WRONGTYPE"):
            provider.fetch([(2, np.array([2]))])
        with pytest.raises(MissingKeyError, match="\\['ghost'\\].*'f:<key>'"):
            provider.fetch([(0, np.array([4])), (2, np.array([4]))])
        np.testing.assert_array_equal(provider.fetch([(2, np.array([3]))])[0], [4.0])
        with pytest.raises(ProviderError, match="field 'temp' of 'w:5' holds 'hot', not a number"):
            provider.fetch([(2, np.array([5]))])


def test_a_server_gone_is_a_connection_error(client):
    provider = redis_provider(client, [1], prefix="h:", columns=["a"])
    provider.client = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=2)
    with pytest.raises(ConnectionError, match="Redis at .* failed: ConnectionError"):
        provider.fetch([(0, np.array([0]))])
