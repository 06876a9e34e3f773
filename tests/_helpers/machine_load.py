"""How loaded the machine is now, for tests that give ``compare`` a wall-clock allowance."""

from __future__ import annotations

import time


def slowdown(cpu_seconds: float = 0.3) -> float:
    """How many times longer CPU-bound work takes now in wall time than in this thread's CPU
    time, measured on a busy loop of ``cpu_seconds``: about 1 on a core of its own, 3 when two
    other busy processes share it (at least 1).

    A test of a wall-clock allowance scales it by this factor so that the allowance plans the
    same work on a loaded machine as on a quiet one; on a quiet machine it is unchanged."""
    wall, cpu = time.perf_counter(), time.thread_time()
    spins = 0
    while time.thread_time() - cpu < cpu_seconds:
        spins += 1
    return max(1.0, (time.perf_counter() - wall) / (time.thread_time() - cpu))
