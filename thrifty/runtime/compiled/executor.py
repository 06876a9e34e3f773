"""The native executor: the interpreter's executor of a forest plan, running compiled code on
the rows it can (dense rows not started yet) and the interpreter's kernels on the others."""

from __future__ import annotations

import sys

import numpy as np

from thrifty.forest import Forest
from thrifty.runtime.compiled.layout import n_words, word_field
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
        fields = s.fields
        ints = S[K * n :].view(np.int64).reshape(len(fields), n)
        nodes, pos, direction, frozen = (
            ints[fields.index(name), take] for name in ("nodes", "pos", "dir", "frozen")
        )
        self.acc[take] = raw[:, take].T
        self.pos[take] = pos
        self.decision[take] = direction
        self.frozen[take] = frozen != 0
        self.done[take] = True
        c.n_nodes[take] += nodes
        c.n_trees[take] += pos
        c.touched[take] |= tested_features(ints, fields, take, f.n_features)


def tested_features(
    ints: np.ndarray, fields: tuple[str, ...], take: slice | np.ndarray, F: int
) -> np.ndarray:
    """The rows ``take`` of the bit set ``bits`` of the state's int64 fields ``ints`` (one row
    per field of ``fields``) as a bool matrix of ``F`` features: bit ``f % 64`` of word
    ``f // 64`` is feature ``f``."""
    W = n_words(F)
    words = np.stack([ints[fields.index(word_field("bits", w)), take] for w in range(W)], axis=1)
    if sys.byteorder != "little":
        words = words.byteswap()
    # A row's words' little-endian bytes unpack in feature order.
    octets = words.view(np.uint8).reshape(len(words), 8 * W)
    tested = np.unpackbits(octets, axis=1, count=F, bitorder="little")
    return tested.view(np.bool_)
