"""One row with trees in vector lanes (``lanes``, ``ir_lanes``): the tables describe each forest's
splits exactly (a plain-Python descent over them reaches ``Forest.apply``'s leaves), and a
served call of one row gives the interpreter's results bit for bit, and the batch path's, on
every split kind (NaN and zero missing types, NaN thresholds, category sets), trees of more
than 64 leaves, forests of more than 64 features, several outputs (class trees and vector
leaves), float32 sums, exits and subsets of trees."""

from __future__ import annotations

import dataclasses
import pickle
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import thrifty
from tests._helpers.compiled_plans import VALUES, assert_same
from tests._helpers.reference import random_forest, random_inputs
from thrifty import CostModel, Forest, Full, Sequential, evaluate
from thrifty.forest.kernels import ZERO
from thrifty.runtime import BinnedExits
from thrifty.runtime.compiled import lranks, targets
from thrifty.runtime.compiled.ir_lranks import TOP_WORDS
from thrifty.runtime.compiled.ir_serving import (
    LANE_ROWS,
    compact,
    lane_rows,
    permute,
    scores_lanes,
    serving_ir,
)
from thrifty.runtime.compiled.lanes import (
    BLOCK,
    CAT_WORDS,
    CATEGORICAL,
    CHUNK_EXITS,
    CHUNK_FULL,
    DEFAULT_RIGHT,
    FEATURE_SHIFT,
    FLAG_SHIFT,
    LANES,
    LEAF,
    NAN_RIGHT,
    TOP_LEVELS,
    TOP_ROWS,
    ZERO_MISSING,
    chunk_of,
    lane_tables,
    leaf_stride,
)
from thrifty.runtime.compiled.layout import TABLES
from thrifty.runtime.compiled.lranks import (
    RANK_SHIFT,
    SLOT_SHIFT,
    SLOT_ZERO,
    UNSIGNED_BIT,
    eytzinger,
    rank_tables,
    ranks_ok,
)
from thrifty.runtime.compiled.serving import (
    SCORES_POSITIONS,
    ScoresEvaluation,
    ServingEvaluation,
    ServingPath,
    serving_path,
)
from thrifty.runtime.compiled.tables import leaf_tables
from thrifty.runtime.evaluation import Evaluation, costs_for


def with_nan_thresholds(forest: Forest, rng: np.random.Generator, share: float = 0.15) -> Forest:
    """``forest`` with a share of its numerical thresholds NaN (no value is <= NaN: numbers go
    right, NaN as its missing type says)."""
    thr = forest.threshold.copy()
    numeric = (forest.feature >= 0) & (forest.cat_start < 0)
    thr[numeric & (rng.random(forest.n_nodes) < share)] = np.nan
    return dataclasses.replace(forest, threshold=thr)


def with_vector_leaves(forest: Forest, rng: np.random.Generator) -> Forest:
    """``forest`` (several outputs) with every second tree a vector leaf (``tree_class == -1``,
    one value per output)."""
    K = forest.n_outputs
    value = np.repeat(forest.value[:, :1], K, axis=1) + rng.normal(size=(forest.n_nodes, K)).round(3)
    tclass = forest.tree_class.copy()
    tclass[::2] = -1
    return dataclasses.replace(forest, value=value, tree_class=tclass)


def with_large_sets(forest: Forest, rng: np.random.Generator) -> Forest:
    """``forest`` with every second categorical split's set widened to 3 or 4 words (codes up to
    127: read from the category table, not the record)."""
    start, size = forest.cat_start.copy(), forest.cat_size.copy()
    bits = list(forest.cat_bitsets.tolist())
    cats = np.flatnonzero((forest.feature >= 0) & (forest.cat_start >= 0))[::2]
    for node in cats.tolist():
        words = int(rng.integers(3, 5))
        start[node], size[node] = len(bits), words
        bits += rng.integers(0, 2**32, size=words, dtype=np.uint64).tolist()
    return dataclasses.replace(
        forest, cat_start=start, cat_size=size, cat_bitsets=np.asarray(bits, dtype=np.uint32)
    )


