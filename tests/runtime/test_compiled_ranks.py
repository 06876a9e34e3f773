"""Vector blocks comparing 32-bit ranks (``thrifty.runtime.compiled.ir_ranks``): a split's
outcome from ranks is the double comparison's on values equal to thresholds, between them,
infinities, NaN, signed zeros and subnormals, for every missing-value rule; whole plans forced
onto rank blocks give the interpreter's results bit for bit on every target this CPU runs (and
LightGBM's predictions); aarch64 rank blocks cross-compile; the rule picks ranks where a block's
splits share few thresholds."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import PLANS, check, input_matrices
from tests._helpers.native_ir import native_function
from tests._helpers.oblivious import oblivious_forest
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from tests._helpers.vector_forests import PROBES, SPECIAL, SPECIAL_VALUES, special_thresholds
from thrifty import Forest, Full, Sequential, evaluate
from thrifty.exceptions import InvalidParameterError
from thrifty.forest.kernels import MISSING_AS_ZERO, MISSING_NAN
from thrifty.runtime.compiled import ir_ranks, targets
from thrifty.runtime.compiled.ir_narrow import exit_leaf_narrow, low_bit32
from thrifty.runtime.compiled.ir_ranks import (
    RANKS_ENV,
    block_thresholds,
    goes_right_rank,
    rank_bits,
    rank_ir,
    splits_per_step,
    use_ranks,
)
from thrifty.runtime.compiled.ir_serving import serving_ir
from thrifty.runtime.compiled.ir_vector import (
    _Emitter,
    _goes_right,
    vector_module_irs,
)
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.tables import leaf_tables
from thrifty.runtime.compiled.vblocks import vblocks_of

VECTOR = [n for n in targets.runnable() if n != "generic"]
EXAMPLES = settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def layout(forest: Forest, order, exits) -> Layout:
    return Layout(forest, np.asarray(order), np.asarray(exits, dtype=np.int8), *leaf_tables(forest)[1:])


def _splits(thresholds: list[float]) -> SimpleNamespace:
    """One numeric split per (threshold, missing type, NaN side), as the arrays the IR reads."""
    rows = [
        (t, mt, ml) for t in thresholds for mt in (0, MISSING_NAN, MISSING_AS_ZERO) for ml in (False, True)
    ]
    return SimpleNamespace(
        threshold=np.array([r[0] for r in rows]),
        missing_type=np.array([r[1] for r in rows]),
        missing_left=np.array([r[2] for r in rows]),
        cat_start=np.full(len(rows), -1),
    )


@pytest.mark.parametrize(("lanes", "bits"), [(8, 32), (16, 32), (16, 16), (32, 16)])
def test_rank_splits_decide_as_double_splits(lanes, bits):
    """For every special threshold and missing-value rule, ``goes_right_rank`` on the rank of
    ``x`` is ``_goes_right`` on ``x`` itself, for ``x`` on, next to and between the
    thresholds, infinities, NaN, signed zeros and subnormals (native code, ``lanes`` lanes,
    ranks of ``bits`` bits)."""
    f = _splits(SPECIAL)
    table = np.unique(f.threshold[~np.isnan(f.threshold)])
    e, globals_ = _Emitter(lanes), []
    V = e.V
    e.lines += ["define void @both(ptr %in, ptr %out) {", "entry:", f"  %x = load {V}, ptr %in, align 8"]
    rank = rank_ir(e, "%x", table, "@thr", globals_, bits)
    for node in range(len(f.threshold)):
        ranked = goes_right_rank(e, f, node, rank, table, bits)
        direct = _goes_right(e, f, node, "%x", globals_, "k")
        same = e(
            f"icmp eq <{lanes} x i8> {e(f'zext {e.B} {ranked} to <{lanes} x i8>')}, "
            f"{e(f'zext {e.B} {direct} to <{lanes} x i8>')}"
        )
        at = e(f"getelementptr <{lanes} x i8>, ptr %out, i64 {node}")
        e.lines.append(
            f"  store <{lanes} x i8> {e(f'zext {e.B} {same} to <{lanes} x i8>')}, ptr {at}, align 1"
        )
    at = e(f"getelementptr <{lanes} x i8>, ptr %out, i64 {len(f.threshold)}")
    e.lines += [f"  store <{lanes} x i{bits}> {rank}, ptr {at}, align 1", "  ret void", "}"]
    decl = f"declare {V} @llvm.fabs.v{lanes}f64({V})\n" + (
        f"declare {V} @llvm.masked.gather.v{lanes}f64.v{lanes}p0(<{lanes} x ptr>, i32 immarg, {e.B}, {V})"
    )
    engine, both = native_function([*globals_, decl, *e.lines], "both", targets.host().machine())
    X = np.resize(PROBES, -(-len(PROBES) // lanes) * lanes)
    want_rank = np.array([-1 if np.isnan(x) else int(np.sum(table < x)) for x in X])
    for i in range(0, len(X), lanes):
        out = np.zeros(len(f.threshold) * lanes + 4 * lanes, dtype=np.uint8)
        both(X[i:].ctypes.data, out.ctypes.data)
        same = out[: len(f.threshold) * lanes].reshape(-1, lanes)
        assert same.all(), f"split {np.argwhere(same == 0)[0]} disagrees on {X[i : i + lanes]}"
        np.testing.assert_array_equal(
            out[len(f.threshold) * lanes :].view(f"<i{bits // 8}")[:lanes], want_rank[i : i + lanes]
        )


def test_lowest_bit_of_32_bit_words():
    """The exit leaf of 32-bit leaf masks without a count-trailing-zeros: every bit, whatever
    the bits above it (bit 31 is the sign of the float)."""
    e = _Emitter(8)
    e.lines += ["define void @low(ptr %in, ptr %out) {", "entry:", "  %w = load <8 x i32>, ptr %in, align 4"]
    got = low_bit32(e, "%w")
    e.lines += [f"  store <8 x i32> {got}, ptr %out, align 4", "  ret void", "}"]
    engine, low = native_function(e.lines, "low", targets.host().machine())
    rng = np.random.default_rng(0)
    k = np.repeat(np.arange(32), 8)
    above = rng.integers(0, 2**32, size=len(k), dtype=np.uint64).astype(np.uint32)
    words = ((above >> (k + 1).astype(np.uint32)) << (k + 1).astype(np.uint32)) | (
        np.uint32(1) << k.astype(np.uint32)
    )
    words = words.astype(np.uint32)
    out = np.zeros(len(k), dtype=np.int32)
    for i in range(0, len(k), 8):
        low(words[i:].ctypes.data, out[i:].ctypes.data)
    np.testing.assert_array_equal(out, k)


@pytest.mark.parametrize("bits", [32, 16])
@pytest.mark.parametrize("by_exponent", [False, True])
def test_exit_leaf_of_narrow_words(bits, by_exponent):
    """The exit leaf of leaf masks of three words of ``bits`` leaves, for every leaf: the words
    before its word zero, the bits below it in its word zero, anything above it (the last word
    never empty), counted by count-trailing-zeros or through a float's exponent."""
    lanes, n_words = 16, 3
    e, T = _Emitter(lanes), f"<{lanes} x i{bits}>"
    e.lines += ["define void @leaf(ptr %in, ptr %out) {", "entry:"]
    words = [e(f"load {T}, ptr {e(f'getelementptr {T}, ptr %in, i64 {w}')}, align 2") for w in range(n_words)]
    got = exit_leaf_narrow(e, words, by_exponent, bits)
    e.lines += [f"  store <{lanes} x i64> {got}, ptr %out, align 8", "  ret void", "}"]
    decl = f"declare {T} @llvm.cttz.v{lanes}i{bits}({T}, i1 immarg)"
    engine, leaf = native_function([decl, *e.lines], "leaf", targets.host().machine())
    rng = np.random.default_rng(bits)
    leaves = np.resize(rng.permutation(bits * n_words), -(-bits * n_words // lanes) * lanes)
    for i in range(0, len(leaves), lanes):
        k = leaves[i : i + lanes]
        mask = [int(rng.integers(0, 2**62)) << 34 | int(rng.integers(0, 2**34)) for _ in k]
        # Per lane: random bits above leaf k, leaf k set, none below; the last word never empty.
        top = 1 << (bits * n_words - 1)
        masks = [((m >> (kk + 1)) << (kk + 1)) | (1 << kk) | top for m, kk in zip(mask, k.tolist())]
        words_in = np.array(
            [[(m >> (bits * w)) & ((1 << bits) - 1) for m in masks] for w in range(n_words)],
            dtype=f"<u{bits // 8}",
        )
        out = np.zeros(lanes, dtype=np.int64)
        leaf(words_in.ctypes.data, out.ctypes.data)
        np.testing.assert_array_equal(out, k)


SPECIAL_FOREST = special_thresholds(random_forest(np.random.default_rng(21), N_FEATURES, n_trees=9), 21)
DEEP = special_thresholds(random_forest(np.random.default_rng(33), N_FEATURES, n_trees=6, max_depth=9), 33)
OBLIVIOUS = oblivious_forest(np.random.default_rng(10), N_FEATURES, [1, 3, 6, 10], others=2)
RANKED = {
    "special": Full(SPECIAL_FOREST),
    "special-sequential": Sequential(SPECIAL_FOREST, np.arange(9)[::-1], np.full(9, 1.5), np.full(9, -1.5)),
    "deep": Full(DEEP),
    "oblivious": Full(OBLIVIOUS),
    **{
        name: PLANS[name]
        for name in ("full", "sequential", "full-multiclass", "full-float32", "gated-forests")
    },
}


@pytest.mark.parametrize("target", VECTOR)
@pytest.mark.parametrize("bits", ["32", "16"])
@pytest.mark.parametrize("name", list(RANKED))
@EXAMPLES
@given(X=input_matrices(N_FEATURES, values=SPECIAL_VALUES))
def test_rank_blocks_match_the_interpreter(target, bits, name, X, monkeypatch):
    """Plans forced onto rank blocks of 32-bit and 16-bit ranks (categorical and "zero as
    missing" features mixed in on doubles, leaf masks of one to fourteen words, oblivious trees,
    exits), dense, one row and lazily: the interpreter's results bit for bit."""
    monkeypatch.setenv(targets.ENV, target)
    monkeypatch.setenv(RANKS_ENV, bits)
    check(RANKED[name], X, cost_model(tree_cost=0.25, split_cost=0.125))


@pytest.mark.parametrize("target", VECTOR)
@pytest.mark.parametrize("bits", ["32", "16"])
@EXAMPLES
@given(X=input_matrices(5, max_rows=40, values=SPECIAL_VALUES))
def test_rank_blocks_match_lightgbm(target, bits, X, monkeypatch):
    """A LightGBM model with NaN in training (thresholds shared across trees) on rank blocks
    of 32-bit and 16-bit ranks predicts what LightGBM predicts."""
    lgb = pytest.importorskip("lightgbm")
    monkeypatch.setenv(targets.ENV, target)
    monkeypatch.setenv(RANKS_ENV, bits)
    model, forest = _lightgbm(lgb)
    compiled = thrifty.compile(forest)
    assert objects._ranks(_lay(forest)) == int(bits)
    got = compiled.evaluate(X).raw
    np.testing.assert_array_equal(got, evaluate(forest, X).raw)
    if len(X):
        np.testing.assert_array_equal(got, model.booster_.predict(X, raw_score=True))


_MODEL: list = []


def _lightgbm(lgb):
    if not _MODEL:
        rng = np.random.default_rng(5)
        X = rng.normal(size=(400, 5))
        X[rng.random(X.shape) < 0.1] = np.nan
        y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2 > 0.7).astype(int)
        model = lgb.LGBMClassifier(n_estimators=20, num_leaves=12, verbose=-1, min_child_samples=5).fit(X, y)
        _MODEL.append((model, Forest.from_model(model)))
    return _MODEL[0]


def _lay(forest: Forest) -> Layout:
    return layout(forest, np.arange(forest.n_trees), np.zeros(forest.n_trees))


@pytest.mark.parametrize("name", ["neon", "sve"])
@pytest.mark.parametrize("bits", [32, 16])
def test_aarch64_rank_blocks_cross_compile(name, bits):
    """NEON and SVE rank blocks of 32-bit and 16-bit ranks (4 and 8 lanes, or 8 and 16) verify
    and compile to aarch64 objects."""
    t = targets.cross(name)
    for plan in (RANKED["special-sequential"], RANKED["deep"], Full(PLANS["full"].forest)):
        f, order = plan.forest, plan.schedule.order
        lay = layout(f, order, np.isfinite(plan.schedule.eps_pos))
        irs = vector_module_irs(lay, "k", 100, t.lanes, t.vscale, t.by_exponent, ranks=bits)
        assert f"<{64 // bits * t.lanes} x i{bits}>" in irs[0]
        irs[-1] += serving_ir(lay, "k", t)
        for ir in irs:
            obj = objects._emit(ir, t)
            assert obj[:4] == b"\x7fELF" and int.from_bytes(obj[18:20], "little") == 183


def test_block_thresholds_leave_out_categorical_and_zero_as_missing_features():
    f = SPECIAL_FOREST
    lay = _lay(f)
    got = block_thresholds(lay, 0, f.n_trees)
    ok = ir_ranks.rankable(f)
    numeric = (f.feature >= 0) & (f.cat_start < 0)
    for feat in range(f.n_features):
        used = numeric & (f.feature == feat)
        if not ok[feat] or not used.any():
            assert feat not in got
            continue
        thr = f.threshold[used]
        np.testing.assert_array_equal(got[feat], np.unique(thr[~np.isnan(thr)]))
    assert not all(ok) and any(ok)


def test_the_rule_takes_ranks_where_splits_share_thresholds(monkeypatch):
    """Many splits per feature quantized take ranks; splits spread over many features, each
    on a threshold of its own, do not; ``THRIFTY_RANKS`` forces either, and a bad value is
    refused in one line; the choice is part of the cache key."""
    monkeypatch.delenv(RANKS_ENV, raising=False)
    shared = special_thresholds(random_forest(np.random.default_rng(3), 3, n_trees=64, max_depth=6), 3)
    # Splits over 200 features, each threshold its own: about one split per quantizing step.
    spread = special_thresholds(random_forest(np.random.default_rng(4), 200, n_trees=64, max_depth=4), 4)
    own = dataclasses.replace(spread, threshold=np.random.default_rng(0).normal(size=spread.n_nodes))
    few, many = _lay(shared), _lay(own)
    blocks = vblocks_of(few.exits)
    assert splits_per_step(few, blocks) >= ir_ranks.MIN_SPLITS_PER_STEP > splits_per_step(many, blocks)
    assert use_ranks(few, 8, blocks) and not use_ranks(many, 8, blocks) and not use_ranks(few, 0, blocks)
    monkeypatch.setenv(RANKS_ENV, "on")
    assert use_ranks(many, 4, blocks)
    key_on = objects.code_key(many)
    monkeypatch.setenv(RANKS_ENV, "off")
    assert not use_ranks(few, 4, blocks)
    if VECTOR:
        assert objects.code_key(many) != key_on
    # The width: 16 bits on AVX-512 for trees of more than 64 leaves on average, else 32; on
    # AVX2 for trees of at most 32 leaves (``RANKS16_AVX2_LEAVES``); either when forced.
    monkeypatch.setenv(RANKS_ENV, "auto")
    deep = _lay(special_thresholds(random_forest(np.random.default_rng(3), 3, n_trees=16, max_depth=9), 3))
    assert np.mean(np.diff(deep.leaf_ptr)) > ir_ranks.RANKS16_LEAVES >= np.mean(np.diff(few.leaf_ptr))
    deep_blocks = vblocks_of(deep.exits)
    assert rank_bits(deep, "avx512", 8, deep_blocks) == 16 and rank_bits(deep, "avx2", 4, deep_blocks) == 32
    assert rank_bits(few, "avx512", 8, blocks) == 32 and rank_bits(few, "avx2", 4, blocks) == 16
    assert rank_bits(many, "avx512", 8, blocks) == 0
    monkeypatch.setenv(RANKS_ENV, "32")
    assert rank_bits(few, "avx512", 8, blocks) == 32
    key32 = objects.code_key(few)
    monkeypatch.setenv(RANKS_ENV, "16")
    assert rank_bits(few, "avx2", 4, blocks) == 16
    if VECTOR:
        assert objects.code_key(few) != key32
    # A feature with more thresholds in a block than 16-bit ranks hold keeps 32-bit ranks.
    monkeypatch.setattr(ir_ranks, "MAX_RANKS16", 2)
    assert rank_bits(few, "avx512", 8, blocks) == 32
    monkeypatch.setenv(RANKS_ENV, "sometimes")
    with pytest.raises(InvalidParameterError, match="THRIFTY_RANKS='sometimes'.*auto") as info:
        use_ranks(few, 8, blocks)
    assert "\n" not in str(info.value)
