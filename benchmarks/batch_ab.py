"""Paired A/B of compiled batch variants against lleaves on the shapes benchmark's models: each
variant is ``thrifty.compile`` under its own environment (``NAME=VAR=value[;VAR=value]``), all
timed in turn with lleaves in one process on the same float64 matrix (medians of ``--repeats``
repeats in one cyclic order, ``interleaved``), ns per tree and row, one thread.
Every variant's raw scores must equal the first's and the interpreter's bit for bit.

    python benchmarks/batch_ab.py --only higgs255,rank300 --clock thread \\
        --variant r32=THRIFTY_RANKS=32 --variant r16=THRIFTY_RANKS=16

Prints a line per model and variant (ns, ratio to lleaves, ratio to the first variant, and the
median and range of the per-round ratios to the first variant); writes
no results file (figures for the record come from ``shapes.py``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from _figures import environment
from _lleaves import lleaves_predict
from shapes import build


def interleaved(fns: dict, repeats: int, clock=time.perf_counter) -> dict:
    """Median seconds of each function, timed in turn in one fixed cyclic order ``repeats``
    times (after a warm-up): no function is ever timed right after itself. (``shapes.medians``
    reverses its order every other repeat, so its last and first functions run twice in a row,
    the second time with their code and tables still in cache: on the 300-feature ranker the
    same compiled plan measured 18 ns per tree and row timed right after itself against 40.)
    ``clock`` is ``time.perf_counter`` (wall) or ``time.thread_time`` (this thread's CPU time:
    every engine here runs one thread in the caller's, and CPU time moves less than wall time
    when other processes share the cores)."""
    return {name: float(np.median(t)) for name, t in interleaved_times(fns, repeats, clock).items()}


def interleaved_times(fns: dict, repeats: int, clock=time.perf_counter) -> dict:
    """Each function's seconds in each of ``repeats`` rounds (``interleaved``'s order): round
    ``r`` of two functions is a pair, timed a few milliseconds apart."""
    for fn in fns.values():
        fn()
    times: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            t0 = clock()
            fn()
            times[name].append(clock() - t0)
    return {name: np.array(t) for name, t in times.items()}


def compiled_under(forest, env: dict):
    """``thrifty.compile(forest)`` with ``env`` set for the compile (restored after)."""
    import thrifty

    with environment(env):
        t0 = time.perf_counter()
        compiled = thrifty.compile(forest)
        return compiled, time.perf_counter() - t0


def parse_variant(text: str) -> tuple[str, dict]:
    name, _, settings = text.partition("=")
    env = dict(s.split("=", 1) for s in settings.split(";") if s)
    return name, env


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="higgs255,rank300")
    ap.add_argument("--variant", action="append", default=[], help="NAME=VAR=value[;VAR=value]")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument(
        "--clock", choices=("wall", "thread"), default="wall", help="wall time or this thread's CPU time"
    )
    ap.add_argument("--quick", action="store_true", help="the shapes benchmark's small models")
    ap.add_argument(
        "--trees", type=int, default=0, help="time the first N trees only (no lleaves: its model is whole)"
    )
    default_home = os.environ.get("THRIFTY_DATA", "../shared/data")
    ap.add_argument("--data-home", default=default_home)
    args = ap.parse_args(argv)
    import thrifty

    variants = [parse_variant(v) for v in args.variant] or [("auto", {})]
    for model in args.only.split(","):
        b = build(model, args.quick, args.data_home)
        forest, M, booster = b["forest"], b["M"], b["booster"]
        fns = {}
        lleaves, why = None, "no lleaves on part of a model"
        if args.trees:
            forest = forest.subset(list(range(min(args.trees, forest.n_trees))))
        else:
            lleaves, why = lleaves_predict(booster.model_to_string(), forest.n_outputs)
        if lleaves is not None:
            fns["lleaves"] = lambda X, p=lleaves: p(X)
        ref = thrifty.evaluate(forest, M).raw
        for name, env in variants:
            compiled, took = compiled_under(forest, env)
            got = compiled.evaluate(M, n_threads=1).raw
            assert np.array_equal(got, ref), f"{model} {name}: differs from the interpreter"
            print(f"{model} {name}: compiled in {took:.0f} s", flush=True)
            fns[name] = lambda X, c=compiled: c.evaluate(X, n_threads=1).raw
        clock = time.thread_time if args.clock == "thread" else time.perf_counter
        rounds = interleaved_times(
            {k: (lambda fn=fn, M=M: fn(M)) for k, fn in fns.items()}, args.repeats, clock
        )
        per = {k: float(np.median(v)) / (forest.n_trees * len(M)) * 1e9 for k, v in rounds.items()}
        first = variants[0][0]
        for k, v in per.items():
            vs_ll = f"{v / per['lleaves']:.3f} of lleaves" if "lleaves" in per else why
            # Paired: each round's time over the first variant's in the same round.
            pair = rounds[k] / rounds[first]
            spread = f"paired {np.median(pair):.3f} [{pair.min():.3f}, {pair.max():.3f}]"
            print(
                f"  {model:9s} {k:10s} {v:7.2f} ns  {vs_ll}  {v / per[first]:.3f} of {first}  {spread}",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
