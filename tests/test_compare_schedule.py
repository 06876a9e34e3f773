"""How compare spends a time allowance: the baselines complete before anything else is cut,
each method's settings coarse to fine across its range, and the plain model fitted once per
set of rows, shared by the post-hoc methods with the same results as fitting it per method."""

import math
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from tests._helpers.compare_data import FAST, binary_data
from thrifty import CostModel
from thrifty.comparison import METHODS, Candidate, Context, Method, compare
from thrifty.comparison.registry import spread
from thrifty.comparison.schedule import sweep
from thrifty.comparison.settings import Settings
from thrifty.comparison.sweep import FitTask, fitting_context


@pytest.mark.parametrize("n", range(0, 40))
def test_spread_takes_every_setting_once_coarse_to_fine(n):
    order = spread(list(range(n)))
    assert sorted(order) == list(range(n))
    # After the first 2^j - 1 settings, no gap between the settings taken (or the ends of the
    # grid) is wider than the grid split j times: a spread, not one end of the range.
    for j in range(1, math.ceil(math.log2(n + 1)) + 1):
        taken = sorted(order[: 2**j - 1])
        gaps = np.diff([-1, *taken, n]) - 1
        assert gaps.max() <= math.ceil((n - (2**j - 1)) / 2**j)
    if n >= 3:
        assert order[0] == (n - 1) // 2  # the middle first, not the cheapest end


def _logged(log, key, names, sleep=0.0):
    def run(ctx):
        for name in names:
            time.sleep(sleep)
            log.append((key, name))
            yield Candidate(name, object())

    return run


def test_under_an_allowance_the_baselines_run_in_full_before_any_refinement(monkeypatch):
    """The first pass fits the reference family's every candidate on every fold before any
    other task, then the others' first candidate; the second pass refines the others and does
    not run a completed baseline again. Results come back in the tasks' order."""
    log = []

    def logged(key, names):
        def run(ctx):
            for name in names:
                log.append((key, len(ctx.y_train), name))  # the fold, by its number of rows
                yield Candidate(name, object())

        return run

    monkeypatch.setitem(METHODS, "ref", Method("ref", "Ref", "reference", ("binary",), logged("ref", "abc")))
    monkeypatch.setitem(
        METHODS, "other", Method("other", "Other", "post-hoc", ("binary",), logged("other", "xyz"))
    )
    X, y = binary_data(200)
    settings = Settings(task="binary", costs=CostModel.uniform(5))
    frame = pd.DataFrame(X)
    folds = {0: np.arange(100), 1: np.arange(150)}  # told apart by their sizes
    tasks = [
        FitTask(key, f, settings, frame.iloc[rows], y[rows], None, in_full=key == "ref")
        for f, rows in folds.items()
        for key in ("ref", "other")
    ]
    results = sweep(tasks, [None] * 4, None, time.time() + 60, None, progress=False)
    sizes = [len(fitting_context(settings, frame.iloc[r], y[r], None).y_train) for r in folds.values()]
    want = [("ref", n, c) for n in sizes for c in "abc"]
    want += [("other", n, "x") for n in sizes]
    want += [("other", n, c) for n in sizes for c in "xyz"]
    assert log == want
    assert [(r.method, r.fold) for r in results] == [(t.method, t.fold) for t in tasks]
    assert [[r["name"] for r in res.rows] for res in results] == [list("abc"), list("xyz")] * 2
    assert not any(r.stopped for r in results)


