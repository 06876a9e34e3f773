"""``thrifty.compile``: a plan whose forests run as native code generated for them.

A ``CompiledPlan`` evaluates exactly like the interpreter (``thrifty.evaluate`` on the source
plan): same raw scores, probabilities, labels, exits and per-example costs, bit for bit. Full
and Sequential plans (and the Full/Sequential parts of a Gated plan) run natively; Cascade and
Linear plans, and lazy evaluation with a feature provider, run on the interpreter (``native``
says which). Compiled code is cached on disk (``thrifty.runtime.native.cache_dir()``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.forest import Forest
from thrifty.runtime.native import NativeCode, leaf_tables
from thrifty.runtime.plans import Full, Gated, Plan, Schedule, Sequential, as_plan

# Positions the native code runs at once between two exits (width of the leaf buffer).
CHUNK = 32
# Rows the native code runs at once: their leaf buffer (NATIVE_BLOCK * CHUNK int32) fits in L1.
NATIVE_BLOCK = 256


LEAF_RECORD = np.dtype([("wv", np.float64), ("depth", np.int64), ("mask", np.uint64)])


@dataclass(frozen=True)
class NativeSchedule:
    """What the native driver needs besides the forest's code: leaf tables and exit stops.

    ``args`` holds the driver's arguments that depend only on the plan (from ``order`` to the
    exit bins, in ``run_native``'s order), gathered once: a one-row call does not pay for it.
    """

    native: NativeCode
    leaf_rec: np.ndarray
    path_ptr: np.ndarray
    path_feat: np.ndarray
    stop: np.ndarray
    has_exit: np.ndarray
    args: tuple


class CompiledPlan:
    """A plan compiled to native code (see ``thrifty.compile``).

    Attributes
    ----------
    plan : Plan
        The source plan (the reference semantics).
    costs : CostModel or None
        The cost model ``evaluate`` uses when given none.
    native : bool
        True when every part of the plan runs natively in dense evaluation; False when some
        part (a Cascade or Linear plan) runs on the interpreter.
    compile_seconds : float
        Time spent generating and compiling code in this process (0 when all came from the
        on-disk cache).
    """

    def __init__(self, plan: Any, costs: CostModel | None = None, *, progress: bool = True) -> None:
        self.plan = as_plan(plan)
        if costs is not None and not isinstance(costs, CostModel):
            raise TypeError(f"costs must be a thrifty CostModel, got {type(costs).__name__}")
        self.costs = costs
        self.parts: tuple[CompiledPlan, ...] = ()
        self.schedule: NativeSchedule | None = None
        self.native: bool
        self.compile_seconds: float
        if isinstance(self.plan, Gated):
            self.parts = tuple(
                CompiledPlan(p, progress=progress) for p in (self.plan.gate, self.plan.low, self.plan.high)
            )
            self.native = all(p.native for p in self.parts)
            self.compile_seconds = sum(p.compile_seconds for p in self.parts)
        elif isinstance(self.plan, (Full, Sequential)):
            self.schedule = _native_schedule(self.plan.forest, self.plan.schedule, progress)
            self.native = True
            self.compile_seconds = self.schedule.native.compile_seconds
        else:
            self.native = False
            self.compile_seconds = 0.0

    def evaluate(self, X: Any, *, n_threads: int | None = None) -> Any:
        """``thrifty.evaluate(self, X, self.costs)``: an ``Evaluation`` of the rows of ``X``."""
        from thrifty.runtime.evaluate import evaluate

        return evaluate(self, X, n_threads=n_threads)

    def __reduce__(self) -> tuple:
        # The native code is not picklable: a new process re-creates it (from the disk cache).
        return (_rebuild, (self.plan, self.costs))

    def __repr__(self) -> str:
        return f"CompiledPlan({self.plan!r}, native={self.native})"


def _rebuild(plan: Plan, costs: CostModel | None) -> CompiledPlan:
    return CompiledPlan(plan, costs, progress=False)


def _native_schedule(forest: Forest, schedule: Schedule, progress: bool) -> NativeSchedule:
    depth, path_ptr, path_feat = leaf_tables(forest)
    n = len(schedule.order)
    has_exit = np.isfinite(schedule.eps_pos) | np.isfinite(schedule.eps_neg) | (schedule.bins.width > 0)
    # stop[p]: one past the first position >= p after which a row may exit.
    stop = np.full(n + 1, n, dtype=np.int64)
    for p in range(n - 1, -1, -1):
        stop[p] = p + 1 if has_exit[p] else stop[p + 1]
    stop = stop[:n].copy()
    code = NativeCode(forest, schedule.order, stop, CHUNK, progress=progress)
    # One record per node (see _native_kernels.run_native): weight x value, depth, and with at
    # most 64 features the path's features as bits.
    rec = np.zeros(forest.n_nodes, dtype=LEAF_RECORD)
    rec["depth"] = depth
    for t in range(forest.n_trees):
        nodes = forest._tree_nodes(t)
        rec["wv"][nodes] = forest.tree_weight[t] * forest.value[nodes, 0]
    if forest.n_features <= 64:
        for node in range(forest.n_nodes):
            for feat in path_feat[path_ptr[node] : path_ptr[node + 1]]:
                rec["mask"][node] |= np.uint64(1) << np.uint64(feat)
    f, b = forest, schedule.bins
    args = (
        schedule.order,
        stop,
        has_exit,
        f.value,
        f.tree_weight,
        f.tree_class,
        rec,
        path_ptr,
        path_feat,
        schedule.eps_pos,
        schedule.eps_neg,
        f.accumulate == "float32",
        b.width,
        b.ptr,
        b.key,
        b.pos,
        b.neg,
    )
    return NativeSchedule(code, rec, path_ptr, path_feat, stop, has_exit, args)


def compile(model: Any, costs: CostModel | None = None) -> CompiledPlan:  # noqa: A001
    """Compile a plan (or forest, or fitted model) to native code.

    Each tree becomes native code with its splits as constants (thresholds, missing-value
    rules, category sets), generated as LLVM IR and compiled with llvmlite; the plan's order
    and exits, and the exact cost accounting, run around it. The result evaluates exactly as
    ``thrifty.evaluate(model, X, costs)`` does.

    Compiling takes about a second per 100 trees of 32 leaves (a progress line is shown when it
    takes longer than a few seconds); the code is cached on disk, keyed by a hash of the forest
    (and CPU), so compiling the same forest again, in any process, only loads it.

    Parameters
    ----------
    model : Plan, Forest, fitted thrifty estimator, or supported tree model
    costs : CostModel, optional
        The cost model used when ``evaluate`` is given none (default: every feature costs 1).

    Returns
    -------
    CompiledPlan
        ``.evaluate(X)`` gives the ``Evaluation``; ``thrifty.evaluate(compiled, X)`` also
        accepts it. ``.native`` is False when part of the plan (Cascade, Linear) runs on the
        interpreter.
    """
    return CompiledPlan(model, costs)
