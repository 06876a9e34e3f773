"""Paired A/B of the scores-only entry's vector blocks (``ir_vraw``) alone: each variant's blocks
generated under its own environment (``NAME=VAR=value[,VAR=value]``, e.g. ``THRIFTY_RAW_TREES``),
JIT-compiled apart from the rest of the plan and called as ``raw``'s driver calls them (256 rows
a pass over the blocks) on a shapes model's first test rows; every variant's scores must equal
the first's bit for bit. Rounds rotate the variants' order; each call is timed in this thread's
CPU time, and each variant's ratio to the first is reported as the median over rounds with its
range (the loaded machine's noise). Compiling only the blocks takes a fraction of a whole plan.

    python benchmarks/raw_ab.py --model higgs255 --trees 128 --rounds 15 \\
        --variant base= --variant r128=THRIFTY_RAW_TREES=128

Prints the compile CPU seconds per variant and a line per variant; writes no results file.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

import numpy as np
from _figures import environment
from shapes import build

RAW_ARGS = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)
BLOCK = ctypes.CFUNCTYPE(None, *RAW_ARGS)


def blocks_under(lay, env: dict, engines: list) -> tuple[list, float]:
    """The ``raw`` blocks of ``lay`` generated with ``env`` set, JIT-compiled; their functions
    and the compile's CPU seconds. ``engines`` keeps the code alive."""
    import llvmlite.binding as llvm

    from thrifty.runtime.compiled import ir_vraw, targets, vblocks
    from thrifty.runtime.compiled.choice import ternlog_masks
    from thrifty.runtime.compiled.objects import _ranks

    with environment(env):
        tg = targets.current()
        tm = tg.machine()
        ranks = _ranks(lay)
        ternlog = ternlog_masks(tg.name, ranks)
        lanes = tg.lanes * 64 // ranks if ranks else tg.lanes
        fns, t0 = [], time.process_time()
        for m, (p, k) in enumerate(vblocks.raw_blocks(lay)):
            ir = ir_vraw.vraw_block_ir(
                lay, "ab", m, p, k, lanes, tg.vscale, tg.by_exponent, ranks, ternlog, tg.cat_shift
            )
            mod = llvm.parse_assembly(ir)
            mod.triple = tm.triple
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=1))
            pb.getModulePassManager().run(mod, pb)
            engine = llvm.create_mcjit_compiler(mod, tm)
            engine.finalize_object()
            engines.append(engine)
            fns.append(BLOCK(engine.get_function_address(f"rawblk_ab_{m}")))
        return fns, time.process_time() - t0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="higgs255")
    ap.add_argument("--trees", type=int, default=128)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--variant", action="append", default=[], help="NAME=VAR=value[,VAR=value]")
    ap.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA", "../shared/data"))
    args = ap.parse_args(argv)
    import thrifty
    from thrifty.runtime.compiled.ir_raw import RAW_CONTEXT
    from thrifty.runtime.compiled.layout import Layout
    from thrifty.runtime.compiled.tables import leaf_tables

    b = build(args.model, False, args.data_home)
    forest = b["forest"].subset(list(range(min(args.trees, b["forest"].n_trees))))
    M = np.ascontiguousarray(b["M"][: args.rows])
    compiled = thrifty.compile(thrifty.Full(forest))
    assert compiled.raw_path is not None and compiled.forest_code.code.vector, "no vector raw entry"
    # The plan's tables (leaf records) serve every variant: they do not depend on the blocks.
    T = int(compiled.raw_path._template[RAW_CONTEXT.index("T")])
    n_trees = forest.n_trees
    lay = Layout(forest, np.arange(n_trees), np.zeros(n_trees, dtype=np.int8), *leaf_tables(forest)[1:])
    engines: list = []
    built = {}
    for text in args.variant or ["default="]:
        name, _, settings = text.partition("=")
        env = dict(s.split("=", 1) for s in settings.split(",") if s)
        built[name], took = blocks_under(lay, env, engines)
        print(f"{name}: {len(built[name])} blocks, compiled in {took:.1f} CPU s", flush=True)

    def run(fns: list) -> np.ndarray:
        n, out = len(M), np.zeros(len(M))
        for lo in range(0, n, 256):
            for fn in fns:
                fn(M.ctypes.data, out.ctypes.data, T, lo, min(n, lo + 256), n)
        return out

    names = list(built)
    first = run(built[names[0]])
    for name in names[1:]:
        assert np.array_equal(run(built[name]), first), f"{name}: scores differ from {names[0]}'s"
    times: dict = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.thread_time()
            run(built[name])
            times[name].append(time.thread_time() - t0)
    for name in names:
        ratio = np.array(times[name]) / np.array(times[names[0]])
        ns = np.median(times[name]) / (n_trees * len(M)) * 1e9
        print(
            f"  {args.model} {name:12s} {ns:7.2f} ns per tree and row  {np.median(ratio):.3f} of {names[0]} "
            f"[{ratio.min():.3f}, {ratio.max():.3f}]",
            flush=True,
        )


if __name__ == "__main__":
    sys.exit(main())
