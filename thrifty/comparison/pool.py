"""Running ``compare``'s fit tasks: one after the other here, on a local process pool (with this
process running tasks beside its workers), or on a Dask cluster; within a time allowance, and
giving up fits still running past it."""

from __future__ import annotations

import concurrent.futures
import heapq
import time
import weakref
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from threadpoolctl import threadpool_limits

from thrifty.comparison.compile_once import install, locked
from thrifty.comparison.sweep import FitTask, TaskResult, run_task
from thrifty.exceptions import InputError
from thrifty.forest.kernels import threads

__all__ = ["local_pool", "run_tasks", "workers_of"]

Progress = Callable[[TaskResult], None]


def run_tasks(
    tasks: Sequence[FitTask],
    *,
    executor: Any = None,
    deadline: float | None = None,
    workers: int = 1,
    on_done: Progress | None = None,
    after: Sequence[int | None] | None = None,
    here: bool = False,
    stop_at: float | None = None,
) -> list[TaskResult]:
    """Run ``tasks``; results in the order of ``tasks`` whatever order they finish in.

    Parameters
    ----------
    tasks : sequence of FitTask
        In order of priority (the cheapest methods first).
    executor : object with ``submit(fn, *args)``, optional
        A ``concurrent.futures.Executor`` or a ``distributed.Client``; None runs the tasks
        here, one after the other.
    deadline : float, optional
        Wall-clock time (``time.time()``) the whole run should end by. The allowance left is
        shared: run here, each task gets its part of what remains when it starts (a task
        that finishes early leaves its time to the next); submitted, ``workers`` at a time in
        order of priority, each gets its part of ``workers`` times what remains over the
        tasks not finished when it is submitted (so again a task that finishes early leaves
        its time to those after it). A task's part is its ``FitTask.weight`` over the weights
        of the tasks not finished (equal parts when every weight is 1). A task ``in_full``
        (the baselines) gets no part: only the deadline stops it. Tasks not started by the
        deadline are cancelled.
    workers : int, default=1
        How many tasks the executor runs at once (sizes the shares).
    on_done : callable, optional
        Called with each result as it arrives.
    after : sequence of int or None, optional
        Per task, the index of the task it builds on (``Method.after``, same rows): it starts
        once that one is done, with the models that one shared (``TaskResult.shared``).
    here : bool, default=False
        With a ``concurrent.futures`` executor (``local_pool``): this process runs tasks too,
        while the executor's workers run others (``workers`` then counts this process). Not
        with ``stop_at``: a fit running here could not be given up.
    stop_at : float, optional
        Wall-clock time (``time.time()``) past which the run no longer waits for the tasks
        still running on the executor: a candidate started before the deadline may take far
        longer than the allowance (a first fit on many rows). Their results are dropped
        (``started`` and ``stopped``, no rows: ``Comparison.cut`` names them) and the workers
        of a :func:`local_pool` are ended, so that the work does not go on beside what comes
        next. Default: wait for every task.

    Returns
    -------
    list of TaskResult
    """
    n = len(tasks)
    parents = [None] * n if after is None else list(after)
    children: defaultdict[int, list[int]] = defaultdict(list)
    for i, p in enumerate(parents):
        if p is not None:
            children[p].append(i)
    results: list[TaskResult | None] = [None] * n

    def finish(i: int, result: TaskResult) -> list[int]:
        """Record ``result``; hand its models to the tasks built on it, which may now start."""
        results[i] = result
        for c in children[i]:
            tasks[c].shared = {**tasks[i].shared, **result.shared, **tasks[c].shared}
        if on_done is not None:
            on_done(result)
        return children[i]

    ready = [i for i, p in enumerate(parents) if p is None]
    if executor is None:
        heapq.heapify(ready)  # in the order of priority, each as soon as what it builds on is done
        # One BLAS thread, as in a worker of local_pool: the same sums, so the same result (and
        # Cronus's many small Cholesky solves run several times faster than on two threads).
        with threadpool_limits(1):
            while ready:
                i = heapq.heappop(ready)
                t = tasks[i]
                if deadline is not None:
                    t.deadline = deadline
                    t.seconds = None if t.in_full else _share(tasks, results, i, deadline, 1)
                for c in finish(i, run_task(t)):
                    heapq.heappush(ready, c)
        return results  # type: ignore[return-value]
    if here and stop_at is not None:
        raise InputError(
            "run_tasks: here=True runs fits in this process, where none can be given up at "
            "stop_at; pass here=False (every fit in a worker) to stop at a time"
        )
    if deadline is not None:
        if time.time() >= deadline:  # nothing would start (and a stopped pool takes nothing)
            return [TaskResult(t.method, t.fold, started=False) for t in tasks]
        for i, t in enumerate(tasks):
            t.deadline, t.seconds = (
                deadline,
                None if t.in_full else _share(tasks, results, i, deadline, workers),
            )
    if here:
        _beside(tasks, ready, executor, finish, deadline)
        futures: dict[Any, int] = {}  # every task waited for
    else:
        running = _Completion(executor)
        waiting = list(ready)
        heapq.heapify(waiting)
        futures = {}

        def fill() -> None:
            """Submit the waiting tasks in order of priority: all of them without an allowance;
            under one, only as many as run at once, each with an equal part of ``workers``
            times the time left over the tasks not finished, so that a task ending early
            leaves its time to the tasks after it (a share fixed at the start would not)."""
            while waiting and (deadline is None or len(futures) < max(1, workers)):
                if deadline is not None and time.time() >= deadline:
                    return  # not started by the deadline: never started at all
                i = heapq.heappop(waiting)
                t = tasks[i]
                if deadline is not None and not t.in_full:
                    t.seconds = _share(tasks, results, i, deadline, workers)
                futures[running.submit(run_task, t)] = i

        fill()
        for future in running.until(stop_at):
            i = futures.pop(future)
            if deadline is not None and time.time() >= deadline:
                _cancel(executor, futures)  # not started by the deadline: never started at all
            for c in finish(i, _result(future, tasks[i])):
                heapq.heappush(waiting, c)
            fill()
    for future, i in futures.items():  # still running at stop_at: given up
        results[i] = TaskResult(tasks[i].method, tasks[i].fold, started=future.running(), stopped=True)
    if futures:
        _stop(executor, list(futures))
    return [
        r if r is not None else TaskResult(t.method, t.fold, started=False) for r, t in zip(results, tasks)
    ]


