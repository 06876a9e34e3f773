"""docs/deploy.md's flights example runs as written, in SQLite and in a real Redis, equal to dense
evaluation, and prints what the page says."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """The page's SQLite block run in a fresh folder: its namespace and what it printed."""
    pytest.importorskip("lightgbm")
    from thrifty.datasets import load

    try:
        load("flights")
    except Exception as exc:  # the shared data is not on every machine
        pytest.skip(f"the flights dataset is not available: {exc}")
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    code = next(b for b in blocks if "joined_provider(" in b and "sql_provider(url" in b)
    folder = tmp_path_factory.mktemp("flights")
    namespace: dict = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(folder)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, str(DOC), "exec"), namespace)
    return namespace, out.getvalue()


def test_the_flights_example_in_sqlite_equals_dense_and_prints_the_page(example):
    from thrifty import evaluate

    ns, printed = example
    dense = evaluate(ns["plan"], ns["X_test"][:2_000], ns["data"].costs)
    np.testing.assert_array_equal(ns["lazy"].raw, dense.raw)
    np.testing.assert_array_equal(ns["lazy"].cost.total, dense.cost.total)
    np.testing.assert_array_equal(ns["lazy"].cost.acquired, dense.cost.acquired)
    page = " ".join(DOC.read_text().replace("`", "").split())
    assert " ".join(printed.split()) in page, printed


def test_the_flights_example_in_redis_equals_sqlite(example, redis_url):
    ns, _ = example
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    code = next(b for b in blocks if "redis_provider(client" in b)
    ns = {**ns, "redis_url": redis_url}
    exec(compile(code, str(DOC), "exec"), ns)
    np.testing.assert_array_equal(ns["from_redis"].raw, ns["lazy"].raw)
    np.testing.assert_array_equal(ns["from_redis"].cost.total, ns["lazy"].cost.total)
