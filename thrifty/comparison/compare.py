"""``thrifty.compare``: every method that applies, over budgets, on one frontier, chosen on
validation rows and confirmed once on test rows."""

from __future__ import annotations

import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thrifty.comparison.inputs import (
    as_frame,
    check_classes,
    check_data,
    infer_task,
    labels_of,
    out_of_range,
    stack_frames,
)
from thrifty.comparison.methods import METHODS, REFERENCE, _rounds, reference_name
from thrifty.comparison.plan import after_of, cut_of, skipped_of, task_seconds_of
from thrifty.comparison.pool import local_pool
from thrifty.comparison.result import Comparison
from thrifty.comparison.schedule import (
    confirm_reserve,
    refit_deadlines,
    run_stage,
    selection_deadlines,
    sweep,
)
from thrifty.comparison.selection import (
    baseline_row,
    confirm,
    eligible_front,
    majority_share,
    prior_weights,
    reweigh,
    select,
    validation_units,
    weighting_note,
)
from thrifty.comparison.settings import Settings, check_budgets, check_n_jobs, check_time_limit
from thrifty.comparison.splits import (
    RANDOM,
    check_split,
    fold_indices,
    holdout_indices,
    split_rank,
    split_rows,
)
from thrifty.comparison.sweep import FitTask, fitting_context, take
from thrifty.comparison.user_model import named_reference, user_model
from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.runtime.evaluate import evaluate

# Comparison (comparison/result.py) is re-exported: thrifty's namespace finds it here.
__all__ = ["Comparison", "compare"]

#: Budgets (fractions of the plain LightGBM model's mean cost on the calibration rows) the
#: budgeted methods aim at.
BUDGET_FRACTIONS = (0.05, 0.1, 0.2, 0.3, 0.5, 0.75)
QUICK_BUDGET_FRACTIONS = (0.1, 0.3, 0.6)
#: Methods whose candidates are one independent fit per budget, named ``budget=<b:.4g>``: their
#: refit fits the chosen budgets only (the same models as the selection's settings give).
PER_BUDGET = ("cegb", "greedymiser")
#: Below this many rows (besides the test rows) the choice is made by K-fold cross-validation,
#: so every row informs it; above, on one validation split.
CV_BELOW = 5000
CV_FOLDS = 5
TEST_FRACTION = 0.25
VALIDATION_FRACTION = 0.2

DEFAULT_LIGHTGBM = {
    "n_estimators": 200,
    "learning_rate": 0.05,
    "num_leaves": 16,
    "random_state": 0,
    "deterministic": True,
    "force_row_wise": True,
    "verbose": -1,
}


