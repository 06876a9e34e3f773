"""sql_provider against real SQLite and DuckDB databases: same results as dense, exact reads."""

from __future__ import annotations

import numpy as np
import pytest

from tests.providers.conftest import NAMES
from tests.providers.conftest import write_store as store
from thrifty import evaluate
from thrifty.providers import sql_provider
from thrifty.runtime.lazy import lazy_rounds

sa = pytest.importorskip("sqlalchemy")

HOSTILE = 'st"; DROP TABLE patients; --'


@pytest.fixture(params=["sqlite", "duckdb"])
def url(request, tmp_path):
    if request.param == "duckdb":
        pytest.importorskip("duckdb_engine")
        return f"duckdb:///{tmp_path / 'features.duckdb'}"
    return f"sqlite:///{tmp_path / 'features.db'}"


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


def n_rounds(plan, X, costs) -> int:
    gen, count = lazy_rounds(plan, costs, n_rows=len(X)), 0
    try:
        requests = next(gen)
        while True:
            count += 1
            requests = gen.send([X[rows, f] for f, rows in requests])
    except StopIteration:
        return count


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


def test_hostile_column_name_is_quoted_never_executed(small_model, tmp_path):
    plan, X, costs = small_model
    keys = list(range(len(X)))
    columns = [*NAMES[:4], HOSTILE, NAMES[5]]
    engine = store(f"sqlite:///{tmp_path / 'f.db'}", X, keys, columns)
    lazy = evaluate(
        plan, sql_provider(engine, "patients", "pid", keys, columns=columns), costs, n_rows=len(X)
    )
    np.testing.assert_array_equal(lazy.raw, evaluate(plan, X, costs).raw)
    assert lazy.cost.acquired[:, 4].any(), "the hostile column must have been read"
    assert sa.inspect(engine).has_table("patients")
    # A name the table does not have is refused before any query runs.
    with pytest.raises(ValueError, match="has no column"):
        sql_provider(engine, "patients", "pid", keys, columns=[*NAMES[:4], "st; DROP TABLE patients", "ca"])
    assert sa.inspect(engine).has_table("patients")


def test_bad_store_errors(small_model, tmp_path):
    plan, X, costs = small_model
    keys = [f"k{i}" for i in range(len(X))]
    engine = store(f"sqlite:///{tmp_path / 'f.db'}", X, keys, NAMES)
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
    with pytest.raises(LookupError, match="ghost"):
        evaluate(plan, missing, costs, n_rows=len(X))
