"""The event loop's Redis connection (thrifty.providers.redis_async): its RESP codec against a
reference writer, and its rounds against redis-py's on a real redis-server: same values, same
errors, a connection that recovers from a cancelled or failed command."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thrifty.exceptions import MissingKeyError, ProviderError
from thrifty.providers import joined_provider, redis_provider
from thrifty.providers.redis_async import AsyncLink, RespError, _Incomplete, async_link, parse_reply

redis = pytest.importorskip("redis", reason="the Redis provider's tests need the extra thrifty[redis]")


def resp(value) -> bytes:
    """A reference RESP2 writer (integers, bulk strings, nil, arrays, errors, simple strings)."""
    if value is None:
        return b"$-1\r\n"
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, bytes):
        return b"$%d\r\n%b\r\n" % (len(value), value)
    if isinstance(value, RespError):
        return b"-%b\r\n" % str(value).encode()
    if isinstance(value, tuple):  # a simple string
        return b"+%b\r\n" % value[0]
    return b"*%d\r\n" % len(value) + b"".join(resp(v) for v in value)


def plain(value):
    """A parsed reply comparable with ==."""
    if isinstance(value, RespError):
        return ("error", str(value))
    if isinstance(value, tuple):  # a simple string, as written: parsed as its bytes
        return value[0]
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


line = st.binary(max_size=12).filter(lambda b: b"\r" not in b and b"\n" not in b)
scalars = st.one_of(
    st.none(),
    st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=30),  # bulk strings may hold CR LF
    line.map(lambda b: (b,)),
    st.text(alphabet="ABCDEFGHIJ xyz", max_size=20).map(RespError),
)
replies = st.recursive(scalars, lambda inner: st.lists(inner, max_size=5), max_leaves=20)


@given(replies)
@settings(max_examples=300, deadline=None)
def test_a_reply_parses_as_written_and_is_incomplete_until_its_last_byte(value):
    raw = resp(value)
    got, end = parse_reply(raw + b"+NEXT\r\n")
    assert end == len(raw)
    assert plain(got) == plain(value)
    for cut in range(len(raw)):
        with pytest.raises(_Incomplete):
            parse_reply(raw[:cut])


def test_only_plain_tcp_and_unix_clients_get_a_link():
    assert isinstance(async_link(redis.Redis(host="127.0.0.1", port=1)), AsyncLink)
    assert isinstance(async_link(redis.Redis(unix_socket_path="/nowhere.sock")), AsyncLink)
    assert async_link(redis.Redis(host="127.0.0.1", port=1, ssl=True)) is None
    assert async_link(object()) is None


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    c.flushdb()
    return c


def test_rounds_on_the_loop_equal_redis_pys_with_the_same_errors(client):
    rng = np.random.default_rng(3)
    for i in range(40):
        fields = {k: float(rng.normal()) for k in ("a", "b") if rng.random() < 0.7}
        if rng.random() < 0.8:
            fields["w_id"] = str(int(rng.integers(6)))
        client.hset(f"f:{i}", mapping=fields or {"_": 0})
    for w in range(6):
        client.hset(f"w:{w}", mapping={"temp": float(rng.normal())} if w else {"_": 0})
    one = redis_provider(client, list(range(40)), prefix="f:", columns=["a", "b"])
    both = joined_provider(
        redis_provider(client, prefix="f:", columns=["a", "b", "w_id"]),
        [("w_id", redis_provider(client, prefix="w:", columns=["temp"]))],
        keys=list(range(40)),
        features=["a", "b", "temp"],
    )
    assert one.link is not None and both.one_redis

    async def check() -> None:
        for provider, n_features in ((one, 2), (both, 3)):
            for _ in range(20):
                requests = [
                    (int(f), rng.choice(40, size=int(rng.integers(1, 10))))
                    for f in rng.choice(n_features, size=int(rng.integers(1, n_features + 1)), replace=False)
                ]
                got = await provider.fetch_async(requests)
                for g, w in zip(got, provider.fetch(requests), strict=True):
                    np.testing.assert_array_equal(g, w)
        client.hset("f:90", mapping={"a": "hot"})
        client.set("f:91", "a string, not a hash")
        for keys, error, message in (
            (["ghost", 1], MissingKeyError, r"\['ghost'\]"),
            ([90], ProviderError, "field 'a' of 'f:90' holds 'hot', not a number"),
            ([91], ProviderError, "refused to read 'f:91'.*WRONGTYPE"),
        ):
            for provider in (one, both):
                with pytest.raises(error, match=message):
                    await provider.with_keys(keys).fetch_async([(0, np.arange(len(keys)))])
        # The script flushed: loaded again, once.
        client.script_flush()
        np.testing.assert_array_equal(
            (await one.fetch_async([(0, np.array([0, 1]))]))[0], one.fetch([(0, np.array([0, 1]))])[0]
        )

    asyncio.run(check())
    asyncio.run(check())  # another event loop: a connection of its own


def test_a_cancelled_round_closes_its_connection_and_the_next_opens_another(client):
    client.hset("f:1", mapping={"a": 7})
    provider = redis_provider(client, [1], prefix="f:", columns=["a"])

    async def check() -> None:
        assert (await provider.fetch_async([(0, np.array([0]))]))[0][0] == 7
        first = provider.link._proto
        # BLPOP holds the connection's reply back: the deadline cancels it mid-command.
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.2):
                await provider.link.call("BLPOP", "nothing", 5)
        assert provider.link._proto is None and first.transport.is_closing()
        assert (await provider.fetch_async([(0, np.array([0]))]))[0][0] == 7

    asyncio.run(check())


def test_a_database_other_than_0_is_selected_and_a_server_gone_is_a_connection_error(redis_url):
    other = redis.Redis.from_url(redis_url[:-1] + "3")
    other.flushdb()
    other.hset("f:1", mapping={"a": 5})
    provider = redis_provider(other, [1], prefix="f:", columns=["a"])
    assert asyncio.run(provider.fetch_async([(0, np.array([0]))]))[0][0] == 5
    provider.link = async_link(redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=2))
    with pytest.raises(ConnectionError, match="Redis at .* failed: ConnectionRefusedError"):
        asyncio.run(provider.fetch_async([(0, np.array([0]))]))
