"""Compiled code for each target (``thrifty.runtime.compiled.targets``): every target this CPU
runs, forced with ``THRIFTY_TARGET``, gives the interpreter's results bit for bit (vector blocks
of 8, 4 or 2 lanes, or scalar blocks); the aarch64 targets are cross-compiled to aarch64 object
code here; a target that is unknown or that this CPU cannot run is refused in one line."""

from __future__ import annotations

import ctypes
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import thrifty.runtime.compiled.objects as objects
from tests._helpers.compiled_plans import PLANS, check, input_matrices
from tests._helpers.reference import random_forest
from tests._helpers.runtime_costs import N_FEATURES, cost_model
from thrifty import Forest, Full, Sequential
from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled import targets
from thrifty.runtime.compiled.ir_serving import serving_ir
from thrifty.runtime.compiled.ir_vector import _Emitter, _low_bit_by_exponent, vector_module_irs
from thrifty.runtime.compiled.layout import Layout, inorder_leaves
from thrifty.runtime.compiled.tables import leaf_tables

HERE = targets.runnable()
EXAMPLES = settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def layout(forest: Forest, order, exits) -> Layout:
    return Layout(forest, np.asarray(order), np.asarray(exits, dtype=np.int8), *leaf_tables(forest)[1:])


def wide_categories(forest: Forest) -> Forest:
    """``forest`` with every category set three words long (codes up to 95): the vector
    blocks then read the set's words from a table rather than a constant."""
    cat = np.flatnonzero(forest.cat_start >= 0)
    rng = np.random.default_rng(len(cat))
    start, size = forest.cat_start.copy(), forest.cat_size.copy()
    start[cat] = 3 * np.arange(len(cat))
    size[cat] = 3
    words = rng.integers(0, 2**32, size=3 * len(cat), dtype=np.uint64).astype(np.uint32)
    return dataclasses.replace(forest, cat_start=start, cat_size=size, cat_bitsets=words)


# Trees of 64 to 219 leaves (leaf masks of one to four words), a forest of 130 features (three
# words of tested features), and one whose category sets span three words.
DEEP = random_forest(np.random.default_rng(33), N_FEATURES, n_trees=6, max_depth=9)
WIDE = random_forest(np.random.default_rng(130), 130, n_trees=8, max_depth=5)
CATS = wide_categories(random_forest(np.random.default_rng(7), N_FEATURES, n_trees=8, max_depth=5))


def test_the_host_runs_its_own_target_and_generic():
    assert HERE[0] == targets.host_name() and HERE[-1] == "generic"
    assert set(HERE) <= set(targets.NAMES)
    for name in HERE:
        t = targets.host(name)
        assert (t.lanes > 0) is (name != "generic")
        # Forced AVX2 code is what a CPU without AVX-512 runs.
        assert ("+avx512f" in t.features.split(",")) is (name in ("avx512", "generic") and "avx512" in HERE)


def test_the_host_target_follows_the_cpus_features(monkeypatch):
    """An x86 CPU without AVX-512 gets AVX2 code at run time, one without AVX2 scalar blocks."""
    if targets._arch() != "x86_64":
        pytest.skip("x86 feature flags")
    for have, want in (({"avx2": True, "avx512f": False}, "avx2"), ({"avx2": False}, "generic")):
        monkeypatch.setattr(targets, "_host_features", lambda have=have: have)
        assert targets.host_name() == want and targets.runnable()[-1] == "generic"


def test_unknown_or_foreign_targets_are_refused_in_one_line(monkeypatch):
    monkeypatch.setenv(targets.ENV, "avx3")
    with pytest.raises(InvalidParameterError) as info:
        targets.current()
    message = str(info.value)
    assert "\n" not in message and "avx3" in message
    # It names every target and the ones this CPU runs.
    assert all(name in message for name in targets.NAMES) and f"this CPU runs {', '.join(HERE)}" in message
    foreign = [name for name in targets.NAMES if name not in HERE]
    for name in foreign:
        monkeypatch.setenv(targets.ENV, name)
        with pytest.raises(InvalidParameterError, match=f"cannot run on this CPU.*{HERE[0]}"):
            targets.current()
    for name in ("", "host", "HOST"):
        monkeypatch.setenv(targets.ENV, name)
        assert targets.current() == targets.host()


def test_the_target_is_part_of_the_cache_key(monkeypatch):
    lay = layout(PLANS["full"].forest, np.arange(9), np.zeros(9))
    keys = set()
    for name in HERE:
        monkeypatch.setenv(targets.ENV, name)
        keys.add(objects.code_key(lay))
        # Vector blocks exactly where the target has lanes.
        assert objects.use_vector(lay) is (name != "generic")
    assert len(keys) == len(HERE)


@pytest.mark.parametrize("name", [n for n in HERE if n != "generic"])
def test_vector_blocks_use_the_targets_registers(name):
    """AVX2 code keeps to 256-bit registers (it runs on CPUs without AVX-512); AVX-512 code
    uses 512-bit ones."""
    lay = layout(PLANS["full"].forest, np.arange(9), np.zeros(9))
    t = targets.host(name)
    mod = objects.llvm.parse_assembly(vector_module_irs(lay, "k", 100, t.lanes, t.vscale)[0])
    asm = t.machine().emit_assembly(mod)
    if name == "avx2":
        assert "ymm" in asm and "zmm" not in asm
    if name == "avx512":
        assert "zmm" in asm


