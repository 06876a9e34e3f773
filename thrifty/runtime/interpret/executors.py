"""Executors: the per-row state of a plan being evaluated, advanced by the kernels."""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.forest import Forest
from thrifty.forest.kernels import SERIAL_ROWS, SWEEP
from thrifty.forest.links import labels_from, raw_to_proba
from thrifty.runtime.evaluation import Evaluation
from thrifty.runtime.exits import Schedule
from thrifty.runtime.interpret import kernels
from thrifty.runtime.models import Linear, Opaque
from thrifty.runtime.plans import Cascade, Full, Gated, Plan, Sequential


class Context:
    """What every component of a plan shares for one chunk of rows: inputs and costs paid."""

    def __init__(self, X: np.ndarray, known: np.ndarray, all_known: bool, costs: CostModel) -> None:
        n, n_features = X.shape
        self.n = n
        self.X = X
        self.known = known
        self.all_known = all_known
        self.touched = np.zeros((n, n_features), dtype=np.bool_)
        # Per-row counters, one array as the kernels take it: splits visited, trees evaluated,
        # the feature a row waits for (-1: none).
        self.tally = np.zeros((3, n), dtype=np.int64)
        self.n_nodes = self.tally[kernels.NODES]
        self.n_trees = self.tally[kernels.TREES]
        self.blocked = self.tally[kernels.BLOCKED]
        self.blocked[:] = -1
        self.costs = costs
        self.inputs = (X, known, all_known)  # what the kernels read of the inputs


class Executor:
    """Advances rows of one plan; after all rows are done, exposes raw, exit and decision."""

    raw: np.ndarray  # (n, n_outputs)
    exit: np.ndarray  # (n,) exit position, stage or route
    decision: np.ndarray  # (n,) +1/-1 forced binary decision, 0 when the score decides
    done: np.ndarray

    def advance(self, rows: np.ndarray) -> None:
        raise NotImplementedError

    def proba(self) -> np.ndarray | None:
        raise NotImplementedError

    def labels(self) -> np.ndarray | None:
        raise NotImplementedError

    def defer_results(self) -> None:
        """Another engine will settle this chunk's results (a compiled plan's serving path):
        an executor may skip publishing its finished rows until ``hand_over`` (default: no)."""

    def hand_over(self) -> None:
        """Publish what ``defer_results`` held back (raw scores, exits, counters, tested set)."""


class Accelerated:
    """A plan some of whose parts another engine runs (``thrifty.compile``'s ``CompiledPlan``).

    The interpreter asks it for each part's executor, so that engine depends on the interpreter
    and never the other way round: importing the interpreter loads no compiler.

    Attributes
    ----------
    plan : Plan
        The plan (the reference semantics).
    costs : CostModel or None
        The cost model evaluation uses when given none.
    parts : tuple of Accelerated
        A Gated plan's gate, low and high parts (empty for other plans).
    """

    plan: Plan
    costs: CostModel | None
    parts: tuple[Accelerated, ...] = ()

    def executor(self, ctx: Context) -> Executor | None:
        """The engine's executor of ``plan`` on ``ctx``, or None to use the interpreter's."""
        return None

    def serve(self, X: Any, n_threads: int | None) -> Evaluation | None:
        """The ``Evaluation`` of the rows of ``X`` under ``costs`` in one call of the engine, or
        None when it cannot take ``X`` (the interpreter's dense loop then runs)."""
        return None

    def lazy_row(self, costs: CostModel | None) -> Any:
        """The engine's one-row lazy evaluation under ``costs`` (None: its own): an object whose
        ``rounds(policy)`` is ``lazy_rounds(..., n_rows=1)``'s generator (in order when
        ``policy`` is None, else under that ``lazy.policies.Policy``), or None to run the
        general rounds."""
        return None


