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
    loop        apart: ``ir_vloop``'s blocks (the trees as records in loops, not code), in its
                own blocks (``ir_vloop.loop_blocks``)
    base        apart: ``loop`` as ``ir_vloop.py`` is at the git revision ``--base`` (default
                ``main``), for paired comparisons of a change to the loop blocks

Each part is the paired difference of two variants, as a share of ``full``'s time (median over
rounds, with the range); the time outside the blocks is the whole call's less the plan's own
blocks' (``loop`` where ``ir_vloop``'s rule takes it). ``full``'s scores must equal the compiled
plan's bit for bit, and every ``loop`` variant's ``full``'s. ``VARIANT@N`` (``--only``) compiles
a variant in blocks of ``N`` positions; ``loop/A-B-C`` with the tiers of rounds ``ir_vloop.TIERS =
(A, B, C)`` (sixteenths of the mask words). With ``--mca``, ``llvm-mca`` (``--mca-bin``) models
``full``'s loop for each ``--mcpu``; ``--fetch`` times straight-line code of 4 to 512 KB.
The test rows are repeated up to ``--rows``.

    python benchmarks/deep_parts.py --model higgs255 --trees 64 --rounds 31 --mca --fetch
    python benchmarks/deep_parts.py --trees 500 --rounds 21 --only full,loop,loop@64
    python benchmarks/deep_parts.py --trees 500 --rounds 21 --only base,loop,loop/16-12-8-6-4-2
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
from _figures import environment
from raw_ab import BLOCK
from shapes import build

VARIANTS = ("empty", "columns", "ranks", "masks", "exits", "full", "gathers", "loop", "base")
# The git revision whose ``ir_vloop.py`` the ``base`` variant compiles (``--base``).
BASE = ["main"]
# (part, variant with it, variant without it)
PARTS = (
    ("loop, scores loaded and stored", "empty", None),
    ("column gathers", "columns", "empty"),
    ("rank searches", "ranks", "columns"),
    ("compares and mask updates", "masks", "ranks"),
    ("exit leaves", "exits", "masks"),
    ("leaf-value gathers and adds", "full", "exits"),
    ("outside the blocks (whole call)", "call", None),
)


def part_block_ir(lay, m: int, p0: int, k: int, lanes: int, ranks: int, ternlog: bool, upto: str) -> str:
    """The block ``rawblk_ab_{m}`` of positions ``[p0, p0 + k)`` with the trees' work up to
    ``upto`` (one of ``VARIANTS``); what a variant computes is summed into the scores so that
    LLVM keeps it."""
    from thrifty.runtime.compiled import ir_vraw
    from thrifty.runtime.compiled.ir_ranks import block_thresholds, rank_ir
    from thrifty.runtime.compiled.ir_ternlog import leaf_mask_ternlog
    from thrifty.runtime.compiled.ir_vector import _Emitter, _exit_leaf, _leaf_mask, _splat, split_tests

    if upto == "loop":
        from thrifty.runtime.compiled.ir_vloop import vloop_block_ir

        return vloop_block_ir(lay, "ab", m, p0, k)
    if upto == "base":
        return base_module().vloop_block_ir(lay, "ab", m, p0, k)
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


_BASE: list = []


