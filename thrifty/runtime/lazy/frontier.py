"""Choosing a ``rounds=`` policy: prefetch sets estimated on calibration rows
(``prefetch_plan``), rounds per row measured (``count_rounds``), and the frontier of feature
cost against rounds (``rounds_frontier``, ``plot_rounds_frontier``).

A round is a round trip to the feature store, so rounds per row are the latency a policy buys;
a prefetch buys fewer at the price of features some rows never needed. These functions measure
both on calibration rows held in memory, with the same generator that serves requests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import to_matrix
from thrifty.runtime.evaluation import Evaluation, costs_for
from thrifty.runtime.interpret.executors import Accelerated, Context, executor
from thrifty.runtime.lazy.policies import Prefetch
from thrifty.runtime.lazy.rounds import lazy_rounds
from thrifty.runtime.plans import Full, Plan, Sequential, as_plan

if TYPE_CHECKING:
    from matplotlib.axes import Axes


def _plan_of(model: Any) -> tuple[Plan, Accelerated | None]:
    accelerated = model if isinstance(model, Accelerated) else None
    return (accelerated.plan if accelerated is not None else as_plan(model)), accelerated


def _matrix(plan: Plan, X: Any) -> np.ndarray:
    return np.ascontiguousarray(
        to_matrix(X, plan.n_features, plan.feature_names, plan.categories), dtype=np.float64
    )


def _given(plan: Plan, given: Any) -> np.ndarray:
    """``given`` (feature indices or a bool per feature) as a bool per feature."""
    mask = np.zeros(plan.n_features, dtype=np.bool_)
    if given is not None:
        g = np.asarray(given)
        if g.dtype == np.bool_:
            if g.shape != (plan.n_features,):
                raise InputError(f"given must have one bool per feature ({plan.n_features}), got {g.shape}")
            mask |= g
        else:
            mask[g.astype(np.int64)] = True
    return mask


def count_rounds(
    model: Any,
    X: Any,
    costs: CostModel | None = None,
    *,
    rounds: Any = "in_order",
    given: Any = None,
) -> tuple[Evaluation, np.ndarray]:
    """Evaluate ``X`` lazily from memory under a ``rounds=`` policy; return the evaluation and
    the round trips each row waited for (int64, one per row).

    Parameters
    ----------
    model : Plan, CompiledPlan, Forest or fitted model
    X : array-like of shape (n, n_features)
    costs : CostModel, optional
    rounds : {"in_order", "parallel"} or Prefetch
    given : array of int or bool, optional
        Features every request brings along (as ``evaluate_async``'s ``given``): a round in
        which a row asks only for these is no round trip and is not counted.
    """
    plan, _ = _plan_of(model)
    M = _matrix(plan, X)
    at_hand = _given(plan, given)
    count = np.zeros(len(M), dtype=np.int64)
    gen = lazy_rounds(model, costs, n_rows=len(M), rounds=rounds)
    try:
        request = next(gen)
        while True:
            waiting = np.zeros(len(M), dtype=np.bool_)
            for f, rows in request:
                if not at_hand[f]:
                    waiting[rows] = True
            count += waiting
            request = gen.send([M[rows, f] for f, rows in request])
    except StopIteration as stop:
        return stop.value, count


def tested_share(model: Any, X: Any, costs: CostModel | None = None) -> np.ndarray:
    """Per feature, the share of the rows of ``X`` whose evaluation tests it (dense, on the
    interpreter)."""
    plan, _ = _plan_of(model)
    M = _matrix(plan, X)
    ctx = Context(M, np.ones(M.shape, dtype=np.bool_), True, costs_for(plan, costs))
    ex = executor(plan, ctx)
    ex.advance(np.arange(len(M), dtype=np.int64))
    return ctx.touched.mean(axis=0) if len(M) else np.zeros(plan.n_features)


def prefetch_plan(
    model: Any,
    X_cal: Any,
    costs: CostModel | None = None,
    *,
    p: float | None = None,
    max_rounds: float | None = None,
    parallel: bool | None = None,
    given: Any = None,
    progress: bool = True,
) -> Prefetch:
    """The features the first round of lazy evaluation should prefetch, from calibration rows.

    Give one of ``p`` or ``max_rounds``:

    - ``p``: every feature the evaluation of at least a share ``p`` of the calibration rows
      tests (a row needs it with probability at least ``p``);
    - ``max_rounds``: the cheapest set found that brings the mean rounds per calibration row
      down to ``max_rounds``: features are added greedily by share of rows testing them per
      unit of price (each feature's own closure, ``CostModel``) until the mean, measured by
      evaluating the calibration rows lazily, is at most ``max_rounds``.

    Either way, every feature that costs nothing more once the set is paid (the other members
    of a group it fetches) joins it: the same round fetches it at no extra cost.

    Parameters
    ----------
    model : Plan, CompiledPlan, Forest or fitted model
    X_cal : array-like of shape (n, n_features)
        Calibration rows, as the service will see them.
    costs : CostModel, optional
        Prices (the greedy order of ``max_rounds``); default: the plan's.
    p : float in (0, 1], optional
    max_rounds : float >= 1, optional
    parallel : bool, optional
        Rounds after the first follow ``"parallel"`` (default for Full and Sequential plans)
        or ``"in_order"``.
    given : array of int or bool, optional
        Features every request brings along: never prefetched, and rounds that ask only for
        them are not counted (``count_rounds``).
    progress : bool, default=True
        Show a progress bar while searching for ``max_rounds`` (on a terminal).

    Returns
    -------
    Prefetch
        Pass it as ``rounds=`` to ``thrifty.evaluate``, ``lazy_rounds`` or ``evaluate_async``.
    """
    plan, accelerated = _plan_of(model)
    if costs is None and accelerated is not None:
        costs = accelerated.costs  # a compiled plan's own prices
    if (p is None) == (max_rounds is None):
        raise InputError(
            "give prefetch_plan one of p= (a share of rows) or max_rounds= (mean rounds per row)"
        )
    if parallel is None:
        parallel = isinstance(plan, (Full, Sequential))
    costs = costs_for(plan, costs)
    share = tested_share(model, X_cal, costs)
    at_hand = _given(plan, given)
    if p is not None:
        if not 0.0 < p <= 1.0:
            raise InputError(f"p must be in (0, 1], got {p}")
        chosen = np.flatnonzero((share >= p) & ~at_hand)
        chosen = _free_along(costs, chosen[np.argsort(-share[chosen], kind="stable")], at_hand)
        return Prefetch(chosen, plan.n_features, parallel, share)
    assert max_rounds is not None
    if not max_rounds >= 1.0:
        raise InputError(
            f"max_rounds must be >= 1 (every row waits for at least one round), got {max_rounds}"
        )
    own = np.array(
        [
            costs.unit_cost[costs.closure_units[costs.closure_ptr[f] : costs.closure_ptr[f + 1]]].sum()
            for f in range(plan.n_features)
        ]
    )
    candidates = np.flatnonzero((share > 0) & ~at_hand)
    candidates = candidates[
        np.argsort(-share[candidates] / np.maximum(own[candidates], 1e-12), kind="stable")
    ]
    from tqdm.auto import tqdm

    chosen = candidates[:0]
    with tqdm(
        total=len(candidates) + 1, desc="prefetch_plan", leave=False, disable=None if progress else True
    ) as bar:
        for k in range(len(candidates) + 1):
            chosen = _free_along(costs, candidates[:k], at_hand)
            policy = Prefetch(chosen, plan.n_features, parallel)
            _, count = count_rounds(model, X_cal, costs, rounds=policy, given=at_hand)
            bar.update(1)
            if not len(count) or count.mean() <= max_rounds:
                break
    return Prefetch(chosen, plan.n_features, parallel, share)


def _free_along(costs: CostModel, chosen: np.ndarray, at_hand: np.ndarray) -> np.ndarray:
    """``chosen`` followed by every other feature (not at hand) that costs nothing more once
    ``chosen`` is paid: its closure's units (a group's other members, say) are all among
    ``chosen``'s. Fetching them in the same round adds no cost and saves later rounds."""
    ptr, units = costs.closure_ptr, costs.closure_units
    paid = np.zeros(len(costs.unit_cost), dtype=np.bool_)
    for f in chosen.tolist():
        paid[units[ptr[f] : ptr[f + 1]]] = True
    taken = np.zeros(len(at_hand), dtype=np.bool_)
    taken[chosen] = True
    free = [
        f
        for f in range(len(at_hand))
        if not taken[f] and not at_hand[f] and ptr[f + 1] > ptr[f] and paid[units[ptr[f] : ptr[f + 1]]].all()
    ]
    return np.concatenate([chosen, np.asarray(free, dtype=np.int64)]).astype(np.int64)


def rounds_frontier(
    model: Any,
    X_cal: Any,
    costs: CostModel | None = None,
    *,
    ps: tuple[float, ...] = (0.9, 0.75, 0.5, 0.25, 0.1),
    max_rounds: tuple[float, ...] = (),
    given: Any = None,
) -> pd.DataFrame:
    """Mean feature cost against rounds per row for each ``rounds=`` policy on calibration rows.

    Parameters
    ----------
    model : Plan, CompiledPlan, Forest or fitted model
    X_cal : array-like of shape (n, n_features)
    costs : CostModel, optional
    ps : tuple of float
        The prefetch shares ``p`` to try (``prefetch_plan(p=...)``).
    max_rounds : tuple of float
        The mean rounds to reach by prefetching (``prefetch_plan(max_rounds=...)``).
    given : array of int or bool, optional
        Features every request brings along (``count_rounds``).

    Returns
    -------
    DataFrame
        One row per policy: ``policy`` (``in_order``, ``parallel``, ``prefetch p=...``),
        ``prefetched`` (features), ``mean_cost`` (mean feature cost per row, prefetches
        included), ``extra_cost_frac`` (over ``in_order``'s), ``mean_rounds``, ``p95_rounds``
        and ``p99_rounds`` (rounds per row). Draw it with ``plot_rounds_frontier``.
    """
    plan, _ = _plan_of(model)
    policies: list[tuple[str, Any]] = [("in_order", "in_order")]
    if isinstance(plan, (Full, Sequential)):
        policies.append(("parallel", "parallel"))
    for p in ps:
        policies.append((f"prefetch p={p:g}", prefetch_plan(model, X_cal, costs, p=p, given=given)))
    for k in max_rounds:
        pre = prefetch_plan(model, X_cal, costs, max_rounds=k, given=given, progress=False)
        policies.append((f"prefetch max_rounds={k:g}", pre))
    out = []
    for name, policy in policies:
        ev, count = count_rounds(model, X_cal, costs, rounds=policy, given=given)
        out.append(
            {
                "policy": name,
                "prefetched": len(policy.features) if isinstance(policy, Prefetch) else 0,
                "mean_cost": float(ev.cost.feature.mean()) if len(count) else 0.0,
                "mean_rounds": float(count.mean()) if len(count) else 0.0,
                "p95_rounds": float(np.percentile(count, 95)) if len(count) else 0.0,
                "p99_rounds": float(np.percentile(count, 99)) if len(count) else 0.0,
            }
        )
    table = pd.DataFrame(out)
    base = table["mean_cost"].iloc[0]
    table.insert(3, "extra_cost_frac", (table["mean_cost"] - base) / base if base > 0 else 0.0)
    return table


def plot_rounds_frontier(table: pd.DataFrame, *, ax: Axes | None = None) -> Axes:
    """Draw ``rounds_frontier``'s table: mean feature cost (x) against mean and p99 rounds per
    row (y), one labelled point per policy, so a latency budget reads off as a policy."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    for column, marker in (("mean_rounds", "o"), ("p99_rounds", "^")):
        ax.plot(
            table["mean_cost"], table[column], marker=marker, linestyle="", label=column.replace("_", " ")
        )
    for _, row in table.iterrows():
        ax.annotate(
            row["policy"],
            (row["mean_cost"], row["mean_rounds"]),
            fontsize=8,
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set_xlabel("mean feature cost per row")
    ax.set_ylabel("rounds per row")
    ax.legend()
    return ax