def test_a_tight_allowance_cuts_the_slow_method_and_leaves_the_baselines_complete(monkeypatch):
    """Every candidate of both baselines is in the table, as without an allowance, while a
    slow method is cut (threads see the method registered here; a process pool would not)."""

    def slow(ctx):
        for i in range(50):
            time.sleep(0.3)
            yield Candidate(f"i={i}", ctx.lightgbm())

    monkeypatch.setitem(
        METHODS, "slow", Method("slow", "Slow method", "post-hoc", ("binary",), slow, "lightgbm")
    )
    X, y = binary_data(300)
    kw = dict(cv=0, progress=False, lightgbm_params=FAST)
    free = compare(X, y, methods=["lightgbm", "cheapest"], **kw)
    with ThreadPoolExecutor(2) as pool:
        cut = compare(X, y, methods=["lightgbm", "cheapest", "slow"], time_limit=4.0, executor=pool, **kw)
    for name in ("LightGBM, first k trees", "cheapest k features"):
        want = free.table.loc[free.table["method"] == name, ["name", "value"]].reset_index(drop=True)
        got = cut.table.loc[cut.table["method"] == name, ["name", "value"]].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want)
        assert not any(m == name for m, _, _ in cut.cut)
    assert any(m == "Slow method" for m, _, _ in cut.cut)
    assert 1 <= (cut.table["method"] == "Slow method").sum() < 50


def _counting_fits(mp):
    fits = []
    original = Context.fit_lightgbm

    def spy(self, X=None, **kw):
        fits.append(X is None)  # the plain model (not a cheapest-k refit)
        return original(self, X, **kw)

    mp.setattr(Context, "fit_lightgbm", spy)
    return fits


def test_the_plain_model_is_fitted_once_per_fold_under_an_allowance_too():
    """Both passes of a time-limited selection use the plain model the first fitted on each
    fold: one fit per fold and the final one, as without an allowance, and the same table."""
    X, y = binary_data(300)
    kw = dict(methods=["lightgbm", "qwyc", "margin"], quick=True, progress=False, lightgbm_params=FAST)
    kw.update(cv=2, n_jobs=1)
    tables = {}
    for limit in (None, 600.0):
        with pytest.MonkeyPatch.context() as mp:
            fits = _counting_fits(mp)
            cmp = compare(X, y, time_limit=limit, **kw)
        assert sum(fits) == 1 + 2 and not cmp.cut
        tables[limit] = cmp.table.drop(columns="fit_seconds")
    pd.testing.assert_frame_equal(tables[None], tables[600.0])


def test_sharing_the_plain_model_gives_the_results_of_fitting_it_per_method():
    """QWYC, Fan and margin exit post-process the LightGBM task's model; with nothing handed
    over each fits its own plain model on the same rows: more fits, the same table."""
    X, y = binary_data(300)
    kw = dict(methods=["lightgbm", "qwyc", "fan", "margin"], quick=True, progress=False)
    kw.update(lightgbm_params=FAST, cv=2, n_jobs=1)
    with pytest.MonkeyPatch.context() as mp:
        shared_fits = _counting_fits(mp)
        shared = compare(X, y, **kw)
    with pytest.MonkeyPatch.context() as mp:
        alone_fits = _counting_fits(mp)
        mp.setattr(Context, "shared", lambda self: {})  # hand nothing over: each fits its own
        alone = compare(X, y, **kw)
    assert sum(shared_fits) == 1 + 2
    assert sum(alone_fits) == 1 + 2 * 4  # the final fit, and each method on each fold
    drop = ["fit_seconds"]
    pd.testing.assert_frame_equal(shared.table.drop(columns=drop), alone.table.drop(columns=drop))


def test_confirm_methods_gives_each_methods_own_front_a_test_figure():
    """``confirm_methods``: every method's own validation front is confirmed on the test rows,
    besides the front of all; the front itself and its figures do not change."""
    X, y = binary_data(400)
    kw = dict(methods=["lightgbm", "cheapest", "qwyc"], quick=True, progress=False, lightgbm_params=FAST)
    kw.update(cv=0, n_jobs=1)
    front_only = compare(X, y, **kw)
    each = compare(X, y, confirm_methods=True, **kw)
    drop = ["fit_seconds"]
    pd.testing.assert_frame_equal(front_only.front.drop(columns=drop), each.front.drop(columns=drop))
    confirmed = each.table[each.table["test_value"].notna()]
    assert set(confirmed["method"]) == set(each.table["method"])
    for name, rows in each.table.groupby("method"):
        # Its own choice at the largest budget: its best validation figure (the cheapest of a
        # tie, as its front keeps), now confirmed.
        best = rows[rows["value"] == rows["value"].max()].sort_values("mean_cost", kind="stable").index[0]
        assert pd.notna(rows.loc[best, "test_value"]), name
    assert len(confirmed) > front_only.table["test_value"].notna().sum()


