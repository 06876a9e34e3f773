"""Where a wide forest's batch call spends its time (issue 29: the 300-feature ranker's batch):
the whole ``evaluate(X).raw`` call of a compiled plan on a ``shapes.py`` model's test rows,
and its parts timed alone in the same rounds, in this thread's CPU time:

- ``copy``: the copy of the rows a ``DeferredEvaluation`` keeps (``np.array(X)``);
- ``raw``: the scores-only entry alone (``ir_raw``'s driver over ``ir_vraw``'s blocks);
- ``block m``: each scores-only block alone (JIT-compiled apart, as ``raw_ab.py`` does), called
  as the driver calls it, 256 rows a pass;
- ``ranks m``: only the inputs a block reads, each tested feature's column gathered and (rank
  blocks) searched among the block's thresholds, once per vector of rows, as the block does
  before its trees (``ir_vector.split_tests``); the ranks are XORed into one word per lane so
  that nothing is left out;
- ``prerank`` and ``pblock m`` (forests whose scores-only entry forms its ranks once per pass,
  ``ir_preranks``): that pass alone, and each block reading the pass's ranks;
- ``python``: the whole call less ``copy`` and ``raw`` (the checks, the context, the result);
- ``whole off``, ``raw off`` and ``python off``: the same with ``THRIFTY_PRERANKS=off`` (each
  block ranks its own features, as before ``ir_preranks``).

Rounds rotate the parts' order; each part's median over rounds and its range are printed, in
µs per call and as a share of the whole call's median (shares of rounds' medians, so they need
not add to 1).

    python benchmarks/wide_parts.py --only rank300,synth136 --rounds 15

Prints a table per model; writes no results file (a measurement for docs/runtime.md).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import numpy as np
from _figures import environment
from raw_ab import BLOCK, RAW_ARGS, blocks_under
from shapes import build


def probe_ir(lay, m: int, p0: int, k: int, lanes: int, ranks: int) -> str:
    """``rawblk_probe_{m}``, ``raw``'s block contract: per vector of ``lanes`` rows, every
    feature the block's splits test gathered and (``ranks``) ranked among the block's
    thresholds as ``ir_vector.split_tests`` does, folded into one word per lane stored to the
    scores (so that the work stays)."""
    from thrifty.runtime.compiled.ir_ranks import block_thresholds, rank_ir
    from thrifty.runtime.compiled.ir_raw import row_vectors
    from thrifty.runtime.compiled.ir_vector import _Emitter, _splat, intrinsics

    f = lay.forest
    e = _Emitter(lanes)
    L, Q, B = e.L, e.I, e.B
    every = _splat("i1", "true")
    thresholds = block_thresholds(lay, p0, k) if ranks else {}
    feats = sorted(
        {
            int(x)
            for x in f.feature[np.concatenate([f._tree_nodes(int(t)) for t in lay.order[p0 : p0 + k]])]
            if x >= 0
        }
    )
    globals_: list[str] = []
    e.lines += [
        f"define void @rawblk_probe_{m}(ptr noalias %X, ptr noalias %out, ptr noalias %T, "
        "i64 %lo, i64 %hi, i64 %n) {",
        "entry:",
        *row_vectors(e),
    ]
    xo = e(f"mul {Q} %idx, {_splat('i64', str(f.n_features))}")
    acc = "zeroinitializer"
    W = f"<{L} x i{ranks or 64}>"
    for feat in feats:
        cell = e.gep("%X", "double", e(f"add {Q} {xo}, {_splat('i64', str(feat))}"))
        x = e.gather("double", cell, every)
        if feat in thresholds:
            word = rank_ir(e, x, thresholds[feat], f"@pthr_{m}_{feat}", globals_, ranks)
        else:
            word = e(f"bitcast {e.V} {x} to {W}") if not ranks else e(f"fptosi {e.V} {x} to {W}")
        acc = e(f"xor {W} {acc}, {word}")
    value = e(f"sitofp {W} {acc} to {e.V}")
    at = e("getelementptr double, ptr %out, i64 %i")
    e.lines.append(f"  call void @llvm.masked.store.v{L}f64.p0({e.V} {value}, ptr {at}, i32 8, {B} %valid)")
    e.lines += [f"  %i1 = add i64 %i, {L}", "  br label %loop", "exit:", "  ret void", "}"]
    decl = f"declare void @llvm.masked.store.v{L}f64.p0({e.V}, ptr, i32 immarg, {B})\n"
    return intrinsics(L) + decl + "\n".join(globals_ + e.lines) + "\n"


def probes(lay, engines: list) -> list:
    """The ``probe_ir`` functions of ``lay``'s scores-only blocks, JIT-compiled."""
    import llvmlite.binding as llvm

    from thrifty.runtime.compiled import targets, vblocks
    from thrifty.runtime.compiled.objects import _ranks

    tg = targets.current()
    tm = tg.machine()
    ranks = _ranks(lay)
    lanes = tg.lanes * 64 // ranks if ranks else tg.lanes
    fns = []
    for m, (p, k) in enumerate(vblocks.raw_blocks(lay)):
        mod = llvm.parse_assembly(probe_ir(lay, m, p, k, lanes, ranks))
        mod.triple = tm.triple
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=1))
        pb.getModulePassManager().run(mod, pb)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        engines.append(engine)
        fns.append(BLOCK(engine.get_function_address(f"rawblk_probe_{m}")))
    return fns


