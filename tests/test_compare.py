"""Tests of ``thrifty.compare`` and the ``thrifty compare`` command."""

import contextlib
import io
import json
import time

import numpy as np
import pandas as pd
import pytest

from tests._helpers.machine_load import slowdown
from thrifty import CostModel, evaluate, metrics
from thrifty.cli import main
from thrifty.comparison import METHODS, compare
from thrifty.comparison.scores import paired_lead
from thrifty.frontier import pareto_front

FAST = {"n_estimators": 30, "num_leaves": 8, "n_jobs": 1}


def binary_data(n=600, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 4] + 0.3 * rng.normal(size=n) > 0).astype(int)
    return X, y


def small_methods(task):
    """The quick methods of today for a task (the trained ones are slower and tested apart)."""
    return [k for k, m in METHODS.items() if task in m.tasks and k in ("lightgbm", "qwyc", "fan", "margin")]


@pytest.fixture(scope="module")
def result():
    X, y = binary_data()
    costs = CostModel([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
    return (
        compare(
            X, y, costs, methods=small_methods("binary"), quick=True, progress=False, lightgbm_params=FAST
        ),
        X,
        y,
        costs,
    )


def frame_of(X, idx):
    return pd.DataFrame(X[idx], columns=[f"f{i}" for i in range(X.shape[1])], index=idx)


def test_cv_figures_are_the_mean_over_folds_of_the_setting_refitted_per_fold(result):
    """The plain model's row, recomputed by hand: LightGBM refitted on each fold's fitting rows
    (less their calibration rows), scored on the fold's held-out rows, averaged."""
    import lightgbm

    from thrifty import Forest
    from thrifty.comparison.compare import _lightgbm_params
    from thrifty.comparison.sweep import CALIBRATION, fold_indices, holdout_indices

    cmp, X, y, costs = result
    pool, test = holdout_indices(y, None, "binary", 0.25, 0)
    assert cmp.selection == f"5-fold cross-validation of {len(pool)} rows" and cmp.n_test == len(test)
    params = _lightgbm_params(len(pool), "binary", 1, FAST)
    values, spent = [], []
    for fit, held in fold_indices(y[pool], None, "binary", 5, 0):
        keep, _ = holdout_indices(y[pool][fit], None, "binary", CALIBRATION, 0)
        rows = pool[fit][keep]
        model = lightgbm.LGBMClassifier(**params).fit(frame_of(X, rows), y[rows])
        ev = evaluate(Forest.from_model(model), frame_of(X, pool[held]), costs)
        values.append(np.mean(ev.labels == y[pool[held]]))
        spent.append(ev.cost.mean)
    row = cmp.table[
        (cmp.table["method"] == METHODS["lightgbm"].name) & (cmp.table["name"] == f"k={FAST['n_estimators']}")
    ].iloc[0]
    assert row["folds"] == 5
    assert row["value"] == pytest.approx(np.mean(values))
    assert row["mean_cost"] == pytest.approx(np.mean(spent))


def test_chosen_models_are_confirmed_once_on_the_untouched_test_rows(result):
    from scipy.stats import binomtest

    from thrifty.comparison.sweep import holdout_indices

    cmp, X, y, costs = result
    _, test = holdout_indices(y, None, "binary", 0.25, 0)
    chosen = cmp.table[cmp.table["test_value"].notna()]
    assert set(cmp.front.index) <= set(chosen.index)
    for _, row in chosen.iterrows():
        ev = evaluate(cmp.model(row["method"], row["name"]), frame_of(X, test), costs)
        correct = int(np.sum(ev.labels == y[test]))
        assert row["test_mean_cost"] == pytest.approx(ev.cost.mean)
        assert row["test_value"] == pytest.approx(correct / len(test))
        assert row["test_rows"] == len(test)
        ci = binomtest(correct, len(test)).proportion_ci(0.95, method="wilson")
        assert (row["test_low"], row["test_high"]) == pytest.approx((ci.low, ci.high))
        assert row["test_balanced_accuracy"] == pytest.approx(
            np.mean([np.mean(ev.labels[y[test] == c] == c) for c in (0, 1)])
        )


def test_front_and_recommendations_agree_with_brute_force(result):
    cmp, *_ = result
    t = cmp.table[cmp.table["single_class"] < 0.5]
    dominated = [
        any(
            (t["mean_cost"][j] <= t["mean_cost"][i])
            and (t["value"][j] >= t["value"][i])
            and ((t["mean_cost"][j] < t["mean_cost"][i]) or (t["value"][j] > t["value"][i]))
            for j in t.index
        )
        for i in t.index
    ]
    undominated = t.loc[[i for i, d in zip(t.index, dominated) if not d]]
    # A method's settings with the same figures are one model, on the front once. Beside them,
    # the exact plans (the plain model, margin exit at disagreement 0) that no cheaper model
    # beats beyond the noise of the validation rows: what ``choose`` may prefer.
    plain = set(undominated.drop_duplicates(["method", "mean_cost", "value"]).index)
    assert plain <= set(cmp.front.index)
    units = cmp.validation_units
    for i in set(cmp.front.index) - plain:
        assert cmp.table.at[i, "exact"]
        rivals = undominated[
            (undominated["mean_cost"] <= t.at[i, "mean_cost"]) & (undominated["value"] > t.at[i, "value"])
        ]
        assert all(paired_lead("accuracy", units[j], units[i])[1] <= 0 for j in rivals.index)
    rec = cmp.recommend([0.3 * cmp.full_cost, cmp.full_cost, 10 * cmp.full_cost])
    for _, r in rec.iterrows():
        within = t[t["mean_cost"] <= r["for_budget"]]
        if pd.isna(r.get("preferred_to")):
            assert r["value"] == within["value"].max()
        else:  # an exact plan within the noise of the best
            assert r["exact"] and r["validation_lead_low"] <= 0 < r["validation_lead"]
            assert r["value"] + r["validation_lead"] == pytest.approx(within["value"].max())
        assert r["mean_cost"] <= r["for_budget"]
    # Balanced accuracy and AUC stand beside accuracy in every row.
    assert cmp.table[["balanced_accuracy", "auc"]].notna().all().all()
    assert cmp.table["mean_trees"].max() == pytest.approx(FAST["n_estimators"])


def test_write_saves_report_plot_and_recommended_models(result, tmp_path):
    cmp, *_ = result
    files = cmp.write(tmp_path, title="synthetic")
    for name in ("table.csv", "front.csv", "frontier.png", "report.md"):
        assert (tmp_path / name).stat().st_size > 0
    report = (tmp_path / "report.md").read_text()
    assert "selected on 5-fold cross-validation of 450 rows" in report
    assert "confirmed on 150 test rows" in report and "## Pareto front" in report
    assert "class counts: selection rows 0: " in report
    saved = [f for f in files if f.suffix == ".json"]
    assert saved
    from thrifty import load

    model = load(saved[0])
    assert evaluate(model, np.zeros((2, 6))).raw.shape[0] == 2


def test_known_best_model_is_chosen_and_its_fresh_score_lies_in_its_interval():
    """One cheap feature decides the label (up to 10% flipped labels): every budget's choice
    reads it alone, and its accuracy on 20,000 fresh rows lies in the reported interval. No
    fit or selection step ever sees a test row (a spy on LightGBM's fit and on the tasks)."""
    import lightgbm

    from thrifty.comparison import sweep

    def draw(n, seed):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(n, 4))
        y = ((X[:, 0] > 0) ^ (rng.random(n) < 0.1)).astype(int)
        return X, y

    X, y = draw(400, 7)
    costs = CostModel([1.0, 50.0, 50.0, 50.0])
    frame = pd.DataFrame(X, columns=["cheap", "b", "c", "d"], index=np.arange(10_000, 10_400))
    seen: list[set] = []
    fit, run_task = lightgbm.LGBMModel.fit, sweep.run_task

    def spy_fit(self, X, *args, **kwargs):
        seen.append(set(X.index))
        return fit(self, X, *args, **kwargs)

    def spy_task(t):
        seen.append(set(t.X_fit.index) | (set() if t.X_eval is None else set(t.X_eval.index)))
        return run_task(t)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lightgbm.LGBMModel, "fit", spy_fit)
        mp.setattr(sweep, "run_task", spy_task)
        cmp = compare(
            frame,
            y,
            costs,
            methods=["lightgbm", "cheapest", "qwyc"],
            quick=True,
            progress=False,
            lightgbm_params=FAST,
            n_jobs=1,  # the spies watch this process
        )
    from thrifty.comparison.sweep import holdout_indices

    _, test = holdout_indices(y, None, "binary", 0.25, 0)
    test_index = set(frame.index[test])
    assert seen and all(not (s & test_index) for s in seen)
    rec = cmp.recommend()
    assert len(rec)
    fresh_X, fresh_y = draw(20_000, 8)
    fresh = pd.DataFrame(fresh_X, columns=["cheap", "b", "c", "d"])
    for _, row in rec.iterrows():
        assert row["mean_cost"] == pytest.approx(1.0) and row["test_mean_cost"] == pytest.approx(1.0)
        score = np.mean(evaluate(cmp.model(row["method"], row["name"]), fresh, costs).labels == fresh_y)
        assert row["test_low"] <= score <= row["test_high"]


