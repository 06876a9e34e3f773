"""Categorical splits of x86 rank blocks on category codes (``thrifty.runtime.compiled.ir_catshift``).

Each coded split's outcome is ``ir_vector._goes_right``'s on NaN, infinities, signed zeros,
negative, fractional and out-of-range codes, both NaN sides and sets of one and two words;
whole plans with codes on and off give the interpreter's results bit for bit on every x86
target this CPU runs (ranks of 32 and 16 bits and doubles, oblivious trees, trees of more than
64 leaves, multiclass, exits, 0 to 40 rows) and LightGBM's predictions on a categorical model;
the aarch64 targets never take codes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.categorical_splits import assert_codes_agree, coded_splits
from tests._helpers.compiled_plans import check, input_matrices
from tests._helpers.native_ir import native_function
from tests._helpers.oblivious import oblivious_forest
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import Forest, Full, Sequential, evaluate
from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled import ir_catshift, targets
from thrifty.runtime.compiled.ir_ranks import RANKS_ENV
from thrifty.runtime.compiled.ir_vector import _Emitter, _goes_right, vector_module_irs
from thrifty.runtime.compiled.ir_vraw import vraw_module_irs
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.tables import leaf_tables

X86 = [n for n in targets.runnable() if n in ("avx512", "avx2")]
EXAMPLES = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.mark.parametrize("target", X86)
def test_coded_splits_decide_as_double_splits(target):
    """``goes_right_ir`` on the codes of ``x`` is ``_goes_right`` on ``x`` for every probe,
    set and NaN side (native code of the target's lanes of 32-bit ranks)."""
    lanes = 2 * targets.host(target).lanes
    assert ir_catshift.supported(lanes, 32)
    f = coded_splits(np.random.default_rng(0))
    e, globals_ = _Emitter(lanes), []
    V = e.V
    e.lines += ["define void @both(ptr %in, ptr %out) {", "entry:", f"  %x = load {V}, ptr %in, align 8"]
    code = ir_catshift.code_ir(e, "%x")
    n = len(f.missing_left)
    for node in range(n):
        assert ir_catshift.fits(f, node)
        coded = ir_catshift.goes_right_ir(e, f, node, code)
        direct = _goes_right(e, f, node, "%x", globals_, "k")
        both = [e(f"zext {e.B} {m} to <{lanes} x i8>") for m in (coded, direct)]
        for i, m in enumerate(both):
            at = e(f"getelementptr <{lanes} x i8>, ptr %out, i64 {2 * node + i}")
            e.lines.append(f"  store <{lanes} x i8> {m}, ptr {at}, align 1")
    e.lines += ["  ret void", "}"]
    decl = ir_catshift.declarations(lanes) + (
        f"declare {V} @llvm.masked.gather.v{lanes}f64.v{lanes}p0(<{lanes} x ptr>, i32 immarg, {e.B}, {V})\n"
        f"declare <{lanes} x i32> @llvm.masked.gather.v{lanes}i32.v{lanes}p0(<{lanes} x ptr>, i32 immarg, "
        f"{e.B}, <{lanes} x i32>)"
    )
    engine, run = native_function([*globals_, decl, *e.lines], "both", targets.host(target).machine())
    assert_codes_agree(run, lanes, n)


def test_codes_are_x86s_only(monkeypatch):
    """The rule codes categories on both x86 targets and never on aarch64 (no such shift);
    ``THRIFTY_CATSHIFT=off`` turns codes off, is in the cache key, and a bad value is refused."""
    monkeypatch.delenv(targets.CAT_SHIFT_ENV, raising=False)
    assert targets.cross("avx2").cat_shift and targets.cross("avx512").cat_shift
    assert not targets.cross("neon").cat_shift and not targets.cross("sve").cat_shift
    on = targets.cross("avx2").key()
    monkeypatch.setenv(targets.CAT_SHIFT_ENV, "off")
    assert not targets.cross("avx2").cat_shift
    assert targets.cross("avx2").key() != on
    monkeypatch.setenv(targets.CAT_SHIFT_ENV, "sometimes")
    with pytest.raises(InvalidParameterError, match="THRIFTY_CATSHIFT"):
        _ = targets.cross("avx2").cat_shift


def _forest() -> Forest:
    """Random trees with categorical splits of one and two words (24) on features that also
    have numeric splits."""
    rng = np.random.default_rng(11)
    return random_forest(rng, N_FEATURES, n_trees=9, max_depth=5)


FOREST = _forest()
MULTI = random_forest(np.random.default_rng(12), N_FEATURES, n_trees=6, n_outputs=3)
# Oblivious trees of 8, 128 and 4 leaves with categorical levels; trees of 88 and 75 leaves.
MIXED = oblivious_forest(np.random.default_rng(13), N_FEATURES, [3, 7, 2], others=0)
DEEP = random_forest(np.random.default_rng(14), N_FEATURES, n_trees=4, max_depth=8)
assert int(np.sum(DEEP.feature < 0)) > 150
PLANS = {
    "full": Full(FOREST),
    "sequential": Sequential(FOREST, np.arange(9)[::-1], np.full(9, 1.5), np.full(9, -1.5)),
    "multiclass": Full(MULTI),
    "oblivious": Full(MIXED),
    "deep": Full(DEEP),
}
# (ranks, coded categories) forced.
SETTINGS = [("32", "on"), ("32", "off"), ("16", "on"), ("off", "on")]


@pytest.fixture
def coded(monkeypatch, tmp_path):
    """Vector blocks of 32-bit ranks with coded categories, compiled into an empty cache."""
    monkeypatch.setenv("THRIFTY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(RANKS_ENV, "32")
    monkeypatch.setenv(targets.CAT_SHIFT_ENV, "on")
    monkeypatch.setenv("THRIFTY_BLOCKS", "vector")


@pytest.mark.parametrize("target", X86)
@pytest.mark.parametrize("setting", SETTINGS, ids="-".join)
@pytest.mark.parametrize("name", list(PLANS))
@EXAMPLES
@given(X=input_matrices(N_FEATURES, max_rows=40))
def test_coded_plans_match_the_interpreter(coded, monkeypatch, target, setting, name, X):
    """Plans with coded categories on and off give the interpreter's results bit for bit
    (dense, one row, lazily; and scores only), on 0 to 40 rows of NaN, infinities and codes."""
    monkeypatch.setenv(targets.ENV, target)
    for var, value in zip((RANKS_ENV, targets.CAT_SHIFT_ENV), setting):
        monkeypatch.setenv(var, value)
    plan = PLANS[name]
    compiled = check(plan, X, cost_model(N_FEATURES))
    np.testing.assert_array_equal(compiled.evaluate(X).raw, evaluate(plan, X).raw)


def _lay(forest: Forest) -> Layout:
    n = forest.n_trees
    return Layout(forest, np.arange(n), np.zeros(n, dtype=np.int8), *leaf_tables(forest)[1:])


@pytest.mark.parametrize("target", X86)
def test_coded_blocks_take_the_shift(coded, monkeypatch, target):
    """The generated blocks (vector and scores only) shift codes where on and not where off:
    the tests above exercise the path they name."""
    monkeypatch.setenv(targets.ENV, target)
    t = targets.current()
    lay = _lay(FOREST)
    for flag in (True, False):
        irs = vector_module_irs(lay, "k", 100, t.lanes, t.vscale, t.by_exponent, 32, flag)
        irs += vraw_module_irs(lay, "k", t.lanes, t.vscale, t.by_exponent, 32, cat_shift=flag)
        assert all(("psllv.d" in ir) is flag for ir in irs[:1] + irs[-2:-1])


def test_categorical_lightgbm_model_on_avx2(coded, monkeypatch):
    """A LightGBM model with categorical features of up to 70 categories (sets past two words
    keep doubles) on AVX2 rank blocks predicts what LightGBM predicts."""
    lgb = pytest.importorskip("lightgbm")
    if "avx2" not in X86:
        pytest.skip("this CPU does not run AVX2")
    monkeypatch.setenv(targets.ENV, "avx2")
    rng = np.random.default_rng(3)
    n = 3000
    X = np.column_stack([rng.integers(0, 70, n), rng.integers(0, 12, n), rng.normal(size=n)]).astype(float)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = ((X[:, 0] % 7 < 3) ^ (X[:, 1] % 3 == 0) ^ (np.nan_to_num(X[:, 2]) > 0.3)).astype(int)
    model = lgb.LGBMClassifier(
        n_estimators=30, num_leaves=16, verbose=-1, min_child_samples=5, max_cat_to_onehot=2, cat_smooth=1
    ).fit(X, y, categorical_feature=[0, 1])
    forest = Forest.from_model(model)
    assert (forest.cat_start[forest.feature >= 0] >= 0).any()
    compiled = thrifty.compile(forest)
    T = np.concatenate([X[:200], [[np.inf, -0.5, np.nan], [-1.0, 64.0, 0.0], [69.0, np.nan, -np.inf]]])
    got = compiled.evaluate(T).raw
    np.testing.assert_array_equal(got, evaluate(forest, T).raw)
    np.testing.assert_array_equal(got, model.booster_.predict(T, raw_score=True))


@pytest.mark.parametrize("name", ["avx2", "avx512"])
def test_coded_blocks_cross_compile_for_any_x86_cpu(name):
    """Coded blocks compile for a generic CPU of each x86 level (x86-64-v3, v4), not only this one."""
    t = targets.cross(name)
    lay = _lay(FOREST)
    irs = vector_module_irs(lay, "k", 100, t.lanes, t.vscale, t.by_exponent, 32, True)
    irs += vraw_module_irs(lay, "k", t.lanes, t.vscale, t.by_exponent, 32, cat_shift=True)
    for ir in irs[:1] + irs[-2:-1]:
        assert "psllv.d" in ir
        obj = objects._emit(ir, t)
        assert obj[:4] == b"\x7fELF" and int.from_bytes(obj[18:20], "little") == 62
