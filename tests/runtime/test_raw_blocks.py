"""Blocks of the scores-only entry sized apart from the vector blocks (``vblocks.raw_blocks``,
``THRIFTY_RAW_TREES``): with AVX-512, a plan's raw scores equal the interpreter's, the serving
path's and LightGBM's bit for bit at every block size (16-bit, 32-bit and no ranks; ternlog and
select masks;
NaN, infinities, values on and next to thresholds, signed zeros, categorical splits, more than
64 leaves and features, several outputs, 0 to 70 rows); the setting is checked, named by the
cache key, and a block too large for 16-bit ranks is an error naming the fix."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.ir_vraw as ir_vraw
import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES
from tests._helpers.vector_forests import FORESTS, SPECIAL_VALUES, special_thresholds, wide
from thrifty import Forest, Full, evaluate
from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.choice import TERNLOG_ENV
from thrifty.runtime.compiled.ir_ranks import RANKS_ENV
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.tables import leaf_tables
from thrifty.runtime.compiled.vblocks import (
    RAW_TREES_ENV,
    raw_blocks,
    vblocks,
)

AVX512 = "avx512" in targets.runnable()
CASES = {
    **{name: FORESTS[name] for name in ("full", "multiclass", "wide", "categories")},
    # Thresholds at infinities, signed zeros, subnormals and NaN in trees of up to 8 levels
    # (more than 64 leaves), most features compared by ranks.
    "special-deep": special_thresholds(
        random_forest(np.random.default_rng(35), N_FEATURES, n_trees=6, max_depth=8), 35
    ),
}
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@pytest.fixture
def target(monkeypatch):
    if not AVX512:
        pytest.skip("ternlog masks are AVX-512 code: this CPU has no AVX-512")
    monkeypatch.setenv(targets.ENV, "avx512")
    monkeypatch.setenv("THRIFTY_BLOCKS", "vector")
    return "avx512"


def _layout(forest: Forest) -> Layout:
    order, exits = np.arange(forest.n_trees), np.zeros(forest.n_trees, dtype=np.int8)
    return Layout(forest, order, exits, *leaf_tables(forest)[1:])


@pytest.mark.parametrize(
    ("trees", "ranks", "ternlog"),
    [
        ("1", "16", "on"),
        ("4", "16", "on"),
        ("100", "16", "on"),
        ("3", "32", "on"),
        ("4", "32", "off"),
        ("2", "off", "on"),
    ],
)
@pytest.mark.parametrize("name", list(CASES))
@settings(max_examples=3, deadline=None, suppress_health_check=SLOW)
@given(data=input_matrices(N_FEATURES, max_rows=70, values=SPECIAL_VALUES))
def test_any_block_size_equals_the_interpreter(target, name, trees, ranks, ternlog, data, monkeypatch):
    monkeypatch.setenv(RANKS_ENV, ranks)
    monkeypatch.setenv(TERNLOG_ENV, ternlog)
    monkeypatch.setenv(RAW_TREES_ENV, trees)
    forest = CASES[name]
    X = wide(data, forest.n_features)
    compiled = thrifty.compile(Full(forest))
    assert compiled.raw_path is not None and compiled.forest_code.code.vector
    raw = compiled.raw_path._scores(X, len(X), 1).raw
    np.testing.assert_array_equal(raw, evaluate(Full(forest), X).raw)
    np.testing.assert_array_equal(raw, compiled.serving.serve(X).raw)


_MODEL: list = []


def _lightgbm(lgb):
    """A LightGBM model of 12 trees of up to 100 leaves on 5 features, NaN in training and one
    categorical feature."""
    if not _MODEL:
        rng = np.random.default_rng(9)
        X = rng.normal(size=(3000, 5))
        X[:, 4] = rng.integers(0, 12, len(X))
        X[rng.random(X.shape) < 0.1] = np.nan
        y = np.nan_to_num(X[:, 0]) + np.sin(3 * np.nan_to_num(X[:, 1])) + (X[:, 4] % 3 == 1) > 0.5
        model = lgb.LGBMClassifier(
            n_estimators=12, num_leaves=100, min_child_samples=3, verbose=-1, random_state=0
        ).fit(X, y.astype(int), categorical_feature=[4])
        _MODEL.append((model, Forest.from_model(model)))
    return _MODEL[0]


@settings(max_examples=5, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(5, max_rows=70, values=SPECIAL_VALUES))
def test_long_blocks_match_lightgbm(target, X, monkeypatch):
    lgb = pytest.importorskip("lightgbm")
    monkeypatch.setenv(RANKS_ENV, "16")
    monkeypatch.setenv(RAW_TREES_ENV, "5")
    model, forest = _lightgbm(lgb)
    got = thrifty.compile(Full(forest)).raw_path._scores(X, len(X), 1).raw
    np.testing.assert_array_equal(got, evaluate(forest, X).raw)
    if len(X):
        np.testing.assert_array_equal(got, model.booster_.predict(X, raw_score=True))


def test_the_settings_their_errors_and_the_cache_key(monkeypatch):
    lay = _layout(CASES["special-deep"])
    monkeypatch.delenv(RAW_TREES_ENV, raising=False)
    assert raw_blocks(lay) == vblocks(lay)
    monkeypatch.setenv(RAW_TREES_ENV, "4")
    assert raw_blocks(lay) == [(0, 4), (4, 2)]
    for bad in ("0", "-2", "many", "1.5"):
        monkeypatch.setenv(RAW_TREES_ENV, bad)
        with pytest.raises(InvalidParameterError, match=RAW_TREES_ENV):
            raw_blocks(lay)
    # Too many thresholds of a feature in one block for 16-bit ranks: an error naming the fix.
    monkeypatch.setenv(RAW_TREES_ENV, "6")
    monkeypatch.setattr(ir_vraw, "MAX_RANKS16", 3)
    with pytest.raises(InvalidParameterError, match=f"{RAW_TREES_ENV}.*lower"):
        ir_vraw.vraw_module_irs(lay, "k", 8, ranks=16, ternlog=True)
    monkeypatch.undo()
    if AVX512:
        monkeypatch.setenv(targets.ENV, "avx512")
        monkeypatch.setenv("THRIFTY_BLOCKS", "vector")
        keys = set()
        for trees in ("", "2", "3"):
            monkeypatch.setenv(RAW_TREES_ENV, trees)
            keys.add(objects.code_key(lay))
        assert len(keys) == 3