def test_single_class_models_are_flagged_and_not_recommended():
    from thrifty.comparison.selection import eligible_front

    table = pd.DataFrame(
        {
            "method": ["a", "b", "c"],
            "name": ["x", "y", "z"],
            "mean_cost": [0.0, 1.0, 5.0],
            "value": [0.8, 0.85, 0.9],
            "single_class": [1.0, 0.0, 0.0],
        }
    )
    assert list(eligible_front(table, 0.9).index) == [1, 2]
    # The plain model no better than the constant answer: the constant answer is honest.
    assert list(eligible_front(table, 0.8).index) == [0, 1, 2]


def test_time_allowance_is_shared_and_honoured():
    """A behaviour bound, not a benchmark: every method fits a model, and the run ends within
    10% of its allowance plus a fixed margin for start-up.

    Allowance and margin are wall-clock seconds of a quiet core (3 and 2), scaled by how much
    longer CPU-bound work takes now (``slowdown``, 1 on a quiet machine): on a machine loaded
    several times over, 3 s did not cover the baselines on 5 folds, and methods went unrun."""

    X, y = binary_data(400)
    load = slowdown()
    allowance = 3.0 * load
    start = time.perf_counter()
    cmp = compare(
        X,
        y,
        methods=small_methods("binary") + ["cheapest"],
        time_limit=allowance,
        progress=False,
        lightgbm_params=FAST,
        n_jobs=1,
    )
    elapsed = time.perf_counter() - start
    assert elapsed <= 1.1 * allowance + 2.0 * load, (elapsed, load)
    assert set(cmp.table["method"]) == {METHODS[k].name for k in small_methods("binary") + ["cheapest"]}