@pytest.mark.parametrize("target", HERE)
@pytest.mark.parametrize("name", ["full", "sequential", "full-multiclass", "full-float32", "gated-forests"])
@EXAMPLES
@given(X=input_matrices(N_FEATURES))
def test_every_target_here_matches_the_interpreter(target, name, X, monkeypatch):
    """Each target's code (forced), dense, one row and lazily, on inputs on and around the
    thresholds (NaN, infinities, category codes, 0 and 1 rows): the interpreter's results."""
    monkeypatch.setenv(targets.ENV, target)
    check(PLANS[name], X, cost_model(tree_cost=0.25, split_cost=0.125))


@pytest.mark.parametrize("target", HERE)
@pytest.mark.parametrize("forest", ["deep", "wide", "categories"])
@EXAMPLES
@given(data=input_matrices(N_FEATURES, max_rows=30))
def test_deep_wide_and_categorical_forests_on_every_target(target, forest, data, monkeypatch):
    """Trees of more than 64 leaves, more than 64 features, and category sets of three words,
    on each target's blocks."""
    monkeypatch.setenv(targets.ENV, target)
    f = {"deep": DEEP, "wide": WIDE, "categories": CATS}[forest]
    if forest == "deep":
        assert np.diff(inorder_leaves(DEEP)[0]).max() > 192
    # The wide forest reads columns past the generated ones: tile them to its width.
    X = np.tile(data, (1, -(-f.n_features // N_FEATURES)))[:, : f.n_features]
    costs = cost_model(tree_cost=0.25, split_cost=0.125) if f.n_features == N_FEATURES else None
    check(Full(f), X, costs)
    order = np.arange(f.n_trees)[::-1]
    check(Sequential(f, order, np.full(f.n_trees, 1.0), np.full(f.n_trees, -1.0)), X, costs)


def test_helper_processes_compile_for_the_forced_target(monkeypatch):
    """The compile helpers (``llc``) inherit the target: their objects are this process's."""
    forest = random_forest(np.random.default_rng(8), N_FEATURES, n_trees=9)
    lay = layout(forest, np.arange(9), np.ones(9))
    monkeypatch.setattr(objects, "_TREES_PER_MODULE", 2)
    for name in HERE:
        monkeypatch.setenv(targets.ENV, name)
        monkeypatch.setattr(objects, "_cores", lambda: 2)
        shared = objects._compile(lay, "k", False)
        monkeypatch.setattr(objects, "_cores", lambda: 1)
        assert objects._compile(lay, "k", False) == shared


# ELF: 64-bit little-endian, e_machine 183 (EM_AARCH64).
EM_AARCH64 = 183


@pytest.mark.parametrize("name", ["neon", "sve"])
def test_aarch64_code_cross_compiles(name):
    """The aarch64 targets' vector blocks, ``run`` and ``serve`` verify as IR and compile to
    aarch64 ELF objects (they cannot run here); NEON code works on 128-bit ``v`` registers,
    SVE code on ``z`` registers (LLVM's SVE lowering of the fixed-width vectors)."""
    t = targets.cross(name)
    assert t.triple.startswith("aarch64") and t.lanes == (2 if name == "neon" else 4)
    for plan in (PLANS["sequential"], Full(DEEP), Full(CATS)):
        f, order = plan.forest, plan.schedule.order
        lay = layout(f, order, np.isfinite(plan.schedule.eps_pos))
        irs = vector_module_irs(lay, "k", 100, t.lanes, t.vscale, t.by_exponent)
        irs[-1] += serving_ir(lay, "k", t)
        for ir in irs:
            obj = objects._emit(ir, t)
            assert obj[:4] == b"\x7fELF" and obj[4] == 2 and obj[5] == 1
            assert int.from_bytes(obj[18:20], "little") == EM_AARCH64
        mod = objects.llvm.parse_assembly(irs[0])
        mod.triple = t.triple
        asm = t.machine().emit_assembly(mod)
        if name == "neon":
            assert "v0.2d" in asm or "v1.2d" in asm
        else:
            assert "z0.d" in asm or "z1.d" in asm


def test_cross_rejects_a_non_vector_target():
    with pytest.raises(InvalidParameterError, match="cross needs one of"):
        targets.cross("generic")


def test_lowest_bit_by_the_exponent_of_a_double():
    """AVX2's and NEON's exit leaf: the lowest set bit of every word whose lowest set bit is
    below bit 52, whatever the bits above it, as native code (four lanes)."""
    e = _Emitter(4)
    e.lines += ["define void @low(ptr %in, ptr %out) {", "entry:", "  %w = load <4 x i64>, ptr %in, align 8"]
    got = _low_bit_by_exponent(e, "%w")
    e.lines += [f"  store <4 x i64> {got}, ptr %out, align 8", "  ret void", "}"]
    mod = objects.llvm.parse_assembly("\n".join(e.lines))
    mod.verify()
    engine = objects.llvm.create_mcjit_compiler(mod, targets.host().machine())
    engine.finalize_object()
    low = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("low"))
    rng = np.random.default_rng(0)
    k = np.repeat(np.arange(52), 8)
    above = rng.integers(-(2**63), 2**63, size=len(k), dtype=np.int64)
    words = (above & ~((np.int64(1) << k) - 1) & ~(np.int64(1) << k)) | (np.int64(1) << k)
    out = np.zeros_like(words)
    for i in range(0, len(words), 4):
        low(words[i:].ctypes.data, out[i:].ctypes.data)
    np.testing.assert_array_equal(out, k)
