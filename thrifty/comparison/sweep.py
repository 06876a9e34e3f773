"""The sweep of :func:`thrifty.compare` as independent, picklable fit tasks.

A :class:`FitTask` is one method fitted on one set of rows: a fold of the cross-validation
(its models scored on the fold's held-out rows) or the final refit of the chosen settings. It
carries plain data only, and :func:`run_task` is a module-level function, so tasks run alike
in this process, in a ``concurrent.futures`` pool or on Dask workers (:func:`run_tasks`).
"""

from __future__ import annotations

import concurrent.futures
import heapq
import sys
import time
import weakref
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.model_selection import GroupKFold, GroupShuffleSplit, KFold, StratifiedKFold, train_test_split
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from thrifty import metrics
from thrifty.comparison.context import Context
from thrifty.comparison.methods import METHODS
from thrifty.comparison.settings import Settings
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.frontier import cost_columns
from thrifty.runtime.evaluate import evaluate
from thrifty.runtime.plans import as_plan

__all__ = [
    "FitTask",
    "TaskResult",
    "fitting_context",
    "fold_indices",
    "holdout_indices",
    "local_pool",
    "measure",
    "run_task",
    "run_tasks",
    "split_rows",
]

#: Fraction of a task's fitting rows held out to calibrate budgets, thresholds and exits.
CALIBRATION = 0.2


@dataclass
class FitTask:
    """One method fitted on one set of rows.

    Attributes
    ----------
    method : str
        Key of ``thrifty.comparison.METHODS``.
    fold : int
        Fold of the selection (0, 1, ...), or -1 for the final refit.
    settings : Settings
        The run's settings, the same for every task.
    X_fit, y_fit, qid_fit : the rows the method fits on (see :func:`fitting_context`).
    X_eval, y_eval, qid_eval : the rows its models are scored on (None: not scored).
    seconds : float, optional
        Its share of the time allowance: no candidate after the first starts once it is spent.
    deadline : float, optional
        Wall-clock time (``time.time()``) after which the task does not start, nor starts a
        further candidate.
    only : tuple of str, optional
        The candidate names wanted (the final refit): the method stops once it has them all.
    keep_models : bool
        Return the fitted models (the final refit, or a single validation split whose models
        are the final ones).
    max_candidates : int, optional
        Stop after this many candidates (the first pass of a time-limited sweep).
    shared : dict
        Models fitted by an earlier task on the same rows (see ``Context.shared``), reused
        instead of fitted again.
    complete : bool
        Fit every candidate even once it has the wanted ones (``only``): a later task builds
        on all of them.
    """

    method: str
    fold: int
    settings: Settings
    X_fit: Any
    y_fit: np.ndarray
    qid_fit: np.ndarray | None
    X_eval: Any = None
    y_eval: np.ndarray | None = None
    qid_eval: np.ndarray | None = None
    seconds: float | None = None
    deadline: float | None = None
    only: tuple[str, ...] | None = None
    keep_models: bool = False
    max_candidates: int | None = None
    shared: dict[str, Any] = field(default_factory=dict)
    complete: bool = False


@dataclass
class TaskResult:
    """What one :class:`FitTask` produced.

    Attributes
    ----------
    method : str
    fold : int
    rows : list of dict
        One per candidate: ``name``, ``params``, ``fit_seconds`` and, when the task had rows
        to score on, the columns of :func:`measure`.
    models : dict of str to model
        When the task kept them.
    skipped : list of (name, reason)
    started : bool
        False when the deadline had passed before the task started (or it was cancelled).
    stopped : bool
        Its share of the time allowance or the deadline cut its candidates short.
    seconds : float
    shared : dict
        The models it fitted that later tasks on the same rows build on (``Context.shared``).
    """

    method: str
    fold: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    models: dict[str, Any] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    started: bool = True
    stopped: bool = False
    seconds: float = 0.0
    shared: dict[str, Any] = field(default_factory=dict)


def run_task(t: FitTask) -> TaskResult:
    """Fit ``t.method``'s candidates on ``t``'s rows, in order, while its time lasts.

    The first candidate is always fitted once the task has started (so every method that
    starts offers a model); later ones only while the task's share and the deadline last.
    """
    start = time.perf_counter()
    result = TaskResult(t.method, t.fold)
    if t.deadline is not None and time.time() >= t.deadline:
        result.started = False
        return result
    ctx = fitting_context(t.settings, t.X_fit, t.y_fit, t.qid_fit, shared=t.shared)
    runner = METHODS[t.method].run(ctx)
    wanted = None if t.only is None else set(t.only)
    tried = 0
    while (wanted is None or wanted or t.complete) and (t.max_candidates is None or tried < t.max_candidates):
        over = (t.seconds is not None and time.perf_counter() - start >= t.seconds) or (
            t.deadline is not None and time.time() >= t.deadline
        )
        if tried and over:
            result.stopped = True
            break
        try:
            cand = next(runner)
        except StopIteration:
            break
        except ValueError as exc:  # e.g. every budget below the method's cheapest model
            result.skipped.append(("", " ".join(str(exc).split())))
            break
        tried += 1
        if cand.model is None:  # the method could not meet this candidate's target
            result.skipped.append((cand.name, str(cand.params.get("reason", ""))))
            continue
        if wanted is not None:
            if cand.name not in wanted:
                continue
            wanted.discard(cand.name)
        row = {"name": cand.name, "params": dict(cand.params), "fit_seconds": cand.fit_seconds}
        if t.X_eval is not None and t.y_eval is not None:
            row.update(
                measure(cand.model, t.X_eval, t.y_eval, t.qid_eval, t.settings.costs, t.settings.task)[0]
            )
        result.rows.append(row)
        if t.keep_models or wanted is not None:
            result.models[cand.name] = cand.model
    result.shared = {k: v for k, v in ctx.shared().items() if k not in t.shared}
    result.seconds = time.perf_counter() - start
    return result


