"""Saving and loading forests and plans (thrifty.save / thrifty.load)."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

import thrifty
from tests._helpers.plain_json import loads_plain_json
from tests._helpers.reference import random_forest, random_inputs
from thrifty import Cascade, Full, Gated, Linear, Sequential, evaluate
from thrifty.exceptions import InputError
from thrifty.io import content_checksum


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
    loads_plain_json(path.read_text())  # plain JSON: no pickle, no NaN or infinities


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


@pytest.fixture(scope="module")
def small_models():
    """A 4-tree LightGBM forest and a Sequential plan over it (documents of about 3 KB)."""
    import lightgbm as lgb

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    forest = thrifty.Forest.from_model(lgb.LGBMClassifier(n_estimators=4, num_leaves=4, verbose=-1).fit(X, y))
    plan = Sequential(forest, [2, 0, 3, 1], [1.0, 0.5, np.inf, np.inf], [-1.0, -0.5, -np.inf, -np.inf])
    return {"forest": forest, "plan": plan}


@pytest.mark.parametrize("kind", ["forest", "plan"])
def test_every_bit_flip_is_refused_or_loads_the_same_model(tmp_path, small_models, kind):
    # A deterministic sample of 1,500 of the document's ~23,000 bits (every bit: 22,008 of 22,064
    # flips of the forest refused, 23,520 of 23,576 of the plan, the others identical).
    model = small_models[kind]
    data = thrifty.save(model, tmp_path / "model.json").read_bytes()
    bits = np.random.default_rng(1).choice(8 * len(data), size=1500, replace=False)
    flipped, counts = tmp_path / "flipped.json", {"refused": 0, "identical": 0}
    for bit in bits.tolist():
        damaged = bytearray(data)
        damaged[bit // 8] ^= 1 << (bit % 8)
        flipped.write_bytes(damaged)
        try:
            again = thrifty.load(flipped)
        except InputError as exc:
            assert "\n" not in str(exc)
            counts["refused"] += 1
            continue
        assert type(again) is type(model) and again.to_json() == model.to_json(), f"bit {bit}"
        counts["identical"] += 1
    # Only a flip inside the member's name "checksum" leaves the content intact.
    assert counts["refused"] >= 1450 and sum(counts.values()) == 1500


def test_an_edit_is_refused_unless_accepted(tmp_path, small_models):
    forest = small_models["forest"]
    path = thrifty.save(forest, tmp_path / "model.json")
    d = json.loads(path.read_text())
    assert d["checksum"].startswith("sha256:") and d["checksum"] == content_checksum(d)
    # Other spacing and another order of the members change no content.
    path.write_text(json.dumps(d, indent=2, sort_keys=True))
    assert thrifty.load(path).to_json() == forest.to_json()
    d["link"] = "identity"
    path.write_text(json.dumps(d))
    with pytest.raises(InputError, match="was changed since it was saved .*verify=False"):
        thrifty.load(path)
    assert thrifty.load(path, verify=False).link == "identity"
    # Documents without a checksum (earlier versions, to_json) still load.
    path.write_text(forest.to_json())
    assert thrifty.load(path).to_json() == forest.to_json()


class _Marker:
    """Unpickling it would create the file ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_a_pickle_renamed_as_a_model_is_refused_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"
    path = tmp_path / "model.json"
    path.write_bytes(pickle.dumps(_Marker(marker)))
    with pytest.raises(InputError, match="is a pickle, not a thrifty JSON model; thrifty never unpickles"):
        thrifty.load(path)
    assert not marker.exists()
    path.write_bytes(b"\xff\xfe not text")
    with pytest.raises(InputError, match="is not a thrifty JSON model"):
        thrifty.load(path)
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="not a thrifty JSON model"):
        thrifty.load(path)


@pytest.mark.parametrize("kind", ["forest", "plan"])
def test_a_classifier_with_too_few_classes_is_refused_at_load(tmp_path, small_models, kind):
    d = json.loads(small_models[kind].to_json())
    (d if kind == "forest" else d["forest"])["classes"] = [0]
    path = tmp_path / "model.json"
    path.write_text(json.dumps(d))
    with pytest.raises(
        InputError, match="the binary model lists 1 classes \\(\\[0\\]\\) but its outputs score 2"
    ):
        thrifty.load(path)


def test_saved_documents_follow_the_schema(tmp_path, small_models):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(thrifty.__file__).parent / "schema" / "thrifty.schema.json").read_text())
    for model in small_models.values():
        jsonschema.validate(json.loads(thrifty.save(model, tmp_path / "m.json").read_text()), schema)
