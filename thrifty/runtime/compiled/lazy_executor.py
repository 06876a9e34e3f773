"""The native lazy executor: the interpreter's executor of a forest plan in lazy evaluation,
each ``advance`` one native call (``ir_lazy``'s ``lazyrun``) over the rows it is given."""

from __future__ import annotations

import numpy as np

from thrifty.forest import Forest
from thrifty.runtime.compiled.layout import LAZY_FIELDS
from thrifty.runtime.compiled.tables import ForestCode, parallel
from thrifty.runtime.exits import Schedule
from thrifty.runtime.interpret.executors import Context, SequentialExecutor, round32

_F = {name: j for j, name in enumerate(LAZY_FIELDS)}


class NativeLazyExecutor(SequentialExecutor):
    """``SequentialExecutor``'s contract in lazy evaluation, on native code: ``advance`` runs
    the rows until each finishes or stops for a feature not known yet (``ctx.blocked``), and
    resumes a stopped row at the node it stopped at.

    The native state (``layout.LAZY_FIELDS``) keeps each row's scores and counters; a row's
    splits, trees and tested features reach the context (``ctx.n_nodes``, ``ctx.n_trees``,
    ``ctx.touched``) once, when it finishes, as ``NativeExecutor`` hands them over. Where a
    stopped row is (``pos``, ``cur``) is copied out after each call, for the rounds that look
    ahead of it (``lazy.policies``).
    """

    def __init__(self, forest: Forest, schedule: Schedule, ctx: Context, code: ForestCode) -> None:
        super().__init__(forest, schedule, ctx)
        self.code = code
        self.native = code.lazy_code()
        n, K = ctx.n, forest.n_outputs
        self.S = np.zeros((K + len(LAZY_FIELDS)) * n)
        self.S[: K * n].reshape(K, n)[:] = forest.base_score[:, None]
        self.state_raw = self.S[: K * n].reshape(K, n)
        self.ints = self.S[K * n :].view(np.int64).reshape(len(LAZY_FIELDS), n)
        self.ints[_F["cur"]] = -1
        self.ints[_F["blocked"]] = -1
        if not (ctx.known.flags.c_contiguous and ctx.X.flags.c_contiguous):
            raise ValueError("lazy evaluation's inputs must be C-contiguous")

    def advance(self, rows: np.ndarray) -> None:
        f, c, ints = self.forest, self.ctx, self.ints
        rows = rows[~self.done[rows]]
        if not len(rows):
            return
        X = c.X if f.input_dtype == "float64" else round32(c.X)
        blocked = ints[_F["blocked"]]
        blocked[rows] = -1
        work = ints[_F["work"]]
        m, n = len(rows), c.n
        work[:m] = rows
        x, s, t = X.ctypes.data, self.S.ctypes.data, self.code.T.ctypes.data
        touched, known = c.touched.ctypes.data, c.known.ctypes.data
        at = work.ctypes.data
        run = self.native.run
        parallel(lambda lo, hi: run(x, s, t, touched, at + 8 * lo, hi - lo, n, known), m)
        waits = blocked[rows]
        c.blocked[rows] = waits
        stopped = waits >= 0
        if stopped.any():
            rest = rows[stopped]
            self.pos[rest] = ints[_F["pos"], rest]
            self.cur[rest] = ints[_F["cur"], rest]
            rows = rows[~stopped]
            if not len(rows):
                return
        pos = ints[_F["pos"], rows]
        self.raw[rows] = self.state_raw[:, rows].T
        self.pos[rows] = pos
        self.cur[rows] = -1
        self.decision[rows] = ints[_F["dir"], rows]
        self.frozen[rows] = ints[_F["frozen"], rows] != 0
        self.done[rows] = True
        c.n_nodes[rows] += ints[_F["nodes"], rows]
        c.n_trees[rows] += pos
        if self.code.masked:
            # Bit f of a row's word is set when its paths tested feature f.
            bits = ints[_F["bits"], rows]
            tested = np.unpackbits(bits.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
            c.touched[rows] |= tested[:, : f.n_features].view(np.bool_)