def compare(
    X: Any,
    y: Any,
    costs: Any = None,
    *,
    task: str | None = None,
    methods: str | Sequence[str] = "all",
    budgets: Sequence[float] | None = None,
    X_val: Any = None,
    y_val: Any = None,
    X_test: Any = None,
    y_test: Any = None,
    qid: Any = None,
    qid_val: Any = None,
    qid_test: Any = None,
    lightgbm_params: Mapping[str, Any] | None = None,
    n_jobs: int | None = None,
    time_limit: float | None = None,
    quick: bool = False,
    random_state: int = 0,
    progress: bool = True,
    cv: int | None = None,
    executor: Any = None,
    model: Any = None,
    trust_pickle: bool = False,
    confirm_methods: bool = False,
    split: str | None = None,
) -> Comparison:
    """Run every method that applies over a sweep of budgets; choose on validation rows and
    confirm once on test rows.

    Training-time methods (CEGB, GreedyMiser, BudgetRF, ADAPT) get the budgets; post-hoc
    methods (QWYC, Fan, margin early exit, Cronus, BudgetPrune) start from a plain LightGBM
    model or a plain random forest; compositions chain them. A candidate is a method and a
    setting (a budget, an alpha...). Each candidate is fitted without the test rows (budgets,
    thresholds and exits on calibration rows held out of its fitting rows) and scored on
    validation rows: under K-fold cross-validation (the default below 5,000 rows, so every row
    informs the choice) its figures are the means over the folds of the setting refitted per
    fold; otherwise one validation split. The Pareto front and the recommendations are chosen
    on these figures; the chosen settings are then refitted on every row but the test rows
    (cross-validation; the validation split's models are used as they are) and scored once
    on the test rows, with a 95% interval. Every cost is the mean per example measured by
    thrifty's runtime, on validation and on test rows alike.

    Parameters
    ----------
    X, y : rows and labels (array or DataFrame; categorical columns as pandas ``category``)
    costs : CostModel, mapping of feature name to cost, sequence, path, or None
        Feature prices (None: 1 per feature). A path is read with ``CostModel.from_file``.
    task : {"binary", "multiclass", "ranking", "regression"}, optional
        Inferred from ``y`` (and ``qid``) when omitted.
    methods : "all" or sequence of str
        Keys of ``thrifty.comparison.METHODS`` (``thrifty compare --list``) or their names;
        methods that do not support the task are left out of "all" and rejected when named.
    budgets : sequence of float, optional
        Positive mean costs per example for the budgeted methods. Default: 5%, 10%, 20%,
        30%, 50% and 75% of the plain LightGBM model's mean cost on the calibration rows.
    X_val, y_val : validation rows, optional
        Added to ``X`` under cross-validation; otherwise the validation split (default: 20%
        of the rows, by query for ranking, stratified otherwise).
    X_test, y_test : test rows, optional
        Default: 25% of the rows given, held out before anything is fitted.
    qid, qid_val, qid_test : query ids (ranking), rows of a query consecutive
    lightgbm_params : mapping, optional
        Parameters of the plain LightGBM model (default: 200 trees of 16 leaves, rate 0.05).
    n_jobs : int, optional
        Processes on this machine for the fit tasks (one per method and fold; default, or -1:
        every core; 1: run here, one after the other): this one and ``n_jobs - 1`` workers
        (``n_jobs`` workers under a ``time_limit``, so that any fit can be ended).
        Each fit uses one thread, so the result is the same whatever the number. Ignored when
        ``executor`` is given.
    time_limit : float, optional
        Default None: no allowance, every planned fit runs in full and the result does not
        depend on the machine's speed or load. Given, positive seconds for the whole run, an
        explicit cut: the two baselines run in full first, then the allowance is shared among
        the other fit tasks (cheapest methods first, each method's first candidate before its
        refinements, its settings in the order that covers their costs first); the end of
        the allowance (5% of it, more when the plain model's scoring, timed at the start,
        says the test rows need it) is kept for confirming the chosen models, and no task
        starts, nor a further candidate, in the 5% before that; a fit still running then is
        given up (the default pool's worker processes are ended; fits run here with
        ``n_jobs=1``, or on a Dask cluster, are waited for); ``Comparison.cut`` names what it
        left out.
    quick : bool, default=False
        Fewer budgets and fewer points per method.
    random_state : int, default=0
    progress : bool, default=True
        A progress bar over the methods in a terminal, else one line per finished method on
        stderr.
    cv : int, optional
        Folds of the cross-validation (0: one validation split). Default: 5 below 5,000 rows
        (besides the test rows), else 0.
    executor : object with ``submit(fn, *args)``, optional
        A ``concurrent.futures.Executor`` or a ``distributed.Client`` to run the fit tasks on;
        the result is the same as run here (without a time limit). Default: a pool of
        ``n_jobs`` processes (see ``n_jobs``).
    model : fitted model, str or Path, optional
        Your own model (anything ``Forest.from_model`` takes, or a model file
        ``thrifty.load_model`` reads) as the plain model, in place of the LightGBM model compare
        would fit: the reference series (its first k trees), the baseline of the report, the
        default budgets' 100%, and the starting model of the post-hoc methods (QWYC, Fan,
        margin exit, Cronus, ADAPT's f0; BudgetPrune when it is an averaging forest). It is
        never refitted: each fold's post-hoc methods are fitted on that fold's calibration rows.
        Training-time methods still fit their own models. Its features must be columns of
        ``X`` (by name, else by count) and its task the data's. The test rows may overlap the
        rows it was trained on, which compare cannot know: give rows it did not see.
    trust_pickle : bool, default=False
        Allow ``model`` to be a pickled file (unpickling runs code; see ``load_model``).
    confirm_methods : bool, default=False
        Confirm on the test rows each method's own front on the validation rows too, not only
        the front of every method together (and the plain model): every method's choice at
        every budget then has a test figure, e.g. to compare a method with the baselines
        where the front holds neither. The front and the recommendations are the same either
        way; under cross-validation the refit has more settings to fit.
    split : {"random", "ordered"} or "time=COLUMN[,COLUMN...]", optional
        How rows are held out for testing (when ``X_test`` is not given), validation and each
        method's calibration. Default "random": stratified (by query for ranking). "ordered":
        the rows are in time order; "time=month,day": ordered by these columns of ``X``.
        Under a time split the held-out rows are the latest ones, later than every row a
        model is fitted on, as a deployed model's rows will be: a plan whose exits trust what
        does not carry to later rows (a tree that memorised the dates it saw) is then judged
        on rows where it does not carry. Rows in time order with test rows later than the
        training rows call for it. It implies one validation split (``cv`` must be 0 or None).

    Returns
    -------
    Comparison
    """
    start = time.perf_counter()
    budgets = None if budgets is None else check_budgets(budgets)
    time_limit = check_time_limit(time_limit)
    if cv is not None and (cv == 1 or cv < 0):
        raise InputError(f"cv must be 0 (one validation split) or at least 2 folds, got {cv}")
    wall_end = None if time_limit is None else time.time() + time_limit
    X, y, qid = as_frame(X), labels_of(y, "y"), None if qid is None else np.asarray(qid)
    user = None if model is None else user_model(model, X, y, qid, task, trust_pickle=trust_pickle)
    task = infer_task(y, qid, task if user is None else user.task)
    check_data(X, y, qid, task)
    check_classes(y, task)
    split = check_split(split, X)
    if split != RANDOM and cv:
        raise InputError(
            f"split={split!r} holds out the latest rows once: it takes one validation split, "
            f"not {cv}-fold cross-validation; pass cv=0 (or leave cv out)"
        )
    if X_test is None:
        (X, y, qid), (X_test, y_test, qid_test) = split_rows(
            X, y, qid, task, TEST_FRACTION, random_state, split
        )
    X_test, y_test = as_frame(X_test), labels_of(y_test, "y_test")
    qid_test = None if qid_test is None else np.asarray(qid_test)
    names = [str(c) for c in X.columns]
    costs = _costs(costs, names)
    chosen = _methods(methods, task)
    n_given = len(y)
    if X_val is not None:
        X, y = stack_frames(X, as_frame(X_val)), np.concatenate([y, labels_of(y_val, "y_val")])
        qid = None if qid is None else np.concatenate([qid, np.asarray(qid_val)])
    shifted = _shifted(X, X_test, split)  # every row but the test rows: what models learn from
    k = (CV_FOLDS if len(y) < CV_BELOW and split == RANDOM else 0) if cv is None else cv
    if k:
        folds = fold_indices(y, qid, task, k, random_state)
        final = np.arange(len(y))
        selection = f"{k}-fold cross-validation of {len(y):,} rows"
    else:
        given = n_given if X_val is not None else None
        folds = [_holdout(y, qid, task, given, random_state, split_rank(X, split))]
        final = folds[0][0]
        latest = " (the latest)" if split != RANDOM and given is None else ""
        selection = f"a validation split of {len(folds[0][1]):,} rows{latest}"
    workers = check_n_jobs(n_jobs)
    own_pool = executor is None and workers > 1 and len(chosen) * len(folds) > 1
    # Without an allowance this process runs tasks too (run_tasks's ``here``): one worker fewer
    # to start. Under one, every fit runs in a worker, where a fit still running past the
    # allowance can be ended (a fit in this process could not: on flights a cascade taken up
    # here ran 330 s of a 300 s allowance).
    here = own_pool and time_limit is None
    if own_pool:
        # Started before the final fit below, so that the workers load thrifty meanwhile.
        executor = local_pool(workers - here)
    # One thread per fit: LightGBM's sums (so its trees) may change with its thread count, and
    # the result must not change with the number of workers. The tasks run side by side instead.
    settings = Settings(
        task=task,
        costs=costs,
        budgets=tuple(budgets or ()),
        lightgbm_params=_lightgbm_params(len(final), task, 1, lightgbm_params),
        n_jobs=1,
        random_state=random_state,
        quick=quick,
        plain_model=None if user is None else user.forest,
        split=split,
    )
    # The final fit (every row but the test rows, or the validation split's fitting rows): its
    # plain model prices the default budgets and is the baseline.
    ctx = fitting_context(settings, *take(X, y, qid, final))
    full_cost = ctx.full_cost
    timings = {"final fit": time.perf_counter() - start}
    if not np.isfinite(full_cost) or not np.isfinite(costs.feature_costs.sum()):
        raise InputError(
            f"the feature costs (up to {costs.feature_costs.max():.3g}) add up to more "
            "than a float holds (inf per example); rescale them, e.g. to thousands"
        )
    if budgets is None:
        fractions = QUICK_BUDGET_FRACTIONS if quick else BUDGET_FRACTIONS
        settings = replace(settings, budgets=tuple(float(f * full_cost) for f in fractions))

    # Fold by fold, each method in turn: should the allowance run out, every method has had
    # its first fold before any has a second (and see schedule.sweep's first pass). A validation
    # split's fitting rows are the final fit's: its plain model is reused there.
    seed = {} if k else {"lightgbm": ctx.lightgbm()}
    tasks: list[FitTask] = []
    after: list[int | None] = []
    for f, (fit, held) in enumerate(folds):
        (Xf, yf, qf), (Xe, ye, qe) = take(X, y, qid, fit), take(X, y, qid, held)
        after += after_of(chosen, len(tasks))
        tasks += [
            FitTask(
                m.key,
                f,
                settings,
                Xf,
                yf,
                qf,
                X_eval=Xe,
                y_eval=ye,
                qid_eval=qe,
                keep_models=not k,
                shared=dict(seed),
                in_full=m.family == "reference",
            )
            for m in chosen
        ]
    # Under cross-validation a share of the allowance is kept for the final refit.
    refit_share = 0.0 if time_limit is None or not k else time_limit / (k + 1)
    # Time for the confirmation: the front's models (about one per budget, and the plain
    # model), each scored on the test rows about as long as the plain model takes on its
    # calibration rows (timed again now that its kernels are compiled), scaled by rows.
    confirm_seconds = 0.0
    if time_limit is not None:
        began = time.perf_counter()
        evaluate(ctx.lightgbm(), ctx.X_val, costs)
        per_model = (time.perf_counter() - began) * len(y_test) / max(1, len(ctx.y_val))
        confirm_seconds = confirm_reserve(time_limit, per_model, len(settings.budgets) + 2)
    select_end, select_stop = selection_deadlines(wall_end, time_limit, refit_share, confirm_seconds)
    results = sweep(tasks, after, executor, select_end, select_stop, progress, here)
    timings["selection"] = time.perf_counter() - start - sum(timings.values())
    table = select(results, METHODS)
    units = validation_units(results, METHODS, table)
    # Validation rows held out by time have their window's class shares: weighted back to
    # those of every row given, accuracy judges models at the classes' long-run weights.
    weights = None if k or split == RANDOM else prior_weights(y[folds[0][1]], y, task)
    if weights is not None:
        table, units = reweigh(table, units, weights)
        selection += weighting_note(y[folds[0][1]], y)
    skipped = skipped_of(results, len(folds))
    cut = cut_of(results, len(folds))
    stopped = any(r.stopped or not r.started for r in results)
    baseline_value = _baseline_value(table)
    majority = majority_share(y, task)
    front = eligible_front(table, baseline_value, majority=majority, units=units)
    own = []  # each method's own front, confirmed too when asked
    if confirm_methods and len(table):
        own = [
            eligible_front(rows, baseline_value, majority=majority, units=units)
            for _, rows in table.groupby("method")
        ]
    wanted = _chosen_rows(table, front, own)

    if k:
        if own_pool:  # the same pool, or a new one if the selection ended its workers
            executor = local_pool(workers - here)
        deadlines = refit_deadlines(wall_end, time_limit, refit_share, confirm_seconds)
        models, refit_cut = _refit(
            wanted, chosen, ctx.lightgbm(), (X, y, qid), settings, (executor, here), deadlines, progress
        )
        cut += refit_cut
        stopped |= bool(refit_cut)
        timings["refit"] = time.perf_counter() - start - sum(timings.values())
    else:  # the validation split's models are the final ones
        models = {
            (METHODS[r.method].name, n): mdl
            for r in results
            for n, mdl in r.models.items()
            if n in wanted.get(METHODS[r.method].name, [])
        }
    if len(table):
        matrices: dict[Any, np.ndarray] = {}  # the test rows converted once per reading of them
        for i, row in table.iterrows():
            key = (row["method"], row["name"])
            if key in models:
                scored = confirm(models[key], X_test, y_test, qid_test, costs, task, matrices=matrices)
                for c, v in scored.items():
                    table.loc[i, c] = v
        # Again once confirmed: a model giving every test row one label leaves the front.
        front = eligible_front(table.loc[front.index], baseline_value, majority=majority, units=units)
        timings["confirmation"] = time.perf_counter() - start - sum(timings.values())
    else:
        table = pd.DataFrame(
            columns=["method", "family", "name", "parameters", "mean_cost", "value", "fit_seconds"]
        )
        front = table
    if user is not None:
        table, front, models = named_reference(table, front, models, reference_name(user.forest.source))
    counts = {}
    if task in ("binary", "multiclass"):
        counts = {"selection": _counts(y), "test": _counts(y_test)}
    return Comparison(
        table=table,
        front=front,
        models=models,
        task=task,
        full_cost=float(full_cost),
        budgets=list(settings.budgets),
        skipped=skipped + cut,
        cut=cut,
        stopped_early=stopped,
        seconds=time.perf_counter() - start,
        timings={k: round(v, 3) for k, v in timings.items()},
        task_seconds=task_seconds_of(results, len(folds)),
        costs=costs,
        baseline=ctx.lightgbm(),
        n_calibration=len(ctx.y_val),
        selection=selection,
        n_test=len(y_test),
        class_counts=counts,
        baseline_value=baseline_value,
        user_model=None if user is None else user.description,
        warnings=shifted,
        validation_units=units,
    )


