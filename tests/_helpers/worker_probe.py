"""Functions the tests run in compare's worker processes (importable there by name)."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Any

import numpy as np

#: A kernel slow enough to compile (a parallel loop and branches) that two workers starting
#: it together overlap; written to a file so that its disk cache starts empty.
KERNEL = """
from numba import njit, prange

@njit(parallel=True, cache=True)
def kernel(x):
    out = 0.0
    for i in prange(x.shape[0]):
        v = x[i]
        if v > 1.0:
            out += v * v - 1.0
        elif v < -1.0:
            out += -v * 0.5
        else:
            out += abs(v) ** 1.5
    return out
"""


def worker_state() -> dict[str, Any]:
    """What a worker runs with: its thread settings and whether it compiles under locks."""
    import numba

    from thrifty.comparison.compile_once import installed

    names = ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    return {
        "env": {k: os.environ.get(k) for k in names},
        "numba_threads": numba.get_num_threads(),
        "locks": installed(),
    }


def compile_at(path: str, name: str, start: float) -> tuple[int, int]:
    """Import the kernel module at ``path`` as ``name`` (a package compiled under locks), wait
    until ``start`` (``time.time()``), call the kernel; its cache hits and misses."""
    from thrifty.comparison import compile_once

    prefix = name.split(".")[0] + "."
    if prefix not in compile_once.PACKAGES:
        compile_once.PACKAGES = (*compile_once.PACKAGES, prefix)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    time.sleep(max(0.0, start - time.time()))
    module.kernel(np.linspace(-2.0, 2.0, 11))
    stats = module.kernel.stats
    return sum(stats.cache_hits.values()), sum(stats.cache_misses.values())
