"""Saving and loading forests and plans (thrifty.save / thrifty.load)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import thrifty
from tests._helpers.reference import random_forest, random_inputs
from thrifty import Cascade, Full, Gated, Linear, Sequential, evaluate


def plans(rng):
    forest = random_forest(rng, 5, n_trees=6)
    yield forest
    yield Full(forest)
    yield Sequential(forest, [5, 3, 1], [1.0, np.inf, 0.5], [-1.0, -np.inf, 0.0])
    yield Cascade(forest, rng.normal(size=(2, 6)), [-0.5, 0.0], [0.1, 0.2])
    yield Gated(
        random_forest(rng, 5, n_trees=2),
        Linear(np.r_[1.0, 0, 0, 0, -1.0], 0.5, link="sigmoid", task="binary"),
        forest,
    )


@pytest.mark.parametrize("index", range(5))
def test_save_load_round_trip(tmp_path, index):
    rng = np.random.default_rng(index)
    model = list(plans(rng))[index]
    X = np.nan_to_num(random_inputs(rng, 50, 5), posinf=3.0, neginf=-3.0)
    path = thrifty.save(model, tmp_path / "model.json")
    again = thrifty.load(path)
    assert type(again) is type(model)
    a, b = evaluate(model, X), evaluate(again, X)
    np.testing.assert_array_equal(a.raw, b.raw)
    np.testing.assert_array_equal(a.cost.total, b.cost.total)
    json.loads(path.read_text())  # plain JSON: no pickle, no infinities


def test_load_rejects_what_it_cannot_read(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        thrifty.load(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a thrifty JSON model"):
        thrifty.load(bad)
    bad.write_text(json.dumps({"format": "thrifty.plan", "version": 99, "kind": "full"}))
    with pytest.raises(ValueError, match="newer than this thrifty"):
        thrifty.load(bad)
    bad.write_text(json.dumps({"format": "thrifty.plan", "version": 1, "kind": "mystery"}))
    with pytest.raises(ValueError, match="unknown plan kind"):
        thrifty.load(bad)