def test_forests_on_many_rows_grow_each_tree_on_a_capped_bootstrap_sample(monkeypatch):
    """Beyond ``ROWS_PER_TREE`` training rows, compare's random forest and BudgetRF grow each
    tree on that many bootstrap rows (fewer leaves than trees of every row), and say so in the
    candidates' parameters; below it, nothing changes."""
    import thrifty.comparison.context as context
    from thrifty.comparison.sweep import fitting_context

    X, y = binary_data(1000)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(5)])
    settings = Settings(task="binary", costs=CostModel.uniform(5), quick=True)

    def leaves(forest):
        return int((forest.children_left < 0).sum())

    whole = fitting_context(settings, frame, y, None).random_forest()
    monkeypatch.setattr(context, "ROWS_PER_TREE", 100)
    ctx = fitting_context(settings, frame, y, None)
    assert ctx.rows_per_tree == 100
    capped = ctx.random_forest()
    # min_samples_leaf=2 on 100 bootstrap rows: at most 50 leaves a tree.
    assert leaves(capped) <= 50 * capped.n_trees < leaves(whole)
    cmp = compare(X, y, methods=["budgetprune", "budgetrf"], quick=True, cv=0, n_jobs=1, progress=False)
    assert set(cmp.table.loc[cmp.table["name"].isin(["unpruned", "15 trees"]), "rows_per_tree"]) == {100}


def test_a_candidate_that_would_end_past_the_deadline_is_not_started(monkeypatch):
    """Judged by the last candidate's time: a baseline (no share) fits two 0.5 s candidates of
    a 1.25 s deadline and does not start a third, which would be given up with the task."""
    from thrifty.comparison.sweep import run_task

    log = []
    monkeypatch.setitem(
        METHODS, "ref", Method("ref", "Ref", "reference", ("binary",), _logged(log, "ref", "abcd", 0.5))
    )
    X, y = binary_data(100)
    task = FitTask("ref", 0, Settings(task="binary", costs=CostModel.uniform(5)), pd.DataFrame(X), y, None)
    task.in_full, task.deadline = True, time.time() + 1.25
    result = run_task(task)
    assert [r["name"] for r in result.rows] == ["a", "b"] and result.stopped
    assert time.time() < task.deadline + 0.2


def test_one_model_at_several_budgets_is_on_the_front_once_as_its_smallest_budget():
    """GreedyMiser returning one model for several budgets, fitted coarse to fine (the middle
    budget first): the front holds it once, named by the smallest budget that gives it."""
    from thrifty.comparison.selection import eligible_front

    budgets = [4.0, 1.0, 8.0, 2.0]  # spread's order of 1, 2, 4, 8
    table = pd.DataFrame(
        {
            "method": ["GreedyMiser"] * 4 + ["other"],
            "name": [f"budget={b:g}" for b in budgets] + ["x"],
            "mean_cost": [0.9, 0.9, 0.9, 0.9, 3.0],
            "value": [0.80, 0.80, 0.80, 0.80, 0.85],
            "budget": [*budgets, np.nan],
        }
    )
    front = eligible_front(table, None)
    assert list(front["name"]) == ["budget=1", "x"]


