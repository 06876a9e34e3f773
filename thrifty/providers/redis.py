"""A feature provider reading Redis hashes, one per row: one round trip per round of lazy evaluation."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.providers.base import (
    TEXT,
    SyncKeyedProvider,
    as_keys,
    feature_columns,
    keys_of,
    missing_extra,
    missing_keys,
    plain_key,
    store_key,
)
from thrifty.providers.redis_async import AsyncLink, async_link
from thrifty.providers.redis_round import HashReads, RoundAnswer, read_round, read_round_async
from thrifty.runtime.lazy import Requests

# redis-py is the optional extra thrifty[redis]: imported where a command is sent, so that
# thrifty.providers imports without it and redis_provider() names the extra to install.


class RedisProvider(SyncKeyedProvider):
    """Features read from Redis hashes, one per example, for the rows a round needs.

    Built by :func:`redis_provider`; see there. ``fetch(requests)`` answers a round of lazy
    evaluation; calling the provider as ``provider(feature_ids, row_ids)`` also works.
    """

    def __init__(
        self,
        client: Any,
        where: str,
        prefix: str,
        fields: list[str],
        keys: np.ndarray,
        max_keys: int,
        link: AsyncLink | None = None,
    ) -> None:
        self.client, self.where, self.prefix, self.fields = client, where, prefix, fields
        self.keys = keys
        self.max_keys = max_keys
        # The event loop's connection to the same server (None: rounds awaited in a thread).
        # Shared by the copies with_keys makes, so one connection serves every round.
        self.link = link

    def fetch(self, requests: Requests) -> list[np.ndarray]:
        """Values of each requested (feature, rows) pair: one round trip for the whole round.

        One ``EVALSHA`` of the round script (:mod:`thrifty.providers.redis_round`): for each
        row's hash, ``EXISTS`` (``HMGET`` answers a missing hash as missing fields) and one
        ``HMGET`` of the fields the round needs from it, run server-side; a round of more than
        ``max_keys`` hashes is split into several calls.
        """
        bounds, reads = self._reads(requests)
        values, found = self.read(reads)
        if found.lost:
            raise missing_keys(found.lost, "key", self._described, TEXT)
        return [values[bounds[i] : bounds[i + 1]] for i in range(len(requests))]

    async def fetch_async(self, requests: Requests) -> list[np.ndarray]:
        """:meth:`fetch` awaited on the event loop (one round trip, no thread): what the
        server's batcher calls. A client the event loop's connection does not serve (TLS)
        runs :meth:`fetch` in a worker thread."""
        if self.link is None:
            return await asyncio.to_thread(self.fetch, requests)
        bounds, reads = self._reads(requests)
        values, found = await self.read_async(reads)
        if found.lost:
            raise missing_keys(found.lost, "key", self._described, TEXT)
        return [values[bounds[i] : bounds[i + 1]] for i in range(len(requests))]

    def _reads(self, requests: Requests) -> tuple[np.ndarray, HashReads]:
        """The hashes and fields of a round, and where each pair's values start."""
        bounds = np.cumsum([0, *(len(rows) for _, rows in requests)])
        reads = HashReads(int(bounds[-1]))
        impossible: list[Any] = []
        for i, (f, rows) in enumerate(requests):
            field = self.fields[int(f)]
            for j, k in enumerate(keys_of(self.keys, rows), start=int(bounds[i])):
                stored = store_key(k, TEXT)
                if stored is None:
                    impossible.append(plain_key(k))
                    continue
                reads.add(self.prefix + stored, plain_key(k), field, j)
        if impossible:
            raise missing_keys(impossible, "key", self._described, TEXT)
        return bounds, reads

    def read(self, reads: HashReads) -> tuple[np.ndarray, RoundAnswer]:
        """The values of ``reads`` (NaN where missing) and what was missing, in calls of at most
        ``max_keys`` hashes."""
        values, found = np.full(reads.n_slots, np.nan), RoundAnswer()
        names = list(reads.hashes)
        for lo in range(0, len(names), self.max_keys):
            found.add(read_round(self.client, self.where, reads, names[lo : lo + self.max_keys], values))
        return values, found

    async def read_async(self, reads: HashReads) -> tuple[np.ndarray, RoundAnswer]:
        """:meth:`read` on the event loop's connection."""
        assert self.link is not None
        values, found = np.full(reads.n_slots, np.nan), RoundAnswer()
        names = list(reads.hashes)
        for lo in range(0, len(names), self.max_keys):
            chunk = names[lo : lo + self.max_keys]
            found.add(await read_round_async(self.link, self.where, reads, chunk, values))
        return values, found

    @property
    def _described(self) -> str:
        return f"in {self.where} (hashes {self.prefix + '<key>'!r})"


