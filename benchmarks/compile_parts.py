"""Where a first compile's time goes: the CPU seconds LLVM spends on each part of a compiled
plan, its blocks (with their scalar twins, ``run`` and ``serve``), the scores-only entry
``raw`` and the second scores-only entry, on ``shapes.py``'s four models (thrifty's own
choice of blocks on this host). Each part's modules are compiled in this one process in
turn (this thread's CPU time), so the parts of one model compare within one run even on a
loaded machine; the wall time of ``thrifty.compile`` is ``shapes.py``'s figure.

    python benchmarks/compile_parts.py [--quick] [--data-home DIR] [--only adult,higgs255]

Prints one line per model and part; results/compile_parts.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from shapes import SHAPES, build

HERE = Path(__file__).resolve().parent


def parts(forest) -> dict[str, float]:
    """Thread CPU seconds of each part's LLVM work (IR generation excluded) for ``forest``."""
    from thrifty import Full
    from thrifty.runtime.compiled import objects
    from thrifty.runtime.compiled.layout import Layout
    from thrifty.runtime.compiled.tables import leaf_tables

    plan = Full(forest)
    schedule = plan.schedule
    exits = np.where(schedule.bins.width > 0, 2, schedule.thresholds).astype(np.int8)
    lay = Layout(forest, schedule.order, exits, *leaf_tables(forest)[1:], schedule.finish)
    key = objects.code_key(lay)
    main, level = objects._main_irs(lay, key)
    named = [("blocks", main, level)]
    later = objects._later_irs(lay, key)
    named += [(name, irs, lv) for name, (irs, lv) in zip(("raw", "second"), later)]
    out = {}
    for name, irs, lv in named:
        t0 = time.thread_time()
        for ir in irs:
            objects._emit(ir, level=lv)
        out[name] = round(time.thread_time() - t0, 2)
    out["scores_share"] = round(sum(v for k, v in out.items() if k != "blocks") / sum(out.values()), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA", "../shared/data"))
    ap.add_argument("--only", default=",".join(SHAPES))
    args = ap.parse_args()
    result = {}
    for name in args.only.split(","):
        result[name] = parts(build(name, args.quick, args.data_home)["forest"])
        print(name, result[name], flush=True)
    path = HERE / "results" / f"compile_parts{'_quick' if args.quick else ''}.json"
    path.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