def fitting_context(
    settings: Settings, X: Any, y: np.ndarray, qid: np.ndarray | None, *, shared: dict[str, Any] | None = None
) -> Context:
    """The context of a method fitted on the rows ``X, y, qid``: :data:`CALIBRATION` of them
    are held out (stratified, or by query) to calibrate budgets, thresholds and exits.
    ``shared``: models an earlier task fitted on the same rows (``Context.shared``)."""
    (X, y, qid), (X_cal, y_cal, qid_cal) = split_rows(
        X, y, qid, settings.task, CALIBRATION, settings.random_state
    )
    ctx = Context(settings, X, y, X_cal, y_cal, qid_train=qid, qid_val=qid_cal)
    ctx._cache.update(shared or {})
    return ctx


def measure(
    model: Any, X: Any, y: np.ndarray, qid: np.ndarray | None, costs: CostModel, task: str
) -> tuple[dict[str, Any], Any]:
    """Cost and quality of ``model`` on the rows ``X``, measured by thrifty's runtime.

    Returns
    -------
    (columns, evaluation)
        ``columns``: the cost columns of :func:`thrifty.frontier.cost_columns`, ``metric``
        and ``value`` (the task's metric, :func:`thrifty.metrics.score`), and for
        classification ``balanced_accuracy``, ``auc`` and ``single_class`` (every row got
        the same label).
    """
    plan = as_plan(model)
    ev = evaluate(plan, X, costs)
    name, value = metrics.score(task, y, ev, qid=qid)
    out: dict[str, Any] = {**cost_columns(ev.cost), "metric": name, "value": float(value)}
    if task in ("binary", "multiclass"):
        out["balanced_accuracy"] = metrics.balanced_accuracy(y, ev.labels)
        out["auc"] = metrics.macro_auc(y, ev.proba, plan.classes)
        out["single_class"] = bool(len(np.unique(np.asarray(ev.labels))) == 1)
    return out, ev


# ---------------------------------------------------------------------- running many
Progress = Callable[[TaskResult], None]