PRE_ARGS = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
PBLOCK = ctypes.CFUNCTYPE(None, *RAW_ARGS, ctypes.c_void_p)


def preranked(lay, engines: list) -> tuple:
    """With ranks formed once per pass (``ir_preranks``): the pass ``prerank_probe`` and the
    scores-only blocks that read its buffer, JIT-compiled, and the buffer's ranked features;
    ``(None, [], 0)`` where ``forest_ranks`` says the plan's blocks rank their own."""
    import llvmlite.binding as llvm

    from thrifty.runtime.compiled import ir_preranks, ir_vraw, targets, vblocks
    from thrifty.runtime.compiled.choice import ternlog_masks
    from thrifty.runtime.compiled.objects import _raw_ranks

    tg = targets.current()
    tm = tg.machine()
    ranks = _raw_ranks(lay)
    lanes = tg.lanes * 64 // ranks if ranks else tg.lanes
    pre = ir_preranks.forest_ranks(lay, ranks, lanes)
    if pre is None:
        return None, [], 0

    def jit(ir: str, name: str, kind):
        mod = llvm.parse_assembly(ir)
        mod.triple = tm.triple
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=1))
        pb.getModulePassManager().run(mod, pb)
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        engines.append(engine)
        return kind(engine.get_function_address(name))

    ternlog = ternlog_masks(tg.name, ranks)
    blocks = [
        jit(
            ir_vraw.vraw_block_ir(
                lay, "pb", m, p, k, lanes, tg.vscale, tg.by_exponent, ranks, ternlog, tg.cat_shift, pre
            ),
            f"rawblk_pb_{m}",
            PBLOCK,
        )
        for m, (p, k) in enumerate(vblocks.raw_blocks(lay))
    ]
    ranker = jit(
        ir_preranks.prerank_ir(lay, "probe", pre, lanes), "prerank_probe", ctypes.CFUNCTYPE(None, *PRE_ARGS)
    )
    return ranker, blocks, len(pre)


