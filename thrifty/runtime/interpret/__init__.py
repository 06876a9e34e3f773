"""The interpreter, thrifty's reference engine: numba kernels that advance rows of a plan until
each finishes or blocks on a feature it does not have (``kernels``), the executors holding each
plan's per-row state (``executors``), outputs collected into an ``Evaluation`` (``results``),
and the dense loop (``dense``). It never imports the compiler: a compiled plan hands its
executors in (``executors.Accelerated``)."""

from thrifty.runtime.interpret.dense import run_dense
from thrifty.runtime.interpret.executors import Accelerated, Context, Executor, executor
from thrifty.runtime.interpret.results import Collector, chunk_rows

__all__ = ["Accelerated", "Collector", "Context", "Executor", "chunk_rows", "executor", "run_dense"]
