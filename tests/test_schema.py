"""The published JSON schema accepts every saved forest and plan, and rejects malformed ones."""

import json
from importlib import resources

import lightgbm as lgb
import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from thrifty import Cascade, Forest, Full, Gated, Linear, Sequential
from thrifty.runtime.plans import BinnedExits

jsonschema = pytest.importorskip("jsonschema")


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(resources.files("thrifty").joinpath("schema/thrifty.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def forests():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    y3 = np.digitize(X[:, 0], [-0.5, 0.5])
    boosted = Forest.from_model(lgb.LGBMClassifier(n_estimators=5, num_leaves=4, verbose=-1).fit(X, y))
    multi = Forest.from_model(lgb.LGBMClassifier(n_estimators=3, num_leaves=4, verbose=-1).fit(X, y3))
    rf = Forest.from_model(RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y))
    return boosted, multi, rf


def _documents(forests):
    boosted, multi, rf = forests
    T = boosted.n_trees
    linear = Linear(np.array([0.5, 0.0, -1.0, 0.0]), 0.1, link="sigmoid", task="binary", classes=[0, 1])
    yield "forest", boosted
    yield "multiclass forest", multi
    yield "random forest", rf
    yield "full", Full(boosted)
    yield "sequential", Sequential(boosted, np.arange(T)[::-1], np.full(T, 2.0), np.full(T, -np.inf))
    yield "sequential, binned", Sequential(boosted, bins=BinnedExits(np.full(T, 0.5), [{0: (1.0, -1.0)}] * T))
    yield "multiclass margin", Sequential(multi, eps_pos=np.full(multi.n_trees, 1.0))
    yield "cascade", Cascade(boosted, np.ones((2, T)), [-1.0, 0.0])
    yield "linear", linear
    yield "gated", Gated(linear, Full(boosted), Sequential(boosted))


def test_every_saved_kind_is_valid(validator, forests):
    for name, model in _documents(forests):
        errors = list(validator.iter_errors(json.loads(model.to_json())))
        assert not errors, f"{name}: {errors[0].message}"


@pytest.mark.parametrize(
    "breakage",
    [
        lambda d: d.pop("arrays"),  # no node arrays
        lambda d: d["arrays"].pop("threshold"),  # one array missing
        lambda d: d.update(task="clustering"),  # unknown task
        lambda d: d.update(link="tanh"),  # unknown link
        lambda d: d["arrays"]["value"].update(dtype="float64"),  # not a NumPy dtype string
        lambda d: d.update(format="thrifty.plan"),  # a forest claiming to be a plan
    ],
)
def test_malformed_forests_are_rejected(validator, forests, breakage):
    d = json.loads(forests[0].to_json())
    breakage(d)
    assert not validator.is_valid(d)


def test_malformed_plans_are_rejected(validator, forests):
    d = json.loads(Sequential(forests[0]).to_json())
    d["eps_pos"][0] = "infinity"
    assert not validator.is_valid(d)
    d = json.loads(Gated(Full(forests[0]), Full(forests[0]), Full(forests[0])).to_json())
    d["low"]["kind"] = "lookup"
    assert not validator.is_valid(d)
