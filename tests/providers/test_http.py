"""http_provider + evaluate_async against a real feature service on 127.0.0.1."""

from __future__ import annotations

import asyncio
import re

import numpy as np
import pytest

from tests._helpers.stores import NAMES
from thrifty import Full, evaluate, evaluate_async
from thrifty.exceptions import InputError, ProviderError
from thrifty.providers import http_provider

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

from tests._helpers.feature_service import FeatureService, serving  # noqa: E402


def run(coro, timeout: float = 60.0):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.fixture
def keys(small_model):
    return [f"p{i}" for i in range(len(small_model[1]))]


def test_http_feature_service_same_as_dense_fetched_concurrently(small_model, keys):
    plan, X, costs = small_model
    service = FeatureService(X, NAMES, keys, delays={"ca": 0.02, "st": 0.01, "age": 0.005})
    dense = evaluate(plan, X, costs)
    with serving(service.app) as url:
        provider = http_provider(url, keys, model=plan, timeout=5)
        ev = run(evaluate_async(plan, provider, costs, n_rows=len(X)))
        np.testing.assert_array_equal(ev.raw, dense.raw)
        np.testing.assert_array_equal(ev.cost.total, dense.cost.total)
        acquired = {(NAMES[f], keys[r]) for r, f in zip(*np.nonzero(dense.cost.acquired))}
        assert len(service.asked) == len(set(service.asked)) and set(service.asked) == acquired
        # The features of one round were requested concurrently.
        assert service.most_in_flight >= 2
        full = Full(plan.forest)
        par = run(evaluate_async(full, provider, costs, n_rows=len(X), trees="parallel"))
        np.testing.assert_array_equal(par.raw, evaluate(full, X, costs).raw)


def test_failing_and_slow_feature_service(small_model, keys):
    plan, X, costs = small_model
    service = FeatureService(X, NAMES, keys, delays={"age": 1.0}, fail=("st",))
    with serving(service.app) as url:
        slow = http_provider(url, keys, model=plan, timeout=0.2)
        with pytest.raises(TimeoutError, match="did not answer for feature 'age' within 0.2 s"):
            run(evaluate_async(plan, slow, costs, n_rows=len(X)))
        fast = http_provider(url, keys, model=plan, timeout=5)
        service.delays.clear()
        with pytest.raises(ConnectionError, match="answered 500 for feature 'st'"):
            run(evaluate_async(plan, fast, costs, n_rows=len(X)))
    with pytest.raises(ConnectionError, match="failed for feature"):
        run(evaluate_async(plan, http_provider(url, keys, model=plan, timeout=1), costs, n_rows=len(X)))


@pytest.mark.parametrize(
    "answer, says",
    [
        ('{"values": [true, true]}', "answered 'true' as value 0"),  # a boolean is no number
        ('{"values": "11"}', """answered '"11"' for feature 'age' on 2 keys"""),  # nor a string of digits
        ('{"values": ["1.5", 2]}', """answered '"1.5"' as value 0"""),
        ('{"values": [[1], [2]]}', "answered a list as value 0"),  # nested lists
        ('{"values": [1.0]}', "answered 1 values for feature 'age' on 2 keys"),  # too few
        ('{"values": [1, 2, 3]}', "answered 3 values for feature 'age' on 2 keys"),  # too many
        ("[1, 2]", "answered a list for feature 'age'"),
        ('{"value": [1, 2]}', """answered an object without "values" for feature 'age'"""),
        ("<html>oops</html>", "answered '<html>oops</html>' for feature 'age', not JSON"),
        ('{"values": [1' + "0" * 400 + ", 1]}", "answered an integer too large for a float"),
    ],
)
def test_feature_service_answers_numbers_or_null_only(small_model, keys, answer, says):
    plan, X, costs = small_model
    service = FeatureService(X, NAMES, keys)
    service.answers["age"] = answer
    with serving(service.app) as url:
        provider = http_provider(url, keys, model=plan, timeout=5)
        with pytest.raises(ProviderError, match=re.escape(f"the feature service {url} {says}")):
            run(provider.fetch([(0, np.array([0, 1]))]))
        service.answers["age"] = '{"values": [null, 2.5]}'
        np.testing.assert_array_equal(run(provider.fetch([(0, np.array([0, 1]))]))[0], [np.nan, 2.5])


def test_keys_are_checked(small_model, keys):
    plan, X, costs = small_model
    with pytest.raises(InputError, match="keys\\[1\\] is the boolean True"):
        http_provider("http://127.0.0.1:1/", [1, True], model=plan)
    provider = http_provider("http://127.0.0.1:1/", keys[:10], model=plan)
    with pytest.raises(InputError, match="provider has keys for 10 rows"):
        run(provider.fetch([(0, np.array([9, 10]))]))