def test_a_time_allowance_is_a_cut_the_result_names():
    X, y = binary_data(400)
    kw = dict(methods=["lightgbm", "qwyc", "cheapest"], progress=False, lightgbm_params=FAST, n_jobs=1)
    cut = compare(X, y, time_limit=0.2, **kw)
    assert cut.stopped_early and cut.cut and set(cut.cut) <= set(cut.skipped)
    assert all("time allowance" in why for _, _, why in cut.cut)
    assert {m for m, _, _ in cut.cut} <= {METHODS[k].name for k in kw["methods"]}
    # Without an allowance nothing is cut: the planned work runs in full.
    full = compare(X, y, **kw)
    assert full.cut == [] and not full.stopped_early and len(full.table) > len(cut.table)


def test_executor_gives_the_sequential_result():
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    X, y = binary_data(200)
    kw = dict(methods=["lightgbm", "qwyc"], quick=True, progress=False, lightgbm_params=FAST, cv=2)
    alone = compare(X, y, n_jobs=1, **kw)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        pooled = compare(X, y, executor=pool, **kw)
    drop = ["fit_seconds"]
    pd.testing.assert_frame_equal(alone.table.drop(columns=drop), pooled.table.drop(columns=drop))
    assert sorted(alone.models) == sorted(pooled.models)


