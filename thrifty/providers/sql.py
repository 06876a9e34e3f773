"""A feature provider reading a SQL table: one query per round of lazy evaluation, matched to the
rows by key."""

from __future__ import annotations

import sqlite3
import urllib.parse
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from thrifty.exceptions import InputError, ProviderError
from thrifty.providers.base import (
    SyncKeyedProvider,
    as_keys,
    feature_columns,
    keys_of,
    missing_extra,
    missing_keys,
    plain_key,
    store_key,
)
from thrifty.providers.sql_clients import AlchemyClient, ConnectionClient, DirectClient
from thrifty.runtime.lazy import Requests

# SQLAlchemy is the optional extra thrifty[sql]: imported where a query is built, so that
# thrifty.providers imports without it and sql_provider() names the extra to install. SQLite
# and DuckDB files are read through their own drivers (sql_clients), SQLAlchemy not needed.

# Backends whose files are read through the database's own driver.
_DIRECT = ("sqlite", "duckdb")

# SQLite refuses compound SELECTs of more than 500 terms; other databases have larger limits.
_MAX_TERMS = 400


class SQLProvider(SyncKeyedProvider):
    """Features read from one table, one record per example, for the rows a round needs.

    Built by :func:`sql_provider`; see there. ``fetch(requests)`` answers a round of lazy
    evaluation; calling the provider as ``provider(feature_ids, row_ids)`` also works.
    ``client`` reads the table: the database's own driver (SQLite, DuckDB) or SQLAlchemy.
    """

    def __init__(
        self, client: Any, key_name: str, column_names: list[str], keys: np.ndarray, max_params: int
    ) -> None:
        self.client, self.key_name, self.column_names = client, key_name, column_names
        self.keys = keys
        self.max_params = max_params

    @property
    def key_kind(self) -> str | None:
        """How the key column compares keys (``INTEGER``, ``TEXT`` or None: as given)."""
        return self.client.key_kind

    def fetch(self, requests: Requests) -> list[np.ndarray]:
        """Values of each requested (feature, rows) pair: one query for the whole round.

        The query is a ``UNION ALL`` of one ``SELECT`` per requested feature, each reading that
        feature's column for the keys of the rows blocked on it, so exactly the (row, feature)
        pairs the round needs are read (selecting the union of the columns for the union of the
        rows would read pairs no tree asked for). Keys are bound parameters, converted to the
        key column's type (``key_kind``); a round with more than ``max_params`` keys (or 400
        features) is split into several queries. The records read are matched to the rows by
        key value: a key with no record raises :class:`~thrifty.exceptions.MissingKeyError`
        naming it.
        """
        index: list[dict[Any, list[int]]] = []
        given: dict[Any, Any] = {}  # the key each store key came from, for messages
        impossible: list[Any] = []
        parts: list[tuple[int, list[Any]]] = []
        kind = self.key_kind
        for f, rows in requests:
            where: dict[Any, list[int]] = {}
            for j, k in enumerate(keys_of(self.keys, rows)):
                stored = store_key(k, kind)
                if stored is None:
                    impossible.append(plain_key(k))
                    continue
                where.setdefault(stored, []).append(j)
                given.setdefault(stored, plain_key(k))
            index.append(where)
            wanted = list(where)
            parts += [
                (int(f), wanted[i : i + self.max_params]) for i in range(0, len(wanted), self.max_params)
            ]
        if impossible:
            raise missing_keys(impossible, self.key_name, f"in {self.client.where}", kind)
        out = [np.full(len(rows), np.nan) for _, rows in requests]
        seen: list[set[Any]] = [set() for _ in requests]
        slot = {int(f): i for i, (f, _) in enumerate(requests)}
        for batch in _batches(parts, self.max_params):
            for f, k, v in self.client.read(batch):
                i = slot[int(f)]
                if k not in index[i]:
                    raise ProviderError(
                        f"{self.client.where} answered a record with {self.key_name} = {k!r} "
                        f"({type(k).__name__}), which is not one of the keys asked for: the column "
                        "compares keys otherwise than by value (a collation, or values of another "
                        "type than its first); store keys of one type, compared exactly"
                    )
                if k in seen[i]:
                    raise ProviderError(
                        f"{self.key_name} = {k!r} appears more than once in {self.client.where}; "
                        "the key column must be unique"
                    )
                seen[i].add(k)
                out[i][index[i][k]] = _number(v, self.column_names[int(f)], k)
        lost = [given[k] for i, where in enumerate(index) for k in where if k not in seen[i]]
        if lost:
            raise missing_keys(lost, self.key_name, f"in {self.client.where}", kind)
        return out


