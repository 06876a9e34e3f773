"""This module contains the njitted routines that predict raw scores and leaf indices."""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any, cast

import numba
import numpy as np
from numba import njit, prange

from thrifty.forest._traverse import add_tree, child, walk_one, walk_pair

if TYPE_CHECKING:
    from numba.core.dispatcher import Dispatcher

    from thrifty.forest._forest import Forest

# Rows per block: all trees run over one block before the next, so a tree's nodes stay in cache.
_BLOCK = 1024
# Batches smaller than this run on the calling thread: launching the thread pool costs more.
SERIAL_ROWS = 1024


class Twin:
    """A parallel kernel and its serial twin (the same code with ``prange`` run as ``range``).

    Calling a parallel kernel launches numba's thread pool even for one row (about 10 µs, and
    far more when other processes hold the cores); small batches call the serial twin instead
    (``for_rows``). Both of a kernel that allocates nothing are compiled without numba's
    reference counting (``nrt=False``): with it, every inlined helper taking arrays pays atomic
    increments and decrements, which makes a tree walk many times slower.
    """

    def __init__(self, kernel: Dispatcher[Any], *, nrt: bool = False) -> None:
        # NUMBA_DISABLE_JIT=1 (make test-nojit) makes njit return the plain function, without py_func.
        f = cast(types.FunctionType, getattr(kernel, "py_func", kernel))

        def copy(suffix: str) -> types.FunctionType:
            g = types.FunctionType(
                f.__code__, f.__globals__, f.__name__ + suffix, f.__defaults__, f.__closure__
            )
            # A distinct qualified name gives the copy its own entry in numba's on-disk cache.
            g.__qualname__ = f.__qualname__ + suffix
            g.__doc__ = f.__doc__
            return g

        # _nrt is numba's private switch for reference counting, absent from its stubs. The
        # parallel kernel goes without it too: with it, the threads' increments and decrements
        # of the same arrays' counts contend for one cache line, and two threads ran Adult's
        # 500 trees 3.4 times slower than one.
        self.parallel = njit(parallel=True, cache=True, _nrt=nrt)(copy("_parallel"))  # type: ignore[call-overload]
        self.serial = njit(cache=True, _nrt=nrt)(copy("_serial"))  # type: ignore[call-overload]

    def for_rows(self, n: int) -> Dispatcher[Any]:
        """The kernel to run on ``n`` rows."""
        return self.serial if n < SERIAL_ROWS or numba.get_num_threads() == 1 else self.parallel


@njit(parallel=True, cache=True)
def sweep(
    X,
    nodes,
    value,
    roots,
    tree_weight,
    tree_class,
    acc32,
    record,
    touched,
    n_nodes,
    out,
):
    """Add every tree's leaf value to ``out``; with ``record``, also mark the features each
    row tests (``touched``) and count the splits it visits (``n_nodes``).

    This is both ``predict_raw`` and the runtime's dense evaluation of a ``Full`` plan, so
    accounting cost costs two stores per split and nothing else.
    """
    n = X.shape[0]
    width = value.shape[1]
    n_blocks = (n + _BLOCK - 1) // _BLOCK
    for b in prange(n_blocks):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        for t in range(roots.shape[0]):
            root = roots[t]
            w = tree_weight[t]
            k = tree_class[t]
            for i in range(lo, hi - 1, 2):
                a, c = walk_pair(
                    X,
                    i,
                    i + 1,
                    root,
                    nodes,
                    record,
                    touched,
                    n_nodes,
                )
                add_tree(out, i, a, k, w, value, width, acc32)
                add_tree(out, i + 1, c, k, w, value, width, acc32)
            if (hi - lo) % 2:
                node = walk_one(
                    X,
                    hi - 1,
                    root,
                    nodes,
                    record,
                    touched,
                    n_nodes,
                )
                add_tree(out, hi - 1, node, k, w, value, width, acc32)


SWEEP = Twin(sweep)


@njit(parallel=True, cache=True)
def _apply(
    X,
    nodes,
    roots,
    out,
):
    feature = nodes[0]
    for i in prange(X.shape[0]):
        for t in range(roots.shape[0]):
            node = roots[t]
            while feature[node] >= 0:
                node = child(nodes, node, X[i, feature[node]])
            out[i, t] = node


class threads:
    """Context manager running numba kernels on ``n`` threads (None: all)."""

    def __init__(self, n: int | None) -> None:
        self.n = n

    def __enter__(self) -> None:
        self.saved = None
        if self.n is not None:
            # Setting the count costs microseconds: only when it changes (one-row calls count).
            # numba.config sets its attributes at import time; its stubs do not list them.
            wanted = max(1, min(int(self.n), numba.config.NUMBA_NUM_THREADS))  # type: ignore[attr-defined]
            current = numba.get_num_threads()
            if wanted != current:
                self.saved = current
                numba.set_num_threads(wanted)

    def __exit__(self, *exc: object) -> None:
        if self.saved is not None:
            numba.set_num_threads(self.saved)


def predict_raw(forest: Forest, X: np.ndarray, *, n_threads: int | None = None) -> np.ndarray:
    out = np.tile(forest.start, (X.shape[0], 1))
    if X.shape[0] == 0:
        return out
    with threads(n_threads):
        SWEEP.for_rows(X.shape[0])(
            X,
            forest.nodes,
            forest.value,
            forest.roots,
            forest.tree_weight,
            forest.tree_class,
            forest.accumulate == "float32",
            False,
            np.zeros((1, 1), dtype=np.bool_),
            np.zeros(1, dtype=np.int64),
            out,
        )
    return forest.finish(out)


def apply(forest: Forest, X: np.ndarray) -> np.ndarray:
    out = np.empty((X.shape[0], forest.n_trees), dtype=np.int32)
    if X.shape[0]:
        _apply(X, forest.nodes, forest.roots, out)
    return out
