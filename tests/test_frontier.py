"""Tests of thrifty.frontier: frontier tables and Pareto fronts."""

import lightgbm
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import thrifty
from thrifty.frontier import COLUMNS, frontier, pareto_front


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    model = lightgbm.LGBMClassifier(
        n_estimators=20, num_leaves=4, verbose=-1, n_jobs=1, deterministic=True
    ).fit(X, y)
    costs = thrifty.CostModel([1.0, 2.0, 4.0, 8.0, 16.0])
    return X, y, thrifty.Forest.from_model(model), costs


def test_one_row_per_model_with_exact_costs(problem):
    X, y, forest, costs = problem
    models = {f"first {k}": forest.subset(range(k)) for k in (1, 5, 20)}
    table = frontier(models, X, y, costs, metric="accuracy", progress=False)
    assert list(table.columns) == COLUMNS
    assert list(table["name"]) == list(models)
    for (_, row), model in zip(table.iterrows(), models.values()):
        ev = thrifty.evaluate(model, X, costs)
        assert row["mean_cost"] == pytest.approx(ev.cost.total.mean())
        assert row["median_cost"] == pytest.approx(np.median(ev.cost.total))
        assert row["q90_cost"] == pytest.approx(np.quantile(ev.cost.total, 0.9))
        assert row["max_cost"] == pytest.approx(ev.cost.total.max())
        assert row["mean_features"] == pytest.approx(ev.cost.acquired.sum(axis=1).mean())
        assert row["value"] == pytest.approx(np.mean(ev.labels == y))
    assert list(table["mean_trees"]) == [1.0, 5.0, 20.0]
    assert set(table["metric"]) == {"accuracy"}


@pytest.mark.parametrize(
    "params, expected",
    [
        # one list per column
        ({"k": [1, 2], "method": ["a", "b"]}, {"k": [1, 2], "method": ["a", "b"]}),
        # a scalar is broadcast to every model
        ({"method": "truncation", "k": [1, 2]}, {"method": ["truncation"] * 2, "k": [1, 2]}),
        # one mapping per model; a key a model lacks is missing there
        ([{"budget": 1.0}, {"budget": 2.0, "lam": 0.5}], {"budget": [1.0, 2.0], "lam": [None, 0.5]}),
    ],
)
def test_params_become_columns(problem, params, expected):
    X, y, forest, costs = problem
    table = frontier(
        [forest.subset([0]), forest], X, y, costs, metric="accuracy", params=params, progress=False
    )
    assert list(table["name"]) == ["model_0", "model_1"]
    for column, values in expected.items():
        got = [None if (isinstance(v, float) and np.isnan(v)) else v for v in table[column]]
        assert got == values


def test_callable_metric_and_default_metric(problem):
    X, y, forest, costs = problem

    def error_rate(y_true, evaluation):
        return float(np.mean(evaluation.labels != y_true))

    table = frontier([forest], X, y, costs, metric=error_rate, progress=True)
    assert table.loc[0, "metric"] == "error_rate"
    assert table.loc[0, "value"] == pytest.approx(np.mean(forest.predict(X) != y))
    default = frontier([forest], X, y, None, progress=False)
    assert isinstance(default.loc[0, "metric"], str) and np.isfinite(default.loc[0, "value"])
    assert default.loc[0, "mean_cost"] == pytest.approx(default.loc[0, "mean_features"])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"names": ["only one"]}, "1 names for 2 models"),
        ({"params": {"k": [1, 2, 3]}}, "3 values for 2 models"),
        ({"params": [{"k": 1}]}, "1 params mappings for 2 models"),
        ({"metric": "f1"}, "unknown metric 'f1'"),
        ({"metric": "ndcg@5"}, "needs qid"),
        ({"params": {"value": [1, 2]}}, "would overwrite"),
    ],
)
def test_user_errors(problem, kwargs, match):
    X, y, forest, costs = problem
    with pytest.raises(ValueError, match=match):
        frontier([forest, forest], X, y, costs, progress=False, **kwargs)


def _brute_force(cost, value):
    keep = []
    for i in range(len(cost)):
        dominated = any(
            cost[j] <= cost[i] and value[j] >= value[i] and (cost[j] < cost[i] or value[j] > value[i])
            for j in range(len(cost))
        )
        if not dominated:
            keep.append(i)
    return keep


