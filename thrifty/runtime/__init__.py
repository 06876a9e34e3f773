"""The runtime: plans and the exact, fast, lazy evaluation that accounts their cost."""

from thrifty.runtime.async_eval import evaluate_async  # noqa: I001 (needs evaluate first)
from thrifty.runtime.evaluate import Evaluation, array_provider, evaluate
from thrifty.runtime.plans import (
    BinnedExits,
    Cascade,
    Full,
    Gated,
    Linear,
    Plan,
    Sequential,
    as_plan,
    plan_from_dict,
)

__all__ = ["BinnedExits", "Cascade", "Evaluation", "Full", "Gated", "Linear", "Plan", "Sequential",
           "array_provider", "as_plan", "evaluate", "evaluate_async", "plan_from_dict"]