@pytest.mark.parametrize("task", ["multiclass", "regression", "ranking"])
def test_other_tasks(task):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(480, 4))
    qid = None
    if task == "multiclass":
        y = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5])
    elif task == "regression":
        y = X[:, 0] + X[:, 1] ** 2 + 0.1 * rng.normal(size=480)
    else:
        qid = np.repeat(np.arange(48), 10)
        y = np.clip(np.round(X[:, 0] + 1.5), 0, 4).astype(int)
    cmp = compare(
        X,
        y,
        [1, 2, 3, 4],
        qid=qid,
        methods=small_methods(task),
        quick=True,
        progress=False,
        lightgbm_params=FAST,
        cv=2,
    )
    assert cmp.task == task
    assert len(cmp.table) >= 3 and cmp.table["value"].notna().all()
    # The Pareto front, and exact plans no cheaper model beats beyond the validation noise.
    plain = pareto_front(cmp.table).drop_duplicates(["method", "mean_cost", "value"])
    assert set(plain.index) <= set(cmp.front.index)
    assert cmp.table.loc[list(set(cmp.front.index) - set(plain.index)), "exact"].all()
    assert all(len(u) == len(cmp.validation_units[cmp.table.index[0]]) for u in cmp.validation_units.values())
    # Each task's metrics by name: RMSE (lower is better), MAE and R² in the target's units;
    # NDCG@10 and precision@5 over queries; accuracy, balanced accuracy and AUC.
    primary, *others = metrics.TASK_METRICS[task]
    assert set(cmp.table["metric"]) == {primary} and set(others) <= set(cmp.table.columns)
    tested = cmp.table[cmp.table["test_value"].notna()]
    assert (
        (tested["test_low"] <= tested["test_value"]) & (tested["test_value"] <= tested["test_high"])
    ).all()
    best = cmp.front["value"].min() if task == "regression" else cmp.front["value"].max()
    top = cmp.recommend([np.inf]).iloc[0]
    assert top["value"] == best or (top["exact"] and top["validation_lead_low"] <= 0)
    if task == "regression":
        assert (tested["test_mae_low"] <= tested["test_mae"]).all() and (tested["test_r2"] <= 1).all()
    if task == "ranking":
        # Ten documents a query: the intervals were over the test rows' queries.
        assert (tested["test_queries"] == cmp.n_test // 10).all()
    # Every quick method of the task gives models: QWYC (with a tolerance, or keeping each
    # query's top 5), for regression the margin exit on the remaining trees' bound, and for
    # multiclass Fan et al. and the margin exit on the top-two gap.
    expect = {
        "regression": {"lightgbm", "qwyc", "margin"},
        "multiclass": {"lightgbm", "qwyc", "fan", "margin"},
    }.get(task, {"lightgbm", "qwyc"})
    assert set(small_methods(task)) == expect
    assert set(cmp.table["method"]) == {METHODS[k].name for k in small_methods(task)}


def test_bad_inputs_name_the_fix():
    X, y = binary_data(100)
    with pytest.raises(ValueError, match="budgets must be positive"):
        compare(X, y, budgets=[0.0, 5.0], progress=False)
    with pytest.raises(ValueError, match="time_limit must be a positive"):
        compare(X, y, time_limit=-1, progress=False)
    with pytest.raises(ValueError, match="single class"):
        compare(X, np.ones_like(y), progress=False)
    with pytest.raises(ValueError, match="2 missing label"):
        compare(X, np.r_[np.nan, y[1:-1], np.nan], progress=False)
    with pytest.raises(ValueError, match="unknown method"):
        compare(X, y, methods=["nope"], progress=False)
    with pytest.raises(ValueError, match="do not support"):
        compare(X, y, methods=["fan"], task="regression", progress=False)
    with pytest.raises(ValueError, match="6 features|one cost per"):
        compare(X, y, [1.0, 2.0], progress=False)


def run_cli(args):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(args)
    return code, out.getvalue(), err.getvalue()


def test_cli_on_a_csv_with_categories_missing_values_and_a_cost_file(tmp_path):
    rng = np.random.default_rng(3)
    n = 400
    colour = rng.choice(["red", "green", "blue"], size=n)
    a, b = rng.normal(size=n), rng.normal(size=n)
    b[rng.random(n) < 0.1] = np.nan
    y = ((a + (colour == "red") + np.nan_to_num(b) * 0.5) > 0.5).astype(int)
    pd.DataFrame({"a": a, "colour": colour, "b": b, "label": y}).to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "costs.json").write_text(json.dumps({"colour": 0.5, "a": 3.0, "b": 10.0}))
    methods = ",".join(small_methods("binary"))
    code, out, err = run_cli(
        [
            "compare",
            str(tmp_path / "data.csv"),
            "--target",
            "label",
            "--costs",
            str(tmp_path / "costs.json"),
            "--methods",
            methods,
            "--quick",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 0, err
    assert "selected on 5-fold cross-validation" in out and "confirmed on 100 test rows" in out
    table = pd.read_csv(tmp_path / "out" / "table.csv")
    # The costliest a model can be is every feature: 13.5 per example.
    assert (table["mean_cost"] <= 13.5 + 1e-9).all() and (table["mean_cost"] > 0).any()
    code, _, err = run_cli(["compare", str(tmp_path / "data.csv"), "--target", "nope"])
    assert code == 2 and "--target" in err
    (tmp_path / "bad.json").write_text(json.dumps({"colour": 0.5, "a": 3.0, "zzz": 1.0}))
    code, _, err = run_cli(
        ["compare", str(tmp_path / "data.csv"), "--target", "label", "--costs", str(tmp_path / "bad.json")]
    )
    assert code == 2 and "zzz" in err


def test_cli_lists_methods():
    code, out, _ = run_cli(["compare", "--list"])
    assert code == 0 and all(name in out for name in METHODS)


#: Methods per task today (docs/usage.md lists them).
N_METHODS = {"binary": 17, "multiclass": 14, "regression": 13, "ranking": 13}


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression", "ranking"])
def test_every_method_and_composition_runs(task):
    """All registered methods on small data: each gives models or says why it skipped."""
    rng = np.random.default_rng(5)
    n = 500
    X = rng.normal(size=(n, 5))
    score = X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 3]
    qid = np.repeat(np.arange(n // 10), 10) if task == "ranking" else None
    if task == "regression":
        y = score + 0.3 * rng.normal(size=n)
    elif task == "ranking":
        y = np.clip(np.round(score + 1.5), 0, 4).astype(int)
    else:
        y = (score > 0).astype(int) if task == "binary" else np.digitize(score, [-0.6, 0.6])
    costs = CostModel([1.0, 5.0, 0.5, 20.0, 2.0])
    cmp = compare(X, y, costs, qid=qid, quick=True, progress=False, lightgbm_params=FAST, cv=0)
    assert cmp.task == task
    # Budgets from 10% of the plain model's cost up are all feasible here: nothing is skipped.
    assert cmp.skipped == []
    names = {m.name for m in METHODS.values() if task in m.tasks}
    assert len(names) == N_METHODS[task]
    assert set(cmp.table["method"]) == names
    assert cmp.table["value"].notna().all()
    assert {"composition", "train", "post-hoc", "reference"} <= set(cmp.table["family"])
    # Every cost is what the runtime measures, so no model costs more than every feature.
    assert (cmp.table["mean_cost"] <= costs.feature_costs.sum() + 1e-9).all()
    assert cmp.table["fit_seconds"].ge(0).all()


@pytest.fixture
def small_csv(tmp_path):
    X, y = binary_data(120)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)]).assign(label=y)
    frame.to_csv(tmp_path / "data.csv", index=False)
    return tmp_path, frame


