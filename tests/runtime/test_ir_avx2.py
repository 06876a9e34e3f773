"""AVX2's 16-bit rank blocks (``ir_ranks.RANKS16_AVX2_LEAVES``, ``ir_avx2``, ``ir_catshift`` on 16 lanes).

The exit leaf of two 16-bit mask words (``ir_avx2.exit_leaf_pair16``) is every leaf 0-31's
position under random bits above it; categorical splits on sixteen coded lanes decide as the
double test on NaN, infinities, signed zeros, fractions and codes past the words; the rule takes
16-bit ranks on AVX2 for trees of up to 32 leaves (and is in the cache key); whole plans on AVX2's own
choice give the interpreter's results bit for bit (NaN, infinities, categorical, multiclass,
more than 64 features, exits, 0 to 40 rows) and a categorical LightGBM model LightGBM's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.categorical_splits import assert_codes_agree, coded_splits
from tests._helpers.compiled_plans import check, input_matrices
from tests._helpers.native_ir import native_function
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import CostModel, Forest, Full, Sequential, evaluate
from thrifty.runtime.compiled import ir_avx2, ir_catshift, ir_ranks, targets
from thrifty.runtime.compiled.ir_narrow import exit_leaf_narrow
from thrifty.runtime.compiled.ir_vector import _Emitter, _goes_right
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.tables import leaf_tables
from thrifty.runtime.compiled.vblocks import vblocks

pytestmark = pytest.mark.skipif("avx2" not in targets.runnable(), reason="this CPU does not run AVX2")
EXAMPLES = settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _machine():
    return targets.host("avx2").machine()


def test_exit_leaf_of_two_16_bit_words():
    """Every leaf of a 32-leaf mask (bits 0, 15, 16 and 31 among them) under random bits above
    it, the words interleaved, counted through a float's exponent and packed back in order."""
    lanes, T = 16, "<16 x i16>"
    e = _Emitter(lanes)
    e.lines += ["define void @leaf(ptr %in, ptr %out) {", "entry:"]
    words = [e(f"load {T}, ptr {e(f'getelementptr {T}, ptr %in, i64 {w}')}, align 2") for w in (0, 1)]
    assert ir_avx2.pair16(e, words, 16, True)
    got = exit_leaf_narrow(e, words, True, 16)
    assert "shufflevector" in "\n".join(e.lines)
    e.lines += [f"  store <{lanes} x i64> {got}, ptr %out, align 8", "  ret void", "}"]
    engine, leaf = native_function(e.lines, "leaf", _machine())
    rng = np.random.default_rng(0)
    leaves = np.concatenate([np.arange(32), rng.permutation(32), [31, 0, 15, 16, 31, 16, 15, 0] * 2])
    for i in range(0, len(leaves), lanes):
        k = leaves[i : i + lanes]
        above = rng.integers(0, 2**32, size=lanes, dtype=np.uint64)
        masks = [(int(a) >> (kk + 1) << (kk + 1)) | (1 << kk) | (1 << 31) for a, kk in zip(above, k.tolist())]
        words_in = np.array([[(m >> (16 * w)) & 0xFFFF for m in masks] for w in (0, 1)], dtype="<u2")
        out = np.zeros(lanes, dtype=np.int64)
        leaf(words_in.ctypes.data, out.ctypes.data)
        np.testing.assert_array_equal(out, k)


def test_coded_splits_on_sixteen_lanes_decide_as_double_splits():
    """Categorical splits of 16-bit rank blocks (two shifted halves, packed) give the double
    test's outcome for every probe, set of one and two words and NaN side."""
    lanes = 16
    assert ir_catshift.supported(lanes, 16) and not ir_catshift.supported(32, 16)
    f = coded_splits(np.random.default_rng(1))
    e, globals_ = _Emitter(lanes), []
    V = e.V
    e.lines += ["define void @both(ptr %in, ptr %out) {", "entry:", f"  %x = load {V}, ptr %in, align 8"]
    code = ir_catshift.code_ir(e, "%x")
    n = len(f.missing_left)
    for node in range(n):
        coded = ir_catshift.goes_right_ir(e, f, node, code, ranks=16)
        direct = _goes_right(e, f, node, "%x", globals_, "k")
        for i, m in enumerate([e(f"zext {e.B} {m} to <{lanes} x i8>") for m in (coded, direct)]):
            at = e(f"getelementptr <{lanes} x i8>, ptr %out, i64 {2 * node + i}")
            e.lines.append(f"  store <{lanes} x i8> {m}, ptr {at}, align 1")
    e.lines += ["  ret void", "}"]
    decl = ir_catshift.declarations(lanes, ranks=16) + (
        f"declare {V} @llvm.masked.gather.v{lanes}f64.v{lanes}p0(<{lanes} x ptr>, i32 immarg, {e.B}, {V})\n"
    )
    engine, run = native_function([*globals_, decl, *e.lines], "both", _machine())
    assert_codes_agree(run, lanes, n)


def _lay(forest: Forest) -> Layout:
    n = forest.n_trees
    return Layout(forest, np.arange(n), np.zeros(n, dtype=np.int8), *leaf_tables(forest)[1:])