def test_cegb_budgets_walk_one_path_and_the_refinements_reuse_the_first_pass(monkeypatch):
    """CEGB's budgets on a fold share their trials (later budgets start from the earlier ones'),
    and under an allowance the refinement pass starts from the first pass's trials: no model
    is trained twice for the same trade-off on the same rows, and the table is the one of a
    run without an allowance."""
    from thrifty.train import CEGBClassifier

    trained = []
    original = CEGBClassifier._train

    def spy(self, X, y, *args, **kw):
        # The rows (by their number), the trade-off and the features it may use (the models of
        # the first features a path buys blank the others out, at trade-off 0).
        read = tuple(np.flatnonzero(~np.isnan(np.asarray(X, dtype=float)).all(axis=0)))
        trained.append((len(y), args[1], read))
        return original(self, X, y, *args, **kw)

    monkeypatch.setattr(CEGBClassifier, "_train", spy)
    X, y = binary_data(400)
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 8.0])
    # n_jobs=1: every task in this process, where the spy counts
    kw = dict(methods=["lightgbm", "cegb"], cv=0, progress=False, lightgbm_params=FAST, quick=True, n_jobs=1)
    free = compare(X, y, costs, **kw)
    n_free, trained[:] = len(trained), []
    timed = compare(X, y, costs, time_limit=600.0, **kw)
    assert len(trained) == len(set(trained)) and len(trained) == n_free
    cegb = free.table["method"] == "CEGB"
    assert cegb.sum() >= 2
    cols = ["name", "mean_cost", "value"]
    pd.testing.assert_frame_equal(
        timed.table.loc[timed.table["method"] == "CEGB", cols].reset_index(drop=True),
        free.table.loc[cegb, cols].reset_index(drop=True),
    )


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression", "ranking"])
def test_cegb_offers_the_estimators_choice_unless_a_path_model_is_better_beyond_noise(task):
    """Of every model on the fold's trade-off path within a budget (cost measured on the
    calibration split), compare's CEGB candidate is the estimator's own choice (the dearest
    within it), unless the one of best metric on the calibration split leads it there beyond
    the noise (paired 95% interval over the calibration rows, or queries, above 0): checked by
    scoring them all here. Only the fitting rows are read: the scored rows are not in the
    context."""
    from thrifty import metrics
    from thrifty.comparison.methods import _cegb_models
    from thrifty.comparison.scores import paired_lead, unit_scores
    from thrifty.runtime.evaluate import evaluate

    rng = np.random.default_rng(3)
    X = rng.normal(size=(1500, 5))
    signal = X[:, 0] + 0.6 * X[:, 1] + 0.4 * X[:, 3] + 0.3 * rng.normal(size=1500)
    y = {
        "binary": (signal > 0).astype(int),
        "multiclass": np.digitize(signal, [-0.8, 0.0, 0.8]),
        "ranking": np.digitize(signal, [-0.5, 0.5, 1.2]),
    }.get(task, signal)
    qid = np.repeat(np.arange(100), 15) if task == "ranking" else None
    costs = CostModel([0.5, 1.0, 2.0, 4.0, 4.0])
    budgets = (0.6, 1.5, 3.0, 6.0)
    settings = Settings(task=task, costs=costs, budgets=budgets, lightgbm_params=FAST)
    ctx = fitting_context(settings, pd.DataFrame(X), y, qid)
    sign = -1.0 if task == "regression" else 1.0
    for cand in _cegb_models(ctx):
        b = cand.params["budget"]
        assert cand.model is not None
        est = ctx._cache["cegb path"]
        table = est.budget_search_
        chosen = est.search_models_[int(np.flatnonzero(table["chosen"].to_numpy())[0])]
        scored = {}
        for forest, cost in zip(est.search_models_, table["cost"], strict=True):
            if cost <= b:
                ev = evaluate(forest, ctx.X_val, costs)
                name, value = metrics.score(task, ctx.y_val, ev, ctx.qid_val)
                scored[id(forest)] = (
                    (sign * value, -cost),
                    name,
                    unit_scores(task, ctx.y_val, ev, ctx.qid_val),
                )
        assert id(cand.model) in scored and id(chosen) in scored
        best = max(scored.values(), key=lambda v: v[0])
        if cand.model is chosen:
            key, name, units = best
            if key != scored[id(chosen)][0]:  # the best does not lead beyond the noise
                assert paired_lead(name, units, scored[id(chosen)][2])[1] <= 0
        else:
            key, name, units = scored[id(cand.model)]
            assert key == best[0]
            assert paired_lead(name, units, scored[id(chosen)][2])[1] > 0 or np.array_equal(
                units, scored[id(chosen)][2]
            )
        assert evaluate(cand.model, ctx.X_val, costs).cost.mean <= b


