"""Paired A/B of compiled variants at a given number of rows per call, in thread CPU time: each
variant is ``thrifty.compile`` under its own environment (``NAME=VAR=value[;VAR=value]``, as
``batch_ab.py``), timed in blocks of calls that alternate with a block of lleaves' calls (or
LightGBM's where lleaves cannot run), so every block of a variant follows another engine's, as
``shapes.py``'s one-row figures do; the variants take their turns in a rotated order each round.
Each round gives every variant's time over the first's; the script prints their median and
range over the rounds, and each variant's median time over lleaves'.

On the four shapes models (``--quick``: their small sizes) the rows are their test rows; on
lleaves' NYC_taxi, airline and mtpl2 rows drawn as ``shapes.draw_inputs`` draws them.

    python benchmarks/kind_ab.py --only mtpl2,adult --rows 1,10 \\
        --variant auto= --variant branchy=THRIFTY_BLOCKS=branchy

Prints a line per model, row count and variant; writes no results file.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import time
from pathlib import Path

import numpy as np
from _lleaves import lleaves_predict
from batch_ab import compiled_under, parse_variant
from shapes import PEERS, build, draw_inputs


def model_rows(name: str, quick: bool, data_home: str):
    """The forest, the rows to call with and the rival engine's predict for ``name``."""
    import lightgbm as lgb

    from thrifty import Forest

    if name in PEERS:
        text = gzip.open(Path(data_home) / "lleaves_models" / f"{name}.txt.gz", "rt").read()
        booster = lgb.Booster(model_str=text)
        forest, X = Forest.from_model(booster), draw_inputs(text, 10_000)
    else:
        b = build(name, quick, data_home)
        booster, forest, X = b["booster"], b["forest"], b["M"]
        text = booster.model_to_string()
    rival, _ = lleaves_predict(text, forest.n_outputs)
    if rival is None:
        rival = lambda Z: booster.predict(Z, raw_score=True, num_threads=1)  # noqa: E731
    lgbm = lambda Z: booster.predict(Z, raw_score=True, num_threads=1)  # noqa: E731
    return forest, X, rival, lgbm


def paired(fns: dict, rival, X: np.ndarray, width: int, calls: int, rounds: int, evict=None) -> dict:
    """Per variant, its thread CPU seconds per call in each round (``calls`` calls of ``width``
    rows each, after a block of the rival's calls on other rows). With ``evict`` (LightGBM's
    predict), a block of its calls, untimed, runs before each timed block (the rival's too):
    in ``shapes.py`` most blocks follow LightGBM's or tl2cgen's, which leave less of a
    model's code and tables in the caches than lleaves' calls do."""
    span = len(X) - width + 1
    sets = [X[(i * width) % span : (i * width) % span + width].copy() for i in range(calls)]
    other = [X[(i * width + 7) % span : (i * width + 7) % span + width].copy() for i in range(calls)]
    names = list(fns)
    for fn in (*fns.values(), rival):
        fn(sets[0])
    times: dict = {k: [] for k in (*names, "rival")}
    for r in range(rounds):
        for k in np.roll(np.arange(len(names)), r).tolist():
            for x in other if evict is not None else ():
                evict(x)
            t0 = time.thread_time()
            for x in other:
                rival(x)
            times["rival"].append((time.thread_time() - t0) / calls)
            fn = fns[names[k]]
            for x in other if evict is not None else ():
                evict(x)
            t0 = time.thread_time()
            for x in sets:
                fn(x)
            times[names[k]].append((time.thread_time() - t0) / calls)
    return times


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="mtpl2")
    ap.add_argument("--rows", default="1", help="rows per call, comma separated")
    ap.add_argument("--variant", action="append", default=[], help="NAME=VAR=value[;VAR=value]")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=300, help="calls per block at one row (fewer above)")
    ap.add_argument("--evict", action="store_true", help="LightGBM's calls before each block")
    ap.add_argument("--quick", action="store_true", help="the shapes benchmark's small models")
    ap.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA", "../shared/data"))
    args = ap.parse_args(argv)
    import thrifty

    variants = [parse_variant(v) for v in args.variant] or [("auto", {})]
    for model in args.only.split(","):
        forest, X, rival, lgbm = model_rows(model, args.quick, args.data_home)
        ref = thrifty.evaluate(forest, X[:2000]).raw
        fns = {}
        for name, env in variants:
            compiled, took = compiled_under(forest, env)
            got = compiled.evaluate(X[:2000], n_threads=1).raw
            assert np.array_equal(got, ref), f"{model} {name}: differs from the interpreter"
            print(f"{model} {name}: compiled in {took:.0f} s", flush=True)
            fns[name] = lambda Z, c=compiled: c.evaluate(Z, n_threads=1).raw
        first = variants[0][0]
        for width in (int(w) for w in args.rows.split(",")):
            calls = max(3, args.calls // max(1, width // 4))
            t = paired(fns, rival, X, width, calls, args.rounds, lgbm if args.evict else None)
            for name in fns:
                r = np.array(t[name]) / np.array(t[first])
                ll = np.median(t[name]) / np.median(t["rival"])
                print(
                    f"  {model:9s} {width:6d} rows {name:10s} {np.median(t[name]) * 1e6:9.2f} µs  "
                    f"{ll:.3f} of lleaves  {np.median(r):.3f} of {first} [{r.min():.3f}, {r.max():.3f}]",
                    flush=True,
                )


if __name__ == "__main__":
    sys.exit(main())
