"""``thrifty.compile``: a plan whose forests run as native code generated for them.

A ``CompiledPlan`` evaluates exactly like the interpreter (``thrifty.evaluate`` on the source
plan): same raw scores, probabilities, labels, exits and per-example costs, bit for bit. Full
and Sequential plans (and the Full/Sequential parts of a Gated plan) run natively; Cascade and
Linear plans, and lazy evaluation with a feature provider, run on the interpreter (``native``
says which). Compiled code is cached on disk (``thrifty.runtime.compiled.cache_dir()``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from thrifty.costs import CostModel
from thrifty.exceptions import InvalidParameterError
from thrifty.runtime.compiled.cascade import CascadeCode
from thrifty.runtime.compiled.executor import NativeExecutor
from thrifty.runtime.compiled.lazy_executor import NativeLazyExecutor
from thrifty.runtime.compiled.lazy_row import LazyRow, lazy_row
from thrifty.runtime.compiled.linear import LinearCode
from thrifty.runtime.compiled.raw_path import RawPath, raw_path
from thrifty.runtime.compiled.serving import ServingPath, serving_path
from thrifty.runtime.compiled.tables import ForestCode, forest_code
from thrifty.runtime.evaluate import evaluate
from thrifty.runtime.evaluation import Evaluation, costs_for
from thrifty.runtime.interpret.executors import Accelerated, Context, Executor
from thrifty.runtime.models import Linear
from thrifty.runtime.plans import Cascade, Full, Gated, Plan, Sequential, as_plan


class CompiledPlan(Accelerated):
    """A plan compiled to native code (see ``thrifty.compile``).

    Attributes
    ----------
    plan : Plan
        The source plan (the reference semantics).
    costs : CostModel or None
        The cost model ``evaluate`` uses when given none.
    native : bool
        True when every part of the plan runs natively in dense evaluation; False when some
        part (an Opaque plan: a Python callable) runs on the interpreter.
    compile_seconds : float
        Time spent generating and compiling code in this process (0 when all came from the
        on-disk cache).
    parts : tuple of CompiledPlan
        A Gated plan's gate, low and high parts, each compiled (empty for other plans).
    forest_code : ForestCode or None
        A Full or Sequential plan's native code and the tables it reads.
    plan_code : CascadeCode or LinearCode or None
        A Cascade or Linear plan's native code (and tables).
    serving : ServingPath or None
        The serving path under ``costs`` (``serving``): one native call from a numeric matrix
        to settled costs (forests of any width; None for other plans).
    raw_path : RawPath or None
        Scores first (``raw_path``): ``evaluate`` computes the raw scores alone and the other
        fields when read, for plans whose code has a scores-only entry (None for others).
    """

    def __init__(self, plan: Any, costs: CostModel | None = None, *, progress: bool = True) -> None:
        self.plan = as_plan(plan)
        if costs is not None and not isinstance(costs, CostModel):
            raise InvalidParameterError(f"costs must be a thrifty CostModel, got {type(costs).__name__}")
        self.costs = costs
        self.parts: tuple[CompiledPlan, ...] = ()
        self.forest_code: ForestCode | None = None
        self.plan_code: CascadeCode | LinearCode | None = None
        self.serving: ServingPath | None = None
        self.raw_path: RawPath | None = None
        # One-row lazy evaluation per cost model object (``lazy_row``).
        self.lazy_rows: dict[int, tuple[Any, LazyRow]] = {}
        self.native: bool
        self.compile_seconds: float
        if isinstance(self.plan, Gated):
            p = self.plan
            self.parts = tuple(CompiledPlan(part, progress=progress) for part in (p.gate, p.low, p.high))
            self.native = all(part.native for part in self.parts)
            self.compile_seconds = sum(part.compile_seconds for part in self.parts)
        elif isinstance(self.plan, (Full, Sequential)):
            self.forest_code = forest_code(self.plan.forest, self.plan.schedule, progress)
            self.native = True
            self.compile_seconds = self.forest_code.code.compile_seconds
            self.serving = serving_path(self.plan, self.forest_code, costs_for(self.plan, costs))
            # A scores-only entry compiled in the background takes its place when it arrives.
            self.raw_path = raw_path(self.serving, partial(setattr, self, "raw_path"))
            if self.serving is not None:
                # The serving path's ``evaluate`` in this instance's place: a one-row call then
                # makes one Python call fewer (about 0.2 µs of 4.4 on Adult's model). The class's
                # method, which it falls back on, stays the reference. A scores-first path is
                # the serving path's ``first`` (``RawPath``), which it tries first.
                general = partial(evaluate, self)
                self.__dict__["evaluate"] = self.serving.bind(general)
        elif isinstance(self.plan, (Cascade, Linear)):
            model = self.plan
            self.plan_code = (
                CascadeCode(model, progress) if isinstance(model, Cascade) else LinearCode(model, progress)
            )
            self.native = True
            self.compile_seconds = self.plan_code.compile_seconds
        else:
            self.native = False
            self.compile_seconds = 0.0

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until every entry of the plan's code is loaded: a large plan's scores-only
        entries are compiled after ``thrifty.compile`` returns (``objects.background_scores``;
        until then calls take the serving path, with the same results). Returns whether they
        arrived (or failed, which a warning says) within ``timeout`` seconds (None: no limit)."""
        codes = [self.forest_code.code] if self.forest_code is not None else []
        return all(part.wait(timeout) for part in self.parts) and all(c.wait(timeout) for c in codes)

    def evaluate(self, X: Any, *, n_threads: int | None = None) -> Evaluation:
        """``thrifty.evaluate(self, X, self.costs)``: an ``Evaluation`` of the rows of ``X``."""
        fast = self.raw_path
        if fast is not None:
            # Scores now, the rest when read: a plain predict needs no cost accounting.
            ev = fast.take(X, n_threads)
            if ev is not None:
                return ev
        serving = self.serving
        if serving is not None:
            # Straight to the serving path (``evaluate`` would take it too, after its checks);
            # ``self.serve`` inlined: a method call is a few percent of a one-row call.
            ev = serving.serve(X, n_threads)
            if ev is not None:
                return ev
        return evaluate(self, X, n_threads=n_threads)

    def executor(self, ctx: Context) -> Executor | None:
        """The native executor of the plan (the interpreter asks for it): for a Full or
        Sequential plan in lazy evaluation (some values not known yet) the one that resumes
        stopped rows; for a Cascade or Linear plan only in dense evaluation."""
        if self.plan_code is not None:
            return self.plan_code.executor(ctx)
        code, plan = self.forest_code, self.plan
        if code is None or not isinstance(plan, (Full, Sequential)):
            return None
        if not ctx.all_known:
            return NativeLazyExecutor(plan.forest, plan.schedule, ctx, code)
        return NativeExecutor(plan.forest, plan.schedule, ctx, code)

    def lazy_row(self, costs: CostModel | None) -> LazyRow | None:
        """One-row lazy evaluation of a Full or Sequential plan under ``costs`` (None: the
        plan's own), prepared once per cost model object (``lazy_row.LazyRow``)."""
        return lazy_row(self, costs)

    def serve(self, X: Any, n_threads: int | None) -> Evaluation | None:
        """The serving path's ``Evaluation`` of ``X``, or None when it has none or cannot take
        ``X`` (see ``ServingPath.serve``)."""
        return self.serving.serve(X, n_threads) if self.serving is not None else None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.plan!r}, native={self.native})"

    def __reduce__(self) -> tuple:
        # The native code is not picklable: a new process re-creates it (from the disk cache).
        return (_rebuild, (self.plan, self.costs))


def _rebuild(plan: Plan, costs: CostModel | None) -> CompiledPlan:
    return CompiledPlan(plan, costs, progress=False)


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
        accepts it. ``.native`` is False when part of the plan (an Opaque model) runs on the
        interpreter.
    """
    return CompiledPlan(model, costs)


def native_engine(plan: Plan, costs: CostModel) -> Plan | CompiledPlan:
    """``plan`` compiled with ``costs`` when some part of it runs natively (any plan but an
    Opaque one, or a Gated plan with a native part), else ``plan`` itself: what a long-running
    service (``thrifty serve``) evaluates with, dense and lazy. Pass ``costs`` itself to ``evaluate`` and
    ``evaluate_async`` (the compiled plan's own cost model takes its serving path)."""
    compiled = CompiledPlan(plan, costs, progress=False)
    return compiled if compiled.native or compiled.parts else plan
