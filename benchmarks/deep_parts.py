"""Where a batch call's cycles go in the scores-only entry's vector blocks (``ir_vraw``), by
subtraction: throw-away variants of a block with its trees' work removed piece by piece, each
JIT-compiled alone and called as ``raw``'s driver calls them (256 rows a pass), timed in paired
rounds (rotating order, this thread's CPU time) against the whole block and the whole call
(``evaluate(X).raw``, Python included). The variants, each a subset of the next:

    empty       the loop over vectors of rows: scores loaded and stored, nothing added
    columns     + each feature's column gathered (summed into the scores)
    ranks       + each feature's rank among the block's thresholds (``ir_ranks``; summed)
    masks       + every split's compare and leaf-mask update (``ir_ternlog``; the words XORed
                  into one per tree, summed), no exit leaf
    exits       + each tree's exit leaf (its index summed), no leaf value read
    full        + the leaf values gathered and added: ``ir_vraw.vraw_block_ir`` itself
    gathers     apart: ``empty`` + one leaf-value gather per tree at a leaf chosen from the
                row's number (the gathers' cost without the trees' work)

Each part is the paired difference of two variants, as a share of ``full``'s time (median over
rounds, with the range). ``full``'s scores must equal the compiled plan's bit for bit. With
``--mca``, ``llvm-mca`` (``--mca-bin``) models ``full``'s loop for each ``--mcpu``.

    python benchmarks/deep_parts.py --model higgs255 --trees 64 --rounds 21 --mca
    python benchmarks/deep_parts.py --quick

Prints a table; writes no results file (the figures are in docs/runtime.md, "Where a
scores-only block's time goes").
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
from raw_ab import BLOCK
from shapes import build

VARIANTS = ("empty", "columns", "ranks", "masks", "exits", "full", "gathers")
# (part, variant with it, variant without it)
PARTS = (
    ("loop, scores loaded and stored", "empty", None),
    ("column gathers", "columns", "empty"),
    ("rank searches", "ranks", "columns"),
    ("compares and mask updates", "masks", "ranks"),
    ("exit leaves", "exits", "masks"),
    ("leaf-value gathers and adds", "full", "exits"),
    ("outside the blocks (whole call)", "call", "full"),
)


def part_block_ir(lay, m: int, p0: int, k: int, lanes: int, ranks: int, ternlog: bool, upto: str) -> str:
    """The block ``rawblk_ab_{m}`` of positions ``[p0, p0 + k)`` with the trees' work up to
    ``upto`` (one of ``VARIANTS``); what a variant computes is summed into the scores so that
    LLVM keeps it."""
    from thrifty.runtime.compiled import ir_vraw
    from thrifty.runtime.compiled.ir_ranks import block_thresholds, rank_ir
    from thrifty.runtime.compiled.ir_ternlog import leaf_mask_ternlog
    from thrifty.runtime.compiled.ir_vector import _Emitter, _exit_leaf, _leaf_mask, _splat, split_tests

    if upto == "full":
        return ir_vraw.vraw_block_ir(lay, "ab", m, p0, k, lanes, 0, False, ranks, ternlog, True)
    e = _Emitter(lanes)
    Q, V = e.I, e.V
    every = _splat("i1", "true")
    globals_: list[str] = []
    acc, at, xo = ir_vraw.open_block(e, lay, "ab", m)

    def add(value: str, ty: str) -> None:
        acc[0] = e(f"fadd {V} {acc[0]}, {e(f'uitofp {ty} {value} to {V}')}")

    thresholds = block_thresholds(lay, p0, k)
    if upto in ("columns", "ranks"):
        for feat in sorted(thresholds):
            cell = e.gep("%X", "double", e(f"add {Q} {xo}, {_splat('i64', str(feat))}"))
            column = e.gather("double", cell, every)
            if upto == "columns":
                acc[0] = e(f"fadd {V} {acc[0]}, {column}")
            else:
                add(
                    rank_ir(e, column, thresholds[feat], f"@rthr_ab_{m}_{feat}", globals_, ranks),
                    f"<{e.L} x i{ranks}>",
                )
    elif upto == "gathers":
        for j in range(k):
            tree = int(lay.order[p0 + j])
            start, n = int(lay.leaf_ptr[tree]), int(lay.leaf_ptr[tree + 1] - lay.leaf_ptr[tree])
            # A leaf spread over the tree's leaves by the row's number (a multiplicative hash).
            hashed = e(f"mul {Q} %rowsv, {_splat('i64', str(2654435761 + 2 * j))}")
            mixed = e(f"lshr {Q} {hashed}, {_splat('i64', '7')}")
            leaf = e(f"urem {Q} {mixed}, {_splat('i64', str(n))}")
            R = lay.vrecord
            scaled = e(f"mul {Q} {leaf}, {_splat('i64', str(R))}")
            rec = e(f"add {Q} {scaled}, {_splat('i64', str(R * start))}")
            acc[0] = e(f"fadd {V} {acc[0]}, {e.gather('double', e.gep('%vleaf', 'double', rec), every)}")
    elif upto in ("masks", "exits"):
        right_of = split_tests(e, lay, p0, k, xo, f"@rthr_ab_{m}", globals_, "ab", ranks, True)
        W = f"<{e.L} x i{ranks}>"
        for j in range(k):
            tree = int(lay.order[p0 + j])
            words = (leaf_mask_ternlog if ternlog else _leaf_mask)(e, lay.forest, tree, right_of, ranks)
            if upto == "exits":
                add(_exit_leaf(e, words, None, False, ranks), Q)
                continue
            folded = words[0]
            for w in words[1:]:
                folded = e(f"xor {W} {folded}, {w}")
            add(folded, W)
    return ir_vraw.close_block(e, acc, at, globals_, ranks, ternlog, True)


def compile_blocks(lay, upto: str, engines: list, asm: list | None = None) -> tuple[list, float]:
    """The plan's ``raw`` blocks (``vblocks.raw_blocks``) as ``upto``'s variant, JIT-compiled
    at the scores-only entry's speed level (1); their functions and the compile's CPU seconds.
    With ``asm``, the first block's assembly is appended to it."""
    import llvmlite.binding as llvm

    from thrifty.runtime.compiled import targets, vblocks
    from thrifty.runtime.compiled.choice import ternlog_masks
    from thrifty.runtime.compiled.objects import _ranks

    tg = targets.current()
    tm = tg.machine()
    ranks = _ranks(lay)
    assert tg.name == "avx512" and ranks == 16, "the variants are written for AVX-512's 16-bit rank blocks"
    ternlog = ternlog_masks(tg.name, ranks)
    lanes = tg.lanes * 64 // ranks
    fns, t0 = [], time.process_time()
    for m, (p, k) in enumerate(vblocks.raw_blocks(lay)):
        mod = llvm.parse_assembly(part_block_ir(lay, m, p, k, lanes, ranks, ternlog, upto))
        mod.triple = tm.triple
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=1))
        pb.getModulePassManager().run(mod, pb)
        if asm is not None and m == 0:
            asm.append(tm.emit_assembly(mod))
        engine = llvm.create_mcjit_compiler(mod, tm)
        engine.finalize_object()
        engines.append(engine)
        fns.append(BLOCK(engine.get_function_address(f"rawblk_ab_{m}")))
    return fns, time.process_time() - t0


