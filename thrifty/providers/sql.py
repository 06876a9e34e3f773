"""A feature provider reading a SQL table through SQLAlchemy: one query per round of lazy evaluation."""

from __future__ import annotations

import urllib.parse
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from thrifty.exceptions import InputError, ProviderError
from thrifty.providers.base import (
    INTEGER,
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

# SQLAlchemy is the optional extra thrifty[sql]: imported where a query is built, so that
# thrifty.providers imports without it and sql_provider() names the extra to install.

# SQLite refuses compound SELECTs of more than 500 terms; other databases have larger limits.
_MAX_TERMS = 400


class SQLProvider(SyncKeyedProvider):
    """Features read from one table, one record per example, for the rows a round needs.

    Built by :func:`sql_provider`; see there. ``fetch(requests)`` answers a round of lazy
    evaluation; calling the provider as ``provider(feature_ids, row_ids)`` also works.
    """

    def __init__(
        self,
        engine: Any,
        table: Any,
        key: Any,
        columns: list[Any],
        keys: np.ndarray,
        max_params: int,
        key_kind: str | None,
    ) -> None:
        self.engine, self.table, self.key, self.columns = engine, table, key, columns
        self.keys = keys
        self.max_params = max_params
        self.key_kind = key_kind

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
        import sqlalchemy as sa

        index: list[dict[Any, list[int]]] = []
        given: dict[Any, Any] = {}  # the key each store key came from, for messages
        impossible: list[Any] = []
        parts: list[tuple[int, list[Any]]] = []
        for f, rows in requests:
            where: dict[Any, list[int]] = {}
            for j, k in enumerate(keys_of(self.keys, rows)):
                stored = store_key(k, self.key_kind)
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
            raise missing_keys(impossible, self.key.name, f"in {self._where}", self.key_kind)
        out = [np.full(len(rows), np.nan) for _, rows in requests]
        seen: list[set[Any]] = [set() for _ in requests]
        slot = {int(f): i for i, (f, _) in enumerate(requests)}
        for batch in _batches(parts, self.max_params):
            selects = [
                sa.select(
                    sa.literal(f, sa.Integer).label("f"), self.key.label("k"), self.columns[f].label("v")
                ).where(self.key.in_(ks))
                for f, ks in batch
            ]
            query = selects[0] if len(selects) == 1 else sa.union_all(*selects)
            for f, k, v in self._run(sa, query):
                i = slot[int(f)]
                if k not in index[i]:
                    raise ProviderError(
                        f"{self._where} answered a record with {self.key.name} = {k!r} "
                        f"({type(k).__name__}), which is not one of the keys asked for: the column "
                        "compares keys otherwise than by value (a collation, or values of another "
                        "type than its first); store keys of one type, compared exactly"
                    )
                if k in seen[i]:
                    raise ProviderError(
                        f"{self.key.name} = {k!r} appears more than once in {self._where}; "
                        "the key column must be unique"
                    )
                seen[i].add(k)
                out[i][index[i][k]] = _number(v, self.columns[int(f)].name, k)
        lost = [given[k] for i, where in enumerate(index) for k in where if k not in seen[i]]
        if lost:
            raise missing_keys(lost, self.key.name, f"in {self._where}", self.key_kind)
        return out

    @property
    def _where(self) -> str:
        return f"table {self.table.name!r}"

    def _run(self, sa: Any, query: Any) -> list[Any]:
        """The records of ``query``; a failing database (locked, gone) is one line, without the
        SQL or the keys."""
        try:
            with self.engine.connect() as conn:
                return list(conn.execute(query))
        except sa.exc.DBAPIError as exc:
            raise ConnectionError(f"the database failed reading {self._where}: {_reason(exc)}") from None


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
    against the table (reflected once, here) and quoted by SQLAlchemy; keys are bound
    parameters, so neither a feature name nor a key can inject SQL.

    Parameters
    ----------
    engine_or_url : sqlalchemy.engine.Engine or str
        The database (``"sqlite:///features.db"``, ``"duckdb:///features.duckdb"``, ...).
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
    :class:`~thrifty.exceptions.ProviderError`; a failing database raises ``ConnectionError``.
    A SQLite file named by URL is opened read-only, so a database deleted while in use is not
    created again empty.
    """
    try:
        import sqlalchemy as sa
    except ImportError:
        raise missing_extra("sqlalchemy", "sql") from None
    engine = _engine(sa, engine_or_url) if isinstance(engine_or_url, str) else engine_or_url
    names = feature_columns(columns, model)
    existing = _columns_of(sa, engine, table, schema)
    unknown = [c for c in [key_column, *names] if c not in existing]
    if unknown:
        raise InputError(
            f"table {table!r} has no column(s) {unknown[:10]}; its columns are "
            f"{existing[:20]} (map model features with columns=[...])"
        )
    if int(max_params) < 1:
        raise InputError(f"max_params must be >= 1, got {max_params}")
    tbl = sa.table(table, *(sa.column(c) for c in dict.fromkeys([key_column, *names])), schema=schema)
    key = tbl.c[key_column]
    return SQLProvider(
        engine,
        tbl,
        key,
        [tbl.c[c] for c in names],
        as_keys(keys),
        int(max_params),
        _key_kind(sa, engine, key),
    )


def _engine(sa: Any, url: str) -> Any:
    """The engine of a database URL: InputError for a URL SQLAlchemy cannot open or a SQLite or
    DuckDB file that does not exist (connecting would create it empty)."""
    try:
        parsed = sa.engine.make_url(url)
        database = parsed.database
        if parsed.get_backend_name() in ("sqlite", "duckdb") and database and database != ":memory:":
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


def _columns_of(sa: Any, engine: Any, table: str, schema: str | None) -> list[str]:
    """The table's column names, from an empty ``SELECT *`` (dialect reflection is not portable)."""
    query = sa.select(sa.text("*")).select_from(sa.table(table, schema=schema)).where(sa.false())
    try:
        with engine.connect() as conn:
            return list(conn.execute(query).keys())
    except sa.exc.DBAPIError as exc:
        raise InputError(f"cannot read table {table!r} in {engine.url!r}: {_reason(exc)}") from None


def _key_kind(sa: Any, engine: Any, key: Any) -> str | None:
    """How the key column compares keys, from the type of one stored key: ``INTEGER``,
    ``TEXT`` or None (keys as given). The stored value is what a query compares against, also
    where SQLite's declared type says otherwise, and SQLAlchemy's reflection of column types
    fails on some dialects (DuckDB's)."""
    query = sa.select(key).where(key.is_not(None)).limit(1)
    with engine.connect() as conn:
        stored = conn.execute(query).scalar()
    if isinstance(stored, (int, np.integer)) and not isinstance(stored, bool):
        return INTEGER
    return TEXT if isinstance(stored, str) else None


def _reason(exc: Any) -> str:
    """The database's own message, on one line."""
    return " ".join(str(exc.orig).split())[:200]


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
