"""The runtime: plans and the exact, fast, lazy evaluation that accounts their cost."""

from thrifty.runtime.evaluate import Evaluation, evaluate
from thrifty.runtime.lazy import array_provider, lazy_rounds
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
           "array_provider", "as_plan", "evaluate", "lazy_rounds", "plan_from_dict"]
