"""A provider over several tables joined by keys: a record per example in one table, other
tables looked up through keys that record holds, only for the rows whose trees need them.

nycflights13 is the example: a flight's schedule is in ``flights``; its weather in ``weather``,
one record per origin and hour; its aircraft in ``planes``, one record per tail number. The
flights table holds, per flight, the integer key of its weather record and of its plane (the
*links*). A round asking weather for some rows reads those rows' link from ``flights`` (with the
flights features of that round, in the same query), then the weather fields from ``weather``
for the linked records only: a weather or aircraft lookup is paid, and made, only for a row
whose evaluation asks for one of its features.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any, Self

import numpy as np

from thrifty.exceptions import InputError, ProviderError
from thrifty.providers.base import (
    TEXT,
    SyncKeyedProvider,
    as_keys,
    keys_of,
    missing_keys,
    plain_key,
    store_key,
)
from thrifty.providers.redis import RedisProvider, same_server
from thrifty.providers.redis_round import HashReads, RoundAnswer
from thrifty.runtime.lazy import Requests
from thrifty.runtime.plans import as_plan


class JoinedProvider(SyncKeyedProvider):
    """Features of one root table and of tables linked to it by keys it holds.

    Built by :func:`joined_provider`; see there.
    """

    def __init__(
        self,
        root: Any,
        lookups: list[tuple[int, Any]],
        source: list[tuple[int, int]],
        keys: np.ndarray,
    ) -> None:
        self.root, self.lookups, self.source = root, lookups, source
        self.keys = keys
        # Every table in one Redis: the round script follows the links server-side.
        self.one_redis = _one_redis(root, [p for _, p in lookups])

    def with_keys(self, keys: Any) -> Self:
        other = super().with_keys(keys)
        other.root = self.root.with_keys(other.keys)
        return other

    def fetch(self, requests: Requests) -> list[np.ndarray]:
        """Values of each requested (feature, rows) pair: one query to the root table for its
        features and the links of the rows needing a lookup, then one query per linked table
        that some row needs (its records for those rows only). Tables in one Redis are read
        in one round trip (:meth:`_fetch_redis`)."""
        if self.one_redis:
            return self._fetch_redis(requests)
        out = [np.full(len(rows), np.nan) for _, rows in requests]
        root_asks: Requests = []
        root_slots: list[int] = []
        needs: dict[int, list[tuple[int, int, np.ndarray]]] = {}  # table -> (slot, column, rows)
        for slot, (f, rows) in enumerate(requests):
            rows = np.asarray(rows, dtype=np.int64)
            keys_of(self.keys, rows)  # rows beyond the keys are refused here, by name
            table, column = self.source[int(f)]
            if table == 0:
                root_asks.append((column, rows))
                root_slots.append(slot)
            else:
                needs.setdefault(table, []).append((slot, column, rows))
        link_rows = {t: np.unique(np.concatenate([r for _, _, r in asks])) for t, asks in needs.items()}
        for t, rows in link_rows.items():
            root_asks.append((self.lookups[t - 1][0], rows))
        answers = self.root.fetch(root_asks) if root_asks else []
        for slot, values in zip(root_slots, answers):
            out[slot] = values
        for (t, rows), links in zip(link_rows.items(), answers[len(root_slots) :]):
            self._look_up(t, rows, links, needs[t], out)
        return out

    async def fetch_async(self, requests: Requests) -> list[np.ndarray]:
        """:meth:`fetch` awaited: tables in one Redis served by the event loop's connection
        are read in one round trip on the loop (what the server's batcher calls); otherwise
        :meth:`fetch` runs in a worker thread."""
        if not self.one_redis or self.root.link is None:
            return await asyncio.to_thread(self.fetch, requests)
        bounds, reads = self._redis_reads(requests)
        values, found = await self.root.read_async(reads)
        self._check(reads, values, found)
        if found.unfollowed:  # links that are not plain integer text: rare, read as fetch does
            await asyncio.to_thread(self._follow, reads, values, found.unfollowed)
        return [values[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]

    def _fetch_redis(self, requests: Requests) -> list[np.ndarray]:
        """The round in one ``EVALSHA``: each row's root hash, and for each linked table the row
        needs, the record its link names (read server-side). Errors as the table-by-table
        round's: a root key with no hash, a link that is no integer key, a link naming no
        record."""
        bounds, reads = self._redis_reads(requests)
        values, found = self.root.read(reads)
        self._check(reads, values, found)
        if found.unfollowed:
            self._follow(reads, values, found.unfollowed)
        return [values[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]

    def _redis_reads(self, requests: Requests) -> tuple[np.ndarray, HashReads]:
        root: RedisProvider = self.root
        bounds = np.cumsum([0, *(len(rows) for _, rows in requests)])
        links = [(root.fields[column], table) for column, table in self.lookups]
        reads = HashReads(int(bounds[-1]), links)
        impossible: list[Any] = []
        for i, (f, rows) in enumerate(requests):
            table, column = self.source[int(f)]
            field = root.fields[column] if table == 0 else links[table - 1][1].fields[column]
            for j, k in enumerate(keys_of(self.keys, rows), start=int(bounds[i])):
                stored = store_key(k, TEXT)
                if stored is None:
                    impossible.append(plain_key(k))
                elif table == 0:
                    reads.add(root.prefix + stored, plain_key(k), field, j)
                else:
                    reads.add_linked(root.prefix + stored, plain_key(k), table - 1, field, j)
        if impossible:
            raise missing_keys(impossible, "key", root._described, TEXT)
        return bounds, reads

    def _check(self, reads: HashReads, values: np.ndarray, found: RoundAnswer) -> None:
        """Raise for a root key with no hash, a link that is no key, a link naming no record."""
        if found.lost:
            raise missing_keys(found.lost, "key", self.root._described, TEXT)
        for slot in reads.link_slots.values():
            if not np.isnan(values[slot]):
                _link_key(values[slot])  # a fraction or an infinity is no key: ProviderError
        for t, lost in found.lost_linked.items():
            raise missing_keys([_link_key(v) for v in lost], "key", reads.links[t][1]._described, TEXT)

    def _follow(self, reads: HashReads, values: np.ndarray, pairs: list[tuple[str, int]]) -> None:
        """Read the linked records of ``pairs`` (hash, table), whose links are not plain integer
        text, through the linked tables' providers, as the table-by-table round reads them: one
        more round trip per table."""
        for t in sorted({t for _, t in pairs}):
            names = [name for name, u in pairs if u == t]
            table = reads.links[t][1].with_keys([_link_key(values[reads.link_slots[(n, t)]]) for n in names])
            asks, slots = [], []
            for at, name in enumerate(names):
                for field, targets in reads.hashes[name][2][t].items():
                    asks.append((table.fields.index(field), np.array([at])))
                    slots.append(targets)
            for targets, got in zip(slots, table.fetch(asks)):
                values[targets] = got[0]

    def _look_up(
        self,
        t: int,
        rows: np.ndarray,
        links: np.ndarray,
        asks: list[tuple[int, int, np.ndarray]],
        out: list[np.ndarray],
    ) -> None:
        """Table ``t``'s values for the rows asking, through the links read for ``rows``; a row
        whose link is missing (NaN) has no record there: its values are missing."""
        linked = ~np.isnan(links)
        position = np.full(len(self.keys), -1, dtype=np.int64)
        position[rows[linked]] = np.arange(int(linked.sum()))
        if not linked.any():
            return
        table = self.lookups[t - 1][1].with_keys([_link_key(v) for v in links[linked]])
        pairs, slots = [], []
        for slot, column, asking in asks:
            at = position[asking]
            found = at >= 0
            if found.any():
                pairs.append((column, at[found]))
                slots.append((slot, found))
        for (slot, found), values in zip(slots, table.fetch(pairs)):
            out[slot][found] = values


def joined_provider(
    root: Any,
    lookups: Sequence[tuple[str, Any]],
    keys: Any = (),
    *,
    model: Any = None,
    features: Sequence[str] | None = None,
) -> JoinedProvider:
    """A provider reading each model feature from the table that has it: a root table keyed by
    the rows' keys, and tables looked up through link columns of the root table.

    Parameters
    ----------
    root : keyed provider
        The root table (``sql_provider`` or ``redis_provider``), built with ``columns=``: its
        features and its link columns (any order; built for no keys).
    lookups : sequence of (link column, keyed provider)
        For each linked table, the root column holding the integer key of a row's record there
        (NULL or missing when it has none), and a provider of that table built with
        ``columns=`` (its features).
    keys : sequence
        ``keys[i]`` is row ``i``'s key in the root table.
    model : Plan, Forest or fitted model, optional
        Supplies the feature names when ``features`` is not given.
    features : sequence of str, optional
        The model's feature names, in model order.

    Returns
    -------
    JoinedProvider
        ``fetch(requests)``: per round, one query to the root table and one to each linked
        table some row needs. Each model feature is read from the one table having a column
        of its name (the root table first).

    Raises
    ------
    InputError
        A model feature no table has, or a link column the root table does not have.
    """
    names = list(features) if features is not None else _names(model)
    root_columns = _columns(root)
    tables = [root_columns] + [_columns(p) for _, p in lookups]
    source: list[tuple[int, int]] = []
    for name in names:
        where = next(((t, cols.index(name)) for t, cols in enumerate(tables) if name in cols), None)
        if where is None:
            raise InputError(
                f"no table has the feature {name!r}; give each table's provider columns=[...] "
                "naming the features it holds"
            )
        source.append(where)
    links = []
    for link, provider in lookups:
        if link not in root_columns:
            raise InputError(
                f"the root table's provider has no column {link!r}; add the link column to its "
                f"columns=[...] (it has {root_columns[:20]})"
            )
        links.append((root_columns.index(link), provider))
    keys = as_keys(keys)
    return JoinedProvider(root.with_keys(keys), links, source, keys)


def _names(model: Any) -> list[str]:
    if model is None:
        raise InputError("give model= or features= (the model's feature names, in model order)")
    names = as_plan(model).feature_names
    if names is None:
        raise InputError("the model has no feature names; give features=[...]")
    return list(names)


def _columns(provider: Any) -> list[str]:
    """The column (field) of each position a keyed provider reads."""
    for attribute in ("column_names", "fields"):
        columns = getattr(provider, attribute, None)
        if columns is not None:
            return [str(c) for c in columns]
    raise InputError(
        f"a joined table must be read by sql_provider or redis_provider, got {type(provider).__name__}"
    )


def _one_redis(root: Any, lookups: list[Any]) -> bool:
    """Every table is Redis hashes on one server."""
    tables = [root, *lookups]
    return all(isinstance(p, RedisProvider) for p in tables) and all(
        same_server(p.client, root.client) for p in lookups
    )


def _link_key(value: float) -> int:
    """A link read as a number is the integer key of the record it names."""
    if not math.isfinite(value) or value != int(value):
        raise ProviderError(
            f"a link column holds {float(value)!r}; store the integer key of the linked record"
        )
    return int(value)
