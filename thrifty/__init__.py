"""thrifty: tree-ensemble predictions that pay only for the features and trees they need."""

from thrifty.comparison import Comparison, compare
from thrifty.costs import CostModel, CostReport
from thrifty.forest import Forest
from thrifty.io import load, save
from thrifty.runtime import Cascade, Evaluation, Full, Gated, Linear, Sequential, evaluate

__version__ = "0.1.0"

__all__ = ["Cascade", "Comparison", "CostModel", "CostReport", "Evaluation", "Forest", "Full", "Gated",
           "Linear", "Sequential", "compare", "evaluate", "load", "save", "__version__"]
