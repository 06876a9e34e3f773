"""How the SQL provider reads a round: SQLite and DuckDB through their own drivers (one prepared
statement per table and set of features, keys bound as one array), other databases through
SQLAlchemy.

A round of lazy evaluation is a list of parts ``(feature, keys)``; a client answers them with one
query, a ``UNION ALL`` of one ``SELECT`` per part reading that feature's column for those keys,
and returns the records ``(part, key, value)``. SQLAlchemy builds and compiles that statement
anew for each round (about a millisecond); the direct clients write its text once per set of
features and bind the keys of each part as one parameter (a JSON array for SQLite, a list for
DuckDB), so the driver's statement cache reuses the prepared statement whatever the number of
keys, and no statement has more than one parameter per feature.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from thrifty.exceptions import InputError
from thrifty.providers.base import INTEGER, TEXT, StoreUnavailable

# A round's parts: (feature, keys as the store compares them).
Parts = list[tuple[int, list[Any]]]
# Statements written per set of features, most recent kept (SQLite keeps 128 prepared).
_STATEMENTS = 256


def quoted(name: str) -> str:
    """An SQL identifier, quoted (a quote inside it doubled): no column name can inject SQL."""
    return '"' + str(name).replace('"', '""') + '"'


class DirectClient:
    """Reads a table of a SQLite or DuckDB database file through the driver, one connection per
    thread (a SQLite connection belongs to its thread; DuckDB's cursors are cheap).

    The file is checked before each query: a database deleted while in use is an error (an open
    connection would go on reading the deleted file), and one replaced by a new file (an atomic
    rename of a rebuilt store) is reopened.
    """

    def __init__(self, backend: str, target: str, table: str, schema: str | None, *, uri: bool) -> None:
        self.backend, self.target, self.uri = backend, target, uri
        self.table = quoted(table) if schema is None else f"{quoted(schema)}.{quoted(table)}"
        self.where = f"table {table!r}"
        self.path = None if uri else Path(target)
        self._identity = self._file_identity()
        self._local = threading.local()
        # Thread-safe, and the driver's statement cache then finds the same text again.
        self._statement = functools.lru_cache(maxsize=_STATEMENTS)(self._write_statement)
        self.key_sql = ""
        self.columns: list[str] = []
        self.max_params = 1 << 62  # keys are one parameter per part: no limit to split at
        self.key_kind: str | None = None

    def bind(self, key_column: str, columns: list[str]) -> None:
        """Read ``columns`` keyed by ``key_column`` (checked to exist by the caller)."""
        self.key_sql, self.columns = quoted(key_column), [quoted(c) for c in columns]
        stored = self._execute(
            f"SELECT {self.key_sql} FROM {self.table} WHERE {self.key_sql} IS NOT NULL LIMIT 1", []
        )
        value = stored[0][0] if stored else None
        if isinstance(value, int) and not isinstance(value, bool):
            self.key_kind = INTEGER
        elif isinstance(value, str):
            self.key_kind = TEXT

    def column_names(self) -> list[str]:
        """The table's columns, from an empty ``SELECT *``."""
        conn = self.connection()
        try:
            cursor = conn.execute(f"SELECT * FROM {self.table} LIMIT 0")
            return [d[0] for d in cursor.description]
        except self._errors() as exc:
            raise InputError(f"cannot read {self.where} in {self.target!r}: {_reason(exc)}") from None

    def read(self, parts: Parts) -> list[Any]:
        """Records ``(feature, key, value)`` of every part, one query."""
        text = self._statement(tuple(f for f, _ in parts))
        if self.backend == "sqlite":
            params: list[Any] = [json.dumps(keys) for _, keys in parts]
        else:
            params = [list(keys) for _, keys in parts]
        return self._execute(text, params)

    def _write_statement(self, features: tuple[int, ...]) -> str:
        if self.backend == "sqlite":
            keys = "SELECT value FROM json_each(?)"
        else:
            cast = {INTEGER: "::BIGINT[]", TEXT: "::VARCHAR[]"}.get(self.key_kind or "", "")
            keys = f"SELECT unnest(?{cast})"
        return " UNION ALL ".join(
            f"SELECT {f} AS f, {self.key_sql} AS k, {self.columns[f]} AS v FROM {self.table} "
            f"WHERE {self.key_sql} IN ({keys})"
            for f in features
        )

    def _execute(self, text: str, params: Sequence[Any]) -> list[Any]:
        try:
            return list(self.connection().execute(text, params).fetchall())
        except self._errors() as exc:
            unavailable = _unavailable(exc)
            raise (StoreUnavailable if unavailable else ConnectionError)(
                f"the database failed reading {self.where}: {_reason(exc)}"
            ) from None

    def _errors(self) -> tuple[type[BaseException], ...]:
        if self.backend == "sqlite":
            return (sqlite3.Error,)
        import duckdb

        return (duckdb.Error,)

    def _file_identity(self) -> tuple[int, int] | None:
        if self.path is None:
            return None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise StoreUnavailable(
                f"the database failed reading {self.where}: the database file is gone"
            ) from None
        return st.st_dev, st.st_ino

    def connection(self) -> Any:
        identity = self._file_identity()
        if identity != self._identity:
            self._identity = identity  # replaced: every thread reopens
        local = self._local
        if getattr(local, "identity", None) != identity or getattr(local, "conn", None) is None:
            local.conn, local.identity = self._open(), identity
        return local.conn

    def _open(self) -> Any:
        if self.backend == "sqlite":
            if self.uri:
                return sqlite3.connect(self.target, uri=True, check_same_thread=False)
            # mode=ro: SQLite then never creates nor writes the file.
            path = urllib.parse.quote(str(Path(self.target).resolve()))
            return sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        import duckdb

        return duckdb.connect(self.target, read_only=True)


class ConnectionClient(DirectClient):
    """The same over a connection the caller opened (``sqlite3.connect(...)`` or
    ``duckdb.connect(...)``): shared by every thread, one query at a time."""

    def __init__(self, backend: str, conn: Any, table: str, schema: str | None) -> None:
        super().__init__(backend, f"the {backend} connection", table, schema, uri=True)
        self.conn, self.lock = conn, threading.Lock()

    def _execute(self, text: str, params: Sequence[Any]) -> list[Any]:
        with self.lock:
            return super()._execute(text, params)

    def connection(self) -> Any:
        return self.conn


class AlchemyClient:
    """Reads a table through SQLAlchemy: any database it has a dialect for."""

    def __init__(self, engine: Any, table: str, schema: str | None) -> None:
        import sqlalchemy as sa

        self.sa, self.engine, self.name, self.schema = sa, engine, table, schema
        self.where = f"table {table!r}"
        self.key_kind: str | None = None
        self.max_params = 30_000

    def column_names(self) -> list[str]:
        """The table's column names, from an empty ``SELECT *`` (dialect reflection is not portable)."""
        sa = self.sa
        query = sa.select(sa.text("*")).select_from(sa.table(self.name, schema=self.schema)).where(sa.false())
        try:
            with self.engine.connect() as conn:
                return list(conn.execute(query).keys())
        except sa.exc.DBAPIError as exc:
            raise InputError(
                f"cannot read {self.where} in {self.engine.url!r}: {_reason(exc.orig)}"
            ) from None

    def bind(self, key_column: str, columns: list[str]) -> None:
        """Read ``columns`` keyed by ``key_column``; the key kind from the type of one stored
        key (SQLAlchemy's reflection of column types fails on some dialects, DuckDB's)."""
        sa = self.sa
        tbl = sa.table(
            self.name, *(sa.column(c) for c in dict.fromkeys([key_column, *columns])), schema=self.schema
        )
        self.key, self.columns = tbl.c[key_column], [tbl.c[c] for c in columns]
        with self.engine.connect() as conn:
            stored = conn.execute(sa.select(self.key).where(self.key.is_not(None)).limit(1)).scalar()
        if isinstance(stored, int) and not isinstance(stored, bool):
            self.key_kind = INTEGER
        elif isinstance(stored, str):
            self.key_kind = TEXT

    def read(self, parts: Parts) -> list[Any]:
        """Records ``(feature, key, value)`` of every part, one query."""
        sa = self.sa
        selects = [
            sa.select(
                sa.literal(f, sa.Integer).label("f"), self.key.label("k"), self.columns[f].label("v")
            ).where(self.key.in_(ks))
            for f, ks in parts
        ]
        query = selects[0] if len(selects) == 1 else sa.union_all(*selects)
        try:
            with self.engine.connect() as conn:
                return list(conn.execute(query))
        except sa.exc.DBAPIError as exc:
            unavailable = isinstance(exc, sa.exc.OperationalError)
            raise (StoreUnavailable if unavailable else ConnectionError)(
                f"the database failed reading {self.where}: {_reason(exc.orig)}"
            ) from None


def _unavailable(exc: BaseException) -> bool:
    """The database cannot be read now (locked, gone, unreachable), rather than refusing."""
    if isinstance(exc, sqlite3.OperationalError):
        return True
    name = type(exc).__name__
    return name in ("IOException", "OperationalError", "ConnectionException")


def _reason(exc: Any) -> str:
    """The database's own message, on one line."""
    return " ".join(str(exc).split())[:200]