def executor(plan: Plan, ctx: Context, accelerated: Accelerated | None = None) -> Executor:
    """The executor of ``plan``; with ``accelerated`` (of ``plan``), its parts run on the
    engine wherever it supplies an executor."""
    if accelerated is not None:
        ex = accelerated.executor(ctx)
        if ex is not None:
            return ex
    if isinstance(plan, (Full, Sequential)):
        return SequentialExecutor(plan.forest, plan.schedule, ctx)
    if isinstance(plan, Cascade):
        return CascadeExecutor(plan, ctx)
    if isinstance(plan, Linear):
        return LinearExecutor(plan, ctx)
    if isinstance(plan, Opaque):
        return _OpaqueExecutor(plan, ctx)
    if isinstance(plan, Gated):
        return _GatedExecutor(plan, ctx, accelerated.parts if accelerated is not None else ())
    raise TypeError(f"no executor for plan {type(plan).__name__}")


class _ForestOutputs(Executor):
    forest: Forest

    def proba(self) -> np.ndarray | None:
        return raw_to_proba(self.raw, self.forest.link) if self.forest.is_classifier else None

    def labels(self) -> np.ndarray | None:
        f = self.forest
        if not f.is_classifier:
            return None
        return labels_from(self.raw, self.decision, f.link, f.classes, f.n_outputs)


class SequentialExecutor(_ForestOutputs):
    """A Full or Sequential plan's forest, visited in its schedule's order with its exits."""

    def __init__(self, forest: Forest, schedule: Schedule, ctx: Context) -> None:
        n = ctx.n
        self.forest, self.ctx = forest, ctx
        self.order, self.exits, self.full = schedule.order, schedule.exits, schedule.full
        self.trees = trees_record(forest)
        # Where each row is: its position in the order, the node it stopped at (-1: a root).
        self.place = np.zeros((2, n), dtype=np.int64)
        self.pos = self.place[kernels.POS]
        self.cur = self.place[kernels.CUR]
        self.cur[:] = -1
        # The trees' sums: every row starts at the base score (as np.tile would give, in fewer
        # steps), or at zero for a forest that adds its base last (``Forest.start``).
        self.acc = np.empty((n, forest.base_score.shape[0]), dtype=forest.base_score.dtype)
        self.acc[:] = forest.start
        # Finished, and frozen by a bin table (no further exits).
        self.flags = np.zeros((2, n), dtype=np.bool_)
        self.done = self.flags[kernels.DONE]
        self.frozen = self.flags[kernels.FROZEN]
        self.decision = np.zeros(n, dtype=np.int8)

    @property
    def exit(self) -> np.ndarray:  # type: ignore[override]
        return self.pos

    @property
    def raw(self) -> np.ndarray:  # type: ignore[override]
        """Raw scores of the sums so far (``Forest.finish``: the sums themselves unless the
        forest adds its base last)."""
        return self.forest.finish(self.acc)

    def advance(self, rows: np.ndarray) -> None:
        f, c = self.forest, self.ctx
        if self.full and c.all_known and len(rows) == c.n and not self.done.any():
            X = c.X if f.input_dtype == "float64" else round32(c.X)
            SWEEP.for_rows(c.n)(
                X,
                f.nodes,
                f.value,
                f.roots,
                f.tree_weight,
                f.tree_class,
                f.accumulate == "float32",
                True,
                c.touched,
                c.n_nodes,
                self.acc,
            )
            c.n_trees += f.n_trees
            self.pos[:] = f.n_trees
            self.done[:] = True
            return
        if (
            c.all_known
            and len(rows) == c.n
            and not self.done.any()
            and f.n_outputs == 1
            and c.n >= SERIAL_ROWS
        ):
            X = c.X if f.input_dtype == "float64" else round32(c.X)
            kernels.run_sequential_dense(X, *self._walk(), _dense_block(c.n))
            return
        kernels.RUN_SEQUENTIAL.for_rows(len(rows))(rows, c.inputs, *self._walk())

    def _walk(self) -> tuple[Any, Any, Any, Any, Any, Any, Any, Any, Any]:
        """The arguments both sequential kernels take after their inputs: what they read of the
        forest and schedule, then every array they write."""
        c = self.ctx
        return (
            self.trees,
            self.order,
            self.exits,
            c.touched,
            c.tally,
            self.place,
            self.acc,
            self.flags,
            self.decision,
        )