def _beside(
    tasks: Sequence[FitTask],
    ready: list[int],
    executor: Any,
    finish: Callable[[int, TaskResult], list[int]],
    deadline: float | None,
) -> None:
    """Run ``tasks`` on ``executor``'s workers and in this process, which would otherwise only
    wait: one worker process fewer to start and import thrifty into (1.4 CPU-seconds each, as
    much as a fold of several methods on a few hundred rows).

    Every task is submitted as soon as it may start, so that the workers never wait on this
    process; this process takes the last one submitted whenever no worker has picked it up yet
    (a cancelled future is one no worker will run): the workers run the tasks from the front
    of the queue, this process from its back. Where a task runs does not change its result
    (one thread per fit, here as in a worker). Every task is waited for."""
    pending: dict[Any, int] = {}

    def submit(ids: list[int]) -> None:
        for i in sorted(ids):  # in order of priority
            pending[executor.submit(run_task, tasks[i])] = i

    submit(ready)
    # One BLAS and one numba thread, as in a worker of local_pool: the worker processes use
    # the other cores. A kernel a worker is compiling is loaded from the cache it writes.
    with threadpool_limits(1), threads(1), locked():
        while pending:
            if deadline is not None and time.time() >= deadline:
                for f in pending:  # not started by the deadline: never started at all
                    f.cancel()
            last = next(reversed(pending))
            if not last.cancelled() and last.cancel():
                i = pending.pop(last)
                submit(finish(i, run_task(tasks[i])))
                timeout: float | None = 0.0
            else:  # every task left is running or queued to a worker: wait for one
                timeout = None
            done, _ = concurrent.futures.wait(
                list(pending), timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in done:
                i = pending.pop(future)
                submit(finish(i, _result(future, tasks[i])))


class _Completion:
    """Futures submitted to an executor, yielded as they complete; more may be submitted while
    they are iterated (Dask's ``as_completed``, or ``concurrent.futures.wait``)."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.pending: set[Any] = set()
        self.dask: Any = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        future = self.executor.submit(fn, *args)
        if type(future).__module__.startswith("distributed"):
            if self.dask is None:
                from distributed import as_completed  # thrifty[dask], present with its futures

                self.dask = as_completed()
            self.dask.add(future)
        else:
            self.pending.add(future)
        return future

    def until(self, end: float | None) -> Iterator[Any]:
        """The futures as they complete; with ``end`` (``time.time()``), none after it
        (Dask's futures are waited for: a cluster's tasks are not ended from here)."""
        if self.dask is not None:
            yield from self.dask
        while self.pending:
            timeout = None if end is None else max(0.0, end - time.time())
            done, self.pending = concurrent.futures.wait(
                self.pending, timeout=timeout, return_when=concurrent.futures.FIRST_COMPLETED
            )
            if not done:
                return
            yield from done


def _cancel(executor: Any, futures: Iterator[Any] | Sequence[Any] | dict[Any, int]) -> None:
    """Cancel ``futures`` not started yet, but on a :func:`local_pool`, which ends its workers
    at ``stop_at`` instead (:func:`_stop`): its tasks need no cancelling, as one started after
    the deadline returns at once (see :func:`run_task`)."""
    if executor not in _POOLS:
        for f in futures:
            f.cancel()


def _stop(executor: Any, futures: list[Any]) -> None:
    """Give up ``futures``: end the worker processes of a :func:`local_pool`, or cancel them
    on a pool the caller gave (which is left running).

    The workers are terminated, rather than the pool shut down with loky's ``kill_workers``: that
    path races with loky's own queue (its manager thread dies on a ``KeyError`` or on a
    cancelled future, seen on flights), while a dead worker is loky's "broken pool", which it
    clears cleanly. The pool is then shut down, so :func:`local_pool` makes a new one.
    """
    if executor not in _POOLS:
        _cancel(executor, futures)
        return
    for process in list(getattr(executor, "_processes", {}).values()):
        process.terminate()
    executor.shutdown(wait=False)


def _result(future: Any, t: FitTask) -> TaskResult:
    if future.cancelled():
        return TaskResult(t.method, t.fold, started=False)
    return future.result()


def local_pool(workers: int) -> Any:
    """A pool of ``workers`` processes on this machine for the fit tasks.

    joblib's loky pool: its workers are started afresh (not forked beside LightGBM's OpenMP
    threads), need no ``if __name__ == "__main__"`` guard in the caller's script, and are kept
    a minute for the next run; each runs one thread (see :func:`thrifty.compare`'s n_jobs), and
    compiles a numba kernel no other worker is compiling (:mod:`thrifty.comparison.compile_once`).
    """
    from joblib.externals.loky import get_reusable_executor

    one = {
        v: "1" for v in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    }
    # Each kernel compiled once across the workers (an empty cache: a first run, a new version).
    pool = get_reusable_executor(max_workers=workers, timeout=60, env=one, initializer=install)
    _POOLS.add(pool)
    for _ in range(workers):
        pool.submit(_loaded)  # the workers import thrifty now, while the caller fits its own model
    return pool


#: The pools :func:`local_pool` made (and so may end, see :func:`_stop`); a pool it ended is
#: replaced by a new one at its next call.
_POOLS: weakref.WeakSet[Any] = weakref.WeakSet()


def _loaded() -> None:
    """Nothing: a worker that unpickles it has imported this module, so the methods too."""


def workers_of(executor: Any) -> int:
    """How many tasks ``executor`` runs at once (1 when it does not say)."""
    if executor is None:
        return 1
    if hasattr(executor, "nthreads"):  # a distributed.Client
        try:
            return max(1, sum(executor.nthreads().values()))
        except Exception:  # noqa: BLE001 - a client that cannot answer runs at least one
            return 1
    return max(1, int(getattr(executor, "_max_workers", 1) or 1))


def _share(
    tasks: Sequence[FitTask], results: Sequence[TaskResult | None], i: int, deadline: float, workers: int
) -> float:
    """Task ``i``'s seconds: its weight's part of ``workers`` times the time left, over the
    weights of the tasks not finished (``i`` among them)."""
    weights = sum(t.weight for t, r in zip(tasks, results) if r is None)
    left = max(0.0, deadline - time.time()) * max(1, workers)
    return left * tasks[i].weight / max(weights, tasks[i].weight)
