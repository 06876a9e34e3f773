"""A Cascade plan compiled to native code (``ir_cascade``): the tables it reads, and the
executor that runs it on the rows of a dense evaluation (lazy evaluation, which resumes rows
blocked on a feature, runs the interpreter's executor)."""

from __future__ import annotations

import numpy as np

from thrifty.forest import Forest
from thrifty.runtime.compiled.ir_cascade import (
    CASCADE_FIELDS,
    CASCADE_TABLES,
    Stages,
    cascade_irs,
    record_words,
)
from thrifty.runtime.compiled.layout import ROW_GROUP, Layout
from thrifty.runtime.compiled.loader import LoadedCode, plan_key
from thrifty.runtime.compiled.objects import LAZY_RUN
from thrifty.runtime.compiled.tables import leaf_tables, parallel
from thrifty.runtime.interpret.executors import CascadeExecutor, Context, round32
from thrifty.runtime.plans import Cascade

# ``crun(X, S, T, touched, rows, m, n, scratch)`` (see ``ir_cascade``): ``run``'s arguments and one
# pointer more, the C signature of the lazy blocks' ``lazyrun``.
_CRUN = LAZY_RUN
# Trees per compiled module (as ``objects``' forest plans).
_TREES_PER_MODULE = 100
# The forest's arrays the code does not depend on: leaf values and weights are tables.
_NUMBERS = ("value", "tree_weight", "base_score")


class CascadeCode:
    """``plan``'s native code (compiled, or loaded from the cache) and the tables it reads.

    Attributes
    ----------
    stages : ir_cascade.Stages
        The cascade's structure: which trees each stage evaluates first and which it reuses.
    compile_seconds : float
        Time spent compiling in this process (0 when loaded from the cache).
    """

    def __init__(self, plan: Cascade, progress: bool = True) -> None:
        f = plan.forest
        self.plan = plan
        self.stages = st = Stages.of(plan.stage_ptr, plan.stage_trees, f.n_trees)
        tree, depth, path_ptr, path_feat = leaf_tables(f)
        lay = Layout(f, st.first, np.zeros(len(st.first), dtype=np.int8), depth, path_ptr, path_feat)
        # The cascade sums tree outputs in float64 whatever the forest's own sums.
        lay.acc32 = False
        structure = [getattr(f, name) for name in Forest.ARRAYS if name not in _NUMBERS]
        key = plan_key("cascade", [f.n_features, *structure, st.stage_ptr, st.stage_trees])
        what = f"a cascade of {len(st.first)} trees"
        self.code = LoadedCode(
            key, lambda: cascade_irs(lay, st, key, _TREES_PER_MODULE), progress=progress, what=what
        )
        self.compile_seconds = self.code.compile_seconds
        # Words of ``crun``'s scratch: a record per row of a group, then the group's list of rows.
        self.scratch_words = ROW_GROUP * (record_words(st, lay.words) + 1)
        self._run = _CRUN(self.code.address("crun"))
        named = {
            "leaf": _leaf_records(f, tree, depth, path_ptr, path_feat, lay.words),
            "bias": plan.stage_bias,
            "w": plan.stage_w,
            "thr": plan.stage_thresholds,
        }
        self.tables = tuple(np.ascontiguousarray(named[name], dtype=np.float64) for name in CASCADE_TABLES)
        self.T = np.array([t.ctypes.data for t in self.tables], dtype=np.int64)
        # Trees a row has evaluated, and its position in its stage, when it ends at stage k.
        self.trees_run = st.new_ptr[1:].astype(np.int64)
        self.stage_len = np.diff(st.stage_ptr).astype(np.int64)

    def state(self, X: np.ndarray, rows: np.ndarray, touched: np.ndarray) -> np.ndarray:
        """The state (``ir_cascade.CASCADE_FIELDS``, one field after the other over ``len(X)``
        rows) of ``rows`` of ``X`` (float64, C-contiguous, inputs rounded to the forest's
        precision); the features each row tested are marked in its row of ``touched`` (C-contiguous
        bool, one row per row of ``X``). Fields of other rows are left undefined."""
        n, m = X.shape[0], len(rows)
        S = np.empty(len(CASCADE_FIELDS) * n)
        work = np.ascontiguousarray(rows, dtype=np.int64)
        x, s, t, w, tc = (
            X.ctypes.data,
            S.ctypes.data,
            self.T.ctypes.data,
            work.ctypes.data,
            touched.ctypes.data,
        )

        def part(lo: int, hi: int) -> None:
            scratch = np.empty(self.scratch_words, dtype=np.int64)  # one per thread
            self._run(x, s, t, tc, w + 8 * lo, hi - lo, n, scratch.ctypes.data)

        parallel(part, m)
        return S

    def executor(self, ctx: Context) -> CascadeExecutor | None:
        """The native executor in dense evaluation, None (the interpreter's) in lazy."""
        return NativeCascadeExecutor(self, ctx) if ctx.all_known else None


class NativeCascadeExecutor(CascadeExecutor):
    """The interpreter's ``CascadeExecutor`` with every row's stages run in native code."""

    def __init__(self, code: CascadeCode, ctx: Context) -> None:
        super().__init__(code.plan, ctx)
        self.code = code

    def advance(self, rows: np.ndarray) -> None:
        c, f, code = self.ctx, self.forest, self.code
        rows = rows[~self.done[rows]]
        if not len(rows):
            return
        X = c.X if f.input_dtype == "float64" else round32(c.X)
        S = code.state(np.ascontiguousarray(X, dtype=np.float64), rows, c.touched)
        # Every row (dense evaluation) as a slice: a one-row call spends its time in indexing.
        take = slice(None) if len(rows) == c.n else rows
        ints = S.view(np.int64).reshape(len(CASCADE_FIELDS), c.n)
        stage = ints[1, take]
        self.score[take] = S[: c.n][take]
        self.stage[take] = stage
        self.jpos[take] = code.stage_len[stage]
        self.decision[take] = ints[3, take]
        self.done[take] = True
        c.n_nodes[take] += ints[2, take]
        c.n_trees[take] += code.trees_run[stage]


def _leaf_records(
    f: Forest, tree: np.ndarray, depth: np.ndarray, path_ptr: np.ndarray, path_feat: np.ndarray, words: int
) -> np.ndarray:
    """Per node, the record the tree code reads (``ir_scalar._tree_ir``): the tree's output at
    that leaf as the interpreter computes it (``contribution_weight * value``, unrounded), the splits
    on its path, and the features the path tests as ``words`` words of bits."""
    leaf = np.zeros((f.n_nodes, 2 + words))
    leaf[:, 0] = f.contribution_weight[tree] * f.value[:, 0]
    bits = leaf.view(np.int64)
    bits[:, 1] = depth
    node = np.repeat(np.arange(f.n_nodes), np.diff(path_ptr))
    for w in range(words):
        inside = path_feat // 64 == w
        np.bitwise_or.at(bits[:, 2 + w], node[inside], np.left_shift(np.int64(1), path_feat[inside] % 64))
    return leaf