class CascadeExecutor(_ForestOutputs):
    """A Cascade plan's stages over its forest's trees, each tree's output kept for later stages."""

    def __init__(self, plan: Cascade, ctx: Context) -> None:
        n, f = ctx.n, plan.forest
        self.forest, self.plan, self.ctx = f, plan, ctx
        # Stage, position in it, and node reached (-1: a root).
        self.place = np.zeros((3, n), dtype=np.int64)
        self.stage = self.place[kernels.STAGE]
        self.jpos = self.place[kernels.JPOS]
        self.cur = self.place[kernels.STAGE_NODE]
        self.cur[:] = -1
        self.score = np.full(n, plan.stage_bias[0])
        # Each row's tree outputs so far, allocated when the kernel first runs (a compiled
        # cascade finishes its rows without them).
        self.tree_out = np.zeros((0, 0))
        self.tree_done = np.zeros((0, 0), dtype=np.bool_)
        self.done = np.zeros(n, dtype=np.bool_)
        self.decision = np.zeros(n, dtype=np.int8)
        # A tree's output h_t is what it adds to the raw score (scale included: ``Plan.Cascade``).
        self.trees = trees_record(f, f.contribution_weight)
        self.stages = (plan.stage_ptr, plan.stage_trees, plan.stage_w, plan.stage_bias, plan.stage_thresholds)

    @property
    def raw(self) -> np.ndarray:  # type: ignore[override]
        return self.score[:, None]

    @property
    def exit(self) -> np.ndarray:  # type: ignore[override]
        return self.stage

    def advance(self, rows: np.ndarray) -> None:
        c, f = self.ctx, self.forest
        if self.tree_out.shape[0] != c.n:
            self.tree_out = np.zeros((c.n, f.n_trees))
            self.tree_done = np.zeros((c.n, f.n_trees), dtype=np.bool_)
        kernels.RUN_CASCADE.for_rows(len(rows))(
            rows,
            c.inputs,
            self.trees,
            self.stages,
            c.touched,
            c.tally,
            self.place,
            self.score,
            self.tree_out,
            self.tree_done,
            self.done,
            self.decision,
        )
        self.decide(rows)

    def decide(self, rows: np.ndarray) -> None:
        """Examples of ``rows`` that passed every stage are decided by the last stage's
        threshold."""
        finished = rows[self.done[rows] & (self.decision[rows] == 0)]
        self.decision[finished] = np.where(self.score[finished] > self.plan.stage_thresholds[-1], 1, -1)


class _ModelExecutor(Executor):
    """A one-model plan (Linear, Opaque): every row is done in one step, nothing is forced."""

    plan: Linear | Opaque

    def __init__(self, plan: Linear | Opaque, ctx: Context) -> None:
        self.plan, self.ctx = plan, ctx
        self.raw = np.zeros((ctx.n, plan.n_outputs))
        self.done = np.zeros(ctx.n, dtype=np.bool_)
        self.exit = np.zeros(ctx.n, dtype=np.int64)
        self.decision = np.zeros(ctx.n, dtype=np.int8)

    def proba(self) -> np.ndarray | None:
        return raw_to_proba(self.raw, self.plan.link) if self.plan.is_classifier else None

    def labels(self) -> np.ndarray | None:
        p = self.plan
        if not p.is_classifier:
            return None
        return labels_from(self.raw, None, p.link, p.classes, p.n_outputs)


class LinearExecutor(_ModelExecutor):
    """A Linear plan: every row's dot product with the coefficients, in one step."""

    plan: Linear

    def advance(self, rows: np.ndarray) -> None:
        c, p = self.ctx, self.plan
        kernels.RUN_LINEAR.for_rows(len(rows))(
            rows, c.inputs, (p.features, p.coef, p.intercept), c.touched, c.tally, self.raw, self.done
        )


