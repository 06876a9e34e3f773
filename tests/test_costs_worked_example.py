"""The worked example of docs/costs.md, computed by the runtime (the doc must not drift)."""

from __future__ import annotations

import numpy as np
import pytest

from thrifty import CostModel, Forest, evaluate

NAMES = ["age", "TSH", "TT4", "T4U", "FTI"]


def two_trees() -> Forest:
    # tree 1: TSH <= 6 -> leaf, else FTI <= 100 -> leaf/leaf ; tree 2: TT4 <= 80 -> leaf/leaf
    #         0: TSH      1: leaf  2: FTI   3: leaf  4: leaf  5: TT4  6: leaf  7: leaf
    return Forest(
        feature=[1, -1, 4, -1, -1, 2, -1, -1],
        threshold=[6.0, 0, 100.0, 0, 0, 80.0, 0, 0],
        children_left=[1, -1, 3, -1, -1, 6, -1, -1],
        children_right=[2, -1, 4, -1, -1, 7, -1, -1],
        missing_left=[False] * 8,
        missing_type=[0] * 8,
        cat_start=[-1] * 8,
        cat_size=[0] * 8,
        cat_bitsets=np.zeros(0),
        value=[0, -1, 0, 1, 2, 0, -1, 1],
        roots=[0, 5],
        tree_weight=[1.0, 1.0],
        tree_class=[0, 0],
        base_score=[0.0],
        n_features=5,
        link="sigmoid",
        task="binary",
        feature_names=NAMES,
    )


def test_worked_example_of_the_docs():
    costs = CostModel(
        {"age": 1.0, "TSH": 22.78, "TT4": 14.51, "T4U": 11.41, "FTI": 0.0},
        feature_names=NAMES,
        dependencies={"FTI": ["TT4", "T4U"]},
        tree_cost=0.5,
    )
    X = np.array([[50, 2.0, 90, 1.0, 90], [50, 9.0, 90, 1.0, 90]])
    report = evaluate(two_trees(), X, costs).cost
    np.testing.assert_allclose(report.feature, [37.29, 48.70])
    np.testing.assert_allclose(report.evaluation, [1.0, 1.0])
    np.testing.assert_allclose(report.total, [38.29, 49.70])
    assert report.acquired.tolist() == [[False, True, True, False, False], [False, True, True, True, True]]
    panel = CostModel(
        {"age": 1.0, "TSH": 22.78, "panel": 20.0, "FTI": 0.0},
        feature_names=NAMES,
        groups={"panel": ["TT4", "T4U"]},
        dependencies={"FTI": ["TT4", "T4U"]},
    )
    report = evaluate(two_trees(), X[:1], panel).cost
    assert report.feature[0] == pytest.approx(42.78)
    assert report.acquired[0].tolist() == [False, True, True, True, False]
