"""Tests of thrifty.plot: every figure renders headless and draws the expected artists."""

import numpy as np
import pandas as pd
import pytest

from thrifty.costs import CostModel, CostReport
from thrifty.plot import (
    plot_cost_histogram,
    plot_feature_acquisition,
    plot_frontier,
    plot_trees_histogram,
)


@pytest.fixture(autouse=True)
def agg(monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def _table(costs, values, method=None):
    table = pd.DataFrame(
        {
            "name": [f"m{i}" for i in range(len(costs))],
            "mean_cost": costs,
            "value": values,
            "metric": "accuracy",
        }
    )
    if method is not None:
        table["method"] = method
    return table


@pytest.fixture
def report():
    rng = np.random.default_rng(0)
    acquired = rng.random((50, 4)) < [0.9, 0.5, 0.2, 0.0]
    feature = acquired @ np.array([1.0, 2.0, 5.0, 9.0])
    n_trees = rng.integers(1, 10, size=50)
    return CostReport(
        feature=feature,
        evaluation=np.zeros(50),
        total=feature,
        n_trees=n_trees,
        n_nodes=3 * n_trees,
        acquired=acquired,
        feature_names=["a", "b", "c", "d"],
    )


def test_frontier_one_series_per_method_plus_front(tmp_path):
    tables = {
        "truncation": _table([1, 5, 9], [0.6, 0.7, 0.8]),
        "cheap features": _table([2, 3, 10], [0.65, 0.75, 0.79]),
    }
    ax = plot_frontier(tables, cost_unit="$")
    assert [line.get_label() for line in ax.lines] == ["truncation", "cheap features", "Pareto front"]
    front = ax.lines[-1]
    # (5, .7) and (10, .79) are dominated: something cheaper is at least as good.
    assert list(front.get_xdata()) == [1, 2, 3, 9]
    assert "($)" in ax.get_xlabel() and ax.get_ylabel() == "accuracy"
    ax.figure.savefig(tmp_path / "frontier.png")
    assert (tmp_path / "frontier.png").stat().st_size > 0


def test_an_error_metrics_front_keeps_the_lower_values():
    # RMSE: lower is better, read from the metric column unless the caller says otherwise.
    table = _table([1, 5, 9], [900.0, 700.0, 800.0]).assign(metric="rmse")
    assert list(plot_frontier(table).lines[-1].get_xdata()) == [1, 5]
    assert list(plot_frontier(table, higher_is_better=True).lines[-1].get_xdata()) == [1]


def test_frontier_joins_each_method_by_cost_and_draws_the_front_boldly():
    # Rows out of cost order, with a tie in cost: the line must still run left to right.
    table = pd.concat([_table([9, 1, 5, 5], [0.8, 0.6, 0.75, 0.7], "a"), _table([3, 2], [0.72, 0.65], "b")])
    given = table.iloc[[1, 5]]
    ax = plot_frontier(table, front=given)
    *methods, front = ax.lines
    for line in methods:
        x, y = line.get_xdata(), line.get_ydata()
        assert np.all(np.diff(x) >= 0)
        assert np.all(np.diff(y)[np.diff(x) == 0] >= 0)  # ties by value: no doubling back
        assert line.get_alpha() < 0.5 and line.get_linewidth() < front.get_linewidth()
    assert list(front.get_xdata()) == [1, 2]  # the front given, not recomputed
    assert front.get_alpha() is None or front.get_alpha() == 1


def test_frontier_from_one_table():
    both = pd.concat([_table([1, 2], [0.5, 0.6], "a"), _table([3], [0.9], "b")])
    assert len(plot_frontier(both).lines) == 3
    assert len(plot_frontier(both, pareto=False).lines) == 2
    assert len(plot_frontier(_table([1, 2], [0.5, 0.6]), annotate="name").lines) == 2


def test_frontier_on_given_axes_for_a_loss():
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    out = plot_frontier(
        _table([1, 2, 3], [0.5, 0.2, 0.4]), ax=ax, higher_is_better=False, value_label="log loss"
    )
    assert out is ax
    assert list(ax.lines[-1].get_ydata()) == [0.5, 0.2]
    assert ax.get_ylabel() == "log loss"


def test_frontier_errors():
    with pytest.raises(KeyError, match="no column"):
        plot_frontier(_table([1], [0.5]), cost="q90_cost")
    with pytest.raises(TypeError, match="DataFrame"):
        plot_frontier([1, 2, 3])


def test_cost_histogram(report, tmp_path):
    ax = plot_cost_histogram(report, bins=7, cost_unit="ms")
    assert len(ax.patches) == 7
    assert [line.get_label().split()[0] for line in ax.lines] == ["mean", "median"]
    assert ax.get_xlabel() == "total cost per example (ms)"
    ax.figure.savefig(tmp_path / "hist.png")


def test_trees_histogram_has_one_bin_per_count(report):
    ax = plot_trees_histogram(report)
    heights = [p.get_height() for p in ax.patches]
    assert len(heights) == report.n_trees.max() + 1
    assert heights == list(np.bincount(report.n_trees).astype(float))


def test_feature_acquisition(report):
    costs = CostModel([1.0, 2.0, 5.0, 9.0], feature_names=["a", "b", "c", "d"])
    ax = plot_feature_acquisition(report, costs=costs)
    widths = [p.get_width() for p in ax.patches]
    assert widths == sorted(report.acquisition_rate(), reverse=True)
    labels = dict(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())))
    # The most acquired feature is on top, labelled with its price.
    assert labels[3] == "a (1)" and len(labels) == 4


