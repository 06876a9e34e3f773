"""Hand-written LLVM IR compiled and called in the test process (one function of two pointers)."""

from __future__ import annotations

import ctypes

from thrifty.runtime.compiled import objects


def native_function(lines: list[str], name: str, machine):
    """The engine that holds ``name`` compiled from ``lines`` for ``machine``, and the function
    as ``f(ptr, ptr)``; keep the engine alive while calling it."""
    mod = objects.llvm.parse_assembly("\n".join(lines))
    mod.verify()
    engine = objects.llvm.create_mcjit_compiler(mod, machine)
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address(name))
    return engine, fn