def sql_provider(
    engine_or_url: Any,
    table: str,
    key_column: str,
    keys: Any,
    *,
    columns: Sequence[str] | None = None,
    model: Any = None,
    schema: str | None = None,
    max_params: int = 30_000,
) -> SQLProvider:
    """A feature provider reading features from a SQL table, only where a tree needs them.

    Each round of lazy evaluation is answered by one query that reads, for each feature some
    blocked rows need, that feature's column for those rows only. Column names are checked
    against the table (read once, here) and quoted; keys are bound parameters, so neither a
    feature name nor a key can inject SQL.

    A SQLite or DuckDB file URL (``"sqlite:///features.db"``, ``"duckdb:///features.duckdb"``)
    or connection (``sqlite3.connect(...)``, ``duckdb.connect(...)``) is read through the
    database's own driver, read-only, one connection per thread: one statement per set of
    features, prepared once, with the keys of each feature bound as one array parameter (no
    ORM on the way, SQLAlchemy not needed). A SQLAlchemy engine, or any other URL, is read
    through SQLAlchemy.

    Parameters
    ----------
    engine_or_url : str, sqlalchemy.engine.Engine, sqlite3.Connection or duckdb connection
        The database (``"sqlite:///features.db"``, ``"duckdb:///features.duckdb"``,
        ``"postgresql://host/db"``, ...). A connection given is shared by every thread, one
        query at a time (open a SQLite one with ``check_same_thread=False`` to use it from
        ``evaluate_async`` or ``thrifty serve``).
    table : str
        Table holding one record per example.
    key_column : str
        Column identifying a record (unique).
    keys : sequence
        ``keys[i]`` is the key of row ``i`` of the evaluation.
    columns : sequence of str, optional
        The table's column of each model feature, in the model's feature order (default: the
        model's feature names, given ``model``).
    model : Plan, Forest or fitted model, optional
        Supplies the feature names when ``columns`` is not given.
    schema : str, optional
        Schema of the table.
    max_params : int, default=30000
        Most keys bound in one query (SQLite allows 32766 parameters).

    Returns
    -------
    SQLProvider
        For ``thrifty.evaluate(plan, provider, costs, n_rows=len(keys))`` or ``evaluate_async``.
        Missing values (SQL ``NULL``) are read as NaN. Categorical features are stored as the
        model's category codes.

    Raises
    ------
    InputError
        When a key is no key at all (None, a boolean, NaN, a list), the URL names no database
        (or a SQLite or DuckDB file that does not exist), or the table lacks a column.

    Notes
    -----
    Keys are compared by value in the key column's type, found from one stored key: for an
    integer column, string keys of decimal digits (``"1000"``) are read as integers; for a text
    column, integer keys are written in decimal. A key no record has, or none can have (``"abc"``
    or ``1.5`` for an integer column), raises :class:`~thrifty.exceptions.MissingKeyError`
    naming it when a tree first needs that row's features; a value that is not a number raises
    :class:`~thrifty.exceptions.ProviderError`; a failing database raises ``ConnectionError``
    (``thrifty.providers.base.StoreUnavailable`` when it cannot be read now: locked, deleted).
    A SQLite or DuckDB file named by URL is opened read-only, so a database deleted while in
    use is not created again empty; the driver's client checks the file before each query, so
    a deleted file is an error and a file replaced by another (a rebuilt store renamed into
    place) is reopened.
    """
    names = feature_columns(columns, model)
    if int(max_params) < 1:
        raise InputError(f"max_params must be >= 1, got {max_params}")
    client = _client(engine_or_url, table, schema)
    existing = client.column_names()
    unknown = [c for c in [key_column, *names] if c not in existing]
    if unknown:
        raise InputError(
            f"table {table!r} has no column(s) {unknown[:10]}; its columns are "
            f"{existing[:20]} (map model features with columns=[...])"
        )
    client.bind(key_column, names)
    return SQLProvider(client, key_column, names, as_keys(keys), min(int(max_params), client.max_params))