def base_module():
    """``ir_vloop`` as it is at the git revision ``BASE[0]``, imported apart from the working
    tree's (its imports are the working tree's other modules)."""
    if not _BASE:
        import importlib.util

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        text = subprocess.run(
            ["git", "show", f"{BASE[0]}:thrifty/runtime/compiled/ir_vloop.py"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        spec = importlib.util.spec_from_loader("_ir_vloop_base", loader=None)
        module = importlib.util.module_from_spec(spec)
        exec(compile(text, f"{BASE[0]}:ir_vloop.py", "exec"), module.__dict__)
        _BASE.append(module)
    return _BASE[0]


def compile_blocks(lay, upto: str, engines: list, asm: list | None = None) -> tuple[list, float]:
    """The plan's ``raw`` blocks (``vblocks.raw_blocks``) as ``upto``'s variant, JIT-compiled
    at the scores-only entry's speed level (1); their functions and the compile's CPU seconds.
    With ``asm``, the first block's assembly is appended to it."""
    import llvmlite.binding as llvm

    from thrifty.runtime.compiled import targets, vblocks
    from thrifty.runtime.compiled.choice import ternlog_masks
    from thrifty.runtime.compiled.ir_vloop import loop_blocks
    from thrifty.runtime.compiled.objects import _ranks

    tg = targets.current()
    tm = tg.machine()
    ranks = _ranks(lay)
    assert tg.name == "avx512" and ranks == 16, "the variants are written for AVX-512's 16-bit rank blocks"
    ternlog = ternlog_masks(tg.name, ranks)
    lanes = tg.lanes * 64 // ranks
    fns, t0 = [], time.process_time()
    # The loop variant in its own blocks (``ir_vloop.loop_blocks``), as ``ir_vraw`` takes them;
    # ``base`` in its revision's (its ``LOOP_TREES``).
    if upto == "base":
        spans = base_module().loop_blocks(lay)
    else:
        spans = loop_blocks(lay) if upto == "loop" else vblocks.raw_blocks(lay)
    for m, (p, k) in enumerate(spans):
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


# Straight-line code of one kind repeated to a size, for ``fetch_rates``: four independent
# 512-bit ternary-logic instructions (7 bytes each, two a cycle on ports 0 and 5 when fed)
# and four scalar adds on two chains (4 bytes each).
FETCH_BODIES = {
    "vpternlogq": (
        "vpternlogq $$0x96, %zmm1, %zmm2, %zmm0\\0Avpternlogq $$0x96, %zmm3, %zmm4, %zmm5\\0A"
        "vpternlogq $$0x96, %zmm1, %zmm2, %zmm6\\0Avpternlogq $$0x96, %zmm3, %zmm4, %zmm7",
        28,
    ),
    "add": ("addq $$1, %rax\\0Aaddq $$1, %rbx\\0Aaddq $$1, %rax\\0Aaddq $$1, %rbx", 16),
}
FETCH_CLOBBERS = ",".join(f"~{{{r}}}" for r in ["rax", "rbx", *(f"xmm{i}" for i in range(8))])


def fetch_rates(sizes_kb=(4, 32, 96, 512), rounds: int = 9) -> None:
    """Instructions and bytes per cycle of straight-line code of ``sizes_kb`` KB run in a loop
    (the same instructions in all: ``2**17`` bodies a call), the clock from a chain of
    dependent 64-bit multiplies (3 cycles each): where a block's code no longer fits the
    first-level instruction cache, how fast the front end still feeds it."""
    import ctypes

    import llvmlite.binding as llvm

    from thrifty.runtime.compiled import targets

    llvm.initialize_native_asmparser()
    tm = targets.current().machine()

    def function(name: str, body: str, inner: int, reps: int) -> str:
        text = f".rept {inner}\\0A{body}\\0A.endr"
        return (
            f"define void @{name}() {{\nentry:\n  br label %loop\nloop:\n"
            f"  %i = phi i64 [0, %entry], [%i1, %loop]\n"
            f'  call void asm sideeffect "{text}", "{FETCH_CLOBBERS}"()\n'
            f"  %i1 = add i64 %i, 1\n  %d = icmp eq i64 %i1, {reps}\n"
            "  br i1 %d, label %exit, label %loop\nexit:\n  ret void\n}\n"
        )

    chain = "imulq %rax, %rax\\0Aimulq %rax, %rax\\0Aimulq %rax, %rax\\0Aimulq %rax, %rax"
    total = 1 << 17
    src, count = [function("chain", chain, 64, total // 64)], {"chain": (total * 4, 0)}
    for kind, (body, size) in FETCH_BODIES.items():
        for kb in sizes_kb:
            inner = kb * 1024 // size
            reps = max(1, total // inner)
            src.append(function(f"{kind}_{kb}", body, inner, reps))
            count[f"{kind}_{kb}"] = (inner * reps * 4, inner * reps * size)
    mod = llvm.parse_assembly("\n".join(src))
    mod.triple = tm.triple
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    fns = {name: ctypes.CFUNCTYPE(None)(engine.get_function_address(name)) for name in count}
    times: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.thread_time()
            fn()
            times[name].append(time.thread_time() - t0)
    hz = 3 * count["chain"][0] / np.median(times["chain"])
    print(f"\nstraight-line code run in a loop (clock {hz / 1e9:.2f} GHz from dependent multiplies)")
    print("| code | KB | instructions per cycle | bytes per cycle |\n|---|---|---|---|")
    for name, (n, size) in count.items():
        if name != "chain":
            cycles = np.median(times[name]) * hz
            kind, kb = name.rsplit("_", 1)
            print(f"| {kind} | {kb} | {n / cycles:.2f} | {size / cycles:.1f} |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="higgs255")
    ap.add_argument("--trees", type=int, default=64)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--quick", action="store_true", help="16 trees, 1,024 rows, 5 rounds")
    ap.add_argument(
        "--only",
        default=",".join(VARIANTS),
        help="the variants to compile, comma-separated (full always; VARIANT@N: in blocks of N positions)",
    )
    ap.add_argument("--base", default="main", help="the git revision of the base variant's ir_vloop.py")
    ap.add_argument("--mca", action="store_true", help="model the full block's loop with llvm-mca")
    ap.add_argument("--mca-bin", default="llvm-mca-19")
    ap.add_argument("--ghz", type=float, default=3.8, help="the clock for cycles (this host's, by --fetch)")
    ap.add_argument("--fetch", action="store_true", help="also time straight-line code of 4 to 512 KB")
    ap.add_argument(
        "--mcpu", action="append", default=[], help="llvm-mca CPU (default: sapphirerapids, znver4)"
    )
    ap.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA", "../shared/data"))
    args = ap.parse_args(argv)
    if args.quick:
        args.trees, args.rows, args.rounds = 16, 1024, 5
    BASE[0] = args.base
    import thrifty
    from thrifty.runtime.compiled import ir_vloop as vloop
    from thrifty.runtime.compiled.ir_raw import RAW_CONTEXT
    from thrifty.runtime.compiled.layout import Layout
    from thrifty.runtime.compiled.tables import leaf_tables
    from thrifty.runtime.compiled.vblocks import RAW_TREES_ENV

    b = build(args.model, args.quick, args.data_home)
    forest = b["forest"].subset(list(range(min(args.trees, b["forest"].n_trees))))
    # The test rows repeated up to ``--rows`` (higgs_small has 500).
    M = np.ascontiguousarray(np.resize(b["M"], (args.rows, b["M"].shape[1])))
    compiled = thrifty.compile(thrifty.Full(forest))
    assert compiled.raw_path is not None and compiled.forest_code.code.vector, "no vector raw entry"
    T = int(compiled.raw_path._template[RAW_CONTEXT.index("T")])
    n_trees, n = forest.n_trees, len(M)
    lay = Layout(forest, np.arange(n_trees), np.zeros(n_trees, dtype=np.int8), *leaf_tables(forest)[1:])
    engines: list = []
    asm: list = []
    fns: dict = {}
    wanted = args.only.split(",")
    for name in ["full"] + [v for v in wanted if v != "full"]:
        # ``VARIANT@N``: the variant in blocks of N positions (``THRIFTY_RAW_TREES``);
        # ``loop/A-B``: with the tiers of rounds (A, B).
        head, _, tiers = name.partition("/")
        upto, _, size = head.partition("@")
        assert upto in VARIANTS, f"{upto}: not one of {VARIANTS}"
        saved = vloop.TIERS
        if tiers:
            vloop.TIERS = tuple(int(t) for t in tiers.split("-"))
        try:
            with environment({RAW_TREES_ENV: size} if size else {}):
                fns[name], took = compile_blocks(lay, upto, engines, asm if name == "full" else None)
        finally:
            vloop.TIERS = saved
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
    for name in fns:
        if name.startswith(("loop", "base")):
            assert np.array_equal(run(fns[name]), run(fns["full"])), f"{name} differs from the full block"
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
            f"  {name:20s} {np.median(t[name]) / per * 1e9:7.2f} ns per tree and row  "
            f"{np.median(ratio):.3f} of full [{ratio.min():.3f}, {ratio.max():.3f}]"
        )
    if "base" in t:
        # A change to the loop blocks, paired against them as they were (``--base``).
        print(f"\nagainst base ({BASE[0]}'s ir_vloop.py), per-round ratios: median [range]")
        for name in names:
            ratio = t[name] / t["base"]
            print(f"  {name:20s} {np.median(ratio):.3f} [{ratio.min():.3f}, {ratio.max():.3f}]")
    print("\n| part | share of the full block's time [range] | ns per tree and row |\n|---|---|---|")
    from thrifty.runtime.compiled.ir_vloop import use_loops

    # The plan's own blocks, for the time outside them: loop blocks where the rule takes them.
    own = "loop" if "loop" in t and use_loops(lay) else "full"
    for part, with_, without in PARTS:
        without = without or (own if with_ == "call" else None)
        if with_ not in t or (without and without not in t):
            continue
        d = t[with_] - (t[without] if without else 0)
        share = d / t["full"]
        print(
            f"| {part} | {np.median(share):.3f} [{share.min():.3f}, {share.max():.3f}] | "
            f"{np.median(d) / per * 1e9:.2f} |"
        )
    if "gathers" in t and "empty" in t:
        g = (t["gathers"] - t["empty"]) / t["full"]
        print(
            f"| (apart) one leaf gather per tree, no trees | {np.median(g):.3f} "
            f"[{g.min():.3f}, {g.max():.3f}] | {np.median(t['gathers'] - t['empty']) / per * 1e9:.2f} |"
        )
    if args.fetch:
        fetch_rates()
    if args.mca:
        body = loop_body(asm[0])
        k0 = min(n_trees, len(lay.order)) if len(fns["full"]) == 1 else None
        for cpu in args.mcpu or ["sapphirerapids", "znver4"]:
            r = mca(body, cpu, args.mca_bin)
            trees = k0 or 64
            vec = 32
            ns_cycles = np.median(t["full"]) / per * vec * args.ghz * 1e9
            print(
                f"llvm-mca -mcpu={cpu}: {r['instructions']:.0f} instructions and {r['cycles']:.0f} cycles "
                "per "
                f"vector of {vec} rows ({r['cycles'] / trees:.0f} cycles per tree, IPC {r['ipc']:.2f}); "
                f"measured {ns_cycles:.0f} cycles per tree and vector at {args.ghz} GHz"
            )


if __name__ == "__main__":
    sys.exit(main())