def run_tasks(
    tasks: Sequence[FitTask],
    *,
    executor: Any = None,
    deadline: float | None = None,
    workers: int = 1,
    on_done: Progress | None = None,
    after: Sequence[int | None] | None = None,
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
        shared: run here, each task gets an equal part of what remains when it starts (a task
        that finishes early leaves its time to the next); submitted, each gets an equal part
        of ``workers`` times the allowance. Tasks not started by the deadline are cancelled.
    workers : int, default=1
        How many tasks the executor runs at once (sizes the shares).
    on_done : callable, optional
        Called with each result as it arrives.
    after : sequence of int or None, optional
        Per task, the index of the task it builds on (``Method.after``, same rows): it starts
        once that one is done, with the models that one shared (``TaskResult.shared``).
    stop_at : float, optional
        Wall-clock time (``time.time()``) past which the run no longer waits for the tasks
        still running on the executor: a candidate started before the deadline may take far
        longer than the allowance (a first fit on many rows). Their results are dropped
        (``started`` and ``stopped``, no rows: ``Comparison.cut`` names them) and the workers
        of a :func:`local_pool` are ended, so that the work does not go on beside what comes
        next. Default: wait for every task; tasks run here are never interrupted.

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
                    t.seconds = max(0.0, deadline - time.time()) / (n - sum(r is not None for r in results))
                for c in finish(i, run_task(t)):
                    heapq.heappush(ready, c)
        return results  # type: ignore[return-value]
    if deadline is not None:
        if time.time() >= deadline:  # nothing would start (and a stopped pool takes nothing)
            return [TaskResult(t.method, t.fold, started=False) for t in tasks]
        share = max(0.0, deadline - time.time()) * max(1, workers) / max(1, n)
        for t in tasks:
            t.deadline, t.seconds = deadline, share
    running = _Completion(executor)
    futures = {running.submit(run_task, tasks[i]): i for i in ready}
    for future in running.until(stop_at):
        i = futures.pop(future)
        if deadline is not None and time.time() >= deadline:
            _cancel(executor, futures)  # not started by the deadline: never started at all
        for c in finish(i, _result(future, tasks[i])):
            futures[running.submit(run_task, tasks[c])] = c
    for future, i in futures.items():  # still running at stop_at: given up
        results[i] = TaskResult(tasks[i].method, tasks[i].fold, started=future.running(), stopped=True)
    if futures:
        _stop(executor, list(futures))
    return [
        r if r is not None else TaskResult(t.method, t.fold, started=False) for r, t in zip(results, tasks)
    ]


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
    a minute for the next run; each runs one thread (see :func:`thrifty.compare`'s n_jobs).
    """
    from joblib.externals.loky import get_reusable_executor

    one = {
        v: "1" for v in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    }
    pool = get_reusable_executor(max_workers=workers, timeout=60, env=one)
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


# ---------------------------------------------------------------------- rows
def take(X: Any, y: np.ndarray, qid: np.ndarray | None, idx: np.ndarray) -> tuple:
    """Rows ``idx`` of ``X`` (a DataFrame), ``y`` and ``qid``."""
    return X.iloc[idx], y[idx], None if qid is None else qid[idx]


def split_rows(
    X: Any, y: np.ndarray, qid: np.ndarray | None, task: str, fraction: float, seed: int
) -> tuple[tuple, tuple]:
    """Hold out ``fraction`` of the rows: whole queries for ranking, stratified otherwise."""
    keep, held = holdout_indices(y, qid, task, fraction, seed)
    return take(X, y, qid, keep), take(X, y, qid, held)


def holdout_indices(
    y: np.ndarray, qid: np.ndarray | None, task: str, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(kept rows, held-out rows) of :func:`split_rows`, sorted."""
    n = len(y)
    if n < 8:
        raise InputError(
            f"{n} rows are too few to hold out calibration and test rows; "
            "give more rows, or X_val/y_val and X_test/y_test"
        )
    if task == "ranking":
        if qid is None:
            raise InputError("a ranking task needs qid")
        keep, held = next(
            GroupShuffleSplit(1, test_size=fraction, random_state=seed).split(np.zeros((n, 1)), y, qid)
        )
    else:
        keep, held = train_test_split(
            np.arange(n),
            test_size=fraction,
            random_state=seed,
            stratify=y if _stratifiable(y, task, 2) else None,
        )
    return np.sort(keep), np.sort(held)


def fold_indices(
    y: np.ndarray, qid: np.ndarray | None, task: str, k: int, seed: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``k`` folds as (fit rows, held-out rows), sorted: by query for ranking, stratified
    for classification when every class has ``k`` rows."""
    rows = np.zeros((len(y), 1))
    if task == "ranking":
        splits = GroupKFold(k).split(rows, y, qid)
    elif _stratifiable(y, task, k):
        splits = StratifiedKFold(k, shuffle=True, random_state=seed).split(rows, y)
    else:
        splits = KFold(k, shuffle=True, random_state=seed).split(rows)
    return [(np.sort(a), np.sort(b)) for a, b in splits]


def _stratifiable(y: np.ndarray, task: str, k: int) -> bool:
    return task in ("binary", "multiclass") and np.unique(y, return_counts=True)[1].min() >= k


class Reporter:
    """Progress: a tqdm bar over the tasks in a terminal; otherwise one line on stderr as
    each method finishes all its tasks, and one as each fold is done for every method."""

    def __init__(self, tasks: Sequence[FitTask], names: dict[str, str], enabled: bool, stage: str) -> None:
        self.left = Counter(t.method for t in tasks)
        self.fold_left = Counter(t.fold for t in tasks)
        self.n_methods, self.n_folds = len(self.left), len(self.fold_left)
        self.rows: Counter[str] = Counter()
        self.seconds: defaultdict[str, float] = defaultdict(float)
        self.names, self.stage, self.done = names, stage, 0
        self.start = time.perf_counter()
        self.terminal = enabled and sys.stderr.isatty()
        self.lines = enabled and not self.terminal
        self.bar = tqdm(
            total=len(tasks),
            desc=f"thrifty compare ({stage})",
            unit="fit",
            disable=not self.terminal,
            leave=False,
        )

    def __call__(self, r: TaskResult) -> None:
        self.left[r.method] -= 1
        self.fold_left[r.fold] -= 1
        self.rows[r.method] += len(r.rows)
        self.seconds[r.method] += r.seconds
        self.bar.update()
        self.bar.set_postfix_str(self.names[r.method])
        if self.lines and not self.fold_left[r.fold] and self.n_folds > 1:
            self._say(f"fold {r.fold + 1} of {self.n_folds} done for every method")
        if self.left[r.method]:
            return
        self.done += 1
        if self.lines:
            n = self.rows[r.method]
            self._say(
                f"[{self.done}/{self.n_methods}] {self.names[r.method]}: "
                f"{n} model{'' if n == 1 else 's'} in {self.seconds[r.method]:.1f} s"
            )

    def _say(self, text: str) -> None:
        print(
            f"thrifty compare ({self.stage}, {time.perf_counter() - self.start:.0f} s): {text}",
            file=sys.stderr,
            flush=True,
        )

    def close(self) -> None:
        self.bar.close()
