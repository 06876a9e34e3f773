"""Tests of ``thrifty.compare`` and the ``thrifty compare`` command."""

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest

from thrifty import CostModel, evaluate
from thrifty.cli import main
from thrifty.comparison import METHODS, compare
from thrifty.frontier import pareto_front

FAST = {"n_estimators": 30, "num_leaves": 8, "n_jobs": 1}


@pytest.fixture(autouse=True)
def agg(monkeypatch):
    monkeypatch.setenv("MPLBACKEND", "Agg")


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
    return compare(X, y, costs, methods=small_methods("binary"), quick=True, progress=False,
                   lightgbm_params=FAST), X, y, costs


def test_every_row_is_the_runtime_measure_on_the_test_split(result):
    cmp, X, y, costs = result
    assert set(cmp.table["method"]) == {METHODS[k].name for k in small_methods("binary")}
    # The held-out test rows are not given back, so re-derive them the way compare does:
    # 25% held out first, stratified, seed 0.
    from sklearn.model_selection import train_test_split

    _, test = train_test_split(np.arange(len(y)), test_size=0.25, random_state=0, stratify=y)
    for _, row in cmp.table.sample(5, random_state=0).iterrows():
        X_test = pd.DataFrame(X[test], columns=[f"f{i}" for i in range(6)])
        ev = evaluate(cmp.model(row["method"], row["name"]), X_test, costs)
        assert ev.cost.mean == pytest.approx(row["mean_cost"])
        assert np.mean(ev.labels == y[test]) == pytest.approx(row["value"])


def test_front_and_recommendations_agree_with_brute_force(result):
    cmp, *_ = result
    t = cmp.table
    dominated = [any((t["mean_cost"][j] <= t["mean_cost"][i]) and (t["value"][j] >= t["value"][i])
                     and ((t["mean_cost"][j] < t["mean_cost"][i]) or (t["value"][j] > t["value"][i]))
                     for j in t.index) for i in t.index]
    assert set(cmp.front.index) == {i for i, d in zip(t.index, dominated) if not d}
    rec = cmp.recommend([0.3 * cmp.full_cost, cmp.full_cost, 10 * cmp.full_cost])
    for _, r in rec.iterrows():
        within = t[t["mean_cost"] <= r["for_budget"]]
        assert r["value"] == within["value"].max()
        assert r["mean_cost"] <= r["for_budget"]
    # The plain model itself (all its trees) is in the table, as the reference.
    assert cmp.table["mean_trees"].max() == pytest.approx(FAST["n_estimators"])


def test_write_saves_report_plot_and_recommended_models(result, tmp_path):
    cmp, *_ = result
    files = cmp.write(tmp_path, title="synthetic")
    for name in ("table.csv", "front.csv", "frontier.png", "report.md"):
        assert (tmp_path / name).stat().st_size > 0
    report = (tmp_path / "report.md").read_text()
    assert "per example (budget" in report and "## Pareto front" in report
    saved = [f for f in files if f.suffix == ".json"]
    assert saved
    from thrifty import load

    model = load(saved[0])
    assert evaluate(model, np.zeros((2, 6))).raw.shape[0] == 2


def test_time_limit_stops_early_and_still_reports():
    X, y = binary_data(300)
    cmp = compare(X, y, methods=small_methods("binary"), time_limit=0.0, progress=False,
                  lightgbm_params=FAST)
    assert cmp.stopped_early
    assert len(cmp.table) == 0 and cmp.summary()


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
    cmp = compare(X, y, [1, 2, 3, 4], qid=qid, methods=small_methods(task), quick=True,
                  progress=False, lightgbm_params=FAST)
    assert cmp.task == task
    assert len(cmp.table) >= 3 and cmp.table["value"].notna().all()
    assert len(pareto_front(cmp.table)) == len(cmp.front)


def test_bad_inputs_name_the_fix():
    X, y = binary_data(100)
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
    code, out, err = run_cli(["compare", str(tmp_path / "data.csv"), "--target", "label", "--costs",
                              str(tmp_path / "costs.json"), "--methods", methods, "--quick",
                              "--out", str(tmp_path / "out")])
    assert code == 0, err
    assert "you get" in out
    table = pd.read_csv(tmp_path / "out" / "table.csv")
    # The costliest a model can be is every feature: 13.5 per example.
    assert (table["mean_cost"] <= 13.5 + 1e-9).all() and (table["mean_cost"] > 0).any()
    code, _, err = run_cli(["compare", str(tmp_path / "data.csv"), "--target", "nope"])
    assert code == 2 and "--target" in err
    (tmp_path / "bad.json").write_text(json.dumps({"colour": 0.5, "a": 3.0, "zzz": 1.0}))
    code, _, err = run_cli(["compare", str(tmp_path / "data.csv"), "--target", "label", "--costs",
                            str(tmp_path / "bad.json")])
    assert code == 2 and "zzz" in err


def test_cli_lists_methods():
    code, out, _ = run_cli(["compare", "--list"])
    assert code == 0 and all(name in out for name in METHODS)


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_every_method_and_composition_runs(task):
    """All registered methods on small data: each gives models or says why it skipped."""
    rng = np.random.default_rng(5)
    n = 500
    X = rng.normal(size=(n, 5))
    score = X[:, 0] + 0.7 * X[:, 1] - 0.5 * X[:, 3]
    y = (score > 0).astype(int) if task == "binary" else np.digitize(score, [-0.6, 0.6])
    costs = CostModel([1.0, 5.0, 0.5, 20.0, 2.0])
    cmp = compare(X, y, costs, quick=True, progress=False, lightgbm_params=FAST)
    # Budgets from 10% of the plain model's cost up are all feasible here: nothing is skipped.
    assert cmp.skipped == []
    assert set(cmp.table["method"]) == {m.name for m in METHODS.values() if task in m.tasks}
    assert {"composition", "train", "post-hoc", "reference"} <= set(cmp.table["family"])
    # Every cost is what the runtime measures, so no model costs more than every feature.
    assert (cmp.table["mean_cost"] <= costs.feature_costs.sum() + 1e-9).all()
    assert cmp.table["fit_seconds"].ge(0).all()