def test_qwyc_and_cegb_get_a_larger_part_of_the_allowance(monkeypatch):
    """A task's seconds are its weight's part of the time left over the unfinished tasks'
    weights; the sweep gives QWYC's and CEGB's tasks schedule.WEIGHTS's, every other task 1."""
    from thrifty.comparison import pool, schedule
    from thrifty.comparison.sweep import TaskResult

    settings = Settings(task="binary", costs=CostModel.uniform(5))
    tasks = [
        FitTask(k, 0, settings, None, None, None, weight=w) for k, w in (("a", 1.0), ("b", 2.0), ("c", 1.0))
    ]
    end = time.time() + 100.0
    shares = [pool._share(tasks, [None] * 3, i, end, 2) for i in range(3)]
    assert shares == pytest.approx([50.0, 100.0, 50.0], abs=0.1)  # 2 workers x 100 s, by weight
    done = [TaskResult("a", 0), None, None]
    assert pool._share(tasks, done, 1, end, 1) == pytest.approx(100.0 * 2 / 3, abs=0.1)
    seen = []

    def capture(tasks, *args, **kwargs):
        seen.extend((t.method, t.weight) for t in tasks)
        return [TaskResult(t.method, t.fold) for t in tasks]

    monkeypatch.setattr(schedule, "run_stage", capture)
    keys = ("lightgbm", "qwyc", "fan", "cegb")
    sweep([FitTask(k, 0, settings, None, None, None) for k in keys], [None] * 4, None, end, None, False)
    assert dict(seen) == {"lightgbm": 1.0, "qwyc": 2.0, "fan": 1.0, "cegb": 2.0}
    sweep([FitTask(k, 0, settings, None, None, None) for k in keys], [None] * 4, None, None, None, False)
    assert [w for _, w in seen[-4:]] == [1.0] * 4  # no allowance: no parts to weigh


def test_a_method_that_cannot_fit_is_not_run_again_nor_reported_as_cut(monkeypatch):
    """A method with no candidate in the first pass (it refused the data: ADAPT-LIN on
    flights' categorical columns) is done: the second pass does not run it again, and its
    reason stays the one reported. Before, it ran again, and where the allowance did not
    reach it the report said the allowance had cut "every setting"."""
    runs = []

    def refuses(ctx):
        runs.append(len(ctx.y_train))
        raise ValueError("needs numeric features")
        yield  # a generator, as every method is

    monkeypatch.setitem(METHODS, "refuses", Method("refuses", "Refuses", "post-hoc", ("binary",), refuses))
    log = []
    monkeypatch.setitem(
        METHODS, "other", Method("other", "Other", "post-hoc", ("binary",), _logged(log, "o", "xy"))
    )
    X, y = binary_data(200)
    settings = Settings(task="binary", costs=CostModel.uniform(5))
    frame = pd.DataFrame(X)
    tasks = [FitTask(key, 0, settings, frame, y, None) for key in ("refuses", "other")]
    refused, other = sweep(tasks, [None, None], None, time.time() + 60, None, progress=False)
    assert len(runs) == 1  # the first pass only
    assert refused.skipped == [("", "needs numeric features")] and not refused.stopped
    assert refused.finished and not refused.rows
    assert [r["name"] for r in other.rows] == ["x", "y"]  # run again, in full
    assert log == [("o", "x"), ("o", "x"), ("o", "y")]
