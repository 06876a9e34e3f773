"""Stores of feature values for the provider and serving tests: a SQL table or Redis hashes of
one record per row, the features' names and prices, and how many rounds a store answers."""

from __future__ import annotations

import numpy as np

from thrifty.runtime.lazy import lazy_rounds

NAMES = ["age", "bp", "chol", "hr", "st", "ca"]
PRICES = [1.0, 2.0, 7.5, 3.0, 11.0, 40.0]


def n_rounds(plan, X, costs) -> int:
    """Rounds of lazy evaluation of ``plan`` on ``X``: the queries (pipelines) a store answers."""
    gen, count = lazy_rounds(plan, costs, n_rows=len(X)), 0
    try:
        requests = next(gen)
        while True:
            count += 1
            requests = gen.send([X[rows, f] for f, rows in requests])
    except StopIteration:
        return count


def write_store(url: str, X: np.ndarray, keys: list, columns: list[str], table: str = "patients") -> object:
    """A SQL table of one record per row (in shuffled order): key ``pid``, the feature columns
    (NaN stored as NULL) and a text column ``note``. Returns the SQLAlchemy engine."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    meta = sa.MetaData()
    key_type = sa.String if isinstance(keys[0], str) else sa.Integer
    tbl = sa.Table(
        table,
        meta,
        sa.Column("pid", key_type, primary_key=True, autoincrement=False),
        *(sa.Column(c, sa.Double) for c in columns),
        sa.Column("note", sa.String),
    )
    meta.create_all(engine)
    order = np.random.default_rng(0).permutation(len(keys))
    records = [
        {"pid": keys[i], "note": "x", **{c: None if np.isnan(v) else float(v) for c, v in zip(columns, X[i])}}
        for i in order
    ]
    with engine.begin() as conn:
        conn.execute(tbl.insert(), records)
    return engine


def write_hashes(url: str, X: np.ndarray, keys: list, fields: list[str], prefix: str = "patient:") -> None:
    """One Redis hash per row, ``{prefix}{key}``, a field per feature (NaN left out)."""
    import redis

    client = redis.Redis.from_url(url)
    client.flushdb()
    with client.pipeline(transaction=False) as pipe:
        for key, row in zip(keys, X):
            values = {f: float(v) for f, v in zip(fields, row) if not np.isnan(v)}
            pipe.hset(f"{prefix}{key}", mapping=values or {"_": 0})
        pipe.execute()
