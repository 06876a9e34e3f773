"""`thrifty serve` run for real in a subprocess on 127.0.0.1: SQL and HTTP providers, every error path."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from tests._helpers.stores import NAMES
from thrifty import CostModel, evaluate

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("starlette")
sa = pytest.importorskip("sqlalchemy")

from tests._helpers.feature_service import FeatureService, serving  # noqa: E402

CLIENT_TIMEOUT = 20.0


@pytest.fixture(scope="module")
def sql_server(files, serve_cli):
    with serve_cli(
        str(files / "plan.json"),
        "--provider",
        f"sqlite:///{files / 'store.db'}",
        "--table",
        "features",
        "--key-column",
        "pid",
        "--costs",
        str(files / "costs.json"),
        "--max-rows",
        "100",
        "--max-body",
        "20000",
        "--timeout",
        "20",
    ) as (url, proc):
        yield url, proc


def post(url: str, body, **kw):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return httpx.post(
        f"{url}/predict",
        content=data,
        timeout=CLIENT_TIMEOUT,
        headers={"content-type": "application/json"},
        **kw,
    )


def check_against_dense(results, plan, X, costs, rows):
    dense = evaluate(plan, X[rows], costs)
    assert [r["prediction"] for r in results] == dense.labels.tolist()
    np.testing.assert_allclose([r["probabilities"] for r in results], dense.proba, rtol=1e-12)
    np.testing.assert_allclose([r["cost"] for r in results], dense.cost.total, rtol=1e-12)
    assert [r["trees"] for r in results] == dense.cost.n_trees.tolist()
    assert [r["acquired"] for r in results] == [
        [NAMES[j] for j in np.flatnonzero(a)] for a in dense.cost.acquired
    ]


def test_predict_fetches_missing_features_from_sqlite(sql_server, small_model):
    url, _ = sql_server
    plan, X, costs = small_model
    rows = list(range(0, 300, 4))
    r = post(url, {"rows": [{"id": i} for i in rows]})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["id"] for x in results] == rows
    check_against_dense(results, plan, X, costs, rows)
    # Values given in the request are used instead of the store's.
    X2 = X.copy()
    X2[rows, 0] = 3.0
    X2[rows, 5] = np.nan
    r = post(url, {"rows": [{"id": i, "age": 3.0, "ca": None} for i in rows]})
    assert r.status_code == 200, r.text
    check_against_dense(r.json()["results"], plan, X2, costs, rows)
    # Rows giving every feature need no id.
    full = [dict(zip(NAMES, [None if np.isnan(v) else v for v in X[i]])) for i in rows[:5]]
    r = post(url, {"rows": full})
    assert r.status_code == 200, r.text
    check_against_dense(r.json()["results"], plan, X, costs, rows[:5])
    health = httpx.get(f"{url}/health", timeout=CLIENT_TIMEOUT).json()
    assert health["status"] == "ok" and health["features"] == NAMES


@pytest.mark.parametrize(
    "body, status, message",
    [
        (b'{"rows": [{"id": 1,', 400, "malformed JSON"),
        (b"[1, 2]", 400, "must be a JSON object"),
        ({"rows": [{"id": 1, "wbc": 3}]}, 422, "unknown feature 'wbc'"),
        ({"rows": [{"id": 1, "age": "old"}]}, 422, "feature 'age' of row 0 must be a number or null"),
        ({"rows": [{"id": 1, "age": True}]}, 422, "must be a number"),
        ({"rows": [7]}, 422, "row 0 must be a JSON object"),
        ({"rows": [{"id": 1}] * 101}, 413, "at most 100"),
        (b'{"rows": [' + b'{"id": 1},' * 3000 + b'{"id": 1}]}', 413, "at most 20000"),
        ({"rows": [{"id": 123456}]}, 404, "no record in the feature store for the 'id' of a row"),
        ({"rows": [{"age": 1.0}]}, 422, "has no 'id'"),
    ],
)
def test_bad_requests_get_a_one_line_reason(sql_server, body, status, message):
    url, proc = sql_server
    r = post(url, body)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert message in error and "\n" not in error
    assert proc.poll() is None
    assert httpx.get(f"{url}/health", timeout=CLIENT_TIMEOUT).status_code == 200


def test_slow_and_failing_feature_service(files, small_model, serve_cli):
    plan, X, costs = small_model
    keys = list(range(len(X)))
    service = FeatureService(X, NAMES, keys)
    with (
        serving(service.app) as features_url,
        serve_cli(str(files / "plan.json"), "--provider", features_url, "--timeout", "1.0") as (
            url,
            proc,
        ),
    ):
        r = post(url, {"rows": [{"id": i} for i in range(20)]})
        assert r.status_code == 200, r.text
        uniform = CostModel.uniform(plan.n_features, feature_names=NAMES)
        check_against_dense(r.json()["results"], plan, X, uniform, list(range(20)))
        service.delays["age"] = 2.0
        start = time.monotonic()
        r = post(url, {"rows": [{"id": 1}]})
        assert r.status_code == 504 and "did not" in r.json()["error"], r.text
        assert time.monotonic() - start < CLIENT_TIMEOUT
        service.delays.clear()
        service.fail = ("age",)
        r = post(url, {"rows": [{"id": 1}]})
        # What the service said and where it is are in the server log, not in the answer.
        assert r.status_code == 502 and "the feature provider failed (reference" in r.json()["error"], r.text
        assert features_url.split("//")[1] not in r.text and "extractor crashed" not in r.text
        assert proc.poll() is None
        assert httpx.get(f"{url}/health", timeout=CLIENT_TIMEOUT).status_code == 200


def test_serve_refuses_a_bad_configuration(files):
    from thrifty.cli import main

    assert main(["serve", str(files / "plan.json"), "--provider", f"sqlite:///{files / 'store.db'}"]) == 2
    assert (
        main(
            [
                "serve",
                str(files / "plan.json"),
                "--provider",
                f"sqlite:///{files / 'store.db'}",
                "--table",
                "nope",
                "--key-column",
                "pid",
            ]
        )
        == 2
    )


def test_serve_prefetches_what_calibration_rows_use(files, small_model, serve_cli, tmp_path):
    """--rounds parallel --prefetch CSV: each answer is the in-process lazy evaluation with the
    same Prefetch (its prefetched features charged), and the predictions are the dense ones."""
    import pandas as pd

    from thrifty import prefetch_plan
    from thrifty.runtime.lazy import array_provider

    plan, X, costs = small_model
    calibration = tmp_path / "calibration.csv"
    pd.DataFrame(X[:200], columns=NAMES).to_csv(calibration, index=False)
    prefetch = prefetch_plan(
        plan, pd.DataFrame(X[:200], columns=NAMES), costs, p=0.5, parallel=True, progress=False
    )
    assert len(prefetch.features) > 0  # the test needs something prefetched
    rows = list(range(200, 240))
    lazy = evaluate(plan, array_provider(X[rows]), costs, n_rows=len(rows), rounds=prefetch)
    args = ["--provider", f"sqlite:///{files / 'store.db'}", "--table", "features", "--key-column", "pid"]
    args += ["--costs", str(files / "costs.json"), "--rounds", "parallel", "--prefetch", str(calibration)]
    with serve_cli(str(files / "plan.json"), *args) as (url, proc):
        r = post(url, {"rows": [{"id": i} for i in rows]})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["prediction"] for x in results] == evaluate(plan, X[rows], costs).labels.tolist()
    np.testing.assert_allclose([x["cost"] for x in results], lazy.cost.total, rtol=1e-12)
    assert [x["acquired"] for x in results] == [
        [NAMES[j] for j in np.flatnonzero(a)] for a in lazy.cost.acquired
    ]