@pytest.mark.parametrize(
    "option, problem",
    [
        (["--budgets", "0"], "--budgets '0': 0 is not a positive cost"),
        (["--budgets=-5"], "--budgets '-5': -5 is not a positive cost"),
        (["--budgets", "5,ten"], "'ten' is not a number"),
        (["--time-limit", "-1"], "--time-limit '-1' is not a positive number of seconds"),
        (["--time-limit", "0"], "--time-limit '0' is not a positive number of seconds"),
    ],
)
def test_cli_rejects_bad_budgets_and_time_limits_in_one_line(small_csv, option, problem):
    tmp, _ = small_csv
    code, out, err = run_cli(
        ["compare", str(tmp / "data.csv"), "--target", "label", "--out", str(tmp / "out"), *option]
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and problem in err and "e.g." in err


@pytest.mark.parametrize(
    "labels, problem",
    [
        (lambda y: np.zeros_like(y), "single class"),
        (lambda y: np.where(np.arange(len(y)) % 7 == 0, np.nan, y), "missing label"),
    ],
)
def test_cli_rejects_one_class_and_missing_labels_in_one_line(small_csv, labels, problem):
    tmp, frame = small_csv
    frame.assign(label=labels(frame["label"].to_numpy(float))).to_csv(tmp / "bad.csv", index=False)
    code, out, err = run_cli(
        ["compare", str(tmp / "bad.csv"), "--target", "label", "--out", str(tmp / "out")]
    )
    assert code == 2 and out == "" and err.count("\n") == 1 and problem in err


def test_absurd_costs_are_an_error_not_inf(small_csv):
    tmp, _ = small_csv
    (tmp / "costs.json").write_text(json.dumps({f"f{i}": 1e308 for i in range(6)}))
    code, out, err = run_cli(
        [
            "compare",
            str(tmp / "data.csv"),
            "--target",
            "label",
            "--costs",
            str(tmp / "costs.json"),
            "--methods",
            "lightgbm",
            "--out",
            str(tmp / "out"),
        ]
    )
    assert code == 2 and "inf per example" not in out and err.count("\n") == 1
    assert "rescale" in err or "cost" in err


# ---------------------------------------------------------------------- the same answer, quickly
#: Methods that build on others' models (QWYC on the plain model, BudgetRF's forest pruned),
#: small enough for a test.
SHARING = ["lightgbm", "qwyc", "margin", "budgetrf", "budgetrf+prune"]


def tables_equal(a, b):
    """Every column but the timings, and the same recommendations and models."""
    drop = ["fit_seconds"]
    pd.testing.assert_frame_equal(a.table.drop(columns=drop), b.table.drop(columns=drop))
    pd.testing.assert_frame_equal(a.recommend().drop(columns=drop), b.recommend().drop(columns=drop))
    assert sorted(a.models) == sorted(b.models) and a.cut == b.cut == []


def test_the_worker_count_does_not_change_the_result():
    X, y = binary_data(300)
    kw = dict(methods=SHARING, quick=True, progress=False, lightgbm_params=FAST, cv=3)
    tables_equal(compare(X, y, n_jobs=1, **kw), compare(X, y, n_jobs=2, **kw))


def test_tasks_run_beside_the_pool_give_the_sequential_results_in_order(monkeypatch):
    """run_tasks(here=True): this process runs tasks too, beside the executor's worker; the
    results come back in the tasks' order, each built on its parent's models (``after``), as
    run one after the other."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from thrifty.comparison import pool as pool_module
    from thrifty.comparison.methods import METHODS as REGISTRY
    from thrifty.comparison.plan import after_of
    from thrifty.comparison.pool import run_tasks
    from thrifty.comparison.settings import Settings
    from thrifty.comparison.sweep import FitTask, run_task, take

    X, y = binary_data(200)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)])
    params = {**FAST, "verbose": -1, "random_state": 0, "deterministic": True}
    settings = Settings(
        "binary", CostModel.uniform(6), budgets=(1.0, 3.0), lightgbm_params=params, quick=True
    )
    chosen = [REGISTRY[k] for k in ("lightgbm", "qwyc", "margin", "cheapest")]
    (Xf, yf, _), (Xe, ye, _) = (
        take(frame, y, None, np.arange(0, 200, 2)),
        take(frame, y, None, np.arange(1, 200, 2)),
    )

    def tasks():
        return [
            FitTask(m.key, f, settings, Xf, yf, None, X_eval=Xe, y_eval=ye) for f in range(2) for m in chosen
        ]

    after = after_of(chosen, 0) + after_of(chosen, len(chosen))
    alone = run_tasks(tasks(), after=after)

    where = []  # the thread each task ran on
    monkeypatch.setattr(pool_module, "run_task", lambda t: where.append(threading.get_ident()) or run_task(t))
    beside_tasks = tasks()
    with ThreadPoolExecutor(1) as pool:
        beside = run_tasks(beside_tasks, executor=pool, workers=2, after=after, here=True)
    # Some ran on the pool's thread, the others here.
    assert len(where) == len(beside_tasks) and len(set(where)) == 2
    assert threading.get_ident() in where
    assert [(r.method, r.fold) for r in beside] == [(t.method, t.fold) for t in beside_tasks]
    for a, b in zip(alone, beside):
        assert [row["name"] for row in a.rows] == [row["name"] for row in b.rows]
        assert [row["value"] for row in a.rows] == [row["value"] for row in b.rows]
        assert [row["mean_cost"] for row in a.rows] == [row["mean_cost"] for row in b.rows]


def test_measure_reuses_the_rows_matrix_only_for_models_reading_them_alike():
    """measure(matrices=...) converts the scored frame once per reading of its columns: two
    models whose categories are coded differently each get their own matrix, and every figure
    equals the one measured on the frame itself."""
    import lightgbm

    from thrifty import Forest
    from thrifty.comparison.sweep import measure

    rng = np.random.default_rng(3)
    n = 300
    colour = rng.choice(["red", "green", "blue"], n)
    frame = pd.DataFrame({"x": rng.normal(size=n), "colour": pd.Categorical(colour)})
    y = ((frame["x"] > 0) ^ (colour == "red")).astype(int).to_numpy()
    # The same column read with its categories in another order: other codes, other matrix.
    other = frame.assign(colour=pd.Categorical(colour, categories=["red", "blue", "green"]))
    params = dict(n_estimators=20, min_data_per_group=5, cat_smooth=1.0, verbose=-1)
    models = [
        Forest.from_model(lightgbm.LGBMClassifier(**params).fit(f, y), feature_names=["x", "colour"])
        for f in (frame, other, frame)
    ]
    costs = CostModel([1.0, 5.0], feature_names=["x", "colour"])
    matrices: dict = {}
    for model in models:
        memo, _ = measure(model, frame, y, None, costs, "binary", matrices=matrices)
        plain, _ = measure(model, frame, y, None, costs, "binary")
        np.testing.assert_array_equal(memo.pop("units"), plain.pop("units"))  # each row's answer
        assert memo == plain
    assert models[0].categories != models[1].categories and len(matrices) == 2
    assert memo["value"] > 0.9  # the models read the category right


def test_a_loaded_machine_gives_the_idle_machine_result():
    """No time allowance: the planned work runs in full, so the load changes only timings."""
    import subprocess
    import sys

    X, y = binary_data(300)
    kw = dict(methods=SHARING, quick=True, progress=False, lightgbm_params=FAST, cv=3)
    # Two CPU-bound processes (one per core of a small machine), bounded in time even if the
    # test dies before stopping them.
    burn = "import time\nend = time.time() + 120\nwhile time.time() < end:\n    pass\n"
    burners = [subprocess.Popen([sys.executable, "-c", burn]) for _ in range(2)]
    try:
        loaded = compare(X, y, **kw)
    finally:
        for p in burners:
            p.kill()
            p.wait()
    tables_equal(loaded, compare(X, y, **kw))


def test_shared_models_are_fitted_once_per_set_of_rows():
    """The plain model once per fold and once for the final fit (its refits reuse it); CEGB's
    models once per budget and set of rows, though CEGB and its composition with QWYC both
    use them."""
    from thrifty.comparison import Context
    from thrifty.train import CEGBClassifier

    X, y = binary_data(300)
    fits = {"lightgbm": 0, "cegb": 0}
    fit, cegb_fit = Context.fit_lightgbm, CEGBClassifier.fit

    def count(key, f):
        def spy(self, *args, **kwargs):
            fits[key] += 1
            return f(self, *args, **kwargs)

        return spy

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Context, "fit_lightgbm", count("lightgbm", fit))
        mp.setattr(CEGBClassifier, "fit", count("cegb", cegb_fit))
        cmp = compare(
            X,
            y,
            methods=["lightgbm", "qwyc", "margin", "cegb", "cegb+qwyc"],
            quick=True,
            progress=False,
            lightgbm_params=FAST,
            cv=2,
            n_jobs=1,
        )
    assert fits["lightgbm"] == 1 + 2
    # The refit fits every budget when CEGB ordered by QWYC builds on them, else only CEGB's
    # chosen budgets (each an independent fit).
    chosen = [m for m, _ in cmp.models]
    refitted = len(cmp.budgets) if "CEGB ordered by QWYC" in chosen else chosen.count("CEGB")
    assert fits["cegb"] == len(cmp.budgets) * 2 + refitted


def test_the_refit_fits_only_the_chosen_budgets_and_gives_the_same_models(monkeypatch):
    """CEGB's refit fits the chosen budgets alone: the same table, test figures included, as
    refitting every budget (the behaviour before), with fewer fits."""
    import sys

    from thrifty.comparison.registry import spread
    from thrifty.train import CEGBClassifier

    compare_module = sys.modules["thrifty.comparison.compare"]
    # Seed 1: two budgets of three chosen, the last of ``spread``'s order among them.
    X, y = binary_data(300, seed=1)
    kw = dict(methods=["lightgbm", "cegb"], quick=True, progress=False, lightgbm_params=FAST, cv=2, n_jobs=1)
    fits = {"n": 0}
    fit = CEGBClassifier.fit

    def spy(self, *args, **kwargs):
        fits["n"] += 1
        return fit(self, *args, **kwargs)

    monkeypatch.setattr(CEGBClassifier, "fit", spy)
    only = compare(X, y, **kw)
    n_only, fits["n"] = fits["n"], 0
    monkeypatch.setattr(compare_module, "PER_BUDGET", ())
    every = compare(X, y, **kw)
    names = [n for m, n in only.models if m == "CEGB"]
    assert 0 < len(names) < len(only.budgets)  # else the test shows nothing
    # Refitting every budget goes through them coarse to fine (``spread``) until it has the
    # chosen ones; refitting the chosen ones fits those alone.
    order = [f"budget={b:.4g}" for b in spread(only.budgets)]
    assert n_only == 2 * len(only.budgets) + len(names)
    assert fits["n"] == 2 * len(only.budgets) + 1 + max(order.index(n) for n in names) > n_only
    drop = ["fit_seconds"]
    pd.testing.assert_frame_equal(only.table.drop(columns=drop), every.table.drop(columns=drop))


@pytest.mark.parametrize(
    "y, task, expect",
    [
        # diamonds' prices are whole dollars: 11,600 of them were read as classes and compare hung
        (np.arange(3000) * 7 + 326, None, "regression"),
        (np.linspace(0.0, 1.0, 100), None, "regression"),
        (np.r_[np.zeros(50), np.ones(50)], None, "binary"),
        (np.array(["neg", "pos", "mid"] * 20), None, "multiclass"),
        (np.arange(120) % 4, "multiclass", "multiclass"),
        (np.arange(120) % 4, "regression", "regression"),
        # an age of 42 distinct values became 42 classes and a model of 6.7% accuracy
        (np.arange(420) % 42 + 20, None, "42 distinct whole numbers"),
        (np.arange(120) % 4, "binary", "task binary, but y has 4 distinct label"),
        (np.arange(120) % 3, None, "multiclass"),  # classes coded 0, 1, 2
        (np.arange(120) % 3 + 1, None, "multiclass"),
        (np.arange(120) % 3 * 2, None, "3 distinct whole numbers"),  # 0, 2, 4: codes or counts?
        (np.arange(3000) * 7 + 326, "multiclass", "3,000 distinct numbers"),
        (np.arange(100) % 2, "ranking", "a ranking needs query ids"),
        (np.arange(100) % 2, "classification", "unknown task 'classification'"),
    ],
)
def test_the_task_is_inferred_or_checked_before_any_fit(y, task, expect):
    from thrifty.comparison.inputs import infer_task
    from thrifty.exceptions import InputError

    if expect in ("regression", "binary", "multiclass"):
        assert infer_task(y, None, task) == expect
        return
    with pytest.raises(InputError, match=expect):
        infer_task(y, None, task)
    X = pd.DataFrame({"a": np.arange(len(y), dtype=float)})
    with pytest.raises(InputError, match=expect):  # compare refuses it before fitting anything
        compare(X, y, task=task, progress=False, methods=["lightgbm"], lightgbm_params=FAST)