def test_reports_from_an_evaluation_are_accepted(report):
    class Evaluation:
        cost = report

    assert len(plot_cost_histogram(Evaluation(), bins=3).patches) == 3
    with pytest.raises(TypeError, match="CostReport"):
        plot_cost_histogram(np.zeros(3))


def test_frontier_gives_each_method_its_own_colour_and_marker():
    import matplotlib.colors as mcolors

    table = pd.concat([_table([i + 1, i + 2], [0.5, 0.6 + i / 100], method=f"m{i}") for i in range(16)])
    ax = plot_frontier(table)
    series = ax.lines[:16]
    styles = {(line.get_color(), line.get_marker()) for line in series}
    assert len(styles) == 16
    # No two colours near-identical (tab20 paired a dark and a light shade of each hue).
    rgb = np.array([mcolors.to_rgb(c) for c in {line.get_color() for line in series}])
    gaps = np.linalg.norm(rgb[:, None] - rgb[None], axis=-1) + 10 * np.eye(len(rgb))
    assert gaps.min() > 0.25
    # Neighbours in the legend differ in colour and in marker.
    for a, b in zip(series, series[1:]):
        assert a.get_color() != b.get_color() and a.get_marker() != b.get_marker()


def test_front_points_wear_their_methods_colour_and_the_plain_model_is_labelled():
    import matplotlib.colors as mcolors

    table = pd.concat(
        [
            _table([1, 5, 9], [0.6, 0.7, 0.8], method="truncation"),
            _table([2, 3], [0.65, 0.75], method="cheap"),
        ],
        ignore_index=True,
    )
    ax = plot_frontier(table, baseline=2, cost_unit="$")
    colour = {line.get_label(): mcolors.to_rgba(line.get_color()) for line in ax.lines}
    points = ax.collections[:-1]
    assert len(points) == 4  # the front: costs 1, 2, 3 and 9
    by_cost = {float(p.get_offsets()[0, 0]): tuple(p.get_facecolor()[0]) for p in points}
    assert by_cost == {
        1.0: colour["truncation"],
        2.0: colour["cheap"],
        3.0: colour["cheap"],
        9.0: colour["truncation"],
    }
    star = ax.collections[-1]
    assert star.get_label() == "plain model" and tuple(star.get_offsets()[0]) == (9.0, 0.8)
    assert any(t.get_text() == "plain model\n$9.00" for t in ax.texts)
    assert "plain model" in [t.get_text() for t in ax.get_legend().get_texts()]
