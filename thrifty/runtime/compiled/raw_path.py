"""Scores first: a compiled plan's ``evaluate`` that computes raw scores only, and everything
else (costs, exits, probabilities, labels) when first read.

A service that reads ``evaluate(X).raw`` (the common ``predict``) needs no cost accounting. For
plans with a scores-only entry (``objects.raw_entry``: no exits, branchy or vector blocks) the
call runs ``raw`` (``ir_raw``, ``ir_vraw``) and returns a ``DeferredEvaluation``: its ``raw``
is set, and reading any other field runs the serving path once on a copy of the call's rows
(taken at the call, so the caller may reuse its matrix) and takes that field from its result.
Every field equals what the serving path gives at once, bit for bit; a caller reading costs
pays for the scores twice. On vector blocks one row takes the serving path (``take``) unless
the plan has a second entry for it; a second entry in the other kind of blocks
(``objects.second_entry``) serves the calls of its row counts. The
compiled plan's ``evaluate`` is the serving path's, which takes this path first (its ``first``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from thrifty.forest.kernels import SERIAL_ROWS, threads
from thrifty.runtime.compiled.ir_raw import RAW_CONTEXT
from thrifty.runtime.compiled.serving import LARGE, SMALL, LaterFields, ServingPath
from thrifty.runtime.compiled.tables import parallel
from thrifty.runtime.evaluation import Evaluation

_X, _OUT, _LO, _HI, _N = (RAW_CONTEXT.index(name) for name in ("X", "out", "lo", "hi", "n"))
_FLOAT64 = np.dtype(np.float64)


class RawPath:
    """``raw`` of a compiled plan (``NativeCode.raw``) beside its serving path ``serving``,
    which computes the other fields when read."""

    def __init__(self, serving: ServingPath) -> None:
        code = serving.code
        assert code.code.raw is not None  # raw_path builds one only then
        self.entry = code.code.raw
        self.serving = serving
        self.K = serving.K
        self._tail = (serving.F,)
        self._template = np.zeros(len(RAW_CONTEXT), dtype=np.int64)
        self._template[RAW_CONTEXT.index("T")] = code.T.ctypes.data
        self._local = threading.local()
        # The other kind's scores for calls of ``second_rows`` rows (``objects.second_entry``).
        self.second = code.code.second
        self.second_rows = code.code.second_rows
        # Rows up to which the serving path serves (``take``): its lanes' one row on vector
        # blocks, unless the second entry serves it; none on branchy blocks (-1: even an empty
        # call is scores first).
        lane = serving.lane_rows if code.code.vector else -1
        self.lane_rows = min(lane, self.second_rows[0] - 1) if self.second is not None else lane
        # The entry of each call of 0 to ``SMALL`` rows, looked up without a method call.
        self._small = [self._entry(n) for n in range(SMALL + 1)]
        # The serving path's ``evaluate`` (the compiled plan's) tries this path first.
        serving.first, serving.first_rows = self._scores, self.lane_rows

    def _calls(self) -> list[tuple[np.ndarray, np.ndarray, int]]:
        """This thread's calls of 0 to ``SMALL`` rows (as ``ServingPath._calls``): per row
        count, the input buffer as an ``(n, F)`` matrix, the scores' buffer, and ``raw``'s
        argument. Building a call's context costs more than its 10 rows of NYC_taxi (each
        ``.ctypes`` about half a µs)."""
        F, K = self._tail[0], self.K
        M, out = np.zeros(SMALL * F), np.zeros(SMALL * K)
        rows = np.arange(SMALL + 1)
        contexts = np.repeat(self._template[None], SMALL + 1, axis=0)
        contexts[:, _X], contexts[:, _OUT] = M.ctypes.data, out.ctypes.data
        contexts[:, _HI] = contexts[:, _N] = rows
        at, step = contexts.ctypes.data, contexts.strides[0]
        calls = [(M[: n * F].reshape(n, F), out[: K * n], at + step * n) for n in rows.tolist()]
        self._local.keep = (M, out, contexts)
        return calls

    def take(self, X: Any, n_threads: int | None = None) -> Evaluation | None:
        """A ``DeferredEvaluation`` of the rows of ``X``, or None when ``X`` is not a float64
        ndarray of the plan's width with more than ``lane_rows`` and at most ``serving.LARGE``
        rows (the serving path, or the general one, takes it). ``lane_rows`` is -1 for branchy
        blocks (one row of NYC_taxi: 1.7 µs against the serving path's lanes' 2.0, lleaves 2.6)
        and the serving path's for vector blocks, whose ``raw`` fills a vector of rows: one
        row takes the serving path's lanes (the trees in the vector's lanes), unless the
        second entry (``second_rows``) takes it."""
        if type(X) is not np.ndarray or X.shape[1:] != self._tail:
            return None
        # An unpickled float64 array holds a dtype equal to, but not, numpy's own object.
        if X.dtype is not _FLOAT64 and X.dtype != _FLOAT64:
            return None
        n = X.shape[0]
        if n > LARGE or n <= self.lane_rows:
            return None
        return self._scores(X, n, n_threads)

    def _scores(self, X: np.ndarray, n: int, n_threads: int | None) -> DeferredEvaluation:
        if n <= SMALL:
            try:
                B, out, at = self._local.calls[n]
            except AttributeError:
                self._local.calls = self._calls()
                B, out, at = self._local.calls[n]
            B[...] = X
            self._small[n](at)
            # The result owns copies: the buffers serve the thread's next call.
            return DeferredEvaluation(out.copy(), B.copy(), self, n_threads)
        # The rows are kept for the fields read later: a copy, as the caller may change X.
        M = np.array(X, dtype=np.float64, order="C")
        out = np.empty(self.K * n)
        entry = self._entry(n)
        if n < SERIAL_ROWS:
            ctx = self._context(M, out, 0, n, n)
            entry(ctx.ctypes.data)
        else:

            def part(lo: int, hi: int) -> None:
                ctx = self._context(M, out, lo, hi, n)  # alive until raw returns
                entry(ctx.ctypes.data)

            with threads(n_threads):
                parallel(part, n)
        return DeferredEvaluation(out, M, self, n_threads)

    def _entry(self, n: int) -> Any:
        """The entry for a call of ``n`` rows: ``second`` for ``second_rows``, else ``raw``."""
        lo, hi = self.second_rows
        return self.second if lo <= n <= hi else self.entry

    def _context(self, M: np.ndarray, out: np.ndarray, lo: int, hi: int, n: int) -> np.ndarray:
        ctx = self._template.copy()
        ctx[_X], ctx[_OUT], ctx[_LO], ctx[_HI], ctx[_N] = M.ctypes.data, out.ctypes.data, lo, hi, n
        return ctx


class DeferredEvaluation(LaterFields):
    """An ``Evaluation`` whose raw scores were computed by ``raw`` and whose other fields come
    from one run of the serving path on the kept rows when first read (``LaterFields``). It
    is an ``Evaluation`` in every way a caller sees; it pickles as the plain ``Evaluation`` it
    stands for."""

    def __init__(self, out: np.ndarray, M: np.ndarray, path: RawPath, n_threads: int | None) -> None:
        super().__init__(M, path.serving, n_threads)
        n, K, finish = len(M), path.K, path.serving.finish
        raw = out if K == 1 else out.reshape(K, n).T.copy()
        # As ``ServingEvaluation.raw``: a forest whose base comes after the sum finishes it.
        self.raw = raw if finish is None else finish(raw.reshape(n, K)).reshape(raw.shape)


def raw_path(serving: ServingPath | None, arrived: Callable[[RawPath], None] | None = None) -> RawPath | None:
    """The scores-first path beside ``serving``, or None when the plan's code has no ``raw``
    entry (``objects.raw_entry``), not yet (compiled in the background: ``NativeCode.when_ready``)
    or there is no serving path. A ``raw`` that arrives later makes its ``RawPath`` then, which
    takes its place in the serving path (``first``) and is handed to ``arrived``."""
    if serving is None:
        return None
    code = serving.code.code
    if code.raw is None:

        def swap() -> None:
            path = RawPath(serving)
            if arrived is not None:
                arrived(path)

        code.when_ready(swap)
        return None
    return RawPath(serving)