def _forests() -> dict[str, Forest]:
    rng = np.random.default_rng(29)
    multi = random_forest(rng, 6, n_trees=13, max_depth=4, n_outputs=3)
    return {
        "small": with_nan_thresholds(random_forest(rng, 6, n_trees=11, max_depth=4), rng),
        # Up to 256 leaves a tree, 41 trees: blocks of 32 lanes and a part-filled one.
        "deep": with_nan_thresholds(random_forest(rng, 6, n_trees=41, max_depth=8), rng),
        # Features in the third word of a tested-feature set.
        "wide": with_nan_thresholds(random_forest(rng, 150, n_trees=20, max_depth=5), rng),
        "multiclass": with_vector_leaves(multi, rng),
        "float32-sums": dataclasses.replace(
            random_forest(rng, 6, n_trees=9, max_depth=5, float32=True), accumulate="float32"
        ),
        "numeric": random_forest(rng, 6, n_trees=300, max_depth=3, categorical=False),
        "large-sets": with_large_sets(random_forest(rng, 6, n_trees=12, max_depth=5), rng),
        # As many features as a permute takes (``ir_lanes.PERMUTE_FEATURES``): both vectors.
        "sixteen": with_nan_thresholds(random_forest(rng, 16, n_trees=24, max_depth=5), rng),
        "seventeen": random_forest(rng, 17, n_trees=10, max_depth=4),
    }


FORESTS = _forests()


def _plans() -> dict[str, thrifty.runtime.Plan]:
    rng = np.random.default_rng(30)
    small, deep, multi = FORESTS["small"], FORESTS["deep"], FORESTS["multiclass"]
    plans: dict[str, thrifty.runtime.Plan] = {name: Full(f) for name, f in FORESTS.items()}
    plans["sequential"] = Sequential(small, rng.permutation(11), np.full(11, 1.5), np.full(11, -1.5))
    # Exits past the first chunk of positions.
    plans["sequential-deep"] = Sequential(deep, rng.permutation(41), np.full(41, 4.0), np.full(41, -4.0))
    plans["sequential-subset"] = Sequential(small, rng.permutation(11)[:6], np.full(6, 0.5))
    plans["sequential-multiclass"] = Sequential(multi, rng.permutation(13), np.full(13, 0.8))
    plans["sequential-wide"] = Sequential(
        FORESTS["wide"], rng.permutation(20), np.full(20, 1.0), np.full(20, -1.0)
    )
    bins = BinnedExits(
        rng.uniform(0.2, 1.0, 11).round(2),
        [{int(b): (1.0, -1.0) for b in rng.integers(-3, 3, 3)} for _ in range(11)],
    )
    # Bin exits: one row is served by ``run``.
    plans["sequential-bins"] = Sequential(small, rng.permutation(11), bins=bins)
    return plans


PLANS = _plans()
_COMPILED: dict[str, tuple[thrifty.CompiledPlan, ServingPath, ServingPath, ServingPath]] = {}


def compiled(name: str) -> tuple[thrifty.CompiledPlan, ServingPath, ServingPath, ServingPath]:
    """``PLANS[name]`` compiled, and its serving path with one row run by ``run`` (the rows
    in the lanes of its blocks), then by the lanes (trees in the lanes) on node records, then
    on compact rank records (``ir_lranks``), whatever the default."""
    if name not in _COMPILED:
        plan = PLANS[name]
        costs = CostModel.uniform(plan.forest.n_features, tree_cost=0.25, split_cost=0.125)
        c = thrifty.compile(plan, costs)
        assert c.serving is not None
        paths = []
        for rows, ranks in ((0, 0), (1, 0), (1, 1)):
            path = serving_path(plan, c.forest_code, costs_for(plan, costs))
            assert path is not None
            path.lane_rows, path.lane_ranks = rows, ranks
            paths.append(path)
        _COMPILED[name] = c, paths[0], paths[1], paths[2]
    return _COMPILED[name]


def scores_path(name: str) -> ServingPath:
    """``compiled(name)``'s serving path whose ``evaluate`` takes the scores-only lanes for one
    row (where the plan has them: ``ir_serving.scores_lanes``), whatever the default."""
    c = compiled(name)[0]
    path = serving_path(PLANS[name], c.forest_code, costs_for(PLANS[name], c.costs))
    assert path is not None
    path.lane_rows, path.lane_ranks = 1, 1
    path.scores = scores_lanes(c.forest_code.layout)
    path.bind(c.evaluate)
    return path


