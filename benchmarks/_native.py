"""Whether the QWYC and Cronus plans of a ranker run natively (issue 29's ``native_plans``).

``native_plans(model, X, y, qid, costs)`` builds QWYC's Sequential plan (``QWYCRanker``, its
default top-k tolerance) and a three-stage Cronus cascade (``cronus`` at half of ``lambda_max``,
relevance ``y >= 3``, one cycle) of the ranker ``model`` on the rows ``X`` (queries ``qid``),
compiles each with ``costs``, and is True when both compile to native code only
(``CompiledPlan.native``) and give the interpreter's scores, exits and per-row costs bit for bit
on ``X``. A benchmark (``benchmarks/shapes.py``) records it as ``native_plans`` for rank_small's
LambdaMART ranker:

    from _native import native_plans
    figures["native_plans"] = native_plans(ranker, X_train, y_train, qid_train, costs)

Run alone it fits a small ranker on rank_small and prints the answer as one JSON object:

    python benchmarks/_native.py [--data-home DIR]
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import numpy as np

import thrifty
from thrifty.cascade import cronus, lambda_max
from thrifty.order import QWYCRanker
from thrifty.runtime.plans import Plan, as_plan


def ranking_plans(model: Any, X: np.ndarray, y: np.ndarray, qid: np.ndarray, costs: Any) -> dict[str, Plan]:
    """QWYC's and Cronus's plans of the ranker ``model``, fitted on ``X`` (queries ``qid``)."""
    forest = thrifty.Forest.from_model(model)
    qwyc = as_plan(QWYCRanker(model, costs=costs, progress=False).fit(X, qid=qid))
    rel = np.asarray(y) >= 3
    lam = lambda_max(forest, X, rel, costs, rho=1e-3, exact=False) / 2
    cascade = cronus(forest, X, rel, costs, lam=lam, n_stages=3, max_cycles=1)
    return {"qwyc": qwyc, "cronus": cascade}


def native_plans(model: Any, X: np.ndarray, y: np.ndarray, qid: np.ndarray, costs: Any) -> bool:
    """True when the QWYC and Cronus plans of ``model`` (``ranking_plans``) compile to native
    code only and evaluate ``X`` exactly as the interpreter does."""
    for plan in ranking_plans(model, X, y, qid, costs).values():
        compiled = thrifty.compile(plan, costs)
        if not compiled.native or not _same(compiled.evaluate(X), thrifty.evaluate(plan, X, costs)):
            return False
    return True


def _same(a: thrifty.Evaluation, b: thrifty.Evaluation) -> bool:
    pairs = [(a.raw, b.raw), (a.exit, b.exit)]
    pairs += [(getattr(a.cost, k), getattr(b.cost, k)) for k in ("feature", "total", "n_trees", "n_nodes")]
    return all(np.array_equal(u, v) for u, v in pairs)


def main() -> None:
    import lightgbm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-home", default=os.environ.get("THRIFTY_DATA"))
    args = parser.parse_args()
    ds = thrifty.datasets.load("rank_small", data_home=args.data_home)
    X, y, qid = ds.subset("train")
    costs = thrifty.CostModel(
        thrifty.datasets.yahoo_costs(300, seed=0, data_home=args.data_home), tree_cost=1.0
    )
    _, sizes = np.unique(qid, return_counts=True)  # the rows of each query are consecutive
    model = lightgbm.LGBMRanker(n_estimators=50, num_leaves=16, verbose=-1, n_jobs=1, random_state=0)
    model.fit(X, y, group=sizes)
    print(json.dumps({"bench": "native_plans", "native_plans": native_plans(model, X, y, qid, costs)}))


if __name__ == "__main__":
    main()