# ---------------------------------------------------------------------- steps
def _lightgbm_params(n: int, task: str, n_jobs: int, given: Mapping[str, Any] | None) -> dict[str, Any]:
    # LightGBM's default min_data_per_group=100 all but forbids categorical splits on a few
    # hundred rows; scale it (and the leaf size) with the data.
    small = {
        "min_data_per_group": int(np.clip(n // 20, 5, 100)),
        "min_child_samples": int(np.clip(n // 50, 5, 20)),
        "cat_smooth": 1.0,
    }
    params = {**DEFAULT_LIGHTGBM, **small, "n_jobs": n_jobs, **(given or {})}
    if task == "multiclass":
        params.setdefault("objective", "multiclass")
    return params


def _refit(
    wanted: dict[str, list[str]],
    chosen: list,
    baseline: Forest,
    rows: tuple[Any, np.ndarray, np.ndarray | None],
    settings: Settings,
    executor: tuple[Any, bool],
    deadlines: tuple[float | None, float | None],
    progress: bool,
) -> tuple[dict[tuple[str, str], Any], list[tuple[str, str, str]]]:
    """The chosen candidates refitted on every row but the test rows: (models, what the time
    allowance left unrefitted, as in ``Comparison.cut``). ``deadlines``: no refit starts
    after the first, none is waited for after the second."""
    wanted = {method: list(names) for method, names in wanted.items()}
    models: dict[tuple[str, str], Any] = {}
    # The plain model is the final fit's own baseline (same rows, same parameters), and every
    # refit builds on it rather than fitting it again.
    whole = f"k={_rounds(baseline)}"
    if whole in wanted.get(REFERENCE, []):
        models[REFERENCE, whole] = baseline
        wanted[REFERENCE].remove(whole)
    keys = {m.key for m in chosen}
    needed = {m.key for m in chosen if wanted.get(m.name)}
    # A method others build on runs in full (its models handed over) even when none of its
    # own is wanted; the plain model is already there.
    helpers = set()
    for key in list(needed):
        up = METHODS[key].after
        while up is not None and up in keys and up != "lightgbm":
            helpers.add(up)
            up = METHODS[up].after
    # Cheapest first, as in the selection.
    run = [m for m in chosen if m.key in needed | helpers]
    refits = [
        FitTask(
            m.key,
            -1,
            _refit_settings(m.key, wanted.get(m.name, ()), settings, m.key in helpers),
            *rows,
            only=tuple(wanted.get(m.name, ())),
            shared={"lightgbm": baseline},
            complete=m.key in helpers,
        )
        for m in run
    ]
    done = run_stage(refits, after_of(run, 0), executor, deadlines[0], progress, "refit", deadlines[1])
    models.update({(METHODS[r.method].name, n): mdl for r in done for n, mdl in r.models.items()})
    cut = [
        (m, n, "not refitted: the time allowance ran out, so it has no test figure")
        for m, names in wanted.items()
        for n in names
        if (m, n) not in models
        and any(r.stopped or not r.started for r in done if METHODS[r.method].name == m)
    ]
    return models, cut


def _refit_settings(key: str, names: Sequence[str], settings: Settings, helper: bool) -> Settings:
    """The settings of a method's refit: a method of :data:`PER_BUDGET` refits the budgets
    chosen and no other (it would fit every budget in turn to reach them); unchanged for the
    others, and for a method others build on (they may use every budget)."""
    if key not in PER_BUDGET or helper:
        return settings
    chosen = [b for b in settings.budgets if f"budget={b:.4g}" in names]
    return replace(settings, budgets=tuple(chosen)) if len(chosen) == len(names) else settings


def _baseline_value(table: pd.DataFrame) -> float | None:
    """The validation figure of the plain model (all its trees), if it ran."""
    row = baseline_row(table)
    return None if row is None else float(table.loc[row, "value"])


def _chosen_rows(
    table: pd.DataFrame, front: pd.DataFrame, own: Sequence[pd.DataFrame] = ()
) -> dict[str, list[str]]:
    """Per method, the candidates to confirm: the front, the plain model and the methods' own
    fronts ``own`` (``confirm_methods=True``)."""
    rows = [*front.index, *(i for f in own for i in f.index)]
    base = baseline_row(table)
    if base is not None:
        rows.append(base)
    wanted: dict[str, list[str]] = {}
    for i in dict.fromkeys(rows):
        wanted.setdefault(table.loc[i, "method"], []).append(table.loc[i, "name"])
    return wanted


def _holdout(
    y: np.ndarray,
    qid: np.ndarray | None,
    task: str,
    n_given: int | None,
    seed: int,
    rank: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(fitting rows, validation rows): the rows given as X_val, else a held-out fraction
    (the latest rows by ``rank``, under a time split)."""
    if n_given is not None:
        return np.arange(n_given), np.arange(n_given, len(y))
    return holdout_indices(y, qid, task, VALIDATION_FRACTION, seed, rank=rank)


def _shifted(X: pd.DataFrame, X_test: pd.DataFrame, split: str) -> list[str]:
    """The report's warnings of features whose test values the training rows never have
    (``inputs.out_of_range``), also issued as a ``UserWarning``."""
    lines = out_of_range(X, X_test)
    if lines:
        fix = (
            "; if the rows are in time order, split='ordered' (or 'time=COLUMN') holds out the latest "
            "rows for validation and calibration, so that plans which do not carry to later rows are "
            "not chosen"
            if split == RANDOM
            else ""
        )
        lines = [f"{line}: the test rows differ from the rows models learn from{fix}" for line in lines]
        warnings.warn("; ".join(lines), UserWarning, stacklevel=3)
    return lines


def _counts(y: np.ndarray) -> dict[Any, int]:
    labels, counts = np.unique(y, return_counts=True)
    return {lab.item() if hasattr(lab, "item") else lab: int(c) for lab, c in zip(labels, counts)}


def _costs(costs: Any, names: list[str]) -> CostModel:
    if costs is None:
        return CostModel.uniform(len(names), feature_names=names)
    if isinstance(costs, CostModel):
        return costs.for_features(names, len(names))
    if isinstance(costs, (str, Path)):
        return CostModel.from_file(costs, names).for_features(names, len(names))
    if isinstance(costs, Mapping):
        return CostModel.from_dict(costs, names).for_features(names, len(names))
    return CostModel(costs, feature_names=names)


def _methods(methods: str | Sequence[str], task: str) -> list:
    if isinstance(methods, str) and methods == "all":
        # Cheapest families first, so that a time limit still leaves the post-hoc methods on
        # the plain model (seconds) and cuts the searches and compositions (minutes).
        # A composition that fits nothing of its own costs what a post-hoc method does.
        rank = {"reference": 0, "post-hoc": 1, "train": 2, "composition": 3}
        return sorted(
            (m for m in METHODS.values() if task in m.tasks),
            key=lambda m: rank[m.family if m.fits else "post-hoc"],
        )
    names = [methods] if isinstance(methods, str) else list(methods)
    by_name = {m.name: m for m in METHODS.values()}
    unknown = [n for n in names if n not in METHODS and n not in by_name]
    if unknown:
        raise InputError(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")
    chosen = [METHODS[n] if n in METHODS else by_name[n] for n in names]
    wrong = [m.key for m in chosen if task not in m.tasks]
    if wrong:
        raise InputError(f"method(s) {wrong} do not support the task {task!r}")
    return chosen