def redis_provider(
    client_or_url: Any,
    keys: Any = (),
    *,
    prefix: str = "",
    columns: Sequence[str] | None = None,
    model: Any = None,
    timeout: float = 10.0,
    max_keys: int = 10_000,
) -> RedisProvider:
    """A feature provider reading features from Redis hashes, only where a tree needs them.

    Row ``i``'s features are the hash ``{prefix}{keys[i]}``, a field per feature (named as the
    model's features, or ``columns``). Each round of lazy evaluation is answered by one
    round trip (``redis_round``): one script call that reads, for each hash the round needs,
    the fields its rows are blocked on.

    Parameters
    ----------
    client_or_url : redis.Redis or str
        A client, or a URL (``"redis://127.0.0.1:6379/0"``, ``"unix:///run/redis.sock"``).
    keys : sequence
        ``keys[i]`` is the key of row ``i``: a string, or an integer (written in decimal, so
        ``1000`` and ``"1000"`` name the same hash).
    prefix : str, default=""
        Prepended to each key to name its hash (``"patient:"`` reads ``patient:1000``).
    columns : sequence of str, optional
        The hash's field of each model feature, in the model's feature order (default: the
        model's feature names, given ``model``).
    model : Plan, Forest or fitted model, optional
        Supplies the feature names when ``columns`` is not given.
    timeout : float, default=10
        Seconds allowed to connect and for one round trip's answer (clients built from a URL).
    max_keys : int, default=10000
        Most hashes read by one round trip (a round needing more makes several).

    Returns
    -------
    RedisProvider
        For ``thrifty.evaluate(plan, provider, costs, n_rows=len(keys))`` or ``evaluate_async``.
        A field the hash lacks is a missing value (NaN). Categorical features are stored as the
        model's category codes.

    Raises
    ------
    InputError
        When a key is no key at all (None, a boolean, NaN, a list) or the URL is not Redis's.
    ConnectionError
        When the server cannot be reached (checked here, with ``PING``).

    Notes
    -----
    A key with no hash, or that can name none (a fraction, bytes), raises
    :class:`~thrifty.exceptions.MissingKeyError` naming it when a tree first needs that row's
    features; a stored value that is not a decimal number (or ``nan``/``inf``), or a key that
    holds another type than a hash, raises :class:`~thrifty.exceptions.ProviderError`.
    """
    try:
        import redis
    except ImportError:
        raise missing_extra("redis", "redis") from None
    if not timeout > 0:
        raise InputError(f"timeout must be > 0 seconds, got {timeout}")
    if int(max_keys) < 1:
        raise InputError(f"max_keys must be >= 1, got {max_keys}")
    client = client_or_url
    if isinstance(client_or_url, str):
        try:
            client = redis.Redis.from_url(
                client_or_url, socket_timeout=timeout, socket_connect_timeout=timeout
            )
        except ValueError as exc:
            raise InputError(
                f"cannot use the Redis URL {client_or_url!r}: {exc}; give a URL such as redis://127.0.0.1:6379/0"
            ) from None
    where = f"Redis at {_address(client)}"
    try:
        client.ping()
    except redis.exceptions.RedisError as exc:
        raise ConnectionError(f"{where} cannot be reached: {type(exc).__name__}: {exc}") from None
    return RedisProvider(
        client,
        where,
        str(prefix),
        feature_columns(columns, model),
        as_keys(keys),
        int(max_keys),
        async_link(client),
    )


def same_server(a: Any, b: Any) -> bool:
    """Two clients connect to the same server and database, as the same user."""

    def where(client: Any) -> tuple[Any, ...]:
        options = client.connection_pool.connection_kwargs
        return tuple(options.get(k) for k in ("path", "host", "port", "db", "username", "password"))

    return a is b or where(a) == where(b)


def _address(client: Any) -> str:
    """Where the client connects (host:port/db or the socket), for messages."""
    options = client.connection_pool.connection_kwargs
    if options.get("path"):
        return str(options["path"])
    return f"{options.get('host', 'localhost')}:{options.get('port', 6379)}/{options.get('db', 0)}"
