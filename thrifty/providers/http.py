"""An async feature provider asking an HTTP feature service, one request per feature of a round."""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from thrifty.exceptions import InputError, ProviderError
from thrifty.providers.base import KeyedProvider, as_keys, feature_columns, keys_of, missing_extra, plain_key
from thrifty.runtime.lazy import Requests

# httpx is the optional extra thrifty[serve]: imported where a request is made, so that
# thrifty.providers imports without it and http_provider() names the extra to install.


class HTTPProvider(KeyedProvider):
    """Features served over HTTP: ``POST url`` with ``{"feature": name, "keys": [...]}``.

    The service answers ``{"values": [...]}``, one number (or ``null`` for missing) per key, in
    the order asked; any other answer (a boolean, a string, a list, too few or too many values)
    raises :class:`~thrifty.exceptions.ProviderError` naming the service and what it sent. Built
    by :func:`http_provider`; ``fetch`` is a coroutine, for ``thrifty.evaluate_async``.
    """

    def __init__(self, url: str, names: list[str], keys: np.ndarray, timeout: float, client: Any) -> None:
        self.url, self.names, self.keys = url, names, keys
        self.timeout, self.client = timeout, client

    async def fetch(self, requests: Requests) -> list[np.ndarray]:
        """Values of each requested (feature, rows) pair, the features fetched concurrently."""
        import httpx

        if self.client is not None:
            return list(await asyncio.gather(*(self._one(self.client, f, r) for f, r in requests)))
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            return list(await asyncio.gather(*(self._one(client, f, r) for f, r in requests)))

    async def _one(self, client: Any, feature: int, rows: np.ndarray) -> np.ndarray:
        import httpx

        name = self.names[int(feature)]
        keys = [plain_key(k) for k in keys_of(self.keys, rows)]
        try:
            response = await client.post(self.url, json={"feature": name, "keys": keys}, timeout=self.timeout)
        except httpx.TimeoutException:
            raise TimeoutError(
                f"the feature service {self.url} did not answer for feature {name!r} "
                f"within {self.timeout:g} s"
            ) from None
        except httpx.HTTPError as exc:
            raise ConnectionError(
                f"the feature service {self.url} failed for feature {name!r}: {type(exc).__name__}: {exc}"
            ) from None
        if response.status_code != 200:
            reason = " ".join(response.text.split())[:200]
            raise ConnectionError(
                f"the feature service {self.url} answered {response.status_code} "
                f"for feature {name!r}: {reason}"
            )
        return _values(response, self.url, name, len(keys))


def _values(response: Any, url: str, name: str, n: int) -> np.ndarray:
    """The service's answer as float64 values: ProviderError naming the service and what it
    sent, unless it is ``{"values": [...]}`` with one number or null per key."""
    try:
        body = response.json()
    except (ValueError, RecursionError):
        raise ProviderError(
            f"the feature service {url} answered {_sample(response.text)} for feature {name!r}, "
            'not JSON; it must answer {"values": [...]}'
        ) from None
    values = body.get("values") if isinstance(body, dict) else None
    if not isinstance(values, list) or len(values) != n:
        if not isinstance(body, dict):
            got = _what(body)
        elif "values" not in body:
            got = 'an object without "values"'
        else:
            got = f"{len(values)} values" if isinstance(values, list) else _what(values)
        raise ProviderError(
            f"the feature service {url} answered {got} for feature {name!r} on {n} keys; it must "
            'answer {"values": [...]} with one number or null per key, in the order asked'
        )
    for i, v in enumerate(values):
        # A boolean is an int to Python, and float("11") parses: both would pass as numbers.
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
            raise ProviderError(
                f"the feature service {url} answered {_what(v)} as value {i} of feature "
                f"{name!r}; values must be numbers, or null for missing"
            )
    try:
        return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    except OverflowError:
        raise ProviderError(
            f"the feature service {url} answered an integer too large for a float for feature {name!r}"
        ) from None


def _what(value: Any) -> str:
    """A JSON value as a message shows it: containers by kind (they may be deep), the rest as sent."""
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "an object"
    return _sample(json.dumps(value))


def _sample(text: str) -> str:
    text = " ".join(str(text).split())
    return repr(text if len(text) <= 60 else text[:57] + "...")


def http_provider(
    url: str,
    keys: Any = (),
    *,
    columns: Sequence[str] | None = None,
    model: Any = None,
    timeout: float = 10.0,
    client: Any = None,
) -> HTTPProvider:
    """An async feature provider for a feature service over HTTP.

    Each (feature, rows) request of a round is one ``POST url`` with JSON
    ``{"feature": name, "keys": [...]}``, answered by ``{"values": [...]}`` (numbers, ``null``
    for missing, category codes for categorical features). The requests of a round are sent
    concurrently.

    Parameters
    ----------
    url : str
        The service's endpoint.
    keys : sequence
        ``keys[i]`` identifies row ``i`` for the service.
    columns : sequence of str, optional
        The service's name of each model feature, in model order (default: the model's names).
    model : Plan, Forest or fitted model, optional
        Supplies the feature names when ``columns`` is not given.
    timeout : float, default=10
        Seconds allowed for one request.
    client : httpx.AsyncClient, optional
        A client to reuse (connection pooling in a server); default: one per round.

    Returns
    -------
    HTTPProvider
    """
    try:
        import httpx  # noqa: F401
    except ImportError:
        raise missing_extra("httpx", "serve") from None
    if not timeout > 0:
        raise InputError(f"timeout must be > 0 seconds, got {timeout}")
    return HTTPProvider(str(url), feature_columns(columns, model), as_keys(keys), float(timeout), client)
