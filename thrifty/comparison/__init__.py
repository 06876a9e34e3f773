"""One frontier for all methods: :func:`compare` runs every method that applies over budgets."""

from thrifty.comparison.compare import Comparison, compare
from thrifty.comparison.methods import METHODS, Candidate, Context, Method, method

__all__ = ["METHODS", "Candidate", "Comparison", "Context", "Method", "compare", "method"]
