"""The runtime: plans and the exact, fast, lazy evaluation that accounts their cost.

Three engines, one room each: ``interpret`` (the reference: numba kernels and executors),
``lazy`` (rounds of feature requests answered by a provider) and ``compiled`` (native code
generated for a plan's forests). ``evaluate`` is the front door; ``plans``, ``exits`` and
``evaluation`` hold what they share.
"""

from typing import TYPE_CHECKING

from thrifty._lazy import attach
from thrifty.runtime.evaluate import Evaluation, evaluate
from thrifty.runtime.lazy import array_provider, evaluate_async, lazy_rounds
from thrifty.runtime.models import Linear, Opaque
from thrifty.runtime.plans import (
    BinnedExits,
    Cascade,
    Full,
    Gated,
    Plan,
    Sequential,
    as_plan,
    plan_from_dict,
)

# The compiler (and llvmlite) is imported on first use: the interpreter and lazy evaluation run
# without it.
if TYPE_CHECKING:
    from thrifty.runtime.compiled import CompiledPlan, cache_dir, compile  # noqa: A004
    from thrifty.runtime.lazy.frontier import plot_rounds_frontier, prefetch_plan, rounds_frontier
    from thrifty.runtime.lazy.policies import Prefetch

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
    "Prefetch",
    "Sequential",
    "array_provider",
    "cache_dir",
    "as_plan",
    "compile",
    "evaluate",
    "evaluate_async",
    "lazy_rounds",
    "plan_from_dict",
    "plot_rounds_frontier",
    "prefetch_plan",
    "rounds_frontier",
]

__getattr__, __dir__ = attach(__name__, __file__)
