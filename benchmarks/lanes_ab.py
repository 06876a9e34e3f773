"""One row per call through the lanes on node records, compact rank records and the scores-only
lanes, paired.

The same compiled code served three times (``ServingPath.lane_ranks`` 0: ``ir_lanes``' node
records; 1: ``ir_lranks``' rank records, every field at once; ``scores``: the scores-only lanes
on rank records, other fields when read, as ``evaluate`` serves one row of a plan of at least
``serving.SCORES_POSITIONS`` positions), and lleaves where its object is cached, on
``shapes.build``'s four models and lleaves' NYC_taxi, airline and mtpl2. In each round every
side takes a block of ``--block`` one-row calls (a new row each call) in a fresh random order,
each block right after a call of another engine (lleaves', else LightGBM's predict; thrifty's
before lleaves'), which evicts what the side left in the caches, as ``shapes.py``'s one-row
figure has it. Each block's time is thread CPU time (``time.thread_time``: other processes'
load does not count).

Per model: µs per call of each side (the median over rounds of a round's mean), the ratios
rank / node and scores / rank per round: median, least and greatest (``rank_vs_node``,
``scores_vs_rank``), and ``<side>_vs_lleaves``. Every side is checked equal to the
interpreter, bit for bit, first.
Results in ``results/lanes_ab.json`` and ``lanes_ab.png`` (µs per call of each side per model).

    python benchmarks/lanes_ab.py [--quick] [--models adult,mtpl2] [--rounds 15] [--block 40]
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import threading
import time
from pathlib import Path

import numpy as np
from _lleaves import LleavesCode, lleaves_object
from shapes import PEERS, build, draw_inputs

HERE = Path(__file__).resolve().parent
MODELS = ("adult", "higgs255", "rank300", "synth136", *PEERS)


def model(name: str, args) -> tuple:
    """The forest, its LightGBM booster and text, and rows to call it on."""
    import lightgbm as lgb

    from thrifty import Forest

    if name in PEERS:
        text = gzip.open(Path(args.data_home) / "lleaves_models" / f"{name}.txt.gz", "rt").read()
        booster = lgb.Booster(model_str=text)
        return Forest.from_model(booster), booster, text, draw_inputs(text, 2_000)
    b = build(name, args.quick, args.data_home)
    return b["forest"], b["booster"], b["booster"].model_to_string(), b["M"][:2_000]


def sides_of(forest, booster, text: str) -> dict:
    """``node``, ``rank``, ``scores`` (thrifty's serving path, the lanes on each record kind,
    and the scores-only lanes where the plan has them), ``lleaves``
    (where its object is cached) and ``lightgbm``, one float64 row in, raw scores out."""
    import thrifty
    from thrifty.runtime.compiled.ir_serving import scores_lanes

    c = thrifty.compile(forest)
    base = c.serving
    assert base is not None and base.lane_rows >= 1, "one row does not take the lanes here"
    fns = {}
    for name, kind in (("node", 0), ("rank", 1), ("scores", 1)):
        path = copy.copy(base)
        path._local, path._template, path.lane_ranks = threading.local(), None, kind
        # The scores-only lanes wherever the plan has them, whatever the default.
        path.scores = name == "scores" and scores_lanes(c.forest_code.layout)
        fns[name] = lambda x, p=path: p.evaluate(x).raw
    path, _ = lleaves_object(text, compile_missing=False)
    if path is not None:
        fns["lleaves"] = LleavesCode(path, forest.n_outputs).predict
    fns["lightgbm"] = lambda x: booster.predict(x, raw_score=True, num_threads=1)
    return fns


def paired(fns: dict, forest, X: np.ndarray, rounds: int, block: int, seed: int = 0) -> dict:
    """Per side (``node``, ``rank``, ``scores``, ``lleaves``), the mean thread CPU seconds per call of
    each round: one block of ``block`` calls per round, sides in a fresh random order, each
    block after a call of another engine."""
    import thrifty

    timed = [k for k in ("node", "rank", "scores", "lleaves") if k in fns]
    evict = {k: fns.get("lleaves", fns["lightgbm"]) for k in ("node", "rank", "scores")}
    evict["lleaves"] = fns["node"]
    rows = [X[i : i + 1].copy() for i in range(len(X))]
    # Exact first, on these rows.
    want = thrifty.evaluate(forest, X[:50]).raw
    for i, x in enumerate(rows[:50]):
        for side in ("node", "rank", "scores"):
            assert np.array_equal(fns[side](x), want[i : i + 1]), side
    rng = np.random.default_rng(seed)
    out: dict = {k: [] for k in timed}
    at = 0
    for _ in range(rounds):
        for k in rng.permutation(len(timed)).tolist():
            side = timed[k]
            part = [rows[(at + j) % len(rows)] for j in range(block)]
            at += block
            evict[side](rows[at % len(rows)])
            fn = fns[side]
            t0 = time.thread_time()
            for x in part:
                fn(x)
            out[side].append((time.thread_time() - t0) / block)
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--block", type=int, default=40)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--data-home", default=None)
    ap.add_argument("--out", default=str(HERE / "results" / "lanes_ab.json"))
    args = ap.parse_args(argv)
    import os

    args.data_home = args.data_home or os.environ.get(
        "THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data")
    )
    res: dict = {
        "estimator": "median over rounds of thread CPU µs per call, one block per round",
        "rounds": args.rounds,
    }
    for name in args.models.split(","):
        forest, booster, text, X = model(name, args)
        fns = sides_of(forest, booster, text)
        t = paired(fns, forest, X, args.rounds, args.block)
        us = {k: float(np.median(v)) * 1e6 for k, v in t.items()}
        res[name] = {"us": us}
        for a, b in (("rank", "node"), ("scores", "rank")):
            ratio = np.array(t[a]) / np.array(t[b])
            res[name][f"{a}_vs_{b}"] = [float(np.median(ratio)), float(ratio.min()), float(ratio.max())]
        res[name].update(
            **(
                {f"{k}_vs_lleaves": us[k] / us["lleaves"] for k in ("node", "rank", "scores")}
                if "lleaves" in us
                else {}
            ),
        )
        print(name, json.dumps(res[name]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    plot(res, Path(args.out).with_suffix(".png"))
    return res


def plot(res: dict, path: Path) -> None:
    """µs per one-row call of each side, a group of bars per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = [m for m in res if isinstance(res[m], dict) and "us" in res[m]]
    sides = ("node", "rank", "scores", "lleaves")
    fig, ax = plt.subplots(figsize=(1.6 * len(models) + 2, 3.6))
    for k, side in enumerate(sides):
        xs = [i + (k - 1.5) * 0.2 for i in range(len(models))]
        ax.bar(xs, [res[m]["us"].get(side, np.nan) for m in models], width=0.2, label=side)
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel("µs per one-row call (thread CPU)")
    ax.set_title("one row: node records, rank records, scores only, lleaves")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
