"""sql_provider against real SQLite and DuckDB databases: same results as dense, exact reads."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

import thrifty
from tests._helpers.stores import NAMES, n_rounds
from tests._helpers.stores import write_store as store
from thrifty import evaluate
from thrifty.exceptions import InputError, MissingKeyError
from thrifty.providers import sql_provider
from thrifty.providers.base import StoreUnavailable

sa = pytest.importorskip("sqlalchemy")

HOSTILE = 'st"; DROP TABLE patients; --'


@pytest.fixture(params=["sqlite", "duckdb"])
def url(request, tmp_path):
    if request.param == "duckdb":
        pytest.importorskip("duckdb_engine")
        return f"duckdb:///{tmp_path / 'features.duckdb'}"
    return f"sqlite:///{tmp_path / 'features.db'}"


@pytest.fixture(params=["sqlalchemy", "driver", "connection"])
def how(request):
    """How the provider reaches the database: a SQLAlchemy engine, a file URL read through the
    database's own driver, or a connection the caller opened (also the driver's)."""
    return request.param


def opened(engine, url: str, how: str):
    """What ``sql_provider`` is given to reach the database ``engine`` wrote at ``url``."""
    if how == "sqlalchemy":
        return engine
    engine.dispose()  # DuckDB refuses a read-only connection beside a writable one
    path = url.split(":///", 1)[1]
    if how == "driver":
        return url
    if url.startswith("duckdb"):
        import duckdb

        return duckdb.connect(path, read_only=True)
    import sqlite3

    return sqlite3.connect(path, check_same_thread=False)


def capture(engine) -> list[tuple[str, object]]:
    statements: list[tuple[str, object]] = []

    def log(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("SELECT") and "patients" in statement:
            statements.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", log)
    return statements


def pairs_read(engine, statements, keys: list[str]) -> set[tuple[int, int]]:
    """(row, feature) pairs the captured queries return, re-running them on their parameters."""
    row_of = {k: i for i, k in enumerate(keys)}
    out: set[tuple[int, int]] = set()
    with engine.connect() as conn:
        for statement, parameters in list(statements):
            for f, k, _ in conn.exec_driver_sql(statement, parameters):
                assert (row_of[k], int(f)) not in out, "a (row, feature) pair was read twice"
                out.add((row_of[k], int(f)))
    return out


def test_lazy_sql_equals_dense_and_reads_exactly_the_acquired_pairs(small_model, url):
    plan, X, costs = small_model
    keys = [f"patient-{i:04d}" for i in range(len(X))]
    engine = store(url, X, keys, NAMES)
    provider = sql_provider(engine, "patients", "pid", keys, model=plan)
    dense = evaluate(plan, X, costs)
    statements = capture(engine)
    lazy = evaluate(plan, provider, costs, n_rows=len(X))
    statements = list(statements)
    np.testing.assert_array_equal(lazy.raw, dense.raw)
    np.testing.assert_array_equal(lazy.labels, dense.labels)
    np.testing.assert_array_equal(lazy.cost.total, dense.cost.total)
    np.testing.assert_array_equal(lazy.cost.acquired, dense.cost.acquired)
    # The plan exits early, so far from every value is read; keys never appear in the SQL text.
    acquired = {(int(r), int(f)) for r, f in zip(*np.nonzero(lazy.cost.acquired))}
    assert len(acquired) < 0.8 * X.size
    assert pairs_read(engine, statements, keys) == acquired
    assert not any("patient-" in s for s, _ in statements)
    assert len(statements) == n_rounds(plan, X, costs), "one query per round"


def test_one_query_per_round_and_chunked_keys(small_model, tmp_path):
    plan, X, costs = small_model
    keys = [f"k{i}" for i in range(len(X))]
    engine = store(f"sqlite:///{tmp_path / 'f.db'}", X, keys, NAMES)
    provider = sql_provider(engine, "patients", "pid", keys, model=plan)
    statements = capture(engine)
    rounds = [(0, np.arange(10)), (4, np.array([3, 3, 250])), (5, np.arange(5, 0, -1))]
    values = provider.fetch(rounds)
    assert len(statements) == 1 and statements[0][0].upper().count("UNION ALL") == 2
    for (f, rows), v in zip(rounds, values):
        np.testing.assert_array_equal(v, X[rows, f])
    small = provider.with_keys(keys[::-1])
    small.max_params = 4
    statements.clear()
    v = small.fetch([(1, np.arange(10))])
    np.testing.assert_array_equal(v[0], X[::-1][:10, 1])
    assert len(statements) == 3  # 10 keys, 4 per query


def test_hostile_column_name_is_quoted_never_executed(small_model, tmp_path, how):
    plan, X, costs = small_model
    keys = list(range(len(X)))
    columns = [*NAMES[:4], HOSTILE, NAMES[5]]
    url = f"sqlite:///{tmp_path / 'f.db'}"
    engine = store(url, X, keys, columns)
    db = opened(engine, url, how)
    lazy = evaluate(plan, sql_provider(db, "patients", "pid", keys, columns=columns), costs, n_rows=len(X))
    np.testing.assert_array_equal(lazy.raw, evaluate(plan, X, costs).raw)
    assert lazy.cost.acquired[:, 4].any(), "the hostile column must have been read"
    assert sa.inspect(engine).has_table("patients")
    # A name the table does not have is refused before any query runs.
    with pytest.raises(ValueError, match="has no column"):
        sql_provider(db, "patients", "pid", keys, columns=[*NAMES[:4], "st; DROP TABLE patients", "ca"])
    assert sa.inspect(engine).has_table("patients")


def test_bad_store_errors(small_model, tmp_path, how):
    plan, X, costs = small_model
    keys = [f"k{i}" for i in range(len(X))]
    url = f"sqlite:///{tmp_path / 'f.db'}"
    engine = opened(store(url, X, keys, NAMES), url, how)
    with pytest.raises(ValueError, match="cannot read table .nope"):
        sql_provider(engine, "nope", "pid", keys, model=plan)
    with pytest.raises(ValueError, match="not a number"):
        evaluate(
            plan,
            sql_provider(engine, "patients", "pid", keys, columns=["note", *NAMES[1:]]),
            costs,
            n_rows=len(X),
        )
    with pytest.raises(ValueError, match="columns="):
        sql_provider(engine, "patients", "pid", keys)
    missing = sql_provider(engine, "patients", "pid", [*keys[:-1], "ghost"], model=plan)
    with pytest.raises(LookupError, match="ghost") as lost:
        evaluate(plan, missing, costs, n_rows=len(X))
    assert lost.value.keys == ["ghost"]


@pytest.mark.parametrize(
    "stored, given",
    [
        (list(range(1000, 1300)), [str(k) for k in range(1000, 1300)]),  # strings on an integer column
        ([str(k) for k in range(1000, 1300)], list(range(1000, 1300))),  # integers on a text column
        (
            list(range(1000, 1300)),
            [float(k) for k in range(1000, 1300)],
        ),  # integral floats (a NaN-able column)
    ],
)
def test_keys_are_converted_to_the_key_columns_type(small_model, url, how, stored, given):
    # The database matches '1000' to 1000 itself; the records read back must find their rows.
    plan, X, costs = small_model
    db = opened(store(url, X, stored, NAMES), url, how)
    lazy = evaluate(plan, sql_provider(db, "patients", "pid", given, model=plan), costs, n_rows=len(X))
    dense = evaluate(plan, X, costs)
    np.testing.assert_array_equal(lazy.raw, dense.raw)
    np.testing.assert_array_equal(lazy.cost.acquired, dense.cost.acquired)


@pytest.mark.parametrize(
    "key",
    [
        "abc",  # not an integer
        "1e3",  # not written in decimal digits
        1000.5,  # a fraction
        10**30,  # beyond 64 bits: no integer column holds it
        5000,  # simply absent
    ],
)
def test_a_key_with_no_record_is_an_error_naming_it(small_model, url, how, key):
    plan, X, costs = small_model
    keys = list(range(1000, 1000 + len(X)))
    db = opened(store(url, X, keys, NAMES), url, how)
    provider = sql_provider(db, "patients", "pid", [*keys[:-1], key], model=plan)
    says = re.escape(f"no record with pid in [{key!r}] in table 'patients'; keys are compared as integer")
    with pytest.raises(MissingKeyError, match=says) as missing:
        evaluate(plan, provider, costs, n_rows=len(X))
    assert missing.value.keys == [key]


@pytest.mark.parametrize(
    "keys, says",
    [
        ([True, False], "the boolean True"),  # True would read key 1
        ([[1000, 1001], [1002, 1003]], "shape \\(2, 2\\)"),  # nested lists are refused, not flattened
        ([1000, [1001, 1002]], "keys\\[1\\] is a list"),
        ([1000, float("nan")], "keys\\[1\\] is nan"),
        ([1000, None], "keys\\[1\\] is None"),
        ([np.datetime64("2024-01-01")], "datetime64"),
    ],
)
def test_what_is_no_key_is_refused(small_model, tmp_path, keys, says):
    plan, X, _ = small_model
    engine = store(f"sqlite:///{tmp_path / 'f.db'}", X, list(range(1000, 1000 + len(X))), NAMES)
    with pytest.raises(InputError, match=says):
        sql_provider(engine, "patients", "pid", keys, model=plan)


def test_rows_beyond_the_keys_are_refused(small_model, tmp_path):
    plan, X, costs = small_model
    keys = list(range(1000, 1000 + len(X)))
    engine = store(f"sqlite:///{tmp_path / 'f.db'}", X, keys, NAMES)
    provider = sql_provider(engine, "patients", "pid", keys[:100], model=plan)
    with pytest.raises(InputError, match=f"n_rows={len(X)}, but the provider has keys for 100 rows"):
        evaluate(plan, provider, costs, n_rows=len(X))
    with pytest.raises(
        InputError, match="provider has keys for 100 rows; evaluate with n_rows=len\\(keys\\)"
    ):
        provider.fetch([(0, np.array([100]))])


def test_database_urls_and_failures_are_one_line(small_model, tmp_path):
    plan, X, costs = small_model
    keys = list(range(1000, 1000 + len(X)))
    with pytest.raises(InputError, match="cannot open the database URL 'foo://bar'"):
        sql_provider("foo://bar", "patients", "pid", keys, model=plan)
    for name in ("nope.db", "nope.duckdb"):
        scheme = "duckdb" if name.endswith("duckdb") else "sqlite"
        with pytest.raises(InputError, match="does not exist; give the path of an existing database"):
            sql_provider(f"{scheme}:///{tmp_path / name}", "patients", "pid", keys, model=plan)
        assert not (tmp_path / name).exists(), "no empty database is left behind"
    path = tmp_path / "f.db"
    store(f"sqlite:///{path}", X, keys, NAMES).dispose()
    provider = sql_provider(f"sqlite:///{path}", "patients", "pid", keys, model=plan)
    assert type(provider.client).__name__ == "DirectClient"
    evaluate(plan, provider, costs, n_rows=len(X))  # connections open, then:
    # Deleted while in use: an error (an open connection would read the deleted file), and no
    # empty database is created.
    path.unlink()
    with pytest.raises(StoreUnavailable, match="the database failed reading table 'patients'") as failed:
        evaluate(plan, provider, costs, n_rows=len(X))
    assert "SELECT" not in str(failed.value) and "1000" not in str(failed.value)
    assert not path.exists()
    # A store rebuilt and renamed into place is read anew.
    store(f"sqlite:///{tmp_path / 'new.db'}", X + 1, keys, NAMES).dispose()
    (tmp_path / "new.db").rename(path)
    np.testing.assert_array_equal(provider.fetch([(0, np.arange(5))])[0], X[:5, 0] + 1)


def test_the_row_count_must_be_the_providers_keys(small_model, tmp_path):
    # Evaluating fewer rows than the provider has keys ignored the rest without a word.
    plan, X, costs = small_model
    keys = list(range(1000, 1000 + len(X)))
    engine = store(f"sqlite:///{tmp_path / 'n.db'}", X, keys, NAMES)
    provider = sql_provider(engine, "patients", "pid", keys, model=plan)
    whole = thrifty.evaluate(plan, provider, costs)  # n_rows from the keys
    assert np.array_equal(whole.raw, thrifty.evaluate(plan, X, costs).raw)
    with pytest.raises(InputError, match=f"keys for {len(X)} rows"):
        thrifty.evaluate(plan, provider, costs, n_rows=len(X) - 1)
    with pytest.raises(InputError, match=f"keys for {len(X)} rows"):
        asyncio.run(thrifty.evaluate_async(plan, provider, costs, n_rows=len(X) + 1))


def test_the_drivers_client_reads_exactly_the_acquired_pairs_one_query_per_round(small_model, tmp_path):
    import sqlite3

    plan, X, costs = small_model
    keys = [f"patient-{i:04d}" for i in range(len(X))]
    path = tmp_path / "f.db"
    store(f"sqlite:///{path}", X, keys, NAMES).dispose()
    conn = sqlite3.connect(path, check_same_thread=False)
    statements: list[str] = []
    conn.set_trace_callback(lambda s: statements.append(s) if "patients" in s else None)
    provider = sql_provider(conn, "patients", "pid", keys, model=plan)
    statements.clear()
    lazy = evaluate(plan, provider, costs, n_rows=len(X))
    dense = evaluate(plan, X, costs)
    np.testing.assert_array_equal(lazy.raw, dense.raw)
    np.testing.assert_array_equal(lazy.cost.acquired, dense.cost.acquired)
    assert len(statements) == n_rounds(plan, X, costs), "one query per round"
    # The trace shows the bound keys; each SELECT of a statement reads its feature's column for
    # exactly the rows blocked on it.
    read = set()
    for text in statements:
        for select in text.split(" UNION ALL "):
            f = int(select.split()[1])
            for k in re.findall(r"patient-(\d{4})", select):
                assert (int(k), f) not in read, "a (row, feature) pair was read twice"
                read.add((int(k), f))
    assert read == {(int(r), int(f)) for r, f in zip(*np.nonzero(lazy.cost.acquired))}
