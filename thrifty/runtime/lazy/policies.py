"""Round policies of lazy evaluation: which features a round asks for (``rounds=``).

- ``"in_order"`` (the reference): each row waits for the one feature its evaluation, in the
  plan's order, stopped at.
- ``"parallel"``: each row also asks for what every tree from its position up to its next exit
  position will wait for, walking each on the values known so far. Those trees are evaluated
  whatever their values (no exit lies between), so the features are exactly those the in-order
  evaluation fetches; a row waits for several at once. No feature a tree past the next exit
  needs is fetched before the exit is decided, so a Sequential plan's exits (and costs) are
  unchanged. A Full plan has no exit: all its trees advance at once.
- a ``Prefetch`` (``prefetch_plan``): the first round also asks, for every row in it, the
  features of the prefetch set, and charges them to the row whether its trees test them or not
  (the cost report stays exact: a fetched feature is a paid feature).

Whatever the policy, a row's trees are evaluated in order on the values fetched, so raw scores,
exits and outputs are those of dense evaluation; only the rounds (and a prefetch's charges)
differ.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.runtime.interpret import kernels
from thrifty.runtime.interpret.executors import Context, Executor, SequentialExecutor
from thrifty.runtime.lazy.providers import Requests
from thrifty.runtime.plans import Full, Plan, Sequential

POLICIES = ("in_order", "parallel")


@dataclass(frozen=True)
class Prefetch:
    """Features the first round of lazy evaluation fetches for every row (``prefetch_plan``).

    Attributes
    ----------
    features : ndarray of int64
        The features prefetched (column indices of the plan).
    n_features : int
        The plan's feature count (checked when used).
    parallel : bool
        Whether rounds after the first follow ``"parallel"`` (else ``"in_order"``).
    frequency : ndarray of float
        Per feature of the plan, the share of calibration rows whose evaluation tests it.
    """

    features: np.ndarray
    n_features: int
    parallel: bool = True
    frequency: np.ndarray | None = None

    def __repr__(self) -> str:
        return f"Prefetch(features={self.features.tolist()}, parallel={self.parallel})"


class Policy:
    """A ``rounds=`` policy ready for one plan: builds each round's requests."""

    def __init__(self, parallel: bool, prefetch: np.ndarray | None, last: np.ndarray | None) -> None:
        self.parallel, self.prefetch, self.last = parallel, prefetch, last
        # The in-order policy needs none of this: lazy_rounds groups the blocked features itself.
        self.prefetches = prefetch is not None and len(prefetch) > 0
        self.plain = not parallel and not self.prefetches

    def request(self, ctx: Context, ex: Executor, active: np.ndarray, lo: int, first: bool) -> Requests:
        """The round's ``(feature, row_ids)`` pairs for the rows ``active`` (all blocked) of the
        chunk starting at row ``lo``; ``first`` is the chunk's first round."""
        want = np.zeros((len(active), ctx.X.shape[1]), dtype=np.bool_)
        want[np.arange(len(active)), ctx.blocked[active]] = True
        if self.parallel:
            assert isinstance(ex, SequentialExecutor) and self.last is not None  # policy_for checks
            kernels.look_ahead(active, ctx.inputs, ex.trees, ex.order, self.last, ex.pos, ex.cur, want)
        if first and self.prefetches:
            assert self.prefetch is not None
            block = np.ix_(active, self.prefetch)
            want[:, self.prefetch] |= ~ctx.known[block]
            # Charged whether the row's trees test them or not: they are fetched.
            ctx.touched[block] = True
        return [(int(f), active[want[:, f]] + lo) for f in np.flatnonzero(want.any(axis=0))]


def policy_for(plan: Plan, rounds: Any) -> Policy:
    """The ``rounds=`` policy for ``plan``, checked."""
    if isinstance(rounds, Prefetch):
        if rounds.n_features != plan.n_features:
            raise InputError(
                f"the Prefetch was made for {rounds.n_features} features, the plan has "
                f"{plan.n_features}; make it with prefetch_plan(plan, X_cal) for this plan"
            )
        parallel, prefetch = rounds.parallel, np.asarray(rounds.features, dtype=np.int64)
    elif isinstance(rounds, str) and rounds in POLICIES:
        parallel, prefetch = rounds == "parallel", None
    elif isinstance(rounds, str) and rounds == "speculative":
        raise InputError(
            "rounds='speculative' needs the features to prefetch: pass "
            "rounds=thrifty.prefetch_plan(plan, X_cal, p=...) (or max_rounds=...)"
        )
    else:
        raise InputError(
            f"rounds must be 'in_order', 'parallel' or a Prefetch (thrifty.prefetch_plan), got {rounds!r}"
        )
    last = None
    if parallel:
        if not isinstance(plan, (Full, Sequential)):
            raise InputError(
                f"rounds='parallel' needs a Full or Sequential plan, got {type(plan).__name__}; "
                "use rounds='in_order' (or a Prefetch with parallel=False)"
            )
        last = plan.schedule.segment_last
    return Policy(parallel, prefetch, last)
