"""``thrifty.compile``: a plan whose forests run as native code generated for them.

A ``CompiledPlan`` evaluates exactly like the interpreter (``thrifty.evaluate`` on the source
plan): same raw scores, probabilities, labels, exits and per-example costs, bit for bit. Full
and Sequential plans (and the Full/Sequential parts of a Gated plan) run natively; Cascade and
Linear plans, and lazy evaluation with a feature provider, run on the interpreter (``native``
says which). Compiled code is cached on disk (``thrifty.runtime.native.cache_dir()``).
"""

from __future__ import annotations

from typing import Any

from thrifty.costs import CostModel
from thrifty.runtime._compiled import NativePlan
from thrifty.runtime.evaluate import Evaluation, evaluate
from thrifty.runtime.plans import Plan


class CompiledPlan(NativePlan):
    """A plan compiled to native code (see ``thrifty.compile``).

    Attributes
    ----------
    plan : Plan
        The source plan (the reference semantics).
    costs : CostModel or None
        The cost model ``evaluate`` uses when given none.
    native : bool
        True when every part of the plan runs natively in dense evaluation; False when some
        part (a Cascade, Linear or Opaque plan) runs on the interpreter.
    compile_seconds : float
        Time spent generating and compiling code in this process (0 when all came from the
        on-disk cache).
    """

    def evaluate(self, X: Any, *, n_threads: int | None = None) -> Evaluation:
        """``thrifty.evaluate(self, X, self.costs)``: an ``Evaluation`` of the rows of ``X``."""
        fast = self.fast
        if fast is not None:
            # Straight to the serving path (``evaluate`` would take it too, after its checks).
            ev = fast.serve(X, n_threads)
            if ev is not None:
                return ev
        return evaluate(self, X, n_threads=n_threads)

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
        accepts it. ``.native`` is False when part of the plan (Cascade, Linear) runs on the
        interpreter.
    """
    return CompiledPlan(model, costs)
