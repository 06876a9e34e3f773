"""A feature provider reading Redis hashes, one per row: one pipeline per round of lazy evaluation."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from thrifty.exceptions import InputError, ProviderError
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
from thrifty.runtime.lazy import Requests

# redis-py is the optional extra thrifty[redis]: imported where a command is sent, so that
# thrifty.providers imports without it and redis_provider() names the extra to install.

# A stored value as Redis holds it (a string): a decimal number, or nan/inf as Python writes them.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?:nan|inf|infinity)", re.I)


class RedisProvider(SyncKeyedProvider):
    """Features read from Redis hashes, one per example, for the rows a round needs.

    Built by :func:`redis_provider`; see there. ``fetch(requests)`` answers a round of lazy
    evaluation; calling the provider as ``provider(feature_ids, row_ids)`` also works.
    """

    def __init__(
        self, client: Any, where: str, prefix: str, fields: list[str], keys: np.ndarray, max_keys: int
    ) -> None:
        self.client, self.where, self.prefix, self.fields = client, where, prefix, fields
        self.keys = keys
        self.max_keys = max_keys

    def fetch(self, requests: Requests) -> list[np.ndarray]:
        """Values of each requested (feature, rows) pair: one pipeline for the whole round.

        The pipeline holds, for each row's hash, one ``HMGET`` of the fields the round needs
        from it and one ``EXISTS`` (``HMGET`` answers a missing hash as missing fields), so a
        round is one round trip however many features it requests; a round of more than
        ``max_keys`` hashes is split into several pipelines.
        """
        wanted: dict[str, dict[str, list[tuple[int, int]]]] = {}  # hash -> field -> (request, position)
        given: dict[str, Any] = {}  # the key each hash name came from, for messages
        impossible: list[Any] = []
        for i, (f, rows) in enumerate(requests):
            field = self.fields[int(f)]
            for j, k in enumerate(keys_of(self.keys, rows)):
                stored = store_key(k, TEXT)
                if stored is None:
                    impossible.append(plain_key(k))
                    continue
                name = self.prefix + stored
                wanted.setdefault(name, {}).setdefault(field, []).append((i, j))
                given.setdefault(name, plain_key(k))
        if impossible:
            raise missing_keys(impossible, "key", self._described, TEXT)
        out = [np.full(len(rows), np.nan) for _, rows in requests]
        lost: list[Any] = []
        names = list(wanted)
        for lo in range(0, len(names), self.max_keys):
            batch = names[lo : lo + self.max_keys]
            answers = self._pipeline(batch, wanted)
            for name, values, exists in zip(batch, answers[0::2], answers[1::2]):
                if not exists:
                    lost.append(given[name])
                    continue
                for (field, slots), raw in zip(wanted[name].items(), values):
                    value = _number(raw, name, field)
                    for i, j in slots:
                        out[i][j] = value
        if lost:
            raise missing_keys(lost, "key", self._described, TEXT)
        return out

    @property
    def _described(self) -> str:
        return f"in {self.where} (hashes {self.prefix + '<key>'!r})"

    def _pipeline(self, names: list[str], wanted: dict[str, dict[str, list[tuple[int, int]]]]) -> list[Any]:
        """``HMGET`` and ``EXISTS`` of each hash, in one round trip."""
        import redis

        pipe = self.client.pipeline(transaction=False)
        for name in names:
            pipe.hmget(name, list(wanted[name]))
            pipe.exists(name)
        try:
            answers = pipe.execute(raise_on_error=False)
        except redis.exceptions.TimeoutError:
            raise TimeoutError(f"{self.where} did not answer in time") from None
        except redis.exceptions.RedisError as exc:
            raise ConnectionError(f"{self.where} failed: {type(exc).__name__}: {exc}") from None
        for at, answer in enumerate(answers):
            if isinstance(answer, Exception):
                raise ProviderError(
                    f"{self.where} refused to read {names[at // 2]!r}: {answer}; store each row's "
                    "features as one hash, a field per feature"
                )
        return list(answers)


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
    pipeline: for each hash a round needs, one ``HMGET`` of the fields its rows are blocked on.

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
        Seconds allowed to connect and for one pipeline's answer (clients built from a URL).
    max_keys : int, default=10000
        Most hashes read by one pipeline.

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
        client, where, str(prefix), feature_columns(columns, model), as_keys(keys), int(max_keys)
    )


def _address(client: Any) -> str:
    """Where the client connects (host:port/db or the socket), for messages."""
    options = client.connection_pool.connection_kwargs
    if options.get("path"):
        return str(options["path"])
    return f"{options.get('host', 'localhost')}:{options.get('port', 6379)}/{options.get('db', 0)}"


def _number(raw: Any, name: str, field: str) -> float:
    """A stored value as a float: NaN for a missing field; ProviderError for anything else than
    a decimal number (Python's float() would also read "1_000" and surrounding spaces)."""
    if raw is None:
        return math.nan
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    if not _NUMBER.fullmatch(text):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ProviderError(
            f"field {field!r} of {name!r} holds {shown!r}, not a number; store numbers (category "
            "codes for categorical features), and leave a missing value's field out"
        )
    return float(text)