def loop_body(asm: str) -> str:
    """The instructions of the block's loop over vectors of rows (the largest basic block
    of the function: its straight-line body), for ``llvm-mca``."""
    blocks, current = [], []
    for line in asm.splitlines():
        text = line.split("#")[0].rstrip()
        if re.match(r"^\.?[\w.$]+:", text) or text.strip().startswith(("jmp", "j")) and current:
            blocks.append(current)
            current = []
            continue
        if text.startswith("\t") and not text.strip().startswith("."):
            current.append(text)
    blocks.append(current)
    return "\n".join(max(blocks, key=len)) + "\n"


def mca(body: str, mcpu: str, binary: str) -> dict:
    """``llvm-mca``'s cycles and instructions per iteration of ``body`` on ``mcpu``."""
    with tempfile.NamedTemporaryFile("w", suffix=".s", delete=False) as fh:
        fh.write(body)
    out = subprocess.run(
        [binary, f"-mcpu={mcpu}", "-mtriple=x86_64-unknown-linux-gnu", "-iterations=4", fh.name],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    os.unlink(fh.name)
    field = {
        k: float(re.search(rf"^{k}:\s+([\d.]+)", out, re.M).group(1))
        for k in ("Instructions", "Total Cycles", "IPC")
    }
    return {
        "instructions": field["Instructions"] / 4,
        "cycles": field["Total Cycles"] / 4,
        "ipc": field["IPC"],
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="higgs255")
    ap.add_argument("--trees", type=int, default=64)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--quick", action="store_true", help="16 trees, 1,024 rows, 5 rounds")
    ap.add_argument("--mca", action="store_true", help="model the full block's loop with llvm-mca")
    ap.add_argument("--mca-bin", default="llvm-mca-19")
    ap.add_argument(
        "--mcpu", action="append", default=[], help="llvm-mca CPU (default: sapphirerapids, znver4)"
    )
    ap.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA", "../shared/data"))
    args = ap.parse_args(argv)
    if args.quick:
        args.trees, args.rows, args.rounds = 16, 1024, 5
    import thrifty
    from thrifty.runtime.compiled.ir_raw import RAW_CONTEXT
    from thrifty.runtime.compiled.layout import Layout
    from thrifty.runtime.compiled.tables import leaf_tables

    b = build(args.model, args.quick, args.data_home)
    forest = b["forest"].subset(list(range(min(args.trees, b["forest"].n_trees))))
    M = np.ascontiguousarray(b["M"][: args.rows])
    compiled = thrifty.compile(thrifty.Full(forest))
    assert compiled.raw_path is not None and compiled.forest_code.code.vector, "no vector raw entry"
    T = int(compiled.raw_path._template[RAW_CONTEXT.index("T")])
    n_trees, n = forest.n_trees, len(M)
    lay = Layout(forest, np.arange(n_trees), np.zeros(n_trees, dtype=np.int8), *leaf_tables(forest)[1:])
    engines: list = []
    asm: list = []
    fns: dict = {}
    for name in VARIANTS:
        fns[name], took = compile_blocks(lay, name, engines, asm if name == "full" else None)
        print(f"{name}: {len(fns[name])} blocks, compiled in {took:.1f} CPU s", flush=True)

    start = float(np.asarray(forest.start, dtype=np.float64).ravel()[0])

    def run(blocks: list) -> np.ndarray:
        # The scores start from the forest's start, as ``raw``'s driver sets them.
        out = np.full(n, start)
        for lo in range(0, n, 256):
            for fn in blocks:
                fn(M.ctypes.data, out.ctypes.data, T, lo, min(n, lo + 256), n)
        return out

    calls = {name: (lambda f=f: run(f)) for name, f in fns.items()}
    calls["call"] = lambda: compiled.evaluate(M, n_threads=1).raw
    assert np.array_equal(run(fns["full"]), np.asarray(compiled.evaluate(M, n_threads=1).raw).ravel()), (
        "full block differs from the compiled plan"
    )
    names = list(calls)
    times: dict = {name: [] for name in names}
    for fn in calls.values():
        fn()
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            t0 = time.thread_time()
            calls[name]()
            times[name].append(time.thread_time() - t0)
    t = {name: np.array(v) for name, v in times.items()}
    per = n_trees * n
    print(f"\n{args.model}, first {n_trees} trees, {n} rows, {args.rounds} rounds (thread CPU time)")
    for name in names:
        ratio = t[name] / t["full"]
        print(
            f"  {name:8s} {np.median(t[name]) / per * 1e9:7.2f} ns per tree and row  "
            f"{np.median(ratio):.3f} of full [{ratio.min():.3f}, {ratio.max():.3f}]"
        )
    print("\n| part | share of the full block's time [range] | ns per tree and row |\n|---|---|---|")
    for part, with_, without in PARTS:
        d = t[with_] - (t[without] if without else 0)
        share = d / t["full"]
        print(
            f"| {part} | {np.median(share):.3f} [{share.min():.3f}, {share.max():.3f}] | "
            f"{np.median(d) / per * 1e9:.2f} |"
        )
    g = (t["gathers"] - t["empty"]) / t["full"]
    print(
        f"| (apart) one leaf gather per tree, no trees | {np.median(g):.3f} [{g.min():.3f}, {g.max():.3f}] | "
        f"{np.median(t['gathers'] - t['empty']) / per * 1e9:.2f} |"
    )
    if args.mca:
        body = loop_body(asm[0])
        k0 = min(n_trees, len(lay.order)) if len(fns["full"]) == 1 else None
        for cpu in args.mcpu or ["sapphirerapids", "znver4"]:
            r = mca(body, cpu, args.mca_bin)
            trees = k0 or 64
            vec = 32
            ns_cycles = np.median(t["full"]) / per * vec * 2.6e9
            print(
                f"llvm-mca -mcpu={cpu}: {r['instructions']:.0f} instructions and {r['cycles']:.0f} cycles "
                "per "
                f"vector of {vec} rows ({r['cycles'] / trees:.0f} cycles per tree, IPC {r['ipc']:.2f}); "
                f"measured {ns_cycles:.0f} cycles per tree and vector at 2.6 GHz"
            )


if __name__ == "__main__":
    sys.exit(main())
