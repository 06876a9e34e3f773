"""The native executor: the interpreter's executor of a forest plan, running compiled code on
the rows it can (dense rows not started yet) and the interpreter's kernels on the others."""

from __future__ import annotations

import numpy as np

from thrifty.forest import Forest
from thrifty.runtime.compiled.layout import STATE_FIELDS
from thrifty.runtime.compiled.tables import ForestCode
from thrifty.runtime.exits import Schedule
from thrifty.runtime.interpret.executors import Context, SequentialExecutor, round32


class NativeExecutor(SequentialExecutor):
    """The interpreter's ``SequentialExecutor`` running the forest's native code on rows not
    started yet in dense evaluation (all rows, or those a gate routed here); lazy evaluation,
    which resumes rows blocked on a feature, stays on the interpreter."""

    def __init__(self, forest: Forest, schedule: Schedule, ctx: Context, code: ForestCode) -> None:
        super().__init__(forest, schedule, ctx)
        self.code = code
        # No row has started yet (pos and done are all zero): the first advance need not check.
        self.fresh = True

    def advance(self, rows: np.ndarray) -> None:
        f, c, s = self.forest, self.ctx, self.code
        fresh, self.fresh = self.fresh, False
        if not (c.all_known and (fresh or not (np.any(self.pos[rows]) or np.any(self.done[rows])))):
            super().advance(rows)
            return
        X = c.X if f.input_dtype == "float64" else round32(c.X)
        n, K = c.n, f.n_outputs
        S = s.state(n)
        s.run(X, rows, S, c.touched)
        every = len(rows) == n  # all rows (dense evaluation), not a gate's share of them
        take = slice(None) if every else rows
        raw = S[: K * n].reshape(K, n)
        ints = S[K * n :].view(np.int64).reshape(len(STATE_FIELDS), n)
        nodes, bits, pos, direction, frozen = (
            ints[STATE_FIELDS.index(name), take] for name in ("nodes", "bits", "pos", "dir", "frozen")
        )
        self.raw[take] = raw[:, take].T
        self.pos[take] = pos
        self.decision[take] = direction
        self.frozen[take] = frozen != 0
        self.done[take] = True
        c.n_nodes[take] += nodes
        c.n_trees[take] += pos
        if s.masked:
            # Bit f of a row's word is set when its paths tested feature f.
            tested = np.unpackbits(bits.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
            c.touched[take] |= tested[:, : f.n_features].view(np.bool_)