def parts_of(name: str, rounds: int, data_home: str, rows: int) -> None:
    import thrifty
    from thrifty.runtime.compiled.ir_raw import RAW_CONTEXT, RAW_ROWS
    from thrifty.runtime.compiled.layout import Layout
    from thrifty.runtime.compiled.tables import leaf_tables

    b = build(name, False, data_home)
    forest, M = b["forest"], b["M"]
    if rows:
        M = np.ascontiguousarray(np.resize(M, (rows, M.shape[1])))
    n = len(M)
    compiled = thrifty.compile(forest)
    # The same plan with each block ranking its own features (the code before ``ir_preranks``).
    with environment({"THRIFTY_PRERANKS": "off"}):
        before = thrifty.compile(forest)
    path = compiled.raw_path
    assert path is not None and compiled.forest_code.code.vector, "no vector scores-only entry"
    T = int(path._template[RAW_CONTEXT.index("T")])
    n_trees = forest.n_trees
    lay = Layout(forest, np.arange(n_trees), np.zeros(n_trees, dtype=np.int8), *leaf_tables(forest)[1:])
    engines: list = []
    blocks, _ = blocks_under(lay, {}, engines)
    probe = probes(lay, engines)
    ranker, pblocks, slots = preranked(lay, engines)
    R = np.zeros(slots * RAW_ROWS, dtype=np.int16)
    out = np.zeros(n)
    C = np.array(M)
    scores = np.empty(path.K * n)  # alive while ``ctx`` points at it
    ctx = path._context(C, scores, 0, n, n)
    ctx_before = before.raw_path._context(C, scores, 0, n, n)

    def chunks(fn) -> None:
        for lo in range(0, n, RAW_ROWS):
            fn(C.ctypes.data, out.ctypes.data, T, lo, min(n, lo + RAW_ROWS), n)

    fns = {
        "whole": lambda: compiled.evaluate(M, n_threads=1).raw,
        "copy": lambda: np.array(M, dtype=np.float64, order="C"),
        "raw": lambda: path.entry(ctx.ctypes.data),
        "whole off": lambda: before.evaluate(M, n_threads=1).raw,
        "raw off": lambda: before.raw_path.entry(ctx_before.ctypes.data),
    }
    for m, fn in enumerate(blocks):
        fns[f"block {m}"] = lambda fn=fn: chunks(fn)
    for m, fn in enumerate(probe):
        fns[f"ranks {m}"] = lambda fn=fn: chunks(fn)
    if ranker is not None:
        # The pass alone for every pass of rows, then each block reading the last pass's ranks
        # (the same work per row; the scores are not compared).
        fns["prerank"] = lambda: [
            ranker(C.ctypes.data, R.ctypes.data, lo, min(n, lo + RAW_ROWS), n) for lo in range(0, n, RAW_ROWS)
        ]
        for m, fn in enumerate(pblocks):
            fns[f"pblock {m}"] = lambda fn=fn: [
                fn(C.ctypes.data, out.ctypes.data, T, lo, min(n, lo + RAW_ROWS), n, R.ctypes.data)
                for lo in range(0, n, RAW_ROWS)
            ]
    names = list(fns)
    for fn in fns.values():
        fn()
    times: dict = {k: [] for k in names}
    for r in range(rounds):
        for k in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.thread_time()
            fns[k]()
            times[k].append(time.thread_time() - t0)
    t = {k: np.array(v) for k, v in times.items()}
    t["python"] = t["whole"] - t["copy"] - t["raw"]
    t["python off"] = t["whole off"] - t["copy"] - t["raw off"]
    whole = np.median(t["whole"])
    print(f"{name}: {n} rows, {n_trees} trees, {len(blocks)} blocks; thread CPU µs a call, {rounds} rounds")
    for k, v in t.items():
        share = v / t["whole"]
        print(
            f"  {k:10s} {np.median(v) * 1e6:9.1f} µs  [{v.min() * 1e6:8.1f}, {v.max() * 1e6:8.1f}]  "
            f"{np.median(v) / whole:6.3f} of the call  "
            f"(per round {np.median(share):.3f} [{share.min():.3f}, {share.max():.3f}])",
            flush=True,
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="rank300,synth136")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--rows", type=int, default=0, help="rows per call (0: the test rows; more repeat them)")
    ap.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA", "../shared/data"))
    args = ap.parse_args(argv)
    for name in args.only.split(","):
        parts_of(name, args.rounds, args.data_home, args.rows)
    # The JIT engines of the parts would be torn down after LLVM at exit (a segmentation fault
    # once everything is printed): leave without running finalizers.
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