class _OpaqueExecutor(_ModelExecutor):
    """Rows whose features are all known are scored by the black box, one call per step."""

    plan: Opaque

    def advance(self, rows: np.ndarray) -> None:
        c, p = self.ctx, self.plan
        rows = rows[~self.done[rows]]
        c.blocked[rows] = -1
        if not c.all_known and len(p.features):
            # A row waits for the first of the model's features it does not have yet.
            missing = ~c.known[np.ix_(rows, p.features)]
            waiting = missing.any(axis=1)
            c.blocked[rows[waiting]] = p.features[np.argmax(missing[waiting], axis=1)]
            rows = rows[~waiting]
        if not len(rows):
            return
        c.touched[np.ix_(rows, p.features)] = True
        self.raw[rows] = p.outputs(c.X[np.ix_(rows, p.features)])
        self.done[rows] = True


class _GatedExecutor(Executor):
    """Gate first; as soon as an example's gate is done it continues in the model it picked."""

    def __init__(self, plan: Gated, ctx: Context, parts: tuple[Accelerated, ...]) -> None:
        self.plan, self.ctx = plan, ctx
        gate, low, high = parts or (None, None, None)
        self.gate = executor(plan.gate, ctx, gate)
        self.low = executor(plan.low, ctx, low)
        self.high = executor(plan.high, ctx, high)
        self.route = np.full(ctx.n, -1, dtype=np.int64)

    @property
    def done(self) -> np.ndarray:  # type: ignore[override]
        return np.where(self.route == 1, self.high.done, self.low.done) & (self.route >= 0)

    @property
    def exit(self) -> np.ndarray:  # type: ignore[override]
        return self.route

    def advance(self, rows: np.ndarray) -> None:
        pending = rows[self.route[rows] < 0]
        if len(pending):
            self.gate.advance(pending)
            ready = pending[self.gate.done[pending]]
            self.route[ready] = (self.gate.raw[ready, 0] > 0).astype(np.int64)
        routed = rows[self.route[rows] >= 0]
        for branch, ex in ((0, self.low), (1, self.high)):
            mine = routed[(self.route[routed] == branch) & ~ex.done[routed]]
            if len(mine):
                ex.advance(mine)

    def _pick(self, a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
        if a is None or b is None:
            return None
        high = self.route == 1
        return np.where(high.reshape((-1,) + (1,) * (a.ndim - 1)), b, a)

    @property
    def raw(self) -> np.ndarray:  # type: ignore[override]
        raw = self._pick(self.low.raw, self.high.raw)
        assert raw is not None  # both branches always hold raw scores
        return raw

    @property
    def decision(self) -> np.ndarray:  # type: ignore[override]
        decision = self._pick(self.low.decision, self.high.decision)
        assert decision is not None  # both branches always hold decisions
        return decision

    def proba(self) -> np.ndarray | None:
        return self._pick(self.low.proba(), self.high.proba())

    def labels(self) -> np.ndarray | None:
        # A model that does not name its classes labels by class index: name them as the plan
        # does (Gated checks that named classes agree).
        classes = self.plan.classes
        parts = []
        for ex, model in ((self.low, self.plan.low), (self.high, self.plan.high)):
            lab = ex.labels()
            if lab is not None and classes is not None and model.classes is None:
                lab = np.asarray(classes)[lab.astype(np.int64)]
            parts.append(lab)
        return self._pick(*parts)


def trees_record(forest: Forest, weight: np.ndarray | None = None) -> tuple:
    """What the kernels read of a forest, in one record: the node arrays (``Forest.nodes``),
    leaf values, roots, tree weights (``weight``, default ``tree_weight``) and classes, and
    whether inputs are rounded to float32 and sums kept in float32 (XGBoost, scikit-learn)."""
    f = forest
    round32, acc32 = f.input_dtype == "float32", f.accumulate == "float32"
    w = f.tree_weight if weight is None else weight
    return (f.nodes, f.value, f.roots, w, f.tree_class, round32, acc32)


def round32(X: np.ndarray) -> np.ndarray:
    """Inputs rounded to float32, as scikit-learn and XGBoost read them."""
    with np.errstate(over="ignore"):
        return X.astype(np.float32).astype(np.float64)


def _dense_block(n: int) -> int:
    """Rows per block of the dense sequential kernel: one block per thread, within limits."""
    import numba

    per_thread = -(-n // max(1, numba.get_num_threads()))
    return int(min(1 << 14, max(1 << 10, per_thread)))
