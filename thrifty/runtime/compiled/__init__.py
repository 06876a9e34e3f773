"""Compiled plans: a plan's forests as native code generated for them, in pipeline order.

``layout`` (what the code is specialised for and the memory it works on) → IR per kind of
block: ``ir_scalar`` (one row at a time), ``ir_vector`` (a vector of rows at once, as many as
the ``targets``' lanes), ``ir_serving`` (the serving path's entry) → ``objects`` (object code
through llvmlite for the target, in helper processes: ``llc``; kept in the verified on-disk
``cache``) → ``tables`` (the tables the code reads;
``ForestCode``) → ``executor`` (the interpreter's executor running the code) and ``serving``
(the serving path) → ``plan`` (``CompiledPlan`` and ``compile``). Cascade and Linear plans
have their own IR (``ir_cascade``, ``ir_linear``), compiled and cached by ``loader``, with their
tables and executors in ``cascade`` and ``linear``.
"""

from thrifty.runtime.compiled.cache import CacheWarning, cache_dir
from thrifty.runtime.compiled.plan import CompiledPlan, compile  # noqa: A004

__all__ = ["CacheWarning", "CompiledPlan", "cache_dir", "compile"]