def descend(tables: dict[str, np.ndarray], root: int, levels: int, x: np.ndarray) -> int:
    """The node a lane reaches from ``root`` after ``levels`` levels, deciding each split from
    its record alone (the rule ``ir_lanes`` vectorises)."""
    node = root
    for _ in range(levels):
        rec = int(tables["lrec"][node, 0])
        left = rec & 0xFFFFFFFF
        feat = (rec >> FEATURE_SHIFT) & ((1 << (FLAG_SHIFT - FEATURE_SHIFT)) - 1)
        flags = rec >> FLAG_SHIFT
        thr = float(tables["lrec"][node : node + 1, 1].view(np.float64)[0])
        v = float(x[feat])
        right = bool(flags & NAN_RIGHT) if np.isnan(v) else not (v <= thr)
        if flags & ZERO_MISSING and (np.isnan(v) or abs(v) <= ZERO):
            right = bool(flags & DEFAULT_RIGHT)
        if flags & LEAF:
            right = False
        elif flags & CATEGORICAL and not np.isnan(v):
            bits = int(tables["lrec"][node, 1]) & ((1 << 64) - 1)
            if flags & CAT_WORDS:
                start, size = bits & 0xFFFFFFFF, bits >> 32
                inside = -1.0 < v < 32.0 * size
                code = int(v) if inside else 0
                member = inside and (int(tables["cat_bits"][start + (code >> 5)]) >> (code & 31)) & 1
            else:
                inside = -1.0 < v < 64.0
                member = inside and (bits >> int(v)) & 1
            right = not member
        node = left + int(right)
    return node


