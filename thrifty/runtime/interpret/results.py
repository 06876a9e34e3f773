"""The pieces every evaluation mode shares: the chunk size and the outputs collected chunk by
chunk into an ``Evaluation``."""

from __future__ import annotations

import numpy as np

from thrifty.costs import CostModel, CostReport
from thrifty.exceptions import InputError
from thrifty.runtime.evaluation import Evaluation
from thrifty.runtime.interpret import kernels
from thrifty.runtime.interpret.executors import Context, Executor
from thrifty.runtime.plans import Cascade, Gated, Plan

__all__ = ["MIN_CHUNK", "Collector", "assemble", "chunk_rows", "evaluation_of"]

# Bytes of per-row state a chunk may hold; bounds memory whatever the number of rows.
_CHUNK_BYTES = 1 << 27
# The fewest rows of a default chunk: a batch this small is always one chunk.
MIN_CHUNK = 256


def chunk_rows(plan: Plan, costs: CostModel, lazy: bool, chunk_size: int | None) -> int:
    """Rows evaluated at once: ``chunk_size``, or sized so per-row state stays near 128 MiB."""
    if chunk_size is not None and int(chunk_size) < 0:
        raise InputError(f"chunk_size must be >= 1 (or None for the default), got {chunk_size}")
    if chunk_size:
        return int(chunk_size)
    F, U = plan.n_features, len(costs.unit_cost)
    per_row = 8 * (F + 2 * plan.n_outputs + 8) + F + U + 9 * _cache_width(plan) + (9 * F if lazy else 0)
    return max(MIN_CHUNK, min(1 << 16, _CHUNK_BYTES // per_row))


def _cache_width(plan: Plan) -> int:
    """Trees whose outputs a cascade caches per row (it reuses them across stages)."""
    if isinstance(plan, Cascade):
        return plan.forest.n_trees
    if isinstance(plan, Gated):
        return sum(_cache_width(p) for p in (plan.gate, plan.low, plan.high))
    return 0


class Collector:
    """Outputs of every chunk written into arrays allocated once (memory stays bounded)."""

    def __init__(self, plan: Plan, costs: CostModel, n: int) -> None:
        self.plan, self.costs, self.n = plan, costs, n
        K, F = plan.n_outputs, plan.n_features
        self.raw = np.zeros((n, K))
        self.exit = np.zeros(n, dtype=np.int64)
        self.feature = np.zeros(n)
        self.n_nodes = np.zeros(n, dtype=np.int64)
        self.n_trees = np.zeros(n, dtype=np.int64)
        self.acquired = np.zeros((n, F), dtype=np.bool_)
        self.proba: np.ndarray | None = None
        self.labels: np.ndarray | None = None
        if plan.is_classifier:
            n_classes = len(plan.classes) if plan.classes is not None else max(2, K)
            self.proba = np.zeros((n, n_classes))
            classes = np.asarray(plan.classes) if plan.classes is not None else np.arange(n_classes)
            self.labels = np.zeros(n, dtype=classes.dtype)

    def add(self, lo: int, hi: int, ctx: Context, ex: Executor) -> None:
        self.raw[lo:hi] = ex.raw
        self.exit[lo:hi] = ex.exit
        self.acquired[lo:hi], self.feature[lo:hi] = settle(ctx)
        self.n_nodes[lo:hi] = ctx.n_nodes
        self.n_trees[lo:hi] = ctx.n_trees
        if self.proba is not None and self.labels is not None:  # set together, for classifiers
            self.proba[lo:hi] = ex.proba()
            self.labels[lo:hi] = ex.labels()

    def result(self) -> Evaluation:
        return assemble(
            self.plan,
            self.costs,
            self.raw,
            self.proba,
            self.labels,
            self.exit,
            self.feature,
            self.acquired,
            self.n_nodes,
            self.n_trees,
        )


def settle(ctx: Context) -> tuple[np.ndarray, np.ndarray]:
    """Acquired-feature mask and feature cost per row of ``ctx``, from the features tested.

    The cost of an example depends only on the *set* of features tested (the union of their
    closures, each unit paid once), so it is settled once rows are done, not in the hot loop.
    """
    c = ctx.costs
    acquired = np.zeros_like(ctx.touched)
    feat_cost = np.zeros(ctx.n)
    if ctx.n:
        kernels.SETTLE_COSTS.for_rows(ctx.n)(
            ctx.touched,
            c.closure_ptr,
            c.closure_units,
            c.unit_ptr,
            c.unit_feat,
            c.unit_cost,
            acquired,
            feat_cost,
        )
    return acquired, feat_cost


def evaluation_of(plan: Plan, costs: CostModel, ctx: Context, ex: Executor) -> Evaluation:
    """The ``Evaluation`` of one chunk holding every row (no copy into a ``Collector``)."""
    acquired, feature = settle(ctx)
    proba = labels = None
    if plan.is_classifier:
        proba, labels = ex.proba(), ex.labels()
    return assemble(plan, costs, ex.raw, proba, labels, ex.exit, feature, acquired, ctx.n_nodes, ctx.n_trees)


def assemble(
    plan: Plan,
    costs: CostModel,
    raw: np.ndarray,
    proba: np.ndarray | None,
    labels: np.ndarray | None,
    exit: np.ndarray,
    feature: np.ndarray,
    acquired: np.ndarray,
    n_nodes: np.ndarray,
    n_trees: np.ndarray,
) -> Evaluation:
    evaluation = costs.tree_cost * n_trees + costs.split_cost * n_nodes
    report = CostReport(
        feature=feature,
        evaluation=evaluation,
        total=feature + evaluation,
        n_trees=n_trees,
        n_nodes=n_nodes,
        acquired=acquired,
        fixed=costs.fixed_cost(plan.feature_usage()),
        feature_names=costs.feature_names or plan.feature_names,
    )
    raw = raw[:, 0] if plan.n_outputs == 1 else raw
    return Evaluation(raw=raw, proba=proba, labels=labels, exit=exit, cost=report)
