"""ONNX import of hand-built ensembles: every node mode, missing tracks, shared subtrees, set
membership, base values, several targets, double inputs and both ai.onnx.ml operator forms, drawn
at random and checked against onnxruntime; refusals of what a Forest cannot represent."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests._helpers.importers import SETTINGS
from tests._helpers.onnx_models import ort_raw
from thrifty.exceptions import InputError
from thrifty.forest import Forest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

MODES = ["BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ"]
# Thresholds and inputs come from one small pool, so that inputs often sit on thresholds.
POOL = [-2.0, -1.0, 0.0, 0.5, 1.0, 3.0, 0.1, 1e-8]
N_FEATURES = 3


def _random_trees(rng: np.random.Generator, n_trees: int, n_targets: int, member: bool) -> list[list[dict]]:
    """Trees as lists of nodes in preorder (root first, false branch before true); a true branch
    may reuse a subtree of the false one (onnxmltools' category chains share subtrees so;
    onnxruntime wants each false node next to its parent)."""
    return [_random_tree(rng, n_targets, member) for _ in range(n_trees)]


def _random_tree(rng: np.random.Generator, n_targets: int, member: bool, every: bool = False) -> list[dict]:
    """One tree; with ``every``, each leaf scores every target."""
    nodes: list[dict] = []

    def build(depth: int) -> int:
        index = len(nodes)
        if depth == 0 or rng.random() < 0.2:
            size = n_targets if every else rng.integers(1, n_targets + 1)
            targets = rng.choice(n_targets, size=size, replace=False)
            weights = {int(k): float(np.float32(rng.normal())) for k in targets}
            nodes.append({"leaf": weights})
            return index
        modes = MODES + (["BRANCH_MEMBER"] if member else [])
        node = {
            "mode": modes[rng.integers(len(modes))],
            "feature": int(rng.integers(N_FEATURES)),
            "value": float(rng.choice(POOL)),
            # No 0: the reference evaluator's parser reads a member 0 as the end of the set.
            "members": sorted(
                {float(v) for v in rng.choice([-2.0, -1.0, 0.5, 1.0, 3.0], size=rng.integers(1, 4))}
            ),
            "nan_true": int(rng.integers(2)),
        }
        nodes.append(node)
        node["false"] = build(depth - 1)
        done = list(range(index + 1, len(nodes)))
        if done and rng.random() < 0.3:
            node["true"] = int(rng.choice(done))  # a subtree shared with the false branch
        else:
            node["true"] = build(depth - 1)
        return index

    build(int(rng.integers(0, 5)))
    return nodes


def _legacy(trees: list[list[dict]], n_targets: int, *, base: list[float], tensor: bool, **attrs: Any) -> Any:
    """A TreeEnsembleRegressor (ai.onnx.ml 3) of the trees."""
    a: dict[str, list] = {
        k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values", "true", "false")
    }
    a.update(tracks=[], t_tree=[], t_node=[], t_id=[], t_w=[])
    for t, nodes in enumerate(trees):
        for i, node in enumerate(nodes):
            a["treeids"].append(t)
            a["nodeids"].append(i)
            leaf = "leaf" in node
            a["featureids"].append(0 if leaf else node["feature"])
            a["modes"].append("LEAF" if leaf else node["mode"])
            a["values"].append(0.0 if leaf else node["value"])
            a["true"].append(0 if leaf else node["true"])
            a["false"].append(0 if leaf else node["false"])
            a["tracks"].append(0 if leaf else node["nan_true"])
            for k, w in node.get("leaf", {}).items():
                a["t_tree"].append(t)
                a["t_node"].append(i)
                a["t_id"].append(k)
                a["t_w"].append(w)
    values = (
        {"nodes_values_as_tensor": numpy_helper.from_array(np.asarray(a["values"], dtype=np.float32))}
        if tensor
        else {"nodes_values": a["values"]}
    )
    node = helper.make_node(
        "TreeEnsembleRegressor",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        n_targets=n_targets,
        nodes_treeids=a["treeids"],
        nodes_nodeids=a["nodeids"],
        nodes_featureids=a["featureids"],
        nodes_modes=a["modes"],
        nodes_truenodeids=a["true"],
        nodes_falsenodeids=a["false"],
        nodes_missing_value_tracks_true=a["tracks"],
        target_treeids=a["t_tree"],
        target_nodeids=a["t_node"],
        target_ids=a["t_id"],
        target_weights=a["t_w"],
        **({"base_values": base} if base else {}),
        **values,
        **attrs,
    )
    return _model(node, TensorProto.FLOAT, n_targets, 3)


def _v5(trees: list[list[dict]], n_targets: int, dtype: Any, **attrs: Any) -> Any:
    """A TreeEnsemble (ai.onnx.ml 5) of the trees; a leaf of several targets keeps its first."""
    splits: list[dict] = []
    leaves: list[tuple[int, float]] = []
    roots = []

    def ref(nodes: list[dict], i: int, memo: dict) -> tuple[int, int]:
        # onnxruntime refuses shared internal nodes in TreeEnsemble: a shared subtree is copied.
        node = nodes[i]
        if "leaf" in node:
            if i not in memo:
                leaves.append(next(iter(node["leaf"].items())))
                memo[i] = (len(leaves) - 1, 1)
            return memo[i]
        index = len(splits)
        entry = dict(node)
        splits.append(entry)
        entry["t"], entry["f"] = ref(nodes, node["true"], memo), ref(nodes, node["false"], memo)
        return (index, 0)

    for nodes in trees:
        if "leaf" in nodes[0]:  # a root must be a split
            nodes = [
                {
                    "mode": "BRANCH_LEQ",
                    "feature": 0,
                    "value": 0.0,
                    "nan_true": 1,
                    "members": [],
                    "true": 1,
                    "false": 1,
                }
            ] + [nodes[0]]
        roots.append(ref(nodes, 0, {})[0])
    codes = {m: i for i, m in enumerate(MODES + ["BRANCH_MEMBER"])}
    members: list[float] = []
    for s in splits:
        if s["mode"] == "BRANCH_MEMBER":
            members += s["members"] + [np.nan]
    node = helper.make_node(
        "TreeEnsemble",
        ["X"],
        ["Y"],
        domain="ai.onnx.ml",
        n_targets=n_targets,
        tree_roots=roots,
        nodes_featureids=[s["feature"] for s in splits],
        nodes_modes=numpy_helper.from_array(np.asarray([codes[s["mode"]] for s in splits], dtype=np.uint8)),
        nodes_splits=numpy_helper.from_array(np.asarray([s["value"] for s in splits], dtype=dtype)),
        nodes_truenodeids=[s["t"][0] for s in splits],
        nodes_trueleafs=[s["t"][1] for s in splits],
        nodes_falsenodeids=[s["f"][0] for s in splits],
        nodes_falseleafs=[s["f"][1] for s in splits],
        nodes_missing_value_tracks_true=[s["nan_true"] for s in splits],
        leaf_targetids=[k for k, _ in leaves],
        leaf_weights=numpy_helper.from_array(np.asarray([w for _, w in leaves], dtype=dtype)),
        **(
            {"membership_values": numpy_helper.from_array(np.asarray(members, dtype=dtype))}
            if members
            else {}
        ),
        **attrs,
    )
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    return _model(node, elem, n_targets, 5)


def _model(node: Any, elem: int, n_targets: int, ml_opset: int) -> Any:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", elem, [None, N_FEATURES])],
        [helper.make_tensor_value_info("Y", elem, [None, n_targets])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", ml_opset)]
    )
    model.ir_version = 10
    return model


@st.composite
def inputs(draw: st.DrawFn, min_rows: int = 0) -> np.ndarray:
    """Rows of pool values, their float32 neighbours, NaN and infinities."""
    near = [float(np.nextafter(np.float32(v), np.float32(s))) for v in POOL for s in (-np.inf, np.inf)]
    cell = st.one_of(st.sampled_from(POOL + near + [np.nan, np.inf, -np.inf, -0.0]), st.floats(-5, 5))
    n = draw(st.integers(min_rows, 12))
    return np.asarray(
        draw(st.lists(cell, min_size=n * N_FEATURES, max_size=n * N_FEATURES)), dtype=np.float64
    ).reshape(n, N_FEATURES)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), X=inputs(), tensor=st.booleans())
def test_legacy_modes_equal_onnxruntime(seed: int, X: np.ndarray, tensor: bool) -> None:
    rng = np.random.default_rng(seed)
    n_targets = int(rng.integers(1, 3))
    base = [float(np.float32(v)) for v in rng.normal(size=n_targets)] if rng.random() < 0.5 else []
    # onnxruntime adds a base value only to rows some tree scored (see the refusal test below).
    trees = _random_trees(rng, 3, n_targets, False) + [_random_tree(rng, n_targets, False, every=True)]
    model = _legacy(trees, n_targets, base=base, tensor=tensor)
    forest = Forest.from_model(model)
    raw = forest.predict_raw(X).reshape(len(X), n_targets)
    np.testing.assert_array_equal(raw, ort_raw(model, X, n_targets))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), X=inputs(), double=st.booleans())
def test_tree_ensemble_5_equals_onnxruntime(seed: int, X: np.ndarray, double: bool) -> None:
    rng = np.random.default_rng(seed)
    n_targets = int(rng.integers(1, 3))
    model = _v5(_random_trees(rng, 4, n_targets, False), n_targets, np.float64 if double else np.float32)
    forest = Forest.from_model(model)
    assert forest.input_dtype == ("float64" if double else "float32")
    raw = forest.predict_raw(X).reshape(len(X), n_targets)
    np.testing.assert_array_equal(raw, ort_raw(model, X, n_targets))


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), X=inputs(min_rows=1))
def test_set_membership_follows_the_onnx_standard(seed: int, X: np.ndarray) -> None:
    """BRANCH_MEMBER against ONNX's reference evaluator, one tree at a time (its weight is
    the output, so no order of summation is involved): onnxruntime 1.32 rewrites member sets
    into nodes that, for some sets, truncate the input or miss a member."""
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(seed)
    model = _v5(_random_trees(rng, 1, 1, True), 1, np.float32)
    expected = ReferenceEvaluator(model).run(None, {"X": X.astype(np.float32)})[0]
    np.testing.assert_array_equal(Forest.from_model(model).predict_raw(X), expected.reshape(-1))


def test_average_is_within_float32_rounding() -> None:
    """AVERAGE divides onnxruntime's float32 sum at the end; weights of 1/T cannot, so the
    forest sums in float64 and agrees to float32 rounding, not bit for bit."""
    rng = np.random.default_rng(0)
    model = _legacy(
        _random_trees(rng, 6, 1, False), 1, base=[0.25], tensor=False, aggregate_function="AVERAGE"
    )
    forest = Forest.from_model(model)
    X = rng.choice(POOL, size=(200, N_FEATURES))
    assert forest.aggregation == "mean"
    np.testing.assert_allclose(forest.predict_raw(X)[:, None], ort_raw(model, X, 1), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"aggregate_function": "MIN"}, "aggregates its trees with MIN"),  # a Forest sums
        ({"aggregate_function": "MAX"}, "aggregates its trees with MAX"),
        ({"post_transform": "PROBIT"}, "post_transform PROBIT"),  # regressors: raw scores only
        ({"post_transform": "LOGISTIC"}, "post_transform LOGISTIC"),
    ],
)
def test_what_a_forest_cannot_represent_is_refused(attrs: dict, message: str) -> None:
    model = _legacy(_random_trees(np.random.default_rng(1), 2, 1, False), 1, base=[], tensor=False, **attrs)
    with pytest.raises(InputError, match=message):
        Forest.from_model(model)


def test_base_values_onnxruntime_adds_only_to_scored_rows_are_refused() -> None:
    tree = [
        {"mode": "BRANCH_LEQ", "feature": 0, "value": 0.0, "nan_true": 0, "false": 1, "true": 2},
        {"leaf": {0: 1.0}},
        {"leaf": {1: 1.0}},
    ]
    model = _legacy([tree], 2, base=[0.5, 0.0], tensor=False)
    X = np.array([[-1.0, 0, 0]])
    assert ort_raw(model, X, 2).tolist() == [[0.0, 1.0]]  # row not scored for target 0: no base
    with pytest.raises(InputError, match=r"adds base_values\[0\] only to rows a tree scored"):
        Forest.from_model(model)


def test_other_nodes_beside_the_ensemble_are_refused() -> None:
    model = _legacy(_random_trees(np.random.default_rng(1), 2, 1, False), 1, base=[], tensor=False)
    model.graph.node.append(helper.make_node("Abs", ["Y"], ["Z"], name="absolute"))
    with pytest.raises(InputError, match=r"node 'absolute' \(Abs\) beside the tree ensemble"):
        Forest.from_model(model)
    model.graph.node.append(model.graph.node[0])
    with pytest.raises(InputError, match="2 tree-ensemble nodes"):
        Forest.from_model(model)