@pytest.mark.parametrize("name", sorted(FORESTS))
def test_a_descent_over_the_tables_reaches_the_forests_leaves(name):
    f = FORESTS[name]
    rng = np.random.default_rng(5)
    order = rng.permutation(f.n_trees)
    tree, depth, _, _ = leaf_tables(f)
    t = lane_tables(f, order, CHUNK_FULL, tree, depth)
    X = random_inputs(rng, 25, f.n_features)
    blocks = t["lblock"].reshape(-1, 1 + BLOCK)
    flags = t["lrec"][:, 0] >> FLAG_SHIFT
    # Sets of up to 64 codes sit in the records, larger ones in the category table.
    assert bool(np.any(flags & CAT_WORDS)) is (name == "large-sets")
    want = f.apply(X)
    for p, tr in enumerate(order.tolist()):
        block = blocks[p // CHUNK_FULL * (CHUNK_FULL // BLOCK) + t["lslot"][p] // BLOCK]
        root = int(block[1 + t["lslot"][p] % BLOCK])
        # The deepest tree of the block sets its levels; a leaf stays where it is.
        assert block[0] >= depth[f.roots[tr]]
        for i in range(len(X)):
            leaf = descend(t, root, int(block[0]), X[i])
            assert int(t["lrec"][leaf, 1]) == int(t["lorig"][leaf]) == want[i, tr]
            assert descend(t, leaf, 3, X[i]) == leaf


def test_the_tables_number_a_splits_children_side_by_side():
    f = FORESTS["deep"]
    tree, depth, _, _ = leaf_tables(f)
    t = lane_tables(f, np.arange(f.n_trees), CHUNK_EXITS, tree, depth)
    orig = t["lorig"][:-1]
    left = t["lrec"][:-1, 0] & 0xFFFFFFFF
    split = f.feature[orig] >= 0
    np.testing.assert_array_equal(orig[left[split]], f.children_left[orig[split]])
    np.testing.assert_array_equal(orig[left[split] + 1], f.children_right[orig[split]])
    np.testing.assert_array_equal(left[~split], np.flatnonzero(~split))
    # Every position has its own lane in its chunk; chunks with exits are one block.
    assert chunk_of(np.array([0, 1], dtype=np.int8)) == CHUNK_EXITS == BLOCK
    first = min(BLOCK, f.n_trees)
    assert sorted(t["lslot"][:first].tolist()) == list(range(first))


@pytest.mark.parametrize("name", ["small", "deep", "numeric", "multiclass"])
def test_the_top_rows_hold_each_lanes_candidates_along_every_path(name):
    f = FORESTS[name]
    tree, depth, _, _ = leaf_tables(f)
    t = lane_tables(f, np.arange(f.n_trees), CHUNK_FULL, tree, depth)
    lrec = t["lrec"]
    top = t["ltop"].reshape(-1, TOP_ROWS, BLOCK)
    roots = t["lblock"].reshape(-1, 1 + BLOCK)[:, 1:]
    assert len(top) == len(roots)
    for b in range(len(roots)):
        for lane in range(BLOCK):
            row = 0
            for d in range(TOP_LEVELS):
                for q in range(2**d):
                    # Bit i of q: the side taken at level i; a leaf stays where it is.
                    node = int(roots[b, lane])
                    for i in range(d):
                        if not (int(lrec[node, 0]) >> FLAG_SHIFT) & LEAF:
                            node = (int(lrec[node, 0]) & 0xFFFFFFFF) + ((q >> i) & 1)
                    assert top[b, row, lane] == lrec[node, 0], (b, lane, d, q)
                    assert top[b, row + 1, lane] == lrec[node, 1], (b, lane, d, q)
                    row += 2
    assert row == TOP_ROWS


@pytest.mark.parametrize("name", ["small", "multiclass", "wide"])
def test_each_renumbered_leaf_has_its_leaf_record_in_the_lanes_numbering(name):
    f = FORESTS[name]
    tree, depth, _, _ = leaf_tables(f)
    # After ``forest_code``, each renumbered node's row of ``lleaf`` is its leaf record.
    code = thrifty.compile(Full(f)).forest_code
    tables = dict(zip(TABLES, code.tables))
    lorig = lane_tables(f, code.layout.order, CHUNK_FULL, tree, depth)["lorig"]
    leaf, lleaf = tables["leaf"], tables["lleaf"]
    R = leaf.shape[1]
    np.testing.assert_array_equal(lleaf[:, :R].view(np.int64), leaf[lorig].view(np.int64))
    # Padded to a power of two words on a table that starts on a cache line: no record
    # straddles two lines.
    assert lleaf.shape == (len(lorig), leaf_stride(R)) and lleaf.ctypes.data % 64 == 0
    assert leaf_stride(R) >= R and (64 % (8 * leaf_stride(R)) == 0 or leaf_stride(R) % 8 == 0)


def test_a_leaf_records_stride_keeps_it_in_one_cache_line():
    assert [leaf_stride(w) for w in (1, 2, 3, 4, 5, 7, 8, 9, 16, 17)] == [1, 2, 4, 4, 8, 8, 8, 16, 16, 24]


def test_one_row_of_the_wrong_shape_or_kind_is_refused_with_the_fix():
    c = compiled("small")[0]
    F = PLANS["small"].forest.n_features
    for bad, says in (
        (np.zeros((1, F + 1)), f"has {F + 1} features, but the model expects {F}"),
        (np.zeros(F), "X.reshape(1, -1)"),
        (np.zeros((1, F, 1)), "2-dimensional"),
        (np.array([["a"] * F]), "non-numeric"),
    ):
        with pytest.raises(ValueError, match=re.escape(says)):
            c.evaluate(bad)


def test_one_row_takes_the_rows_values_by_a_permute_only_on_avx512_up_to_sixteen_features():
    host = targets.current()
    for name, permutes in (("sixteen", True), ("small", True), ("seventeen", False), ("wide", False)):
        lay = compiled(name)[0].forest_code.layout
        assert permute(lay) is (permutes and host.name == "avx512"), name
        assert ("vpermi2var" in serving_ir(lay, "k")) is permute(lay), name
        for other in ("avx2", "neon", "sve"):
            assert "vpermi2var" not in serving_ir(lay, "k", targets.cross(other)), (name, other)
        assert permute(lay, targets.cross("avx512")) is permutes, name


def test_serve_takes_the_lanes_only_without_bin_exits_and_by_default_without_exits_from_a_block_of_trees():
    for name, compiled_in, default in (
        # Fewer trees than a block of lanes: one row takes ``run``.
        ("small", True, 0),
        ("numeric", True, LANE_ROWS),
        ("sequential", True, 0),
        ("sequential-bins", False, 0),
    ):
        c = compiled(name)[0]
        lay = c.forest_code.layout
        assert ("call void @lanes_" in serving_ir(lay, "k")) is compiled_in, name
        assert c.serving.lane_rows == lane_rows(lay) == default, name
    assert LANE_ROWS >= 1


@pytest.mark.parametrize("name", sorted(PLANS))
@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_one_row_is_the_interpreters_and_the_batchs(name, data):
    plan, (c, by_run, by_lanes, by_ranks) = PLANS[name], compiled(name)
    F = plan.forest.n_features
    n = data.draw(st.integers(1, 6))
    X = random_inputs(np.random.default_rng(data.draw(st.integers(0, 2**32 - 1))), n, F)
    cells = st.tuples(st.integers(0, n - 1), st.integers(0, F - 1), VALUES)
    for i, j, v in data.draw(st.lists(cells, max_size=12)):
        X[i, j] = v
    by_scores = scores_path(name)
    # Nine copies of each row: more than LANE_ROWS, so the batch runs on the plan's blocks.
    batch = c.evaluate(np.repeat(X, 9, axis=0))
    for i in range(n):
        one = by_lanes.serve(X[i : i + 1])
        assert_same(one, evaluate(plan, X[i : i + 1], c.costs))
        assert_same(one, by_run.serve(X[i : i + 1]))
        assert_same(c.evaluate(X[i : i + 1]), one)
        if compact(c.forest_code.layout):
            assert_same(by_ranks.serve(X[i : i + 1]), one)
        # The scores-only lanes: the scores at the call, every other field read later equal.
        quick = by_scores.evaluate(X[i : i + 1])
        kind = ScoresEvaluation if scores_lanes(c.forest_code.layout) else ServingEvaluation
        assert type(quick) is kind, name
        np.testing.assert_array_equal(quick.raw, one.raw)
        assert_same(quick, one)
        np.testing.assert_array_equal(one.raw, batch.raw[9 * i : 9 * i + 1])
        np.testing.assert_array_equal(one.exit, batch.exit[9 * i : 9 * i + 1])
        for field in ("total", "n_nodes", "acquired"):
            want = getattr(batch.cost, field)[9 * i : 9 * i + 1]
            np.testing.assert_array_equal(getattr(one.cost, field), want, err_msg=field)


def with_leaves(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The lanes' tables ``t`` with a stand-in ``lleaf`` (``rank_tables`` copies its values)."""
    return {**t, "lleaf": np.zeros((len(t["lorig"]), 8))}


@pytest.mark.parametrize("name", ["numeric", "multiclass", "float32-sums"])
def test_the_scores_only_lanes_read_each_nodes_values_from_cval(name):
    code = compiled(name)[0].forest_code
    K = code.forest.n_outputs
    lleaf, cval = (code.tables[TABLES.index(t)] for t in ("lleaf", "cval"))
    np.testing.assert_array_equal(cval.reshape(-1, K), lleaf[:, :K])
    assert cval.ctypes.data % 64 == 0
    assert ("@slanes_" in serving_ir(code.layout, "k")) is scores_lanes(code.layout) is True
    # One row takes them by default from ``SCORES_POSITIONS`` positions.
    P = len(code.layout.order)
    assert compiled(name)[0].serving.scores is (P >= SCORES_POSITIONS), (name, P)
    # Plans with exits have none (``lanes_ir`` refuses them).
    assert not scores_lanes(compiled("sequential-deep")[0].forest_code.layout)


def slot_ranks(f: Forest, r: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Each slot's rank for the row ``x`` (``lranks``): the numerical ones by the tables'
    breadth-first search, checked against a count over the forest's own thresholds; the
    categorical ones from the row of their feature's table for the row's category."""
    ranks = np.zeros(len(r["cfeat"]), dtype=np.int64)
    for s in range((len(r["csteps"]) - 1) * LANES):
        m, base, steps = int(r["cfeat"][s]), int(r["cbase"][s]), int(r["csteps"][s // LANES])
        v = float(x[m])
        k = 0
        for _ in range(steps):
            k = 2 * k + 1 + int(r["cthr"][base + k] < v)
        rank = k - (2**steps - 1)
        thr = f.threshold[(f.feature == m) & (f.cat_start < 0)]
        assert np.isnan(v) or rank == len(np.unique(thr[~np.isnan(thr) & (thr < v)]))
        missing = np.isnan(v) or (r["cflag"][s] & SLOT_ZERO and abs(v) <= ZERO)
        ranks[s] = -1 if missing else rank
    for m, C, at, s0, n in r["ccf"].tolist():
        v = float(x[m])
        code = C + 1 if np.isnan(v) else int(v) if -1.0 < v < C else C
        ranks[s0 : s0 + n * LANES] = r["ccat"][at + code * n * LANES : at + (code + 1) * n * LANES]
    return ranks


@pytest.mark.parametrize("name", sorted(FORESTS))
def test_a_descent_over_the_rank_records_reaches_the_forests_leaves(name):
    f = FORESTS[name]
    rng = np.random.default_rng(6)
    tree, depth, _, _ = leaf_tables(f)
    t = lane_tables(f, np.arange(f.n_trees), CHUNK_FULL, tree, depth)
    r = {**rank_tables(f, with_leaves(t)), "cat_bits": t["cat_bits"]}
    X = random_inputs(rng, 20, f.n_features)
    X[0, :] = ZERO
    X[1, :] = -0.0
    X[2, :] = np.nan
    want = f.apply(X)
    crec = r["crec"]
    for i in range(len(X)):
        ranks = slot_ranks(f, r, X[i])
        for tr in range(f.n_trees):
            block = tr // CHUNK_FULL * (CHUNK_FULL // BLOCK) + t["lslot"][tr] // BLOCK
            node = int(t["lblock"].reshape(-1, 1 + BLOCK)[block, 1 + t["lslot"][tr] % BLOCK])
            for _ in range(int(depth.max()) + 1):
                rec = int(crec[node])
                left, uns = rec & 0x7FFFFFFF, (rec >> UNSIGNED_BIT) & 1
                slot, j = (rec >> SLOT_SHIFT) & 0xFFFF, rec >> RANK_SHIFT
                rank = int(ranks[slot])
                right = (rank & 0xFFFFFFFF) > (j & 0xFFFFFFFF) if uns else rank > j
                node = left + int(right)
            assert int(t["lorig"][node]) == want[i, tr], (i, tr)


def test_the_rank_records_top_rows_and_searches(monkeypatch):
    f = FORESTS["deep"]
    tree, depth, _, _ = leaf_tables(f)
    t = lane_tables(f, np.arange(f.n_trees), CHUNK_FULL, tree, depth)
    r = rank_tables(f, with_leaves(t))
    crec, left = r["crec"], t["lrec"][:, 0] & 0xFFFFFFFF
    top = r["ctop"].reshape(-1, TOP_WORDS, BLOCK)
    roots = t["lblock"].reshape(-1, 1 + BLOCK)[:, 1:]
    for b in range(len(roots)):
        for lane in range(BLOCK):
            row = 0
            for d in range(TOP_LEVELS):
                for q in range(2**d):
                    node = int(roots[b, lane])
                    for i in range(d):
                        node = int(left[node]) + (int(left[node]) != node) * ((q >> i) & 1)
                    assert top[b, row, lane] == crec[node]
                    row += 1
    # Each numerical slot's keys: a complete search tree over its sorted thresholds.
    for keys in ([], [1.0], [1.0, 2.0], [-np.inf, -0.0, 0.5, 3.0, np.inf]):
        e = eytzinger(np.array(keys))
        assert len(e) == 2 ** len(keys).bit_length() - 1
        assert sorted(e[~np.isnan(e)].tolist()) == sorted(keys)
    # Slots and thresholds beyond the records' fields are refused.
    assert ranks_ok(f)
    most = max(len(np.unique(f.threshold[(f.feature == m) & (f.cat_start < 0)])) for m in range(f.n_features))
    monkeypatch.setattr(lranks, "MAX_RANK", most - 1)
    assert not ranks_ok(f)
    monkeypatch.undo()
    assert ranks_ok(FORESTS["large-sets"])
    monkeypatch.setattr(lranks, "MAX_CAT_TABLE", 64)
    assert not ranks_ok(FORESTS["large-sets"])


def test_one_row_on_rank_records_takes_empty_and_float32_inputs_and_refuses_wrong_shapes():
    plan, (c, _, _, _) = PLANS["numeric"], compiled("numeric")
    # The default one-row path here: the scores-only lanes on rank records.
    assert c.serving.lane_rows == 1 and c.serving.lane_ranks == 1 and c.serving.scores
    assert type(c.evaluate(np.zeros((1, plan.forest.n_features)))) is ScoresEvaluation
    F = plan.forest.n_features
    X = random_inputs(np.random.default_rng(8), 4, F)
    X[0, :3] = (np.nan, -0.0, np.inf)
    assert c.evaluate(X[:0]).raw.shape[0] == 0
    for i in range(len(X)):
        for dtype in (np.float32, np.float64):
            x = X[i : i + 1].astype(dtype)
            assert_same(c.evaluate(x), evaluate(plan, x, c.costs))
            # Fields read in another order, after the thread's buffers served other calls.
            ev = c.evaluate(x)
            c.evaluate(X[(i + 1) % len(X) :][:1])
            np.testing.assert_array_equal(ev.cost.acquired, evaluate(plan, x, c.costs).cost.acquired)
            np.testing.assert_array_equal(ev.raw, evaluate(plan, x, c.costs).raw)
            # It pickles as the plain Evaluation it stands for.
            back = pickle.loads(pickle.dumps(c.evaluate(x)))
            assert type(back) is Evaluation
            assert_same(back, evaluate(plan, x, c.costs))
    with pytest.raises(ValueError, match=re.escape(f"has {F + 1} features, but the model expects {F}")):
        c.evaluate(np.zeros((1, F + 1)))
