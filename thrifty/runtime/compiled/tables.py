"""The tables a forest plan's native code reads, built from the forest and its schedule; the
code and tables together (``ForestCode``), and how they run over rows."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numba
import numpy as np

from thrifty.forest import Forest
from thrifty.forest.kernels import SERIAL_ROWS
from thrifty.runtime.compiled.lanes import chunk_of, lane_tables, leaf_rows
from thrifty.runtime.compiled.layout import TABLES, Layout, n_words, state_fields
from thrifty.runtime.compiled.lranks import rank_tables
from thrifty.runtime.compiled.objects import NativeCode
from thrifty.runtime.exits import Schedule


@dataclass(frozen=True)
class ForestCode:
    """A forest plan's native code with the tables it reads (kept alive here: ``T`` holds
    their addresses)."""

    code: NativeCode
    forest: Forest
    tables: tuple[np.ndarray, ...]
    T: np.ndarray
    masked: bool
    layout: Layout | None = None
    # The lazy blocks' code, compiled (or loaded from the cache) on first use.
    _lazy: list[NativeCode] = field(default_factory=list, repr=False, compare=False)

    def lazy_code(self, progress: bool = True) -> NativeCode:
        """The native code of the lazy blocks (``ir_lazy``), compiled or loaded on first use:
        lazy evaluation resumes rows where they stopped for a feature."""
        if not self._lazy:
            with _LAZY_LOCK:
                if not self._lazy:
                    assert self.layout is not None  # forest_code always records it
                    self._lazy.append(NativeCode(self.layout, progress=progress, lazy=True))
        return self._lazy[0]

    def state(self, n: int) -> np.ndarray:
        """Fresh per-row state of ``n`` rows (``layout.state_fields`` after the raw scores):
        the trees' sums at their start (``Forest.start``), counters at zero."""
        K = self.forest.n_outputs
        S = np.zeros(self.width * n)
        S[: K * n].reshape(K, n)[:] = self.forest.start[:, None]
        return S

    def run(self, X: np.ndarray, rows: np.ndarray, S: np.ndarray, touched: np.ndarray) -> None:
        """Evaluate ``rows`` of ``X`` (C-contiguous float64, inputs already rounded to the
        forest's precision) into the state ``S`` (``state``), the tested features as its
        ``bits`` words whatever the width (``touched`` is not written). Batches of
        ``SERIAL_ROWS`` rows or more are split over numba's thread count
        (``thrifty.forest.kernels.threads``)."""
        m, n = len(rows), len(S) // self.width
        field = self.forest.n_outputs + self.fields.index("work")
        work = S[field * n :].view(np.int64)  # the work list, consumed
        work[:m] = rows
        x, s, t = X.ctypes.data, S.ctypes.data, self.T.ctypes.data
        at = s + 8 * field * n
        parallel(lambda lo, hi: self.code.run(x, s, t, touched.ctypes.data, at + 8 * lo, hi - lo, n), m)

    @property
    def words(self) -> int:
        """Words of each bit set of features (``layout.n_words``)."""
        return n_words(self.forest.n_features)

    @property
    def fields(self) -> tuple[str, ...]:
        """The state's fields after the raw scores (``layout.state_fields``)."""
        return state_fields(self.words)

    @property
    def width(self) -> int:
        """Words of state per row."""
        return self.forest.n_outputs + len(self.fields)


