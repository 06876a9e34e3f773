"""Loop blocks of the scores-only entry (``compiled.ir_vloop``): forced on with AVX-512 and
16-bit ranks, a plan's raw scores equal the interpreter's, the serving path's and LightGBM's bit
for bit (NaN, infinities, values on and next to thresholds, signed zeros, subnormals, NaN
thresholds, every missing type that compares ranks, one-leaf and oblivious trees, trees of 1
to 97 leaves: one to seven mask words, seven tiers of rounds; 0 to 600 rows), and a LightGBM
model of 160-leaf trees takes them by the rule; blocks the loops cannot take (categories,
"zero as missing", several outputs) keep straight-line code; the rule, the switch and the
cache key."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty
import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES
from tests._helpers.vector_forests import FORESTS, SPECIAL, SPECIAL_VALUES, wide
from thrifty import Forest, Full, evaluate
from thrifty.exceptions import InvalidParameterError
from thrifty.forest.kernels import MISSING_ZERO
from thrifty.runtime.compiled import ir_vloop, targets
from thrifty.runtime.compiled.choice import TERNLOG_ENV
from thrifty.runtime.compiled.ir_ranks import RANKS_ENV
from thrifty.runtime.compiled.ir_vraw import vraw_module_irs
from thrifty.runtime.compiled.layout import Layout
from thrifty.runtime.compiled.tables import leaf_tables

AVX512 = "avx512" in targets.runnable()
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


def ranked(forest: Forest, seed: int, special: bool = True) -> Forest:
    """``forest`` with every split comparing ranks (no category sets, no "zero as missing"),
    its thresholds drawn from ``SPECIAL`` (NaN included) when ``special``."""
    rng = np.random.default_rng(seed)
    f = forest
    missing_type = np.where(f.missing_type == MISSING_ZERO, 0, f.missing_type)
    threshold = f.threshold.copy()
    split = f.feature >= 0
    if special:
        threshold[split] = rng.choice(np.array(SPECIAL), size=int(split.sum()))
    return dataclasses.replace(
        f, threshold=threshold, cat_start=np.full_like(f.cat_start, -1), missing_type=missing_type
    )


CASES = {
    # Trees of up to 8 levels (up to 97 leaves here: seven mask words; one tree a single leaf).
    "deep": ranked(random_forest(np.random.default_rng(33), N_FEATURES, n_trees=6, max_depth=8), 33),
    "shallow": ranked(random_forest(np.random.default_rng(3), N_FEATURES, n_trees=9, max_depth=3), 3),
    "plain": ranked(random_forest(np.random.default_rng(9), N_FEATURES, n_trees=5, max_depth=6), 9, False),
}


@pytest.fixture
def target(monkeypatch):
    if not AVX512:
        pytest.skip("loop blocks are AVX-512 code: this CPU has no AVX-512")
    monkeypatch.setenv(targets.ENV, "avx512")
    monkeypatch.setenv("THRIFTY_BLOCKS", "vector")
    monkeypatch.setenv(TERNLOG_ENV, "on")
    monkeypatch.setenv(RANKS_ENV, "16")
    monkeypatch.setenv(ir_vloop.LOOP_ENV, "on")
    return "avx512"


def _layout(forest: Forest) -> Layout:
    order, exits = np.arange(forest.n_trees), np.zeros(forest.n_trees, dtype=np.int8)
    return Layout(forest, order, exits, *leaf_tables(forest)[1:])


def _compiled(forest: Forest, loops: bool = True):
    """``forest`` compiled with its scores-only entry on 16-bit ranks; its blocks are loop
    blocks exactly when ``loops``."""
    lay = _layout(forest)
    irs = vraw_module_irs(lay, "k", 8, ranks=16, ternlog=True)
    assert all(("@lp_k_" in m) == loops for m in irs[:-1])
    compiled = thrifty.compile(Full(forest))
    assert compiled.raw_path is not None and compiled.forest_code.code.vector
    return compiled


@pytest.mark.parametrize("name", list(CASES))
@settings(max_examples=6, deadline=None, suppress_health_check=SLOW)
@given(data=input_matrices(N_FEATURES, max_rows=70, values=SPECIAL_VALUES))
def test_loop_blocks_equal_the_interpreter_and_the_serving_path(target, name, data):
    forest = CASES[name]
    X = wide(data, forest.n_features)
    compiled = _compiled(forest)
    raw = compiled.raw_path._scores(X, len(X), 1).raw
    np.testing.assert_array_equal(raw, evaluate(Full(forest), X).raw)
    np.testing.assert_array_equal(raw, compiled.serving.serve(X).raw)


@pytest.mark.parametrize("name", ["full", "multiclass", "categories"])
def test_blocks_the_loops_cannot_take_keep_straight_code(target, name):
    """Category sets, "zero as missing" splits and several outputs: straight-line blocks, the
    same scores."""
    forest = FORESTS[name]
    rng = np.random.default_rng(1)
    X = rng.uniform(-5, 70, (77, forest.n_features))
    X[rng.random(X.shape) < 0.2] = np.nan
    compiled = _compiled(forest, loops=False)
    np.testing.assert_array_equal(compiled.raw_path._scores(X, len(X), 1).raw, evaluate(Full(forest), X).raw)


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 255, 256, 257, 600])
def test_every_row_count_past_whole_vectors(target, n):
    """Row counts around the vectors' 32 rows and the driver's 256: a partial vector stores no
    score past its rows."""
    rng = np.random.default_rng(n)
    forest = CASES["deep"]
    X = rng.uniform(-5, 70, (n, N_FEATURES))
    X[rng.random(X.shape) < 0.2] = np.nan
    compiled = _compiled(forest)
    reference = evaluate(Full(forest), X).raw
    for threads in (1, 2):
        np.testing.assert_array_equal(compiled.raw_path._scores(X, n, threads).raw, reference)


_MODEL: list = []


def _lightgbm(lgb):
    """A LightGBM model of trees of 160 leaves on 6 features with NaN in training."""
    if not _MODEL:
        rng = np.random.default_rng(29)
        X = rng.normal(size=(6000, 6))
        X[rng.random(X.shape) < 0.1] = np.nan
        y = (np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) + np.sin(3 * np.nan_to_num(X[:, 2])) > 0).astype(
            int
        )
        model = lgb.LGBMClassifier(
            n_estimators=5, num_leaves=160, min_child_samples=2, verbose=-1, random_state=0
        ).fit(X, y)
        _MODEL.append((model, Forest.from_model(model)))
    return _MODEL[0]


@settings(max_examples=8, deadline=None, suppress_health_check=SLOW)
@given(X=input_matrices(6, max_rows=70, values=SPECIAL_VALUES))
def test_loop_blocks_match_lightgbm_by_the_rule(X, monkeypatch):
    """Unforced (the rule: trees of more than 128 leaves), the scores equal LightGBM's."""
    lgb = pytest.importorskip("lightgbm")
    if not AVX512:
        pytest.skip("loop blocks are AVX-512 code: this CPU has no AVX-512")
    monkeypatch.setenv(targets.ENV, "avx512")
    for name in (ir_vloop.LOOP_ENV, RANKS_ENV, TERNLOG_ENV, "THRIFTY_BLOCKS"):
        monkeypatch.delenv(name, raising=False)
    # The rule's leaves per tree, on 5 trees rather than ``LOOP_MIN_TREES`` (a quicker compile).
    monkeypatch.setattr(ir_vloop, "LOOP_MIN_TREES", 1)
    model, forest = _lightgbm(lgb)
    assert np.mean(np.diff(_layout(forest).leaf_ptr)) > ir_vloop.LOOP_LEAVES
    compiled = _compiled(forest)
    got = compiled.raw_path._scores(X, len(X), 1).raw
    np.testing.assert_array_equal(got, evaluate(forest, X).raw)
    np.testing.assert_array_equal(got, model.booster_.predict(X, raw_score=True))