# Trees of at most 32 leaves (two 16-bit words: ``exit_leaf_pair16``) with categorical splits.
SMALL = random_forest(np.random.default_rng(41), N_FEATURES, n_trees=24, max_depth=5)
WIDE = random_forest(np.random.default_rng(42), 70, n_trees=10, max_depth=5)
MULTI = random_forest(np.random.default_rng(43), N_FEATURES, n_trees=9, max_depth=5, n_outputs=3)
PLANS = {
    "full": Full(SMALL),
    "sequential": Sequential(SMALL, np.arange(24)[::-1], np.full(24, 1.5), np.full(24, -1.5)),
    "multiclass": Full(MULTI),
    "wide": Full(WIDE),
}


def test_avx2_takes_16_bit_ranks_for_trees_of_up_to_32_leaves(monkeypatch):
    """The rule: 16-bit ranks on AVX2 for trees of up to 32 leaves on average (AVX-512 keeps 32
    bits there; AVX2 keeps them for larger trees), in the cache key; ``THRIFTY_RANKS=32`` still
    forces 32. (``on`` takes ranks, the width by the
    rule: the test forest has too few splits per quantizing step for ranks unforced.)"""
    monkeypatch.setenv(ir_ranks.RANKS_ENV, "on")
    lay = _lay(SMALL)
    blocks = vblocks(lay)
    assert np.mean(np.diff(lay.leaf_ptr)) <= 32
    assert ir_ranks.rank_bits(lay, "avx2", 4, blocks) == 16
    assert ir_ranks.rank_bits(lay, "avx512", 8, blocks) == 32
    large = _lay(random_forest(np.random.default_rng(44), N_FEATURES, n_trees=6, max_depth=8))
    assert np.mean(np.diff(large.leaf_ptr)) > ir_ranks.RANKS16_AVX2_LEAVES
    assert ir_ranks.rank_bits(large, "avx2", 4, vblocks(large)) == 32
    monkeypatch.setenv(targets.ENV, "avx2")
    key16 = objects.code_key(lay)
    monkeypatch.setenv(ir_ranks.RANKS_ENV, "32")
    assert ir_ranks.rank_bits(lay, "avx2", 4, blocks) == 32
    assert objects.code_key(lay) != key16


@pytest.fixture
def avx2(monkeypatch, tmp_path):
    """AVX2's own choice of blocks (ranks on: the small test forests have too few splits per
    quantizing step for the rule), compiled into an empty cache."""
    monkeypatch.setenv("THRIFTY_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv(targets.ENV, "avx2")
    monkeypatch.setenv(ir_ranks.RANKS_ENV, "on")
    monkeypatch.setenv("THRIFTY_BLOCKS", "vector")
    monkeypatch.delenv(targets.CAT_SHIFT_ENV, raising=False)


@pytest.mark.parametrize("name", list(PLANS))
@EXAMPLES
@given(X=input_matrices(N_FEATURES, max_rows=40))
def test_avx2_16_bit_plans_match_the_interpreter(avx2, name, X):
    """Plans on AVX2's 16-bit rank blocks with coded categories: the interpreter's results bit
    for bit (dense, one row, lazily; and scores only) on 0 to 40 rows of NaN, ±inf and codes."""
    plan = PLANS[name]
    n = plan.forest.n_features
    costs = cost_model(tree_cost=0.25, split_cost=0.125)
    if n != X.shape[1]:
        # The 70-feature forest: the drawn values repeated across its features.
        X = np.resize(X, (len(X), n))
        costs = CostModel({f"x{i}": 1.0 + i % 5 for i in range(n)}, feature_names=[f"x{i}" for i in range(n)])
    assert objects._ranks(_lay(plan.forest)) == 16
    compiled = check(plan, X, costs)
    np.testing.assert_array_equal(compiled.evaluate(X).raw, evaluate(plan, X).raw)


def test_categorical_lightgbm_model_on_avx2_16_bit_ranks(avx2, monkeypatch):
    """A LightGBM model of 32-leaf trees with categorical features (sets past two words keep
    doubles) on AVX2's own rule (16-bit ranks, no forcing) predicts what LightGBM predicts."""
    lgb = pytest.importorskip("lightgbm")
    monkeypatch.setenv(ir_ranks.RANKS_ENV, "auto")
    monkeypatch.setenv("THRIFTY_BLOCKS", "auto")
    rng = np.random.default_rng(3)
    n = 4000
    X = np.column_stack(
        [rng.integers(0, 70, n), rng.integers(0, 12, n), rng.normal(size=n), rng.integers(0, 40, n)]
    ).astype(float)
    X[rng.random(X.shape) < 0.05] = np.nan
    y = ((X[:, 0] % 7 < 3) ^ (X[:, 1] % 3 == 0) ^ (np.nan_to_num(X[:, 2]) > 0.3)).astype(int)
    model = lgb.LGBMClassifier(
        n_estimators=40, num_leaves=32, verbose=-1, min_child_samples=5, max_cat_to_onehot=2, cat_smooth=1
    ).fit(X, y, categorical_feature=[0, 1])
    forest = Forest.from_model(model)
    assert objects._ranks(_lay(forest)) == 16
    compiled = thrifty.compile(forest)
    T = np.concatenate([X[:300], [[np.inf, -0.5, np.nan, 1e300], [-1.0, 64.0, 0.0, -np.inf]]])
    for rows in (T, T[:1], T[:0]):
        got = compiled.evaluate(rows).raw
        np.testing.assert_array_equal(got, evaluate(forest, rows).raw)
        if len(rows):
            np.testing.assert_array_equal(got, model.booster_.predict(rows, raw_score=True))
