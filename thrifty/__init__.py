"""thrifty: tree-ensemble predictions that pay only for the features and trees they need."""

from typing import TYPE_CHECKING

from thrifty._lazy import attach
from thrifty._version import __version__

# Imported on first use (PEP 562): `import thrifty.costs` and `thrifty --help` load neither numba
# nor scikit-learn nor LightGBM.
if TYPE_CHECKING:
    from thrifty.cascade import CronusClassifier, CronusRanker
    from thrifty.cascade.cronus import cronus  # the function, not the module of that name
    from thrifty.comparison.compare import Comparison, compare
    from thrifty.costs import CostModel, CostReport
    from thrifty.forest import Forest
    from thrifty.forest.onnx_export import export_onnx
    from thrifty.io import load, save
    from thrifty.model_files import load_model
    from thrifty.order import QWYCClassifier, QWYCRanker, QWYCRegressor, qwyc
    from thrifty.prune import BudgetPrunedClassifier, BudgetPrunedRegressor, budget_prune
    from thrifty.runtime import (
        Cascade,
        CompiledPlan,
        Evaluation,
        Full,
        Gated,
        Linear,
        Opaque,
        Sequential,
        compile,  # noqa: A004 (thrifty.compile, like the builtin, turns a description into code)
        evaluate,
        evaluate_async,
        plot_rounds_frontier,
        prefetch_plan,
        rounds_frontier,
    )
    from thrifty.train import (
        ADAPTClassifier,
        ADAPTRegressor,
        BudgetRFClassifier,
        BudgetRFRegressor,
        CEGBClassifier,
        CEGBRanker,
        CEGBRegressor,
        GreedyMiserClassifier,
        GreedyMiserRegressor,
    )

__all__ = [
    "ADAPTClassifier",
    "ADAPTRegressor",
    "BudgetPrunedClassifier",
    "BudgetPrunedRegressor",
    "BudgetRFClassifier",
    "BudgetRFRegressor",
    "CEGBClassifier",
    "CEGBRanker",
    "CEGBRegressor",
    "Cascade",
    "Comparison",
    "CompiledPlan",
    "CostModel",
    "CostReport",
    "CronusClassifier",
    "CronusRanker",
    "Evaluation",
    "Forest",
    "Full",
    "Gated",
    "GreedyMiserClassifier",
    "GreedyMiserRegressor",
    "Linear",
    "Opaque",
    "QWYCClassifier",
    "QWYCRanker",
    "QWYCRegressor",
    "Sequential",
    "budget_prune",
    "compare",
    "compile",
    "cronus",
    "evaluate",
    "evaluate_async",
    "export_onnx",
    "load",
    "load_model",
    "plot_rounds_frontier",
    "prefetch_plan",
    "qwyc",
    "rounds_frontier",
    "save",
    "__version__",
]

__getattr__, __dir__ = attach(__name__, __file__)
