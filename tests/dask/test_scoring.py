"""thrifty.dask.evaluate on a LocalCluster of worker processes, checked against thrifty.evaluate."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

dd = pytest.importorskip("dask.dataframe", reason="the Dask tests need the extra thrifty[dask]")
da = pytest.importorskip("dask.array", reason="the Dask tests need the extra thrifty[dask]")

import lightgbm  # noqa: E402

import thrifty  # noqa: E402
from thrifty.costs import CostModel  # noqa: E402
from thrifty.dask import (  # noqa: E402
    PartitionInfo,
    _scoring,  # noqa: E402
    cost_summary,
    evaluate,
)
from thrifty.runtime.evaluate import array_provider  # noqa: E402
from thrifty.runtime.plans import Full  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def adult_like():
    """A frame with a categorical column, string classes, a cost model and a fitted LightGBM."""
    rng = np.random.default_rng(0)
    n = 1200
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, n).astype(float),
            "hours": rng.normal(40, 10, n),
            "work": pd.Categorical(rng.choice(["private", "gov", "self"], n)),
            "gain": rng.exponential(1.0, n),
        }
    )
    score = 0.05 * (frame.age - 40) + 0.1 * (frame.hours - 40) + (frame.work == "gov") + frame.gain
    y = np.where(score + rng.normal(size=n) > 1, ">50K", "<=50K")
    model = lightgbm.LGBMClassifier(n_estimators=25, num_leaves=8, verbose=-1, n_jobs=1).fit(frame, y)
    costs = CostModel(
        {"age": 1, "hours": 2, "work": 3, "gain": 5}, feature_names=list(frame.columns), tree_cost=0.1
    )
    return frame, y, model, costs


def _check_equal(table: pd.DataFrame, ev) -> None:
    np.testing.assert_array_equal(table["prediction"].to_numpy(), ev.predictions)
    np.testing.assert_array_equal(table["cost"].to_numpy(), ev.cost.total)
    np.testing.assert_array_equal(table["feature_cost"].to_numpy(), ev.cost.feature)
    np.testing.assert_array_equal(table["evaluation_cost"].to_numpy(), ev.cost.evaluation)
    np.testing.assert_array_equal(table["n_trees"].to_numpy(), ev.cost.n_trees)
    np.testing.assert_array_equal(table["exit"].to_numpy(), ev.exit)


def test_dataframe_with_categoricals_matches_evaluate(client, adult_like):
    frame, _, model, costs = adult_like
    ddf = dd.from_pandas(frame, npartitions=5)
    scored = evaluate(model, ddf, costs)
    assert list(scored.columns) == [
        "prediction",
        "proba_<=50K",
        "proba_>50K",
        "exit",
        "cost",
        "feature_cost",
        "evaluation_cost",
        "n_trees",
    ]
    table = scored.compute()
    # meta is exact: the computed frame has the dtypes the lazy frame announced
    assert table.dtypes.equals(scored.dtypes)
    ev = thrifty.evaluate(model, frame, costs)
    assert table.index.equals(frame.index)
    _check_equal(table, ev)
    np.testing.assert_allclose(table[["proba_<=50K", "proba_>50K"]].to_numpy(), ev.proba)


def test_array_regressor_and_cost_summary_exact(client):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 6))
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(scale=0.1, size=3000)
    model = lightgbm.LGBMRegressor(n_estimators=30, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
    costs = CostModel([1, 2, 3, 4, 5, 6], split_cost=0.01)
    scored = evaluate(model, da.from_array(X, chunks=(700, 3)), costs)
    table = scored.compute()
    ev = thrifty.evaluate(model, X, costs)
    np.testing.assert_allclose(table["prediction"].to_numpy(), ev.raw, rtol=1e-12)
    np.testing.assert_array_equal(table["cost"].to_numpy(), ev.cost.total)
    qs = (0.0, 0.1, 0.5, 0.9, 0.99, 1.0)
    summary = cost_summary(scored, qs)
    total = ev.cost.total
    assert summary.n == 3000 and summary.quantiles_exact
    assert summary.mean == pytest.approx(total.mean(), rel=1e-12)
    assert summary.max == total.max() and summary.min == total.min()
    assert summary.feature_mean == pytest.approx(ev.cost.feature.mean(), rel=1e-12)
    assert summary.evaluation_mean == pytest.approx(ev.cost.evaluation.mean(), rel=1e-12)
    for q in qs:
        assert summary.quantiles[q] == pytest.approx(np.quantile(total, q), rel=1e-12)


def test_approximate_quantiles_from_sketches(monkeypatch):
    # Continuous costs with more distinct values than the exact limit: the sketches' merged
    # quantiles are close to the exact ones (in rank), and reported as approximate.
    monkeypatch.setattr(_scoring, "_EXACT_DISTINCT", 100)
    rng = np.random.default_rng(2)
    cost = rng.gamma(2.0, 3.0, 20_000)
    frame = pd.DataFrame({"cost": cost, "feature_cost": cost, "evaluation_cost": 0.0})
    summary = cost_summary(dd.from_pandas(frame, npartitions=7), (0.05, 0.5, 0.95), compute=False)
    summary = summary.compute(scheduler="sync")
    assert not summary.quantiles_exact
    assert summary.mean == pytest.approx(cost.mean(), rel=1e-12)
    for q, value in summary.quantiles.items():
        assert abs(np.mean(cost <= value) - q) < 0.003


def test_plan_reaches_each_worker_once(client, adult_like, tmp_path):
    # The plan unpickles at most once per process that holds it (scheduler and 2 workers),
    # not once per partition.
    frame, _, model, costs = adult_like
    counting = CountingPlan(thrifty.Forest.from_model(model), str(tmp_path / "loads"))
    scored = evaluate(counting, dd.from_pandas(frame, npartitions=12), costs)
    table = scored.compute()
    _check_equal(table, thrifty.evaluate(model, frame, costs))
    loads = (tmp_path / "loads").read_text().count("\n")
    assert 1 <= loads <= 3 < 12


def test_lazy_fetches_exactly_what_lazy_evaluation_acquires(client, adult_like, tmp_path):
    frame, _, model, costs = adult_like
    X = thrifty.forest._inputs.to_matrix(
        frame, 4, list(frame.columns), Full(thrifty.Forest.from_model(model)).categories
    )
    np.save(tmp_path / "store.npy", X)
    keys = dd.from_pandas(pd.DataFrame({"row": np.arange(len(frame))}), npartitions=6)
    scored = evaluate(model, keys, costs, provider_factory=StoreProvider(str(tmp_path)))
    table = scored.compute()
    # The reference: single-process lazy evaluation, recording what it fetched.
    fetched = []
    serve = array_provider(X)

    def recording(features, rows):
        fetched.extend((int(r), int(f)) for f in features for r in rows)
        return serve(features, rows)

    ev = thrifty.evaluate(model, recording, costs, n_rows=len(frame))
    _check_equal(table, ev)
    worker_pairs = []
    for path in sorted(tmp_path.glob("fetched-*.npy")):
        worker_pairs.extend(map(tuple, np.load(path).tolist()))
    assert len(list(tmp_path.glob("fetched-*.npy"))) == 6  # one provider per partition
    assert len(worker_pairs) == len(set(worker_pairs))  # nothing fetched twice
    assert set(worker_pairs) == set(fetched)
    assert set(worker_pairs) == {(int(r), int(f)) for r, f in zip(*np.nonzero(ev.cost.acquired))}


def test_lazy_mode_runs_a_compiled_plan(client, adult_like, tmp_path):
    # Each partition's rounds run the compiled plan's native lazy code: the interpreter's results.
    frame, _, model, costs = adult_like
    X = thrifty.forest._inputs.to_matrix(
        frame, 4, list(frame.columns), Full(thrifty.Forest.from_model(model)).categories
    )
    np.save(tmp_path / "store.npy", X)
    keys = dd.from_pandas(pd.DataFrame({"row": np.arange(len(frame))}), npartitions=4)
    compiled = thrifty.compile(model, costs)
    table = evaluate(compiled, keys, provider_factory=StoreProvider(str(tmp_path))).compute()
    _check_equal(table, thrifty.evaluate(model, array_provider(X), costs, n_rows=len(frame)))


def test_bad_inputs_fail_with_a_message(adult_like):
    frame, _, model, _ = adult_like
    with pytest.raises(TypeError, match="Dask DataFrame or Array"):
        evaluate(model, frame)
    with pytest.raises(ValueError, match="2-D"):
        evaluate(model, da.zeros(10, chunks=5))
    with pytest.raises(TypeError, match="CostModel"):
        evaluate(model, dd.from_pandas(frame, npartitions=2), costs=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="lacks the model's feature"):
        evaluate(model, dd.from_pandas(frame.rename(columns={"age": "AGE"}), npartitions=2))


def test_import_thrifty_does_not_import_dask():
    code = "import sys, thrifty; print(any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert out.stdout.strip() == "False"


class CountingPlan(Full):
    """A Full plan that records every unpickling in a file (one line per load)."""

    def __init__(self, forest, path):
        super().__init__(forest)
        self.path = path

    def __reduce__(self):
        return (_load_counting, (self.forest, self.path))


def _load_counting(forest, path):
    with open(path, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    return CountingPlan(forest, path)


class StoreProvider:
    """A provider factory reading a feature store on disk, recording what each partition fetched."""

    def __init__(self, directory):
        self.directory = directory

    def __call__(self, info: PartitionInfo):
        store = np.load(os.path.join(self.directory, "store.npy"), mmap_mode="r")
        rows_global = info.rows["row"].to_numpy()
        log = []
        out_path = os.path.join(self.directory, f"fetched-{info.number}.npy")

        def provider(features, rows):
            global_rows = rows_global[rows]
            log.extend((int(r), int(f)) for f in features for r in global_rows)
            np.save(out_path, np.array(log, dtype=np.int64).reshape(-1, 2))
            return np.asarray(store[np.ix_(global_rows, features)])

        return provider


def test_compiled_plan_scores_on_the_cluster(client, adult_like):
    # The plan pickles as plan + costs; each worker loads the native code from the disk cache.
    frame, _, model, costs = adult_like
    compiled = thrifty.compile(model, costs)
    assert compiled.native
    table = evaluate(compiled, dd.from_pandas(frame, npartitions=3)).compute()
    ev = thrifty.evaluate(model, frame, costs)
    _check_equal(table, ev)
    # Probability columns are named by class, as for the plan itself.
    assert [c for c in table.columns if c.startswith("proba_")] == ["proba_<=50K", "proba_>50K"]
    np.testing.assert_array_equal(table[["proba_<=50K", "proba_>50K"]].to_numpy(), ev.proba)
