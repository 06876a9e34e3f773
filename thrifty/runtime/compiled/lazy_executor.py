"""The native lazy executor: the interpreter's executor of a forest plan in lazy evaluation,
each ``advance`` one native call (``ir_lazy``'s ``lazyrun``) over the rows it is given."""

from __future__ import annotations

import numpy as np

from thrifty.forest import Forest
from thrifty.forest.kernels import SERIAL_ROWS
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
        self.S[: K * n].reshape(K, n)[:] = forest.start[:, None]
        self.state_raw = self.S[: K * n].reshape(K, n)
        self.ints = self.S[K * n :].view(np.int64).reshape(len(LAZY_FIELDS), n)
        self.ints[_F["cur"]] = -1
        self.ints[_F["blocked"]] = -1
        if not (ctx.known.flags.c_contiguous and ctx.X.flags.c_contiguous):
            raise ValueError("lazy evaluation's inputs must be C-contiguous")
        # Every address the native call takes is fixed for the chunk: read once (a ``.ctypes``
        # lookup costs about a microsecond, a round of one row only a few).
        self.X32 = None if forest.input_dtype == "float64" else np.empty_like(ctx.X)
        X = ctx.X if self.X32 is None else self.X32
        self.defer = False
        self.deferred: list[np.ndarray] = []
        self.blocked_now = self.ints[_F["blocked"]]
        self.work = self.ints[_F["work"]]
        self.args = (
            X.ctypes.data,
            self.S.ctypes.data,
            code.T.ctypes.data,
            ctx.touched.ctypes.data,
            self.work.ctypes.data,
            n,
            ctx.known.ctypes.data,
        )

    def advance(self, rows: np.ndarray) -> None:
        c, ints = self.ctx, self.ints
        if len(rows) == 1 and self.X32 is None:
            # One row (a service's request): scalars, no array indexing, while it waits.
            i = int(rows[0])
            if self.done[i]:
                return
            self.blocked_now[i] = -1
            self.work[0] = i
            x, s, t, touched, at, n, known = self.args
            self.native.run(x, s, t, touched, at, 1, n, known)
            wait = self.blocked_now[i]
            c.blocked[i] = wait
            if wait >= 0:
                self.pos[i] = ints[_F["pos"], i]
                self.cur[i] = ints[_F["cur"], i]
                return
            self._finish(rows)
            return
        rows = rows[~self.done[rows]]
        m = len(rows)
        if not m:
            return
        if self.X32 is not None:
            # Inputs rounded to float32 as the forest reads them (values arrive every round).
            self.X32[:] = round32(c.X)
        blocked = self.blocked_now
        blocked[rows] = -1
        self.work[:m] = rows
        x, s, t, touched, at, n, known = self.args
        run = self.native.run
        if m < SERIAL_ROWS:
            run(x, s, t, touched, at, m, n, known)
        else:
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
        self._finish(rows)

    def _finish(self, rows: np.ndarray) -> None:
        """Hand the rows that finished over to the executor and context (or, deferred, only
        mark them done: ``hand_over`` does the rest when asked)."""
        if self.defer:
            self.done[rows] = True
            self.deferred.append(rows)
            return
        self._hand_over(rows)

    def defer_results(self) -> None:
        """Finished rows are only marked done until ``hand_over``."""
        self.defer = True

    def hand_over(self) -> None:
        """Hand over the finished rows ``_finish`` deferred (lazy rounds defer them while a
        compiled plan's serving path is to settle the result, which then makes this unneeded)."""
        self.defer = False
        for rows in self.deferred:
            self._hand_over(rows)
        self.deferred = []

    def _hand_over(self, rows: np.ndarray) -> None:
        f, c, ints = self.forest, self.ctx, self.ints
        pos = ints[_F["pos"], rows]
        self.acc[rows] = self.state_raw[:, rows].T
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