def _in_order_leaves(forest: Forest, node: int, out: list[int]) -> list[int]:
    """The leaves under ``node`` left to right (the leaf masks' numbering)."""
    if forest.feature[node] < 0:
        out.append(node)
    else:
        _in_order_leaves(forest, int(forest.children_left[node]), out)
        _in_order_leaves(forest, int(forest.children_right[node]), out)
    return out


def test_tiers_of_rounds():
    """Each tier updates the first ``ceil(words * t / 16)`` words, largest first, the first
    over every word; one word takes one tier."""
    assert ir_vloop._tiers(16) == list(range(16, 0, -1))
    assert ir_vloop._tiers(7) == [7, 6, 5, 4, 3, 2, 1]
    assert ir_vloop._tiers(1) == [1]


@pytest.mark.parametrize("tiers", [None, (16,), (16, 8, 4), (16, 12, 8, 6, 4, 2)])
@pytest.mark.parametrize("name", list(CASES))
def test_records_leave_the_interpreters_exit_leaf(name, tiers, monkeypatch):
    """A block's records applied in numpy to the rows' ranks (as the loops apply them: the
    rank buffer, the unsigned compares, the leaves kept, the padding) leave as each tree's
    lowest leaf the one ``Forest.apply`` reaches, on values at and next to the thresholds,
    whatever the tiers of rounds (``None``: ``ir_vloop.TIERS``)."""
    if tiers is not None:
        monkeypatch.setattr(ir_vloop, "TIERS", tiers)
    forest = CASES[name]
    lay = _layout(forest)
    tab = ir_vloop.loop_tables(lay, 0, forest.n_trees)
    rng = np.random.default_rng(0)
    probes = np.array([*SPECIAL, 0.25, 7.0, -3.0, 5e-324, -5e-324, 1.0000000000000002])
    X = rng.choice(probes, size=(300, N_FEATURES))
    buffer = []
    for feat, thr in tab["slots"]:
        x = X[:, feat]
        rank = np.where(np.isnan(x), -1, (thr[None, :] < x[:, None]).sum(axis=1)).astype(np.int16)
        buffer += [rank.view(np.uint16), (rank ^ np.int16(-32768)).view(np.uint16)]
    outcomes = [buffer[c >> 16] > (c & 0xFFFF) for c in tab["compares"]]
    W, reached = tab["words"], forest.apply(X)
    tiers = tab["tiers"]
    per_tree = 1 + len(tiers)
    assert tiers[0] == W and len(tab["starts"]) == per_tree * forest.n_trees
    for j in range(forest.n_trees):
        words = np.full((W, len(X)), 0xFFFF, dtype=np.int64)
        q = tab["starts"][per_tree * j]
        # Each tier's rounds: one record per word of the tier's first ``size``.
        for size, rounds in zip(tiers, tab["starts"][per_tree * j + 1 : per_tree * (j + 1)], strict=True):
            for _ in range(rounds):
                for w in range(size):
                    record = tab["records"][q]
                    keep = tab["kept"][(record >> 16) // ir_vloop.KEEP_BYTES]
                    words[w] = np.where(outcomes[(record & 0xFFFF) // 4], words[w] & keep, words[w])
                    q += 1
        first = np.argmax(words != 0, axis=0)
        low = words[first, np.arange(len(X))]
        leaf = 16 * first + np.log2(low & -low).astype(np.int64)
        leaves = np.array(_in_order_leaves(forest, int(forest.roots[j]), []))
        np.testing.assert_array_equal(leaves[leaf], reached[:, j])


def test_the_rule_the_switch_and_the_cache_key(monkeypatch):
    """Loop blocks by the rule for trees of more than ``LOOP_LEAVES`` leaves on average in plans
    of at least ``LOOP_MIN_TREES`` positions;
    ``THRIFTY_VLOOP`` forces either way, names itself when wrong, and the cache key tells the
    two apart."""
    monkeypatch.delenv(ir_vloop.LOOP_ENV, raising=False)
    small, big = _layout(CASES["shallow"]), _layout(CASES["deep"])
    assert not ir_vloop.use_loops(small) and not ir_vloop.use_loops(big)  # too few trees
    monkeypatch.setattr(ir_vloop, "LOOP_MIN_TREES", 1)
    assert not ir_vloop.use_loops(small)
    assert ir_vloop.use_loops(big) == (np.mean(np.diff(big.leaf_ptr)) > ir_vloop.LOOP_LEAVES)
    monkeypatch.setenv(ir_vloop.LOOP_ENV, "on")
    assert ir_vloop.use_loops(small)
    monkeypatch.setenv(ir_vloop.LOOP_ENV, "off")
    assert not ir_vloop.use_loops(big)
    monkeypatch.setenv(ir_vloop.LOOP_ENV, "sideways")
    with pytest.raises(InvalidParameterError, match=ir_vloop.LOOP_ENV):
        ir_vloop.use_loops(small)
    if AVX512:
        monkeypatch.setenv(targets.ENV, "avx512")
        monkeypatch.setenv("THRIFTY_BLOCKS", "vector")
        monkeypatch.setenv(RANKS_ENV, "16")
        keys = set()
        for kind in ("on", "off"):
            monkeypatch.setenv(ir_vloop.LOOP_ENV, kind)
            keys.add(objects.code_key(small))
        assert len(keys) == 2


def test_loop_blocks_take_precedence_over_ranks_once_per_pass(target, monkeypatch):
    """A forest both rules could take (forced here): its blocks are loop blocks, which store
    their own ranks, so no pass ranks for them and the driver passes no buffer; the scores
    equal the interpreter's, and the cache key tells the two kinds apart."""
    from thrifty.runtime.compiled.ir_preranks import PRERANKS_ENV

    monkeypatch.setenv(PRERANKS_ENV, "on")
    forest = CASES["deep"]
    lay = _layout(forest)
    irs = vraw_module_irs(lay, "k", 8, ranks=16, ternlog=True)
    assert all("@lp_k_" in m for m in irs[:-1]) and "prerank_k" not in irs[-1]
    rng = np.random.default_rng(5)
    X = rng.uniform(-5, 70, (300, N_FEATURES))
    X[rng.random(X.shape) < 0.2] = np.nan
    compiled = _compiled(forest)
    np.testing.assert_array_equal(compiled.raw_path._scores(X, len(X), 1).raw, evaluate(Full(forest), X).raw)
    key_loops = objects.code_key(lay)
    monkeypatch.setenv(ir_vloop.LOOP_ENV, "off")
    assert "prerank_k" in vraw_module_irs(lay, "k", 8, ranks=16, ternlog=True)[-1]
    assert objects.code_key(lay) != key_loops
