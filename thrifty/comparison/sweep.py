"""The sweep of :func:`thrifty.compare` as independent, picklable fit tasks.

A :class:`FitTask` is one method fitted on one set of rows: a fold of the cross-validation
(its models scored on the fold's held-out rows) or the final refit of the chosen settings. It
carries plain data only, and :func:`run_task` is a module-level function, so tasks run alike
in this process, in a ``concurrent.futures`` pool or on Dask workers
(:func:`thrifty.comparison.pool.run_tasks`).
"""

from __future__ import annotations

import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from thrifty.comparison.context import Context
from thrifty.comparison.methods import METHODS
from thrifty.comparison.scores import quality_columns
from thrifty.comparison.settings import Settings
from thrifty.comparison.splits import fold_indices, holdout_indices, split_rows, take
from thrifty.costs import CostModel
from thrifty.forest import to_matrix
from thrifty.frontier import cost_columns
from thrifty.runtime.evaluate import evaluate
from thrifty.runtime.plans import as_plan

__all__ = [
    "FitTask",
    "TaskResult",
    "fitting_context",
    "fold_indices",
    "holdout_indices",
    "measure",
    "run_task",
    "split_rows",
    "take",
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
    in_full : bool
        Take no share of a time allowance (``seconds`` stays None): fit every candidate while
        the deadline lasts. The baselines' tasks (the reference family), which every other
        method's figures are measured against and which cost little.
    weight : float
        The task's part of a time allowance relative to the others' (``run_tasks``): 1, or
        ``schedule.WEIGHTS``'s for the methods whose settings span every budget.
    keep_fitted : bool
        Return every candidate fitted, with its model, and its row (``TaskResult.fitted``):
        the first pass of a time-limited sweep, whose second pass runs the task again.
    replay : list of (Candidate, dict or None)
        Candidates this method fitted before on the same rows, with their rows (None: the
        method could not fit it), from an earlier ``TaskResult.fitted``: handed back to the
        method (``Context.replay``) instead of fitted again, and a candidate handed back with
        its model keeps its row instead of being scored again.
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
    in_full: bool = False
    weight: float = 1.0
    keep_fitted: bool = False
    replay: list[tuple[Any, dict[str, Any] | None]] = field(default_factory=list)


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
    fitted : list of (Candidate, dict or None)
        With ``FitTask.keep_fitted``: every candidate the method yielded, in order, and its row
        (None for one it could not fit), for ``FitTask.replay``.
    finished : bool
        The method had no further candidate (its iterator ended, or it could not fit at all:
        ADAPT-LIN on categorical columns): running the task again would add nothing.
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
    fitted: list[tuple[Any, dict[str, Any] | None]] = field(default_factory=list)
    finished: bool = False


def run_task(t: FitTask) -> TaskResult:
    """Fit ``t.method``'s candidates on ``t``'s rows, in order, while its time lasts.

    The first candidate is always fitted once the task has started (so every method that
    starts offers a model); later ones only while the task's share lasts and, judged by the
    time the last one took, they would end before the deadline.
    """
    start = time.perf_counter()
    result = TaskResult(t.method, t.fold)
    if t.deadline is not None and time.time() >= t.deadline:
        result.started = False
        return result
    ctx = fitting_context(t.settings, t.X_fit, t.y_fit, t.qid_fit, shared=t.shared)
    ctx.replay = {cand.name: cand for cand, _ in t.replay}
    rows_before = {cand.name: row for cand, row in t.replay if row is not None}
    runner = METHODS[t.method].run(ctx)
    wanted = None if t.only is None else set(t.only)
    matrices: dict[Any, np.ndarray] = {}  # the scored rows as each reading of them needs
    tried, begun = 0, start  # candidates tried, and when the last one began
    took: float | None = None  # a candidate handed back: the seconds its fit took before
    while (wanted is None or wanted or t.complete) and (t.max_candidates is None or tried < t.max_candidates):
        now = time.perf_counter()
        last, begun = (now - begun if tried else 0.0), now  # the seconds the last one took
        # A candidate handed back took no time now: judge the next by the fit it took before.
        last = last if took is None else max(last, took)
        # A candidate that would end past the deadline, if it takes as long as the last one,
        # is not started: a fit still running past the allowance is given up with the whole
        # task, and the candidates fitted before it would go with it.
        over = (t.seconds is not None and now - start >= t.seconds) or (
            t.deadline is not None and time.time() + last >= t.deadline
        )
        if tried and over:
            result.stopped = True
            break
        try:
            cand = next(runner)
        except StopIteration:
            result.finished = True
            break
        except ValueError as exc:  # e.g. every budget below the method's cheapest model
            result.skipped.append(("", " ".join(str(exc).split())))
            result.finished = True
            break
        tried += 1
        # The candidate fitted before with this very model (``fitted``): its row as scored then.
        before = ctx.replay.get(cand.name)
        again = before is not None and before.model is cand.model and cand.name in rows_before
        took = float(cand.fit_seconds) if before is cand else None
        if cand.model is None:  # the method could not meet this candidate's target
            result.skipped.append((cand.name, str(cand.params.get("reason", ""))))
            if t.keep_fitted:
                result.fitted.append((cand, None))
            continue
        if wanted is not None:
            if cand.name not in wanted:
                continue
            wanted.discard(cand.name)
        row = {"name": cand.name, "params": dict(cand.params), "fit_seconds": cand.fit_seconds}
        if again:  # its scores as measured then, its parameters as the method gives them now
            row = {**rows_before[cand.name], "params": dict(cand.params)}
        elif t.X_eval is not None and t.y_eval is not None:
            row.update(
                measure(
                    cand.model,
                    t.X_eval,
                    t.y_eval,
                    t.qid_eval,
                    t.settings.costs,
                    t.settings.task,
                    matrices=matrices,
                )[0]
            )
        result.rows.append(row)
        if t.keep_fitted:
            result.fitted.append((cand, row))
        if t.keep_models or wanted is not None:
            result.models[cand.name] = cand.model
    result.shared = {k: v for k, v in ctx.shared().items() if k not in t.shared}
    result.seconds = time.perf_counter() - start
    return result


def fitting_context(
    settings: Settings, X: Any, y: np.ndarray, qid: np.ndarray | None, *, shared: dict[str, Any] | None = None
) -> Context:
    """The context of a method fitted on the rows ``X, y, qid``: :data:`CALIBRATION` of them
    are held out (stratified, or by query; the latest under a time split, ``Settings.split``)
    to calibrate budgets, thresholds and exits.
    ``shared``: models an earlier task fitted on the same rows (``Context.shared``)."""
    (X, y, qid), (X_cal, y_cal, qid_cal) = split_rows(
        X, y, qid, settings.task, CALIBRATION, settings.random_state, settings.split
    )
    ctx = Context(settings, X, y, X_cal, y_cal, qid_train=qid, qid_val=qid_cal)
    ctx._cache.update(shared or {})
    return ctx


def measure(
    model: Any,
    X: Any,
    y: np.ndarray,
    qid: np.ndarray | None,
    costs: CostModel,
    task: str,
    *,
    matrices: dict[Any, np.ndarray] | None = None,
) -> tuple[dict[str, Any], Any]:
    """Cost and quality of ``model`` on the rows ``X``, measured by thrifty's runtime.

    ``matrices``: a dict kept across the calls on the same rows ``X`` (a DataFrame), where the
    matrix the runtime reads is kept per reading of the columns (names and categories): a
    method's candidates all read the frame alike, and turning it into a matrix costs more
    than evaluating a small one.

    Returns
    -------
    (columns, evaluation)
        ``columns``: the cost columns of :func:`thrifty.frontier.cost_columns` and the quality
        columns of :func:`thrifty.comparison.scores.quality_columns` (``metric``, ``value``,
        the task's other metrics, ``single_class`` or ``constant``).
    """
    if getattr(model, "needs_qid", False):  # a rule over each query's documents (EarlyExitRanker)
        ev, classes = model.evaluate(X, costs, qid=qid), None
    else:
        plan = as_plan(model)
        if matrices is not None and hasattr(X, "iloc"):
            cats = plan.categories or {}
            key = (
                plan.n_features,
                tuple(plan.feature_names or ()),
                tuple((j, *cats[j]) for j in sorted(cats)),
            )
            if key not in matrices:
                matrices[key] = to_matrix(X, plan.n_features, plan.feature_names, plan.categories)
            X = matrices[key]
        ev, classes = evaluate(plan, X, costs), plan.classes
    return {**cost_columns(ev.cost), **quality_columns(task, y, ev, qid, classes)}, ev


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
