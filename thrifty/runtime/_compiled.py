"""The data of a compiled plan: the source plan, its native parts and its serving path."""

from __future__ import annotations

from typing import Any

from thrifty.costs import CostModel
from thrifty.exceptions import InvalidParameterError
from thrifty.runtime._evaluation import costs_for
from thrifty.runtime._fast import FastPath, fast_path
from thrifty.runtime._native_plan import NativeSchedule, native_schedule
from thrifty.runtime.plans import Full, Gated, Sequential, as_plan


class NativePlan:
    """A plan with native code for its forest parts (``thrifty.compile`` returns the public
    ``CompiledPlan``, which adds evaluation and documents ``plan``, ``costs``, ``native`` and
    ``compile_seconds``).

    Attributes
    ----------
    parts : tuple of NativePlan
        A Gated plan's gate, low and high parts.
    schedule : NativeSchedule or None
        The native code of a Full or Sequential plan.
    fast : FastPath or None
        The serving path under ``costs`` (see ``_fast``), when the plan has one.
    """

    def __init__(self, plan: Any, costs: CostModel | None = None, *, progress: bool = True) -> None:
        self.plan = as_plan(plan)
        if costs is not None and not isinstance(costs, CostModel):
            raise InvalidParameterError(f"costs must be a thrifty CostModel, got {type(costs).__name__}")
        self.costs = costs
        self.parts: tuple[NativePlan, ...] = ()
        self.schedule: NativeSchedule | None = None
        self.fast: FastPath | None = None
        self.native: bool
        self.compile_seconds: float
        if isinstance(self.plan, Gated):
            self.parts = tuple(
                NativePlan(p, progress=progress) for p in (self.plan.gate, self.plan.low, self.plan.high)
            )
            self.native = all(p.native for p in self.parts)
            self.compile_seconds = sum(p.compile_seconds for p in self.parts)
        elif isinstance(self.plan, (Full, Sequential)):
            self.schedule = native_schedule(self.plan.forest, self.plan.schedule, progress)
            self.native = True
            self.compile_seconds = self.schedule.native.compile_seconds
            self.fast = fast_path(self.plan, self.schedule, costs_for(self.plan, costs))
        else:
            self.native = False
            self.compile_seconds = 0.0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.plan!r}, native={self.native})"
