"""The second pass of a time-limited sweep goes on from the first pass's candidates (their
models and rows handed back, ``FitTask.replay``) instead of fitting them again: each candidate
is fitted once per fold, with the table of a run without an allowance."""

import time
from collections import Counter

import joblib
import numpy as np
import pandas as pd
import pytest

from tests._helpers.compare_data import FAST, binary_data
from thrifty import CostModel
from thrifty.comparison import METHODS, Method, compare
from thrifty.comparison import methods as methods_module
from thrifty.comparison import schedule as schedule_module
from thrifty.comparison.registry import CostOrder, fitted
from thrifty.comparison.schedule import sweep
from thrifty.comparison.settings import Settings
from thrifty.comparison.sweep import FitTask


def test_each_candidate_is_fitted_once_per_fold_across_both_passes(monkeypatch):
    """A method whose settings are ordered by their costs (``CostOrder``) fits each setting once
    per fold: the first pass's setting is handed back to the second, which asks for the same
    settings in the same order (its cost known again without a fit)."""
    builds = Counter()

    def run(ctx):
        order = CostOrder([0.1, 0.2, 0.4, 0.8, 1.6])
        for v in order:

            def build(v=v):
                builds[(len(ctx.y_train), v)] += 1
                return ctx.lightgbm().subset(range(max(1, int(v * 10))))

            cand = fitted(ctx, f"v={v:g}", build, v=v)
            order.cost(ctx.order_cost(cand.model))
            yield cand

    monkeypatch.setitem(METHODS, "counted", Method("counted", "Counted", "post-hoc", ("binary",), run))
    X, y = binary_data(300)
    settings = Settings(task="binary", costs=CostModel.uniform(5), lightgbm_params=FAST)
    frame = pd.DataFrame(X)
    folds = {0: np.arange(200), 1: np.arange(250)}  # told apart by their sizes
    tasks = [FitTask("counted", f, settings, frame.iloc[r], y[r], None, frame, y) for f, r in folds.items()]
    timed = sweep(tasks, [None, None], None, time.time() + 600, None, progress=False)
    assert len(builds) == 2 * 5 and set(builds.values()) == {1}
    free = sweep(
        [FitTask("counted", f, settings, frame.iloc[r], y[r], None, frame, y) for f, r in folds.items()],
        [None, None],
        None,
        None,
        None,
        progress=False,
    )
    assert set(builds.values()) == {2}  # a run without an allowance fits each once too
    for a, b in zip(timed, free):
        assert [r["name"] for r in a.rows] == [r["name"] for r in b.rows]
        assert [r["value"] for r in a.rows] == [r["value"] for r in b.rows]
        assert not a.fitted and not a.stopped  # the models handed back are not kept


METHODS_REPLAYED = [
    "lightgbm",
    "qwyc",
    "margin",
    "cronus",
    "adapt-gbrt",
    "cegb",
    "cegb+qwyc",
    "cegb+cronus",
    "greedymiser",
]
METHODS_REPLAYED += ["budgetprune", "budgetrf", "budgetrf+prune", "budgetrf+prune+adapt"]


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_second_pass_keeps_the_first_passs_rows_and_the_table_of_a_run_without_allowance(
    monkeypatch, n_jobs
):
    """Every task the second pass runs again starts with the first pass's own first row (its
    fit seconds included: not fitted again, in this process or in a worker); the table is the
    one of a run without an allowance."""
    stages = []
    original = schedule_module.run_stage

    def spy(tasks, *args, **kwargs):
        out = original(tasks, *args, **kwargs)
        stages.append([(t.method, t.fold, r) for t, r in zip(tasks, out)])
        return out

    monkeypatch.setattr(schedule_module, "run_stage", spy)
    X, y = binary_data(400)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0])
    kw = dict(methods=METHODS_REPLAYED, quick=True, progress=False, lightgbm_params=FAST, cv=2, n_jobs=n_jobs)
    free = compare(X, y, costs, **kw)
    stages.clear()
    timed = compare(X, y, costs, time_limit=600.0, **kw)
    first, second = ({(m, f): r for m, f, r in stage} for stage in stages[:2])
    assert len(second) >= 2 * (len(METHODS_REPLAYED) - 1)
    for key, b in second.items():
        a = first[key]
        # Its scores and seconds as measured then (the parameters are as the method gives them
        # now: the CEGB model under QWYC's plan was searched again on the path, with no fit).
        assert a.rows and _same_row(b.rows[0], a.rows[0]), key
        assert len(b.rows) + len(b.skipped) >= len(a.rows) + len(a.skipped)
    drop = ["fit_seconds"]
    pd.testing.assert_frame_equal(timed.table.drop(columns=drop), free.table.drop(columns=drop))
    assert not timed.cut


def _same_row(a, b):
    """The same scores and seconds (arrays of per-unit scores compared by value)."""
    keys = set(a) - {"params"}
    return keys == set(b) - {"params"} and all(np.array_equal(a[k], b[k]) for k in keys)


def test_the_second_pass_reads_lambda_max_from_the_first(monkeypatch):
    """Cronus's ``lambda_max`` of a forest is computed once per fold (``Context.figure``, handed
    on with the shared models), not again in the second pass: on flights 4.7 to 6.4 CPU seconds per
    Cronus task before any cascade. The table is the one of a run without an allowance."""
    calls = Counter()
    original = methods_module.lambda_max

    def counted(forest, X, *args, **kwargs):
        calls[joblib.hash(X), joblib.hash(forest)] += 1
        return original(forest, X, *args, **kwargs)

    monkeypatch.setattr(methods_module, "lambda_max", counted)
    X, y = binary_data(400)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0])
    kw = dict(methods=["lightgbm", "cronus", "cegb", "cegb+cronus"], quick=True, progress=False)
    kw.update(lightgbm_params=FAST, cv=2, n_jobs=1)  # in this process: every call is counted
    free = compare(X, y, costs, **kw)
    assert calls and set(calls.values()) == {1}
    calls.clear()
    timed = compare(X, y, costs, time_limit=600.0, **kw)
    # The plain model's and the CEGB model's, on each of the two folds, each once.
    assert len({rows for rows, _ in calls}) >= 2 and len(calls) >= 4
    assert set(calls.values()) == {1}, calls.values()
    drop = ["fit_seconds"]
    pd.testing.assert_frame_equal(timed.table.drop(columns=drop), free.table.drop(columns=drop))
