"""The order in which :func:`thrifty.compare` runs its selection's fit tasks within a time
allowance: the baselines in full first, then every other method's first candidate on every
fold, then their refinements (each method's settings coarse to fine: by position, ``registry.spread``,
or covering their costs first, ``registry.CostOrder``), all within the allowance less the
confirmation's part (:data:`CONFIRM_SHARE`)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from thrifty.comparison.methods import METHODS
from thrifty.comparison.pool import run_tasks, workers_of
from thrifty.comparison.sweep import FitTask, Reporter, TaskResult

__all__ = [
    "CONFIRM_MAX",
    "CONFIRM_SHARE",
    "REFIT_GRACE",
    "WEIGHTS",
    "confirm_reserve",
    "refit_deadlines",
    "run_stage",
    "selection_deadlines",
    "sweep",
]

#: The parts of the allowance of the methods whose settings span every budget, against 1 for
#: every other task: QWYC's bounds (its plans from the plain model's cost down to a fraction of
#: it) and CEGB's budgets (one model per budget along one trade-off path). On flights' 218,000
#: fitting rows and two cores, an equal part of a 300 s allowance left them 3 of QWYC's 9 bounds
#: and 2 of CEGB's 6 budgets, so no model of either near the middle budgets.
WEIGHTS = {"qwyc": 2.0, "cegb": 2.0}

#: The last part of a stage's time in which no fit starts and the fits started before it may
#: end: a fit still running when it is over is given up (see ``run_tasks``' ``stop_at``).
REFIT_GRACE = 0.05
#: The part of a time allowance kept at least for scoring the chosen models once on the test
#: rows (``Comparison`` is returned at the allowance's end). Measured in the last quiet run of
#: benchmarks/tasks.py, which confirms every method's own front too: 3.2% of flights'
#: allowance (9.6 s), 4.1% of diamonds', 5.2% of letter's (12.5 s for 51 models of up to
#: 5,200 trees on 4,000 rows), 0.3% of rank_small's.
CONFIRM_SHARE = 0.05
#: The most of it kept (:func:`confirm_reserve`), so that the selection keeps most of the time.
CONFIRM_MAX = 0.25


def confirm_reserve(time_limit: float | None, seconds_per_model: float, n_models: int) -> float:
    """Seconds kept for the confirmation: :data:`CONFIRM_SHARE` of the allowance, or, when
    more, ``n_models`` times ``seconds_per_model`` (the plain model's scoring on the test rows,
    estimated from its scoring on the calibration rows at the start of the run, so on this
    machine at its present load), at most :data:`CONFIRM_MAX` of the allowance.

    On a machine loaded six times over, letter's final fit took 35.6 s (5.8 s quiet) and its
    confirmation 105 s (12.5 s quiet): a fixed share of the allowance cannot cover both."""
    if time_limit is None:
        return 0.0
    wanted = max(CONFIRM_SHARE * time_limit, seconds_per_model * n_models)
    return min(CONFIRM_MAX * time_limit, wanted)


def selection_deadlines(
    wall_end: float | None, time_limit: float | None, kept: float = 0.0, confirm: float = 0.0
) -> tuple[float | None, float | None]:
    """(no fit starts after, a fit still running is given up at) for the selection, both
    within the allowance ending at ``wall_end``: before the ``kept`` seconds (a refit's share)
    and the ``confirm`` seconds (:func:`confirm_reserve`), with :data:`REFIT_GRACE` of the
    allowance between the two.

    Before, fits were given up 5% of the allowance *past* its end and the confirmation came
    after: letter's run took 264.7 s of 240 (its selection ended 12 s past the allowance
    waiting for a fit, then 12.5 s of confirmation)."""
    if wall_end is None or time_limit is None:
        return None, None
    stop = wall_end - kept - confirm
    return stop - REFIT_GRACE * time_limit, stop


def refit_deadlines(
    wall_end: float | None, time_limit: float | None, share: float, confirm: float = 0.0
) -> tuple[float | None, float | None]:
    """:func:`selection_deadlines` for a cross-validation's refit of the chosen settings: it
    ends with the allowance, less the ``confirm`` seconds, but gets at least its ``share``
    from now even when that runs past (a chosen model without its refit cannot be
    confirmed)."""
    if wall_end is None or time_limit is None:
        return None, None
    stop = max(wall_end - confirm, time.time() + share)
    return stop - REFIT_GRACE * time_limit, stop


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
    the models the first fitted (the plain model of each fold is fitted once, and each
    task's first candidate is handed back with its model and row, ``FitTask.replay``, not
    fitted again), and replaces a first-pass result wherever it got as far; a baseline the
    first pass completed, or a task with no further candidate (``TaskResult.finished``), is
    not run again. Without an allowance, one pass: every task in
    full.
    """
    executor = (pool, here)
    if deadline is None:
        return run_stage(tasks, after, executor, deadline, progress, "selection")
    tasks = [replace(t, weight=WEIGHTS.get(t.method, t.weight)) for t in tasks]
    # The first pass keeps what it fitted (``keep_fitted``) where the second runs the task again.
    first_tasks = [
        replace(t, max_candidates=None if t.in_full else 1, keep_fitted=not t.in_full) for t in tasks
    ]
    # The baselines of every fold before any other task (the tasks come fold by fold).
    order = sorted(range(len(tasks)), key=lambda i: not tasks[i].in_full)
    ran = _in_order(
        order, first_tasks, after, executor, deadline, progress, "selection, first candidates", stop
    )
    first = [ran[j] for j in sorted(range(len(order)), key=order.__getitem__)]  # in the tasks' order
    # A task the first pass completed is not run again: a baseline, or a method that had no
    # further candidate (ADAPT-LIN refusing flights' categorical columns was run again, and
    # where the allowance did not reach it, reported as cut by it instead of by its reason).
    done = {
        i
        for i, (t, r) in enumerate(zip(tasks, first))
        if (t.in_full or r.finished) and r.started and not r.stopped
    }
    again = [i for i in range(len(tasks)) if i not in done]
    # Each task again with what the first pass fitted on its rows (``run_tasks`` handed it its
    # parent's models): the same models as fitting them anew, in less time.
    # Its own first candidates are handed back with their models and rows (``replay``): the
    # second pass goes on from them rather than fitting them again.
    second = [
        replace(t, shared={**first_tasks[i].shared, **first[i].shared}, replay=first[i].fitted)
        for i, t in enumerate(tasks)
    ]
    # A parent the first pass completed is not run again: its models are in ``shared`` already.
    full = _in_order(again, second, after, executor, deadline, progress, "selection, refinements", stop)
    out = [replace(r, fitted=[]) for r in first]  # the models handed back are not kept
    for i, b in zip(again, full):
        a = first[i]
        further = b.started and len(b.rows) + len(b.skipped) >= len(a.rows) + len(a.skipped)
        # A first-pass result kept is one whose refinements the allowance cut. A second-pass
        # result counts the first pass's seconds too: the fits it handed back took them.
        out[i] = replace(b, seconds=a.seconds + b.seconds) if further else replace(a, stopped=True, fitted=[])
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
