"""Feature providers for lazy evaluation: in-memory arrays, SQL tables, Redis hashes, HTTP services,
and tables joined by keys."""

from typing import TYPE_CHECKING

from thrifty._lazy import attach

if TYPE_CHECKING:
    from thrifty.providers.http import HTTPProvider, http_provider
    from thrifty.providers.joined import JoinedProvider, joined_provider
    from thrifty.providers.redis import RedisProvider, redis_provider
    from thrifty.providers.sql import SQLProvider, sql_provider
    from thrifty.runtime.lazy import RoundProvider, array_provider

__all__ = [
    "HTTPProvider",
    "JoinedProvider",
    "RedisProvider",
    "RoundProvider",
    "SQLProvider",
    "array_provider",
    "http_provider",
    "joined_provider",
    "redis_provider",
    "sql_provider",
]

__getattr__, __dir__ = attach(__name__, __file__)