@settings(max_examples=200, deadline=None)
@given(points=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=25), higher=st.booleans())
def test_pareto_front_matches_brute_force(points, higher):
    # Small integer grids make ties in cost, in value and in both common.
    table = pd.DataFrame(points, columns=["mean_cost", "value"], dtype=float)
    front = pareto_front(table, higher_is_better=higher)
    value = table["value"].to_numpy() * (1 if higher else -1)
    assert sorted(front.index) == _brute_force(table["mean_cost"].to_numpy(), value)
    assert front["mean_cost"].is_monotonic_increasing
    # Along the front, spending more buys strictly better values.
    strict = front.drop_duplicates(["mean_cost", "value"])
    oriented = strict["value"] * (1 if higher else -1)
    assert oriented.is_monotonic_increasing and oriented.is_unique


def test_pareto_front_ignores_missing_and_names_columns():
    table = pd.DataFrame({"c": [1.0, np.nan, 3.0, 2.0], "v": [0.5, 0.9, np.nan, 0.7]})
    assert list(pareto_front(table, cost="c", value="v").index) == [0, 3]
    # An infinitely bad value is still on the front when nothing is cheaper.
    worst = pd.DataFrame({"mean_cost": [0.0, 1.0], "value": [-np.inf, 0.0]})
    assert list(pareto_front(worst).index) == [0, 1]
    with pytest.raises(KeyError, match="no column 'mean_cost'"):
        pareto_front(table)


def test_frontier_gap_integrates_the_step_functions_exactly():
    import pandas as pd

    from thrifty.frontier import frontier_gap

    a = pd.DataFrame({"mean_cost": [1.0, 3.0, 5.0], "value": [0.5, 0.8, 0.7]})
    b = pd.DataFrame({"mean_cost": [2.0, 4.0, 9.0], "value": [0.6, 0.7, 0.9]})
    # Common range [2, 5]. a: 0.5 on [2,3), 0.8 on [3,5]; b: 0.6 on [2,4), 0.7 on [4,5].
    expected = ((0.5 - 0.6) * 1 + (0.8 - 0.6) * 1 + (0.8 - 0.7) * 1) / 3
    assert frontier_gap(a, b) == pytest.approx(expected)
    assert frontier_gap(b, a) == pytest.approx(-expected)
    assert frontier_gap(a, a) == 0.0
    # A brute-force Riemann sum over a fine grid agrees.
    grid = np.linspace(2, 5, 300001)[:-1]
    step = lambda t, x: np.array([t["value"][t["mean_cost"] <= c].max() for c in x])  # noqa: E731
    assert frontier_gap(a, b) == pytest.approx(np.mean(step(a, grid[::100]) - step(b, grid[::100])), abs=2e-3)
    far = pd.DataFrame({"mean_cost": [10.0, 11.0], "value": [0.1, 0.2]})
    assert np.isnan(frontier_gap(a, far))
    assert frontier_gap(a, b, log_cost=True) == pytest.approx(
        ((0.5 - 0.6) * np.log(1.5) + 0.2 * np.log(4 / 3) + 0.1 * np.log(5 / 4)) / np.log(2.5)
    )


def test_a_regressions_frontier_is_in_rmse_and_lower_is_better():
    from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

    from thrifty.frontier import frontier_gap

    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3))
    y = 1e4 * (X[:, 0] + 0.5 * X[:, 1] ** 2)
    model = lightgbm.LGBMRegressor(n_estimators=20, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y)
    forest = thrifty.Forest.from_model(model)
    models = {f"first {k}": forest.subset(range(k)) for k in (1, 5, 20)}
    table = frontier(models, X, y, thrifty.CostModel([1.0, 2.0, 4.0]), progress=False)
    assert set(table["metric"]) == {"rmse"}
    pred = model.predict(X)
    assert table["value"].iloc[2] == pytest.approx(np.sqrt(mean_squared_error(y, pred)))
    for name, reference in [("mae", mean_absolute_error), ("r2", r2_score)]:
        assert frontier([forest], X, y, None, metric=name, progress=False)["value"][0] == pytest.approx(
            reference(y, pred)
        )
    # More trees, lower RMSE: every model is on the front, read from the metric column.
    assert list(pareto_front(table).index) == [0, 1, 2]
    assert list(pareto_front(table, higher_is_better=True).index) == [0]
    # The metric column names what "value" holds, not another column's direction.
    assert list(pareto_front(table.assign(score=-table["value"]), value="score").index) == [0, 1, 2]
    # The gap is positive when the first frontier's error is lower.
    better = table.assign(value=table["value"] - 10.0)
    assert frontier_gap(better, table) == pytest.approx(10.0)
