"""Lazy evaluation: thrifty's own time per one-row lazy request, interpreter against compiled
plan, and round trips per row under each ``rounds=`` policy, on Adult and flights.

One-row requests: a LightGBM model of Adult (500 trees of depth 5; 100 with --quick), its Full
plan, answered from memory (``lazy_rounds`` driven by hand, values read from the test matrix).
thrifty's own time is the request's time less the provider's (reading the values), measured per
request over 1,000 test rows (200 with --quick), interpreter and compiled plan in alternating
blocks; ``overhead_us_per_round`` is the time of a round that does not finish the row (the
median over rounds), ``overhead_us_per_request`` the whole request's (the median over requests).
Target (issue 26): at most 30 µs plus 5 µs per round. Beside it, in the same blocks:
``overhead_us_per_request_read``, the compiled request with its result read as ``thrifty
serve`` reads it (prediction, probabilities, exit, cost report), and
``overhead_us_per_request_parallel`` with ``rounds="parallel"`` (``rounds_per_request_parallel``).

Round trips: ``thrifty.rounds_frontier`` on 2,000 test rows (500 with --quick) of Adult (every
feature fetched) and of flights (a LightGBM model of 300 trees of 63 leaves, 100 with --quick,
trained on 40,000 flights; its Full plan and a QWYC plan; the schedule features, priced 0,
come with the request and cost no round trip). ``flights_rounds_p95`` and
``flights_extra_cost_frac`` are those of the recommended policy: of the QWYC plan's
``parallel`` and prefetch policies, the cheapest whose 95th percentile is at most 3 round trips,
else the one with the fewest. Writes benchmarks/results/lazy.json (lazy_quick.json with
--quick), lazy_rounds.csv and lazy_rounds.png; the last stdout line is one JSON object.

    python benchmarks/lazy.py [--quick] [--data-home DIR]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from _figures import RESULTS, emit

HERE = Path(__file__).resolve().parent


def one_request(model, x, clock, rounds="in_order", read=False):
    """A one-row lazy request answered from ``x`` under the ``rounds=`` policy; returns
    (seconds, provider seconds, rounds, seconds of each round that did not finish the row).
    With ``read``, the request's time includes reading its result as ``thrifty serve`` answers
    it (prediction, probabilities, exit and the cost report's fields)."""
    from thrifty.runtime import lazy_rounds

    provider = 0.0
    rounds_s: list[float] = []
    t0 = clock()
    gen = lazy_rounds(model, n_rows=1, rounds=rounds)
    try:
        request = next(gen)
        while True:
            a = clock()
            values = [x[rows, f] for f, rows in request]
            b = clock()
            provider += b - a
            request = gen.send(values)
            rounds_s.append(clock() - b)
    except StopIteration as stop:
        if read:
            ev, c = stop.value, stop.value.cost
            _ = (ev.predictions, ev.proba, ev.exit, c.total, c.feature, c.n_trees, c.acquired)
        end = clock()
    return end - t0, provider, len(rounds_s), rounds_s[:-1]


def request_times(models: dict, M: np.ndarray, n: int, block: int = 50) -> dict:
    """Per model: thrifty's own µs per request and per round (medians), rounds per request;
    the models run in alternating blocks of ``block`` requests. A model is a plan, or a tuple
    ``(plan, rounds, read)`` of ``one_request``'s arguments."""
    clock = time.perf_counter
    how = {k: m if isinstance(m, tuple) else (m, "in_order", False) for k, m in models.items()}
    for model, rounds, read in how.values():  # warm-up: numba's and the native code's first calls
        for i in range(5):
            one_request(model, M[i : i + 1], clock, rounds, read)
    own: dict[str, list[float]] = {k: [] for k in models}
    per_round: dict[str, list[float]] = {k: [] for k in models}
    n_rounds: dict[str, list[int]] = {k: [] for k in models}
    for lo in range(0, n, block):
        for name, (model, rounds, read) in how.items():
            for i in range(lo, min(n, lo + block)):
                total, provider, r, times = one_request(model, M[i : i + 1], clock, rounds, read)
                own[name].append(total - provider)
                per_round[name] += times
                n_rounds[name].append(r)
    return {
        name: {
            "us_per_request": 1e6 * float(np.median(own[name])),
            "us_per_round": 1e6 * float(np.median(per_round[name])) if per_round[name] else 0.0,
            "rounds": float(np.mean(n_rounds[name])),
        }
        for name in models
    }


def flights_model(args, n_trees: int):
    import lightgbm as lgb

    from thrifty import Forest
    from thrifty.datasets import load

    data = load("flights", data_home=args.data_home)
    X_tr, y_tr, _ = data.subset("train")
    X_te, _, _ = data.subset("test")
    rng = np.random.default_rng(0)
    fit = rng.choice(len(X_tr), 40_000, replace=False)
    gbm = lgb.LGBMClassifier(n_estimators=n_trees, num_leaves=63, verbose=-1, random_state=0, n_jobs=1)
    gbm.fit(X_tr.iloc[fit], y_tr[fit])
    forest = Forest.from_model(gbm)
    costs = data.costs.for_features(forest.feature_names, forest.n_features)
    # Features whose acquisition costs nothing (the schedule): every unit of their closure is free.
    own = [
        costs.unit_cost[costs.closure_units[costs.closure_ptr[f] : costs.closure_ptr[f + 1]]].sum()
        for f in range(forest.n_features)
    ]
    given = np.flatnonzero(np.asarray(own) == 0)
    cal = rng.choice(len(X_tr), 20_000, replace=False)
    return forest, costs, given, X_tr.iloc[cal], X_te


def recommend(table) -> dict:
    """The cheapest policy (other than in_order) whose p95 is at most 3, else the fewest."""
    rows = table[table["policy"] != "in_order"]
    ok = rows[rows["p95_rounds"] <= 3]
    pick = (
        ok.sort_values("mean_cost").iloc[0]
        if len(ok)
        else rows.sort_values(["p95_rounds", "mean_cost"]).iloc[0]
    )
    return pick.to_dict()


def adult_overhead(args) -> tuple[dict, dict]:
    """thrifty's own time per one-row lazy request on Adult (interpreter and compiled Full plan),
    the figures, and the Adult Full plan's rounds frontier (``{"adult Full": table}``)."""
    import lightgbm as lgb

    import thrifty
    from thrifty import Forest, Full
    from thrifty.datasets import load

    quick = args.quick
    data = load("adult", data_home=args.data_home)
    X_tr, y_tr, _ = data.subset("train")
    X_te, _, _ = data.subset("test")
    n_trees = 100 if quick else 500
    gbm = lgb.LGBMClassifier(
        n_estimators=n_trees,
        max_depth=5,
        num_leaves=32,
        learning_rate=0.1,
        verbose=-1,
        random_state=0,
        n_jobs=1,
    ).fit(X_tr, y_tr)
    forest = Forest.from_model(gbm)
    M = np.ascontiguousarray(forest._as_matrix(X_te))
    plan = Full(forest)
    compiled = thrifty.compile(plan)
    compiled.forest_code.lazy_code()  # compile (or load) the lazy blocks before timing
    timing = request_times(
        {
            "interpreter": plan,
            "compiled": compiled,
            "compiled, result read": (compiled, "in_order", True),
            "compiled, parallel": (compiled, "parallel", False),
        },
        M,
        200 if quick else 1000,
    )
    print(f"adult, one-row lazy requests ({n_trees} trees): {timing}")
    c, i = timing["compiled"], timing["interpreter"]
    par = timing["compiled, parallel"]
    figures = {
        "overhead_us_per_request": round(c["us_per_request"], 1),
        "overhead_us_per_round": round(c["us_per_round"], 2),
        "rounds_per_request": c["rounds"],
        "overhead_target_us": round(30 + 5 * c["rounds"], 1),
        # The same request with its result read as ``thrifty serve`` reads it.
        "overhead_us_per_request_read": round(timing["compiled, result read"]["us_per_request"], 1),
        "overhead_us_per_request_parallel": round(par["us_per_request"], 1),
        "rounds_per_request_parallel": par["rounds"],
        "interpreter_us_per_request": round(i["us_per_request"], 1),
        "interpreter_us_per_round": round(i["us_per_round"], 2),
    }
    n_cal = 500 if quick else 2000
    return figures, {"adult Full": thrifty.rounds_frontier(compiled, X_te[:n_cal], ps=(0.5, 0.2))}


def flights_rounds(args) -> tuple[dict, dict]:
    """Round trips per row on flights under each policy (Full and QWYC plans), the figures of the
    recommended QWYC policy, and the frontiers (``{"flights Full": table, "flights QWYC": ...}``)."""
    import thrifty
    from thrifty import Full

    quick = args.quick
    n_cal = 500 if quick else 2000
    f_forest, f_costs, given, X_cal, F_te = flights_model(args, 100 if quick else 300)
    # QWYC* fitted on 10,000 calibration flights (order and thresholds; --quick: trees in order).
    qwyc_plan = thrifty.qwyc(f_forest, X_cal[:10_000], alpha=0.005, ordering="given" if quick else "optimize")
    tables = {}
    for name, p in (("flights Full", Full(f_forest)), ("flights QWYC", qwyc_plan)):
        tables[name] = thrifty.rounds_frontier(
            thrifty.compile(p, f_costs),
            F_te[:n_cal],
            f_costs,
            ps=(0.9, 0.5, 0.25, 0.1),
            max_rounds=(2.0, 1.5),
            given=given,
        )
    best = recommend(tables["flights QWYC"])
    figures = {
        "flights_policy": best["policy"],
        "flights_rounds_p95": best["p95_rounds"],
        "flights_rounds_mean": round(best["mean_rounds"], 3),
        "flights_extra_cost_frac": round(best["extra_cost_frac"], 4),
        "flights_in_order_rounds_p95": float(tables["flights QWYC"]["p95_rounds"].iloc[0]),
    }
    return figures, tables


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller models and fewer rows")
    default_home = os.environ.get("THRIFTY_DATA", str(HERE.parent.parent / "shared" / "data"))
    ap.add_argument("--data-home", default=default_home, help="folder of the shared datasets")
    args = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    import thrifty

    quick = args.quick
    overhead, tables = adult_overhead(args)
    rounds, flights_tables = flights_rounds(args)
    tables.update(flights_tables)
    rows = []
    for name, table in tables.items():
        print(f"\n{name}\n{table.to_string(index=False)}")
        rows.append(table.assign(plan=name))
    RESULTS.mkdir(parents=True, exist_ok=True)
    pd.concat(rows).to_csv(RESULTS / f"lazy_rounds{'_quick' if quick else ''}.csv", index=False)
    fig, axes = plt.subplots(1, len(tables), figsize=(5 * len(tables), 4))
    for ax, (name, table) in zip(axes, tables.items()):
        thrifty.plot_rounds_frontier(table, ax=ax)
        ax.set_title(name)
    fig.tight_layout()
    fig.savefig(RESULTS / f"lazy_rounds{'_quick' if quick else ''}.png", dpi=120)

    figures = {
        "bench": "lazy",
        **overhead,
        "adult_rounds_p95": {r["policy"]: r["p95_rounds"] for _, r in tables["adult Full"].iterrows()},
        **rounds,
    }
    emit(figures, quick)
    return figures


if __name__ == "__main__":
    main()
