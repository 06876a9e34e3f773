"""The compiled-code cache: verified before loading, private to the user, never trusted blindly."""

from __future__ import annotations

import os
import stat
import warnings

import lightgbm as lgb
import numpy as np
import pytest

import thrifty
from tests._helpers.compiled_plans import PLANS, plan_layout
from thrifty.runtime.compiled import CacheWarning, cache_dir
from thrifty.runtime.compiled.cache import MAGIC

posix_only = pytest.mark.skipif(os.name != "posix", reason="mode bits and owners are POSIX")


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    forest = thrifty.Forest.from_model(
        lgb.LGBMClassifier(n_estimators=12, num_leaves=6, verbose=-1).fit(X, y)
    )
    return forest, X


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    directory = tmp_path / "cache"
    monkeypatch.setenv("THRIFTY_CACHE_DIR", str(directory))
    return directory


def _compile(forest):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compiled = thrifty.compile(forest)
    return compiled, [w for w in seen if issubclass(w.category, CacheWarning)]


def _same_as_interpreter(compiled, forest, X) -> bool:
    want = thrifty.evaluate(forest, X)
    got = compiled.evaluate(X)
    one = [compiled.evaluate(X[i : i + 1]).raw[0] for i in range(len(X))]
    return bool(
        np.array_equal(got.raw, want.raw)
        and np.array_equal(one, want.raw)
        and np.array_equal(got.cost.total, want.cost.total)
    )


def _entry(directory):
    (entry,) = directory.glob("*.o")
    return entry


@posix_only
def test_the_cache_is_created_private_and_reloads(model, cache_home):
    forest, X = model
    first, warned = _compile(forest)
    assert not first.forest_code.code.from_cache and warned == []
    assert stat.S_IMODE(cache_home.stat().st_mode) == 0o700
    entry = _entry(cache_home)
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert entry.read_bytes().startswith(MAGIC)
    again, warned = _compile(forest)
    assert again.forest_code.code.from_cache and warned == []
    assert _same_as_interpreter(again, forest, X)


def test_every_flipped_byte_of_an_entry_is_caught_and_replaced(model, cache_home):
    # Each flip is a new load of the entry (as a new process would make): the damage is found
    # before the code runs, the entry is compiled again, and the results are the interpreter's.
    forest, X = model
    _compile(forest)
    entry = _entry(cache_home)
    good = entry.read_bytes()
    positions = sorted(
        {0, len(MAGIC), len(MAGIC) + 40, len(good) - 1, *np.linspace(0, len(good) - 1, 40, dtype=int)}
    )
    for at in positions:
        damaged = bytearray(good)
        damaged[at] ^= 0x10
        entry.write_bytes(bytes(damaged))
        compiled, warned = _compile(forest)
        assert len(warned) == 1 and "damaged" in str(warned[0].message), at
        assert not compiled.forest_code.code.from_cache
        assert _same_as_interpreter(compiled, forest, X[:50]), at
        assert entry.read_bytes() == good, at  # replaced by the fresh compile
    assert len(positions) > 30


@pytest.mark.parametrize("damage", ["truncated", "empty", "other key", "old format"])
def test_other_damage_is_caught_too(model, cache_home, damage):
    forest, X = model
    _compile(forest)
    entry = _entry(cache_home)
    good = entry.read_bytes()
    if damage == "truncated":
        entry.write_bytes(good[: len(good) // 2])
    elif damage == "empty":
        entry.write_bytes(b"")
    elif damage == "other key":
        # A valid entry of another key, renamed: its digest covers its own key.
        other = thrifty.Forest.from_model(
            lgb.LGBMRegressor(n_estimators=3, num_leaves=4, verbose=-1).fit(X, X[:, 0])
        )
        _compile(other)
        (other_entry,) = set(cache_home.glob("*.o")) - {entry}
        entry.write_bytes(other_entry.read_bytes())
    else:
        entry.write_bytes(good[len(MAGIC) + 32 :])  # the bare objects, as version 12 wrote them
    compiled, warned = _compile(forest)
    assert len(warned) == 1 and not compiled.forest_code.code.from_cache
    assert _same_as_interpreter(compiled, forest, X[:50])


@posix_only
@pytest.mark.parametrize("what", ["directory", "entry"])
def test_code_others_can_write_is_never_loaded(model, cache_home, what):
    forest, X = model
    _compile(forest)
    entry = _entry(cache_home)
    target = cache_home if what == "directory" else entry
    target.chmod(stat.S_IMODE(target.stat().st_mode) | stat.S_IWOTH)
    # A planted entry with a valid digest: only the permission check stands in its way.
    compiled, warned = _compile(forest)
    assert len(warned) == 1
    message = str(warned[0].message)
    assert str(target) in message and "other users can write" in message and "THRIFTY_CACHE_DIR" in message
    assert not compiled.forest_code.code.from_cache
    assert _same_as_interpreter(compiled, forest, X[:50])


def test_cache_dir_follows_the_environment(cache_home):
    assert cache_dir() == cache_home


def test_generator_source_is_part_of_every_key(tmp_path, monkeypatch):
    """An edit to the code generator that forgot to bump CODEGEN_VERSION must not load the old
    object code: the generator's source digest is in the forest and plan keys."""
    from thrifty.runtime.compiled import cache, loader, objects

    gen = tmp_path / "gen"
    gen.mkdir()
    (gen / "ir_a.py").write_text("x = 1\n")
    (gen / "notes.txt").write_text("not source")
    first = cache.generator_digest(gen)
    cache.generator_digest.cache_clear()
    (gen / "notes.txt").write_text("changed, but not source")
    assert cache.generator_digest(gen) == first
    cache.generator_digest.cache_clear()
    (gen / "ir_a.py").write_text("x = 2\n")
    assert cache.generator_digest(gen) != first
    cache.generator_digest.cache_clear()

    lay = plan_layout(PLANS["full"])
    forest_key, plan_key = objects.code_key(lay), loader.plan_key("cascade", [np.arange(3)])
    monkeypatch.setattr(cache, "generator_digest", lambda directory=cache.GENERATOR: "edited")
    assert objects.code_key(lay) != forest_key
    assert loader.plan_key("cascade", [np.arange(3)]) != plan_key
