"""The pieces of prediction other kernels build on: the split rule, leaf accumulation,
traversal that marks the features it tests, the prediction sweep, the missing-value rules,
and control of numba's threads (the runtime's evaluation kernels and compiler use them)."""

from thrifty.forest._forest import MISSING_AS_ZERO, MISSING_NAN, MISSING_ZERO
from thrifty.forest._predict import SERIAL_ROWS, SWEEP, Twin, threads
from thrifty.forest._traverse import ZERO, add_leaf, add_tree, child, next_node, walk_one, walk_pair

__all__ = [
    "MISSING_AS_ZERO",
    "MISSING_NAN",
    "MISSING_ZERO",
    "SERIAL_ROWS",
    "SWEEP",
    "ZERO",
    "Twin",
    "add_leaf",
    "add_tree",
    "child",
    "next_node",
    "threads",
    "walk_one",
    "walk_pair",
]
