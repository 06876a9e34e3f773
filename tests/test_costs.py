"""CostModel semantics and validation, CostReport summaries."""

from __future__ import annotations

import json

import numpy as np
import pytest

from thrifty import CostModel, CostReport

NAMES = ["age", "TT4", "T4U", "FTI", "TSH"]


def thyroid_like() -> CostModel:
    return CostModel(
        {"age": 1.0, "TT4": 14.51, "T4U": 11.41, "FTI": 0.0, "TSH": 22.78},
        feature_names=NAMES,
        dependencies={"FTI": ["TT4", "T4U"]},
    )


def test_dependency_pays_inputs_once():
    costs = thyroid_like()
    assert costs.acquisition_cost(["FTI"]) == pytest.approx(25.92)
    # TT4 already acquired through FTI: no second payment.
    assert costs.acquisition_cost(["FTI", "TT4"]) == pytest.approx(25.92)
    assert costs.acquisition_cost(["TT4"]) == pytest.approx(14.51)
    assert list(costs.closure(["FTI"])) == [False, True, True, True, False]


@pytest.mark.parametrize(
    "groups, costs_given, expected",
    [
        # a group without its own price costs the sum of its members
        ({"panel": ["TT4", "T4U"]}, {}, 14.51 + 11.41),
        # a group priced by name costs that price, however many members are used
        ({"panel": ["TT4", "T4U"]}, {"panel": 20.0}, 20.0),
    ],
)
def test_group_is_paid_once(groups, costs_given, expected):
    spec = {"age": 1.0, "TT4": 14.51, "T4U": 11.41, "FTI": 0.0, "TSH": 22.78, **costs_given}
    costs = CostModel(spec, feature_names=NAMES, groups=groups)
    assert costs.acquisition_cost(["TT4"]) == pytest.approx(expected)
    assert costs.acquisition_cost(["TT4", "T4U"]) == pytest.approx(expected)
    assert costs.closure(["T4U"]).tolist() == [False, True, True, False, False]


def test_group_and_dependency_combine():
    costs = CostModel(
        {"age": 1.0, "TT4": 14.51, "T4U": 11.41, "FTI": 0.0, "TSH": 22.78},
        feature_names=NAMES,
        groups={"thyro": ["TSH", "age"]},
        dependencies={"FTI": ["TT4", "TSH"]},
    )
    # FTI -> TT4 and TSH; TSH's group brings age along.
    assert costs.acquisition_cost(["FTI"]) == pytest.approx(14.51 + 22.78 + 1.0)
    assert costs.closure(["FTI"]).tolist() == [True, True, False, True, True]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(feature_costs=[1.0, -2.0]), "negative"),
        (dict(feature_costs=[1.0, np.nan]), "NaN"),
        (dict(feature_costs=[np.inf, 1.0]), "infinite"),
        (dict(feature_costs=[1.0, "a"]), "number"),
        (dict(feature_costs=[1.0, 2.0], feature_names=["a", "b", "c"]), "one cost per feature"),
        (dict(feature_costs={"a": 1.0}), "feature_names"),
        (dict(feature_costs={"a": 1.0, "zz": 2.0}, feature_names=["a", "b"]), "unknown feature name 'zz'"),
        (dict(feature_costs={"a": 1.0}, feature_names=["a", "b"]), r"no cost given for feature\(s\) \['b'\]"),
        (
            dict(
                feature_costs=[1.0, 1.0, 1.0],
                feature_names=["a", "b", "c"],
                dependencies={"a": ["b"], "b": ["c"], "c": ["a"]},
            ),
            "cyclic feature dependency: a -> b -> c -> a",
        ),
        (
            dict(feature_costs=[1.0, 1.0], feature_names=["a", "b"], groups={"g": ["a"], "h": ["a", "b"]}),
            "more than one group",
        ),
        (dict(feature_costs=[1.0, 1.0], tree_cost=-1), "tree_cost"),
        (dict(feature_costs=[1.0, 1.0], fixed_costs=[1.0]), "fixed_costs"),
        (dict(feature_costs=[1.0, 1.0], feature_names=["a", "a"]), r"duplicate name\(s\) \[.a.\]"),
        # more costs than names: counted before a cost is labelled by its name (was IndexError)
        (dict(feature_costs=[1.0, 2.0, 3.0], feature_names=["a", "b"]), "3 feature costs for 2"),
        # true is not 1, nor "2" two: JSON booleans and strings are slips, refused like null
        (dict(feature_costs={"a": True, "b": 1.0}, feature_names=["a", "b"]), "feature 'a' must be a number"),
        (dict(feature_costs={"a": "2", "b": 1.0}, feature_names=["a", "b"]), "feature 'a' must be a number"),
    ],
)
def test_validation_names_the_problem(kwargs, match):
    costs = kwargs.pop("feature_costs")
    with pytest.raises(ValueError, match=match):
        CostModel(costs, **kwargs)


def test_uniform_and_from_meta():
    assert CostModel.uniform(4).feature_costs.tolist() == [1.0] * 4
    meta = {
        "features": NAMES,
        "costs": {"age": 1.0, "TT4": 14.51, "T4U": 11.41, "TSH": 22.78},
        "dependencies": {"FTI": ["TT4", "T4U"]},
    }
    costs = CostModel.from_meta(meta)
    assert costs.feature_costs[NAMES.index("FTI")] == 0.0
    assert costs.acquisition_cost(["FTI"]) == pytest.approx(25.92)
    assert CostModel.from_meta({"features": ["a", "b"], "costs": None}).feature_costs.tolist() == [1, 1]


