"""Leaf masks by ``vpternlogq`` in the scores-only entry (``compiled.ir_ternlog``): forced on
with AVX-512, a plan's raw scores equal the interpreter's, the serving path's and LightGBM's bit
for bit, with 16-bit, 32-bit and no ranks (NaN, infinities, values on and next to thresholds,
signed zeros, subnormals, categorical and "zero as missing" splits, category sets of three
words, several outputs, trees of more than 64 leaves, more than 64 features, oblivious trees,
0 to 600 rows); the rule (AVX-512 and 16-bit ranks only), the switch and the cache key."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES
from tests._helpers.vector_forests import FORESTS, SPECIAL_VALUES, special_thresholds, wide
from thrifty import Forest, Full, evaluate
from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.choice import TERNLOG_ENV, ternlog_masks
from thrifty.runtime.compiled.ir_ranks import RANKS_ENV
from thrifty.runtime.compiled.ir_vraw import vraw_module_irs
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.tables import leaf_tables

AVX512 = "avx512" in targets.runnable()
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
CASES = {
    **FORESTS,
    # Thresholds at infinities, signed zeros, subnormals and NaN in trees of up to 9 levels.
    "special-deep": special_thresholds(
        random_forest(np.random.default_rng(34), N_FEATURES, n_trees=5, max_depth=9), 34
    ),
}


@pytest.fixture
def target(monkeypatch):
    if not AVX512:
        pytest.skip("ternlog masks are AVX-512 code: this CPU has no AVX-512")
    monkeypatch.setenv(targets.ENV, "avx512")
    monkeypatch.setenv("THRIFTY_BLOCKS", "vector")
    monkeypatch.setenv(TERNLOG_ENV, "on")
    return "avx512"


def _compiled(forest: Forest):
    """``forest`` compiled with ternlog masks in its scores-only entry."""
    compiled = thrifty.compile(Full(forest))
    assert compiled.raw_path is not None and compiled.forest_code.code.vector
    return compiled


@pytest.mark.parametrize("ranks", ["16", "32", "off"])
@pytest.mark.parametrize("name", list(CASES))
@settings(max_examples=5, deadline=None, suppress_health_check=SLOW)
@given(data=input_matrices(N_FEATURES, max_rows=70, values=SPECIAL_VALUES))
def test_ternlog_masks_equal_the_interpreter_and_the_serving_path(target, name, ranks, data, monkeypatch):
    monkeypatch.setenv(RANKS_ENV, ranks)
    forest = CASES[name]
    X = wide(data, forest.n_features)
    compiled = _compiled(forest)
    # The scores-only entry at every row count (``evaluate`` gives one row to the lanes).
    raw = compiled.raw_path._scores(X, len(X), 1).raw
    np.testing.assert_array_equal(raw, evaluate(Full(forest), X).raw)
    np.testing.assert_array_equal(raw, compiled.serving.serve(X).raw)


@pytest.mark.parametrize("n", [0, 1, 15, 16, 17, 31, 32, 33, 255, 256, 257, 600])
def test_every_row_count_past_whole_vectors(target, n):
    """Row counts around the vectors' 8 to 32 rows and the driver's 256: a partial vector
    stores no score past its rows."""
    rng = np.random.default_rng(n)
    forest = FORESTS["deep"]
    X = rng.uniform(-5, 70, (n, N_FEATURES))
    X[rng.random(X.shape) < 0.2] = np.nan
    compiled = _compiled(forest)
    reference = evaluate(Full(forest), X).raw
    for threads in (1, 2):
        np.testing.assert_array_equal(compiled.raw_path._scores(X, n, threads).raw, reference)


_MODEL: list = []


def _lightgbm(lgb):
    """A LightGBM model of trees of up to 100 leaves on 5 features, NaN in training and one
    categorical feature."""
    if not _MODEL:
        rng = np.random.default_rng(8)
        X = rng.normal(size=(3000, 5))
        X[:, 4] = rng.integers(0, 12, len(X))
        X[rng.random(X.shape) < 0.1] = np.nan
        y = (np.nan_to_num(X[:, 0]) + np.sin(3 * np.nan_to_num(X[:, 1])) + (X[:, 4] % 3 == 1) > 0.5).astype(
            int
        )
        model = lgb.LGBMClassifier(
            n_estimators=12, num_leaves=100, min_child_samples=3, verbose=-1, random_state=0
        ).fit(X, y, categorical_feature=[4])
        _MODEL.append((model, Forest.from_model(model)))
    return _MODEL[0]


@pytest.mark.parametrize("ranks", ["16", "32"])
@settings(max_examples=5, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(5, max_rows=70, values=SPECIAL_VALUES))
def test_ternlog_masks_match_lightgbm(target, ranks, X, monkeypatch):
    lgb = pytest.importorskip("lightgbm")
    monkeypatch.setenv(RANKS_ENV, ranks)
    model, forest = _lightgbm(lgb)
    compiled = _compiled(forest)
    got = compiled.raw_path._scores(X, len(X), 1).raw
    np.testing.assert_array_equal(got, evaluate(forest, X).raw)
    if len(X):
        np.testing.assert_array_equal(got, model.booster_.predict(X, raw_score=True))


def test_the_rule_the_switch_and_the_cache_key(monkeypatch):
    """Ternlog masks by the rule for 16-bit ranks on AVX-512 only; ``THRIFTY_TERNLOG`` forces
    either way on AVX-512 (never elsewhere), names itself when wrong, and the cache key tells
    the two apart; the generated code has the instruction only when on."""
    monkeypatch.delenv(TERNLOG_ENV, raising=False)
    assert ternlog_masks("avx512", 16) and not ternlog_masks("avx512", 32) and not ternlog_masks("avx512", 0)
    assert not any(ternlog_masks(t, 16) for t in ("avx2", "neon", "sve", "generic"))
    monkeypatch.setenv(TERNLOG_ENV, "off")
    assert not ternlog_masks("avx512", 16)
    monkeypatch.setenv(TERNLOG_ENV, "on")
    assert ternlog_masks("avx512", 32) and ternlog_masks("avx512", 0) and not ternlog_masks("avx2", 16)
    monkeypatch.setenv(TERNLOG_ENV, "sideways")
    with pytest.raises(InvalidParameterError, match=TERNLOG_ENV):
        ternlog_masks("avx512", 16)
    forest = FORESTS["deep"]
    order, exits = np.arange(forest.n_trees), np.zeros(forest.n_trees, dtype=np.int8)
    lay = Layout(forest, order, exits, *leaf_tables(forest)[1:])
    for ranks, L in ((16, 8), (32, 8), (0, 8)):
        on = vraw_module_irs(lay, "k", L, ranks=ranks, ternlog=True)[0]
        off = vraw_module_irs(lay, "k", L, ranks=ranks, ternlog=False)[0]
        assert "pternlog" in on and "pternlog" not in off
    if AVX512:
        monkeypatch.setenv(targets.ENV, "avx512")
        monkeypatch.setenv("THRIFTY_BLOCKS", "vector")
        keys = set()
        for kind in ("on", "off"):
            monkeypatch.setenv(TERNLOG_ENV, kind)
            keys.add(objects.code_key(lay))
        assert len(keys) == 2
