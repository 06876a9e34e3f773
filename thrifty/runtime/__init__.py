"""The runtime: plans and the exact, fast, lazy evaluation that accounts their cost."""

from thrifty.runtime.async_eval import evaluate_async
from thrifty.runtime.compiled import CompiledPlan, compile  # noqa: A004
from thrifty.runtime.evaluate import Evaluation, evaluate
from thrifty.runtime.lazy import array_provider, lazy_rounds
from thrifty.runtime.plans import (
    BinnedExits,
    Cascade,
    Full,
    Gated,
    Linear,
    Opaque,
    Plan,
    Sequential,
    as_plan,
    plan_from_dict,
)

__all__ = [
    "BinnedExits",
    "Cascade",
    "CompiledPlan",
    "Evaluation",
    "Full",
    "Gated",
    "Linear",
    "Opaque",
    "Plan",
    "Sequential",
    "array_provider",
    "as_plan",
    "compile",
    "evaluate",
    "evaluate_async",
    "lazy_rounds",
    "plan_from_dict",
]
