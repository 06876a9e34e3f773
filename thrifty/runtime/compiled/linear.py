"""A Linear plan compiled to native code (``ir_linear``), and the executor that runs it on the
rows of a dense evaluation (lazy evaluation runs the interpreter's executor)."""

from __future__ import annotations

import ctypes

import numpy as np

from thrifty.runtime.compiled.ir_linear import linear_ir
from thrifty.runtime.compiled.loader import LoadedCode, plan_key
from thrifty.runtime.compiled.tables import parallel
from thrifty.runtime.interpret.executors import Context, LinearExecutor
from thrifty.runtime.models import Linear

# ``lrun(X, R, touched, rows, m, n)`` (see ``ir_linear``).
_LRUN = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64
)


class LinearCode:
    """``model``'s native code (compiled, or loaded from the cache)."""

    def __init__(self, model: Linear, progress: bool = True) -> None:
        self.model = model
        key = plan_key("linear", [model.n_features, model.coef, model.intercept])
        self.code = LoadedCode(key, lambda: [linear_ir(model, key)], progress=progress, what="a linear model")
        self.compile_seconds = self.code.compile_seconds
        self._run = _LRUN(self.code.address("lrun"))

    def outputs(self, X: np.ndarray, rows: np.ndarray, touched: np.ndarray) -> np.ndarray:
        """The raw outputs of ``rows`` of ``X`` (float64, C-contiguous), shape ``(K, len(X))``
        (columns of other rows are undefined); the features the model reads are marked in the
        rows' rows of ``touched`` (C-contiguous bool, one row per row of ``X``)."""
        n, m = X.shape[0], len(rows)
        R = np.empty((self.model.n_outputs, n))
        work = np.ascontiguousarray(rows, dtype=np.int64)
        x, r, t, w = X.ctypes.data, R.ctypes.data, touched.ctypes.data, work.ctypes.data
        parallel(lambda lo, hi: self._run(x, r, t, w + 8 * lo, hi - lo, n), m)
        return R

    def executor(self, ctx: Context) -> LinearExecutor | None:
        """The native executor in dense evaluation, None (the interpreter's) in lazy."""
        return NativeLinearExecutor(self, ctx) if ctx.all_known else None


class NativeLinearExecutor(LinearExecutor):
    """The interpreter's ``LinearExecutor`` with the dot products in native code."""

    def __init__(self, code: LinearCode, ctx: Context) -> None:
        super().__init__(code.model, ctx)
        self.code = code

    def advance(self, rows: np.ndarray) -> None:
        c = self.ctx
        rows = rows[~self.done[rows]]
        if not len(rows):
            return
        R = self.code.outputs(np.ascontiguousarray(c.X, dtype=np.float64), rows, c.touched)
        # Every row (dense evaluation) as a slice: a one-row call spends its time in indexing.
        take = slice(None) if len(rows) == c.n else rows
        self.raw[take] = R.T[take]
        self.done[take] = True
