"""redis_provider against a real redis-server on 127.0.0.1: same results as dense, exact reads."""

from __future__ import annotations

import numpy as np
import pytest

from tests._helpers.stores import NAMES, n_rounds, write_hashes
from thrifty import evaluate
from thrifty.exceptions import InputError, MissingKeyError, ProviderError
from thrifty.providers import redis_provider

redis = pytest.importorskip("redis", reason="the Redis provider's tests need the extra thrifty[redis]")


class Spy:
    """A client that counts round trips (script calls that ran) and logs the (hash, field) pairs
    each reads; the script's arguments are, per hash, its field count, the fields and its lookups."""

    def __init__(self, client):
        self.client, self.calls, self.read = client, 0, []
        self.connection_pool = client.connection_pool

    def ping(self):
        return self.client.ping()

    def script_load(self, script):
        return self.client.script_load(script)

    def evalsha(self, sha, n_keys, *args):
        answer = self.client.evalsha(sha, n_keys, *args)  # the first call may load the script
        self.calls += 1
        keys, rest = args[:n_keys], list(args[n_keys:])
        for key in keys:
            n = rest.pop(0)
            self.read.extend((key, f) for f in rest[:n])
            del rest[:n]
            assert rest.pop(0) == 0  # no lookups: one table
        assert not rest
        return answer


def test_lazy_redis_equals_dense_one_round_trip_per_round(small_model, redis_url):
    plan, X, costs = small_model
    keys = list(range(1000, 1000 + len(X)))
    write_hashes(redis_url, X, keys, NAMES)
    spy = Spy(redis.Redis.from_url(redis_url))
    # String keys name the same hashes as the integers they were written with.
    provider = redis_provider(spy, [str(k) for k in keys], prefix="patient:", model=plan)
    lazy = evaluate(plan, provider, costs, n_rows=len(X))
    dense = evaluate(plan, X, costs)
    np.testing.assert_array_equal(lazy.raw, dense.raw)
    np.testing.assert_array_equal(lazy.cost.total, dense.cost.total)
    np.testing.assert_array_equal(lazy.cost.acquired, dense.cost.acquired)
    acquired = {(f"patient:{keys[r]}", NAMES[f]) for r, f in zip(*np.nonzero(dense.cost.acquired))}
    assert len(spy.read) == len(set(spy.read)) and set(spy.read) == acquired
    assert len(acquired) < 0.8 * X.size
    assert spy.calls == n_rounds(plan, X, costs)


def test_integer_string_and_float_keys_and_split_round_trips(small_model, redis_url):
    plan, X, _ = small_model
    keys = list(range(20))
    write_hashes(redis_url, X[:20], keys, NAMES, prefix="p:")
    spy = Spy(redis.Redis.from_url(redis_url))
    mixed = [np.int64(0), "1", 2.0, np.float32(3), *keys[4:]]
    provider = redis_provider(spy, mixed, prefix="p:", columns=NAMES, max_keys=4)
    values = provider.fetch([(0, np.arange(10)), (3, np.array([9, 0, 0]))])
    np.testing.assert_array_equal(values[0], X[:10, 0])
    np.testing.assert_array_equal(values[1], X[[9, 0, 0], 3])
    assert spy.calls == 3  # 10 hashes, 4 per call
    np.testing.assert_array_equal(provider(np.array([1, 2]), np.array([4, 5])), X[4:6, 1:3])


@pytest.mark.parametrize(
    "keys, says",
    [
        ([True], "the boolean True"),  # True would read hash 1
        ([[1, 2], [3, 4]], "shape \\(2, 2\\)"),  # nested lists are not flattened
        ([[1], [2, 3]], "a list"),
        ([float("nan")], "nan"),
        ([None], "None"),
        ("1000", "the single key"),
    ],
)
def test_no_keys_are_refused(redis_url, keys, says):
    with pytest.raises(InputError, match=says):
        redis_provider(redis_url, keys, columns=NAMES)


def test_missing_keys_rows_and_values_are_errors(small_model, redis_url):
    plan, X, costs = small_model
    keys = list(range(10))
    write_hashes(redis_url, X[:10], keys, NAMES, prefix="p:")
    client = redis.Redis.from_url(redis_url)
    provider = redis_provider(client, keys, prefix="p:", columns=NAMES)
    with pytest.raises(
        MissingKeyError, match="no record with key in \\['ghost'\\] in Redis at 127.0.0.1"
    ) as missing:
        provider.with_keys([0, "ghost", 1, "ghost"]).fetch([(0, np.arange(4))])
    assert missing.value.keys == ["ghost"] and isinstance(missing.value, LookupError)
    # A fraction names no hash (2.5 is not the key 2, and "2.5" would be a guess).
    with pytest.raises(MissingKeyError, match="2.5") as missing:
        provider.with_keys([0, 2.5]).fetch([(0, np.array([0, 1]))])
    assert missing.value.keys == [2.5]
    # The evaluation has more rows than the provider has keys: refused before any fetch, and a
    # row past the keys is refused by the provider itself.
    with pytest.raises(InputError, match=f"n_rows={len(X)}, but the provider has keys for 10 rows"):
        evaluate(plan, provider, costs, n_rows=len(X))
    with pytest.raises(InputError, match="row 10 was asked for, but the provider has keys for 10 rows"):
        provider.fetch([(0, np.array([10]))])
    client.hset("p:3", "age", "eleven")
    with pytest.raises(ProviderError, match="field 'age' of 'p:3' holds 'eleven', not a number"):
        provider.fetch([(0, np.array([2, 3]))])
    client.hset("p:4", "age", "")
    with pytest.raises(ProviderError, match="holds '', not a number"):
        provider.fetch([(0, np.array([4]))])
    client.set("p:5", "a string, not a hash")
    with pytest.raises(ProviderError, match="refused to read 'p:5'.*WRONGTYPE"):
        provider.fetch([(0, np.array([5]))])


def test_unreachable_server_and_bad_url():
    pytest.importorskip("redis")
    with pytest.raises(ConnectionError, match="Redis at 127.0.0.1:1/0 cannot be reached"):
        redis_provider("redis://127.0.0.1:1/0", [], columns=NAMES, timeout=2)
    with pytest.raises(InputError, match="cannot use the Redis URL"):
        redis_provider("http://127.0.0.1/", [], columns=NAMES)
