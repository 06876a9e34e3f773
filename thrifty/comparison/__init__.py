"""One frontier for all methods: :func:`compare` runs every method that applies over budgets."""

# Imported eagerly, not lazily as thrifty's other packages: the function `compare` shares the
# name of its module, which importing that module would bind over it in a lazy namespace.
from thrifty.comparison.compare import compare
from thrifty.comparison.context import Context
from thrifty.comparison.methods import METHODS, Candidate, Method, method
from thrifty.comparison.result import Comparison
from thrifty.comparison.settings import Settings

__all__ = ["METHODS", "Candidate", "Comparison", "Context", "Method", "Settings", "compare", "method"]