def direct_target(url: str) -> tuple[str, str, bool] | None:
    """``(backend, database, is_uri)`` of a SQLite or DuckDB file URL read through the
    database's own driver; None for other URLs (SQLAlchemy opens them): another database, an
    in-memory one, or a URL with driver options (``?timeout=...``)."""
    scheme, sep, rest = url.partition("://")
    backend = scheme.split("+")[0].lower()
    if not sep or backend not in _DIRECT or not rest.startswith("/"):
        return None
    database, _, query = rest[1:].partition("?")
    if database in ("", ":memory:"):
        return None
    if backend == "sqlite" and database.startswith("file:"):
        options = [q for q in query.split("&") if q and q != "uri=true"]
        return backend, database + ("?" + "&".join(options) if options else ""), True
    return None if query else (backend, database, False)


def _client(engine_or_url: Any, table: str, schema: str | None) -> Any:
    """The client reading the table: the driver's own for a SQLite or DuckDB file URL or
    connection, SQLAlchemy for an engine or another URL."""
    if isinstance(engine_or_url, sqlite3.Connection):
        return ConnectionClient("sqlite", engine_or_url, table, schema)
    if type(engine_or_url).__module__.split(".")[0] in ("duckdb", "_duckdb"):
        return ConnectionClient("duckdb", engine_or_url, table, schema)
    if isinstance(engine_or_url, str):
        target = direct_target(engine_or_url)
        if target is not None:
            backend, database, uri = target
            if not uri and not Path(database).is_file():
                raise InputError(
                    f"the {backend} database {database!r} does not exist; "
                    "give the path of an existing database file"
                )
            if backend == "duckdb":
                try:
                    import duckdb  # noqa: F401
                except ImportError:
                    raise missing_extra("duckdb", "sql") from None
            return DirectClient(backend, database, table, schema, uri=uri)
    try:
        import sqlalchemy as sa
    except ImportError:
        raise missing_extra("sqlalchemy", "sql") from None
    engine = _engine(sa, engine_or_url) if isinstance(engine_or_url, str) else engine_or_url
    return AlchemyClient(engine, table, schema)


def _engine(sa: Any, url: str) -> Any:
    """The engine of a database URL: InputError for a URL SQLAlchemy cannot open or a SQLite or
    DuckDB file that does not exist (connecting would create it empty)."""
    try:
        parsed = sa.engine.make_url(url)
        database = parsed.database
        if parsed.get_backend_name() in _DIRECT and database and database != ":memory:":
            if not database.startswith("file:") and not Path(database).is_file():
                raise InputError(
                    f"the {parsed.get_backend_name()} database {database!r} does not exist; "
                    "give the path of an existing database file"
                )
            if parsed.get_backend_name() == "sqlite" and not database.startswith("file:"):
                # Read-only: a file deleted while in use is an error, not a new empty database.
                path = urllib.parse.quote(str(Path(database).resolve()))
                query = {**parsed.query, "mode": "ro", "uri": "true"}
                parsed = parsed.set(database=f"file:{path}", query=query)
        return sa.create_engine(parsed)
    except sa.exc.ArgumentError as exc:
        raise InputError(
            f"cannot open the database URL {url!r}: {exc}; give a SQLAlchemy URL such as "
            "sqlite:///features.db (with its driver installed)"
        ) from None


def _number(value: Any, column: str, key: Any) -> float:
    # Checked per value: SQLite columns are dynamically typed whatever their declared type.
    if value is None:
        return np.nan
    if isinstance(value, (int, float, Decimal, np.number)):
        return float(value)
    raise ProviderError(
        f"column {column!r} holds {value!r} (for key {key!r}), not a number; store "
        "numbers (category codes for categorical features) or NULL for missing"
    )


def _batches(parts: list[tuple[int, list[Any]]], max_params: int) -> list[list[tuple[int, list[Any]]]]:
    """Consecutive parts packed into queries of at most ``max_params`` keys and 400 terms."""
    batches: list[list[tuple[int, list[Any]]]] = []
    size = 0
    for part in parts:
        if not batches or size + len(part[1]) > max_params or len(batches[-1]) >= _MAX_TERMS:
            batches.append([])
            size = 0
        batches[-1].append(part)
        size += len(part[1])
    return batches