def test_from_file_json_and_csv(tmp_path):
    j = tmp_path / "costs.json"
    j.write_text(json.dumps({"a": 1.5, "b": 2.0}))
    assert CostModel.from_file(j).feature_costs.tolist() == [1.5, 2.0]
    assert CostModel.from_file(j, feature_names=["b", "a"]).feature_costs.tolist() == [2.0, 1.5]
    c = tmp_path / "costs.csv"
    c.write_text("feature,cost\na,1.5\nb,2\n")
    assert CostModel.from_file(c).feature_costs.tolist() == [1.5, 2.0]
    full = tmp_path / "full.json"
    full.write_text(
        json.dumps({"costs": {"a": 1, "b": 2, "c": 0}, "dependencies": {"c": ["a"]}, "tree_cost": 0.5})
    )
    m = CostModel.from_file(full)
    assert m.acquisition_cost(["c"]) == 1 and m.tree_cost == 0.5
    bad = tmp_path / "bad.csv"
    bad.write_text("name,price\na,1\n")
    with pytest.raises(ValueError, match="feature,cost"):
        CostModel.from_file(bad)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        CostModel.from_file(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        CostModel.from_file(broken)


def test_round_trip_and_alignment():
    costs = CostModel(
        {"age": 1.0, "TT4": 14.51, "T4U": 11.41, "FTI": 0.0, "TSH": 22.78},
        feature_names=NAMES,
        groups={"panel": ["TT4", "T4U"]},
        dependencies={"FTI": ["TT4"]},
        fixed_costs={"TSH": 3.0},
    )
    again = CostModel._from_saved(costs.to_dict())
    assert again.acquisition_cost(["FTI"]) == costs.acquisition_cost(["FTI"])
    reordered = costs.for_features(list(reversed(NAMES)), 5)
    assert reordered.feature_names == list(reversed(NAMES))
    assert reordered.acquisition_cost(["TT4"]) == pytest.approx(25.92)
    assert reordered.fixed_costs[0] == 3.0
    with pytest.raises(ValueError, match="no cost for the model's feature"):
        costs.for_features(["age", "TT4", "T4U", "FTI", "weight"], 5)


def test_cost_report_summaries():
    total = np.array([1.0, 2.0, 3.0, 10.0])
    r = CostReport(
        feature=total,
        evaluation=np.zeros(4),
        total=total,
        n_trees=np.array([1, 2, 3, 4]),
        n_nodes=np.zeros(4, int),
        acquired=np.eye(4, 3, dtype=bool),
    )
    assert r.mean == 4.0 and r.max == 10.0
    assert r.quantiles([0.5])[0.5] == 2.5
    s = r.summary()
    assert s["mean_trees"] == 2.5 and s["q99"] <= 10.0
    assert r.to_frame().shape == (4, 5 + 3)
    np.testing.assert_allclose(r.acquisition_rate(), [0.25, 0.25, 0.25])


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(feature_costs=[1e308] * 3),  # each finite, the sum overflows to inf
        dict(feature_costs=[1e300, 1e300]),  # finite sum, beyond what sums over rows hold
        dict(feature_costs=[1.0], tree_cost=1e301),  # evaluation cost alone
    ],
)
def test_absurd_costs_are_refused_at_construction(kwargs):
    costs = kwargs.pop("feature_costs")
    with pytest.raises(ValueError, match=r"the costs add up to .*express them in a larger unit"):
        CostModel(costs, **kwargs)
    CostModel(np.full(3, 1e200))  # large but summable


@pytest.mark.parametrize(
    "name, text, match",
    [
        # a cost listed twice is an error (JSON and csv would keep the last one)
        ("twice.json", '{"a": 1, "b": 2, "a": 5}', r"gives 'a' twice \(1 and 5\)"),
        ("twice.csv", "feature,cost\na,1\nb,2\na,9\n", r"gives 'a' twice \(1.0 and 9.0\)"),
        # a misspelt key of the full spec would be ignored
        ("typo.json", '{"costs": {"a": 1, "b": 2}, "tree_cots": 1}', r"unknown key\(s\) \['tree_cots'\]"),
        # an empty cell names its feature and line
        ("empty.csv", "feature,cost\na,1\nb,\n", "line 3: the cost of feature 'b' is empty"),
        ("text.csv", "feature,cost\na,1\nb,high\n", "the cost of feature 'b' is 'high', not a number"),
        ("bool.json", '{"a": true, "b": 2}', "cost of feature 'a' must be a number, got True"),
    ],
)
def test_cost_file_mistakes_are_named(tmp_path, name, text, match):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        CostModel.from_file(path, feature_names=["a", "b"])


def test_a_saved_cost_model_reads_back_from_its_dict(tmp_path):
    # to_dict writes group_costs: a key of the full spec, honoured (a group's own price)
    costs = CostModel(
        {"age": 1.0, "TT4": 14.51, "T4U": 11.41, "FTI": 0.0, "TSH": 22.78, "panel": 20.0},
        feature_names=NAMES,
        groups={"panel": ["TT4", "T4U"]},
    )
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(costs.to_dict()))
    again = CostModel.from_file(path)
    assert again.acquisition_cost(["TT4"]) == pytest.approx(20.0)
    assert again.to_dict() == costs.to_dict()
