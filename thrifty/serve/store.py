"""The feature store ``thrifty serve --provider URL`` reads: checked at start-up, opened read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from thrifty.exceptions import InputError
from thrifty.providers import http_provider, sql_provider
from thrifty.providers.base import missing_extra
from thrifty.providers.sql import direct_target

# Backends that create an empty database file where a path is wrong.
_FILE_BACKENDS = ("sqlite", "duckdb")


def store_provider(
    url: str | None,
    model: Any,
    *,
    table: str | None = None,
    key_column: str | None = None,
    timeout: float = 10.0,
) -> Any:
    """The provider ``thrifty serve --provider URL`` configures (None without a URL).

    ``http://`` and ``https://`` URLs name a feature service (:func:`http_provider`); any other
    URL is a database URL, read with :func:`sql_provider` from ``table`` keyed by
    ``key_column`` (a SQLite or DuckDB file through its own driver, others through
    SQLAlchemy). Feature names are the model's. A SQLite or DuckDB file must exist and is
    opened read-only: serving never writes, and must not leave an empty database behind a
    mistyped path (or a database deleted while serving).

    Raises
    ------
    InputError
        One line naming what is wrong with the URL, the table or the key column, and the fix.
    """
    if url is None:
        if table or key_column:
            raise InputError("--table and --key-column need --provider DATABASE_URL")
        return None
    if url.startswith(("http://", "https://")):
        return http_provider(url, [], model=model, timeout=timeout)
    if not table or not key_column:
        raise InputError(
            f"the database provider {url!r} needs --table NAME and --key-column NAME "
            "(the table of features and its column of row keys)"
        )
    if direct_target(url) is not None:
        # A SQLite or DuckDB file: its own driver, read-only (see sql_provider).
        return sql_provider(url, table, key_column, [], model=model)
    return sql_provider(_read_only_engine(url), table, key_column, [], model=model)


def _read_only_engine(url: str) -> Any:
    """A SQLAlchemy engine on ``url``, read-only for a database file, which must exist."""
    try:
        import sqlalchemy as sa
    except ImportError:
        raise InputError(str(missing_extra("sqlalchemy", "sql"))) from None
    shown = _hide_password(sa, url)
    try:
        parsed = sa.engine.make_url(url)
        backend = parsed.get_backend_name()
        options: dict[str, Any] = {}
        if backend in _FILE_BACKENDS and parsed.database not in (None, "", ":memory:"):
            parsed, options = _read_only(parsed, backend, shown)
        return sa.create_engine(parsed, **options)
    except sa.exc.ArgumentError as exc:  # not a URL, or no dialect of that name
        raise InputError(
            f"--provider {shown!r} is neither a feature service (http://...) nor a database URL "
            f"SQLAlchemy can open ({exc}); give e.g. sqlite:///features.db or postgresql://host/db"
        ) from None
    except ImportError as exc:
        raise InputError(
            f"--provider {shown!r} needs a database driver that is not installed ({exc}); install it with pip"
        ) from None


def _read_only(parsed: Any, backend: str, shown: str) -> tuple[Any, dict[str, Any]]:
    """The URL and engine options opening an existing SQLite or DuckDB file read-only."""
    database = str(parsed.database)
    if backend == "sqlite" and (database.startswith("file:") or "uri" in parsed.query):
        return parsed, {}  # a SQLite URI: its own mode= says how to open it
    path = Path(database)
    if not path.is_file():
        raise InputError(
            f"the {backend} database {database!r} does not exist (--provider {shown}); give an "
            f"existing file: {backend}:///relative/path or {backend}:////absolute/path"
        )
    if backend == "duckdb":
        return parsed, {"connect_args": {"read_only": True}}
    # mode=ro: SQLite then never creates nor writes the file (a plain path would create it).
    query = {**parsed.query, "mode": "ro", "uri": "true"}
    return parsed.set(database=f"file:{quote(str(path.resolve()))}", query=query), {}


def _hide_password(sa: Any, url: str) -> str:
    """``url`` to print, its password masked (a URL SQLAlchemy cannot parse as given)."""
    try:
        return str(sa.engine.make_url(url).render_as_string(hide_password=True))
    except sa.exc.ArgumentError:
        return url