def parallel(task: Callable[[int, int], None], m: int) -> None:
    """``task(lo, hi)`` over ``[0, m)``: in one call below ``SERIAL_ROWS`` rows, else in parts
    on numba's thread count (the native code releases the GIL, so threads run in parallel)."""
    parts = 1 if m < SERIAL_ROWS else min(numba.get_num_threads(), -(-m // SERIAL_ROWS))
    if parts == 1:
        task(0, m)
        return
    bounds = np.linspace(0, m, parts + 1).astype(np.int64).tolist()
    list(_pool().map(task, bounds[:-1], bounds[1:]))


_POOL: list[ThreadPoolExecutor] = []
_LAZY_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    if not _POOL:
        _POOL.append(ThreadPoolExecutor(max_workers=numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
    return _POOL[0]


def leaf_tables(forest: Forest) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per node: the tree it belongs to, its depth (splits on the path from the root) and the
    distinct features tested on that path (CSR: ``feat[ptr[node]:ptr[node + 1]]``). At a leaf
    these are exactly the splits a row reaching it visited and the features it tested."""
    f = forest
    tree = np.zeros(f.n_nodes, dtype=np.int64)
    depth = np.zeros(f.n_nodes, dtype=np.int64)
    paths: list[tuple[int, ...]] = [()] * f.n_nodes
    for t, root in enumerate(f.roots.tolist()):
        stack = [root]
        while stack:
            node = stack.pop()
            tree[node] = t
            feat = int(f.feature[node])
            if feat < 0:
                continue
            below = paths[node] if feat in paths[node] else paths[node] + (feat,)
            for c in (int(f.children_left[node]), int(f.children_right[node])):
                depth[c] = depth[node] + 1
                paths[c] = below
                stack.append(c)
    ptr = np.zeros(f.n_nodes + 1, dtype=np.int64)
    ptr[1:] = np.cumsum([len(p) for p in paths])
    tested = np.fromiter((x for p in paths for x in p), dtype=np.int64, count=int(ptr[-1]))
    return tree, depth, ptr, tested


def forest_code(forest: Forest, schedule: Schedule, progress: bool) -> ForestCode:
    """Compile (or load from the cache) the native code of ``forest`` visited as ``schedule``
    and build the tables it reads."""
    tree, depth, path_ptr, path_feat = leaf_tables(forest)
    bins = schedule.bins
    exits = np.where(bins.width > 0, 2, schedule.thresholds).astype(np.int8)
    lay = Layout(forest, schedule.order, exits, depth, path_ptr, path_feat, schedule.finish)
    code = NativeCode(lay, progress=progress)
    # Per node, a record of K + 1 + W words: the weighted leaf value of each output the
    # interpreter adds (the same product, so sums agree bit for bit; rounded to float32 where
    # XGBoost sums in float32), the splits on its path and the features the path tests as a
    # bit set of W words (feature f is bit f % 64 of word f // 64).
    K, W = forest.n_outputs, lay.words
    leaf = np.zeros((forest.n_nodes, K + 1 + W))
    weight = forest.tree_weight[tree][:, None]
    vector = forest.tree_class[tree] < 0
    leaf[:, :1] = weight * forest.value[:, :1]
    if vector.any():
        leaf[vector, :K] = weight[vector] * forest.value[vector, :K]
    if lay.acc32:
        leaf[:, :K] = leaf[:, :K].astype(np.float32)
    words = leaf.view(np.int64)
    words[:, K] = depth
    # Each node's tested features as bits: per word, an OR over its CSR segment of the features
    # in that word (a trailing 0 keeps every segment start a valid index; empty segments are 0).
    nonempty = path_ptr[1:] > path_ptr[:-1]
    for w in range(W):
        inside = path_feat // 64 == w
        ones = np.where(inside, np.left_shift(np.int64(1), path_feat % 64), np.int64(0))
        bits = np.bitwise_or.reduceat(np.append(ones, np.int64(0)), path_ptr[:-1])
        words[:, K + 1 + w] = np.where(nonempty, bits, 0)
    named = {
        "leaf": leaf,
        "eps_pos": schedule.eps_pos,
        "eps_neg": schedule.eps_neg,
        "bin_width": bins.width,
        "bin_ptr": bins.ptr,
        "bin_key": bins.key,
        "bin_pos": bins.pos,
        "bin_neg": bins.neg,
        # Where the serving path starts the trees' sums (``Forest.start``).
        "base": forest.start,
        # The leaf records again, each tree's leaves left to right (``ir_vector``).
        "vleaf": _vector_records(leaf, lay, K),
        # Their weighted values alone (``ir_oblivious``): an oblivious tree of 32 leaves reads
        # 4 cache lines rather than the records' 12, and a block's trees stay in L1.
        "oleaf": leaf[lay.leaves, :K],
        # The nodes again, for one row with trees in vector lanes (``ir_lanes``).
        **lane_tables(forest, lay.order, chunk_of(exits), tree, depth),
    }
    # The leaf records again, in the lanes' numbering: a lane at its leaf finds its record from
    # its node number without a gather of the node's record (``ir_lanes._leaf_lanes``).
    named["lleaf"] = leaf_rows(leaf, named["lorig"])
    # The same nodes as compact rank records (``ir_lranks``).
    named.update(rank_tables(forest, named))
    tables = tuple(np.ascontiguousarray(named[name]) for name in TABLES)
    T = np.array([t.ctypes.data for t in tables], dtype=np.int64)
    return ForestCode(code, forest, tables, T, lay.masked, lay)


def _vector_records(leaf: np.ndarray, lay: Layout, K: int) -> np.ndarray:
    """The leaf records of the vector blocks, each tree's leaves left to right; with
    ``lay.packed``, the splits on the path also in the top byte of the tested-feature word
    (features below bit 56), which ``ir_vector._counts`` then gathers alone; with
    ``lay.folded``, the values and then the tested-feature words folded as ``lay.folds`` says
    (each rotated left into its fold), the splits on the path in fold 0's top byte."""
    out = leaf[lay.leaves]
    if lay.packed:
        words = out.view(np.int64)
        words[:, K + 1] |= np.left_shift(words[:, K], 56)
    if not lay.folded:
        return out
    words = out.view(np.uint64)
    folded = np.zeros((len(out), lay.vrecord), dtype=np.uint64)
    folded[:, :K] = words[:, :K]
    folded[:, K] = words[:, K] << np.uint64(56)
    for t in range(lay.forest.n_trees):
        at = slice(int(lay.leaf_ptr[t]), int(lay.leaf_ptr[t + 1]))
        for word, i, r, _ in lay.folds(t):
            bits = words[at, K + 1 + word]
            if r:
                bits = (bits << np.uint64(r)) | (bits >> np.uint64(64 - r))
            folded[at, K + i] |= bits
    return folded.view(np.float64)
