"""The order in which :func:`thrifty.compare` runs its selection's fit tasks within a time
allowance: the baselines in full first, then every other method's first candidate on every
fold, then their refinements (each method's settings coarse to fine, ``registry.spread``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from thrifty.comparison.methods import METHODS
from thrifty.comparison.pool import run_tasks, workers_of
from thrifty.comparison.sweep import FitTask, Reporter, TaskResult

__all__ = ["REFIT_GRACE", "WEIGHTS", "run_stage", "stop_at", "sweep"]

#: The parts of the allowance of the methods whose settings span every budget, against 1 for
#: every other task: QWYC's bounds (its plans from the plain model's cost down to a fraction of
#: it) and CEGB's budgets (one model per budget along one trade-off path). On flights' 218,000
#: fitting rows and two cores, an equal part of a 300 s allowance left them 3 of QWYC's 9 bounds
#: and 2 of CEGB's 6 budgets, so no model of either near the middle budgets.
WEIGHTS = {"qwyc": 2.0, "cegb": 2.0}

#: Without its refit a chosen model cannot be confirmed: the refit may run this fraction of the
#: allowance past it (the selection kept a share for it, but its last candidates can overrun).
REFIT_GRACE = 0.05


def stop_at(deadline: float | None, time_limit: float | None) -> float | None:
    """When to stop waiting for fits still running past ``deadline`` (see ``run_tasks``)."""
    return None if deadline is None or time_limit is None else deadline + REFIT_GRACE * time_limit


def run_stage(
    tasks: list[FitTask],
    after: list[int | None],
    executor: tuple[Any, bool],
    deadline: float | None,
    progress: bool,
    stage: str,
    stop: float | None = None,
) -> list[TaskResult]:
    """``run_tasks`` with progress; ``executor``: (executor, whether this process runs tasks too)."""
    pool, here = executor
    names = {m.key: m.name for m in METHODS.values()}
    reporter = Reporter(tasks, names, progress, stage)
    try:
        return run_tasks(
            tasks,
            executor=pool,
            deadline=deadline,
            workers=workers_of(pool) + here,
            on_done=reporter,
            after=after,
            here=here,
            stop_at=stop,
        )
    finally:
        reporter.close()


def sweep(
    tasks: list[FitTask],
    after: list[int | None],
    pool: Any,
    deadline: float | None,
    stop: float | None,
    progress: bool,
    here: bool = False,
) -> list[TaskResult]:
    """The selection tasks, in order of priority; a fit still running at ``stop`` is given up
    (see ``run_tasks``).

    Under a time allowance (``deadline``), two passes, each task's part of the allowance
    weighted by :data:`WEIGHTS`. The first runs the baselines' tasks
    (``FitTask.in_full``) in full and every other task's first candidate, so that the
    baselines every figure is measured against are complete, and every method scored on every
    fold, before any method is refined. The second runs the other tasks again in full from
    the models the first fitted (the plain model of each fold is fitted once), and replaces a
    first-pass result wherever it got as far; a baseline the first pass completed is not run
    again. Without an allowance, one pass: every task in full.
    """
    executor = (pool, here)
    if deadline is None:
        return run_stage(tasks, after, executor, deadline, progress, "selection")
    tasks = [replace(t, weight=WEIGHTS.get(t.method, t.weight)) for t in tasks]
    first_tasks = [replace(t, max_candidates=None if t.in_full else 1) for t in tasks]
    # The baselines of every fold before any other task (the tasks come fold by fold).
    order = sorted(range(len(tasks)), key=lambda i: not tasks[i].in_full)
    ran = _in_order(
        order, first_tasks, after, executor, deadline, progress, "selection, first candidates", stop
    )
    first = [ran[j] for j in sorted(range(len(order)), key=order.__getitem__)]  # in the tasks' order
    done = {i for i, (t, r) in enumerate(zip(tasks, first)) if t.in_full and r.started and not r.stopped}
    again = [i for i in range(len(tasks)) if i not in done]
    # Each task again with what the first pass fitted on its rows (``run_tasks`` handed it its
    # parent's models): the same models as fitting them anew, in less time.
    second = [replace(t, shared={**first_tasks[i].shared, **first[i].shared}) for i, t in enumerate(tasks)]
    # A parent the first pass completed is not run again: its models are in ``shared`` already.
    full = _in_order(again, second, after, executor, deadline, progress, "selection, refinements", stop)
    out = list(first)
    for i, b in zip(again, full):
        a = first[i]
        further = b.started and len(b.rows) + len(b.skipped) >= len(a.rows) + len(a.skipped)
        # A first-pass result kept is one whose refinements the allowance cut.
        out[i] = b if further else replace(a, stopped=True)
    return out


def _in_order(
    order: list[int],
    tasks: list[FitTask],
    after: list[int | None],
    executor: tuple[Any, bool],
    deadline: float | None,
    progress: bool,
    stage: str,
    stop: float | None,
) -> list[TaskResult]:
    """The tasks ``order`` names (indices into ``tasks``), run in that order of priority, with
    what each builds on remapped (a parent not among them is not waited for); their results,
    in that order."""
    position = {i: j for j, i in enumerate(order)}
    parents = [None if (p := after[i]) is None else position.get(p) for i in order]
    return run_stage([tasks[i] for i in order], parents, executor, deadline, progress, stage, stop)
