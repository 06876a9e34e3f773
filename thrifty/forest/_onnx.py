"""Import of ONNX tree ensembles (ai.onnx.ml ``TreeEnsembleRegressor``, ``TreeEnsembleClassifier``
and ``TreeEnsemble``) into a Forest that reproduces onnxruntime's scores."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest._forest import Forest
from thrifty.forest._onnx_trees import (
    MODES,
    Leaf,
    Split,
    features,
    keep_column,
    leaves,
    single_target,
    unroll,
)
from thrifty.forest.builder import ForestBuilder

TREE_OPS = ("TreeEnsembleRegressor", "TreeEnsembleClassifier", "TreeEnsemble")
# Nodes converters put after the ensemble that leave its scores as they are.
_PASSIVE = {"Identity", "Cast", "ZipMap"}
# The nodes thrifty.export_onnx puts after a base_last forest's trees: times its scale, plus its base.
_BASE_LAST_NODES = {"times_scale", "plus_base"}
# The probability nodes thrifty.export_onnx puts after the ensemble.
_THRIFTY_OUTPUTS = {"Constant", "Sigmoid", "Softmax", "Sub", "Concat"}
META = "thrifty:"  # metadata keys of thrifty.export_onnx
_LEAF = "LEAF"
_AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")  # TreeEnsemble's codes 0..3
_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")  # TreeEnsemble's codes 0..4
_FLOAT, _DOUBLE = 1, 11  # onnx.TensorProto.FLOAT, DOUBLE


def is_onnx(model: Any) -> bool:
    """Whether ``model`` is an ``onnx.ModelProto`` or the path of a ``.onnx`` file."""
    if isinstance(model, (str, os.PathLike)):
        return str(model).lower().endswith(".onnx")
    return any(cls.__module__.split(".")[0] == "onnx" for cls in type(model).__mro__)


def from_onnx(model: Any) -> Forest:
    """Convert an ONNX model whose graph is one tree-ensemble node into a :class:`Forest`.

    onnxruntime casts the input to the precision of the model's input (float32 for a ``float``
    input, as skl2onnx and onnxmltools write), compares it with the node's thresholds in that
    precision, and sums the leaf weights tree by tree in it, adding ``base_values`` last. The
    forest does the same: ``input_dtype`` and ``accumulate`` are that precision, ``BRANCH_LT``
    becomes ``x <= t'`` with ``t'`` the float below ``t`` (exact on inputs of that precision),
    ``BRANCH_GT``/``BRANCH_GTE`` swap the children, ``BRANCH_EQ``/``BRANCH_NEQ``/``BRANCH_MEMBER``
    become two comparisons per value (``x <= t'`` then ``x <= t``), copying the subtrees the
    outcomes share, and a non-zero ``base_values`` becomes a last constant tree, so raw scores
    equal onnxruntime's on one thread bit for bit under ``SUM`` (on several, onnxruntime sums
    the trees in per-thread parts). ``nodes_missing_value_tracks_true`` is the missing
    direction; without it NaN takes the outcome of the comparison (false but for ``NEQ``).
    ``BRANCH_MEMBER`` is ONNX's exact membership (onnxruntime 1.32 departs from it for some sets).

    Post-transforms map to links: ``NONE`` (regression: identity; classifiers with non-negative
    weights: probabilities), ``LOGISTIC`` (binary: sigmoid), ``SOFTMAX`` (multiclass: softmax).
    A binary classifier's raw score is its positive class's score. A model written by
    :func:`thrifty.export_onnx` gets its task, link, classes and feature names back from its
    metadata.

    Parameters
    ----------
    model : onnx.ModelProto or path of a ``.onnx`` file

    Returns
    -------
    Forest

    Raises
    ------
    InputError
        For graphs with other computations than the ensemble (a scaler before it, ...), the
        ``MIN``/``MAX`` aggregates, the ``SOFTMAX_ZERO`` and ``PROBIT`` transforms, and scores
        onnxruntime turns into something other than a link of the raw score.
    """
    # Not at the top: onnx is optional (thrifty[onnx]).
    import onnx

    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model))
    node, precision, input_dtype, n_features = _ensemble_node(model)
    attrs = {a.name: _attribute(a) for a in node.attribute}
    trees, n_columns, base = _parse(node.op_type, attrs)
    forest = _build(node.op_type, attrs, trees, n_columns, base, precision, n_features)
    forest = dataclasses.replace(forest, input_dtype=input_dtype, **_base_last(model))
    # What ONNX has no place for, written by thrifty.export_onnx.
    meta = {p.key[len(META) :]: json.loads(p.value) for p in model.metadata_props if p.key.startswith(META)}
    if not meta:
        return forest
    return dataclasses.replace(
        forest,
        task=meta.get("task", forest.task),
        link=meta.get("link", forest.link),
        classes=meta.get("classes", forest.classes),
        feature_names=meta.get("feature_names", forest.feature_names),
    )


def _attribute(attribute: Any) -> Any:
    import onnx
    from onnx import numpy_helper

    value = onnx.helper.get_attribute_value(attribute)
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value


def _ensemble_node(model: Any) -> tuple[Any, Any, str, int | None]:
    """The graph's one tree-ensemble node, the precision it computes in (its input's type), the
    precision the model's input is rounded to on the way, and the input's width.

    Between the input and the ensemble only Cast and Identity nodes may stand; after it only
    nodes that pass its scores on (``_PASSIVE``, and thrifty's own probability nodes)."""
    graph = model.graph
    trees = [n for n in graph.node if n.op_type in TREE_OPS]
    if len(trees) != 1:
        raise InputError(
            f"the ONNX graph has {len(trees)} tree-ensemble nodes; thrifty imports a graph of one "
            f"({' or '.join(TREE_OPS)}) reading the graph's input"
        )
    ensemble = trees[0]
    inputs = {i.name: i for i in graph.input}
    initializers = {t.name: t for t in graph.initializer}
    producers = {out: n for n in graph.node for out in n.output}
    source, chain = ensemble.input[0], []
    while source not in inputs:
        before = producers.get(source)
        if before is None or before.op_type not in ("Cast", "Identity"):
            what = f"node {before.name!r} ({before.op_type})" if before is not None else f"tensor {source!r}"
            raise InputError(
                f"the tree ensemble reads the output of {what}, not the model's input: "
                "preprocessing before the trees is not supported; export the trees alone, or "
                "apply that step to X before calling thrifty"
            )
        chain.append(before)
        source = before.input[0]
    elem = inputs[source].type.tensor_type.elem_type
    types = [elem] + [a.i for n in chain for a in n.attribute if a.name == "to"]
    if any(t not in (_FLOAT, _DOUBLE) for t in types):
        raise InputError(
            f"the ONNX model's input {source!r} reaches the trees as element types {types}; thrifty "
            "imports float (1) or double (11) inputs"
        )
    allowed = _PASSIVE | (_THRIFTY_OUTPUTS if model.producer_name == "thrifty" else set())
    for other in graph.node:
        if other is ensemble or any(other is n for n in chain) or other.op_type in allowed:
            continue
        if model.producer_name == "thrifty" and other.name in _BASE_LAST_NODES:
            continue  # a base_last forest's scale and base (``_base_last``)
        if other.op_type == "Mul" and _multiplies_by_one(other, initializers):
            continue
        raise InputError(
            f"the ONNX graph holds node {other.name!r} ({other.op_type}) beside the tree ensemble; "
            f"thrifty imports the ensemble followed only by {sorted(_PASSIVE)} nodes"
        )
    dims = inputs[source].type.tensor_type.shape.dim
    width = dims[1].dim_value if len(dims) == 2 and dims[1].HasField("dim_value") else None
    # A float anywhere on the way rounds the input to float32 (a cast back to double keeps it so).
    rounding = "float32" if _FLOAT in types else "float64"
    return ensemble, np.float32 if types[-1] == _FLOAT else np.float64, rounding, width


def _base_last(model: Any) -> dict[str, Any]:
    """The ``base_last``, ``scale`` and ``base_score`` of a forest :func:`thrifty.export_onnx`
    wrote with its scale and base after the trees' sums (nodes ``_BASE_LAST_NODES``), else {}."""
    from onnx import numpy_helper

    if model.producer_name != "thrifty" or not any(n.name == "plus_base" for n in model.graph.node):
        return {}
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return {
        "base_last": True,
        "scale": float(constants["scale"].reshape(-1)[0]),
        "base_score": constants["base"].astype(np.float64).reshape(-1),
    }


def _multiplies_by_one(node: Any, initializers: dict[str, Any]) -> bool:
    """onnxmltools multiplies LightGBM's probabilities by a constant one."""
    from onnx import numpy_helper

    constants = [numpy_helper.to_array(initializers[i]) for i in node.input if i in initializers]
    return len(constants) == 1 and bool(np.all(constants[0] == 1))


def _parse(op: str, a: dict[str, Any]) -> tuple[list[Split | Leaf], int, np.ndarray]:
    """The trees (roots in tree order), the number of score columns and the base values."""
    if op == "TreeEnsemble":
        return _parse_v5(a)
    prefix = "class" if op == "TreeEnsembleClassifier" else "target"
    if op == "TreeEnsembleClassifier":
        labels = a.get("classlabels_int64s") or a.get("classlabels_strings") or []
        n_columns = len(labels)
    else:
        n_columns = int(a.get("n_targets", 1))
    values = a["nodes_values_as_tensor"] if "nodes_values_as_tensor" in a else a.get("nodes_values")
    if values is None:
        raise InputError(f"the {op} node has no thresholds (nodes_values or nodes_values_as_tensor)")
    weights = a.get(f"{prefix}_weights_as_tensor")
    weights = a[f"{prefix}_weights"] if weights is None else weights
    base = a.get("base_values_as_tensor")
    base = np.asarray(a.get("base_values", []) if base is None else base, dtype=np.float64)
    tree_ids = np.asarray(a["nodes_treeids"], dtype=np.int64)
    node_ids = np.asarray(a["nodes_nodeids"], dtype=np.int64)
    modes = list(a["nodes_modes"])
    tracks = list(a.get("nodes_missing_value_tracks_true", [])) or [0] * len(modes)
    leaves: dict[tuple[int, int], dict[int, float]] = {}
    for t, n, k, w in zip(a[f"{prefix}_treeids"], a[f"{prefix}_nodeids"], a[f"{prefix}_ids"], weights):
        leaf = leaves.setdefault((int(t), int(n)), {})
        if int(k) in leaf:
            raise InputError(f"leaf {n} of tree {t} lists score column {k} twice; thrifty needs one weight")
        leaf[int(k)] = float(w)
    table = {(int(t), int(n)): i for i, (t, n) in enumerate(zip(tree_ids, node_ids))}
    built: dict[tuple[int, int], Split | Leaf] = {}

    def make(key: tuple[int, int]) -> Split | Leaf:
        # Iterative post-order: deep trees must not hit Python's recursion limit.
        stack = [key]
        while stack:
            k = stack[-1]
            if k in built:
                stack.pop()
                continue
            if k not in table:
                raise InputError(f"node {k[1]} of tree {k[0]} is referenced but not defined")
            i = table[k]
            if modes[i] == _LEAF:
                built[k] = Leaf(leaves.get(k, {}))
                stack.pop()
                continue
            kids = [(k[0], int(a["nodes_truenodeids"][i])), (k[0], int(a["nodes_falsenodeids"][i]))]
            todo = [c for c in kids if c not in built]
            if todo:
                stack.extend(todo)
                continue
            if modes[i] not in MODES:
                raise InputError(f"unknown node mode {modes[i]!r} in tree {k[0]}")
            built[k] = Split(
                int(a["nodes_featureids"][i]),
                modes[i],
                float(values[i]),
                bool(tracks[i]),
                built[kids[0]],
                built[kids[1]],
            )
            stack.pop()
        return built[key]

    roots: list[tuple[int, int]] = []
    for t, n in zip(tree_ids, node_ids):
        if not roots or roots[-1][0] != t:
            roots.append((int(t), int(n)))
    # onnxruntime takes a tree's first listed node as its root, trees in order of appearance.
    return [make(r) for r in roots], n_columns, base


def _parse_v5(a: dict[str, Any]) -> tuple[list[Split | Leaf], int, np.ndarray]:
    """``TreeEnsemble`` (ai.onnx.ml 5): node arrays of the splits only, leaves apart."""
    splits = np.asarray(a["nodes_splits"], dtype=np.float64)
    modes = np.asarray(a["nodes_modes"], dtype=np.int64)
    tracks = list(a.get("nodes_missing_value_tracks_true", [])) or [0] * len(modes)
    members = list(np.asarray(a.get("membership_values", []), dtype=np.float64))
    sets: dict[int, frozenset[float]] = {}
    for i in np.flatnonzero(modes == 6):  # each MEMBER node's values, NaN-terminated, in order
        end = next(j for j in range(len(members)) if np.isnan(members[j]))
        sets[int(i)], members = frozenset(members[:end]), members[end + 1 :]
    weights = np.asarray(a["leaf_weights"], dtype=np.float64)
    targets = a["leaf_targetids"]
    built: dict[int, Split] = {}

    def child(i: int, leaf: int) -> Any:
        return Leaf({int(targets[i]): float(weights[i])}) if leaf else ("split", i)

    def make(root: int) -> Split:
        stack = [root]
        while stack:
            i = stack[-1]
            kids = [
                child(int(a["nodes_truenodeids"][i]), a["nodes_trueleafs"][i]),
                child(int(a["nodes_falsenodeids"][i]), a["nodes_falseleafs"][i]),
            ]
            todo = [c[1] for c in kids if isinstance(c, tuple) and c[1] not in built]
            if todo:
                stack.extend(todo)
                continue
            kids = [built[c[1]] if isinstance(c, tuple) else c for c in kids]
            mode = int(modes[i])
            built[i] = Split(
                int(a["nodes_featureids"][i]),
                MODES[mode],
                sets[i] if mode == 6 else float(splits[i]),
                bool(tracks[i]),
                kids[0],
                kids[1],
            )
            stack.pop()
        return built[root]

    return [make(int(r)) for r in a["tree_roots"]], int(a["n_targets"]), np.zeros(0)


def _build(
    op: str,
    a: dict[str, Any],
    trees: list[Split | Leaf],
    n_columns: int,
    base: np.ndarray,
    precision: Any,
    n_features: int | None,
) -> Forest:
    aggregate = a.get("aggregate_function", "SUM")
    aggregate = _AGGREGATES[aggregate] if isinstance(aggregate, int) else aggregate
    transform = a.get("post_transform", "NONE")
    transform = _TRANSFORMS[transform] if isinstance(transform, int) else transform
    if aggregate not in ("SUM", "AVERAGE"):
        raise InputError(
            f"the ONNX ensemble aggregates its trees with {aggregate}; a Forest sums or averages them"
        )
    classifier = op == "TreeEnsembleClassifier"
    all_weights: dict[int, list[float]] = {}
    for tree in trees:
        for leaf in leaves(tree):
            for k, w in leaf.weights.items():
                all_weights.setdefault(k, []).append(w)
    task, link, column, classes = _output(a, classifier, n_columns, transform, all_weights, base)
    n_out = 1 if column is not None else n_columns
    if column is not None:  # a binary classifier: only its positive column's weights
        trees = [keep_column(t, column) for t in trees]
        base = base[:1] if column == 0 else np.zeros(0)
    single = [single_target(t) for t in trees]
    width = 1 if all(s is not None for s in single) else n_out
    builder = ForestBuilder(width)
    weight = 1.0 / len(trees) if aggregate == "AVERAGE" and trees else 1.0
    for tree, target in zip(trees, single):
        feature, threshold, left, right, value, missing_left = unroll(tree, precision, width)
        builder.add_tree(
            feature,
            threshold,
            left,
            right,
            value,
            missing_left=missing_left,
            weight=weight,
            tree_class=(target or 0) if width == 1 else -1,
        )
    base_full = np.zeros(n_out)
    base_full[: min(n_out, base.size)] = base[:n_out].astype(precision)
    if not classifier:
        _check_base_reaches(trees, base_full)
    if np.any(base_full != 0):
        # onnxruntime adds base_values after the trees: a last constant tree adds them in the
        # same order, so the sums round alike.
        none = np.full(1, -1)  # one node, a leaf
        if width > 1:
            builder.add_tree(none, np.zeros(1), none, none, base_full[None, :], tree_class=-1)
        for out in np.flatnonzero(base_full) if width == 1 else ():
            value = np.full((1, 1), base_full[out])
            builder.add_tree(none, np.zeros(1), none, none, value, tree_class=int(out))
    used = [f for tree in trees for f in features(tree)]
    n = max([n_features or 0] + [f + 1 for f in used])
    # Sums in onnxruntime run in the precision of the thresholds, which is the input's; AVERAGE
    # divides the float32 sum at the end, which weights of 1/T cannot do, so it sums in float64.
    acc = "float32" if precision is np.float32 and aggregate == "SUM" else "float64"
    return builder.build(
        base_score=np.zeros(n_out),
        n_features=n,
        link=link,
        task=task,
        classes=classes,
        input_dtype="float32" if precision is np.float32 else "float64",
        accumulate=acc,
        aggregation="mean" if aggregate == "AVERAGE" else "sum",
        source=f"onnx:{op}",
    )


def _check_base_reaches(trees: list[Split | Leaf], base: np.ndarray) -> None:
    """onnxruntime's regressors add ``base_values[k]`` only to rows some leaf scored for target
    ``k``; the forest adds it to every row, which is the same when a tree scores ``k`` on every
    path."""
    for k in np.flatnonzero(base):
        if not any(all(int(k) in leaf.weights for leaf in leaves(tree)) for tree in trees):
            raise InputError(
                f"onnxruntime adds base_values[{k}] only to rows a tree scored for target {k}, and "
                f"no tree scores it on every path; a Forest adds its base score to every row "
                f"(fold base_values[{k}] into the leaves of a tree, or set it to 0)"
            )


def _output(
    a: dict[str, Any],
    classifier: bool,
    n_columns: int,
    transform: str,
    weights: dict[int, list[float]],
    base: np.ndarray,
) -> tuple[str, str, int | None, Any]:
    """Task, link, the one score column a binary classifier keeps (else None), class labels."""
    if not classifier:
        if transform != "NONE":
            raise InputError(
                f"an ONNX regressor with post_transform {transform} is not supported; a regression "
                "Forest's output is its raw score (post_transform NONE)"
            )
        return "regression", "identity", None, None
    labels = a.get("classlabels_int64s") or a.get("classlabels_strings") or []
    classes = np.asarray(labels)
    used = set(weights)
    positive = all(w >= 0 for column in weights.values() for w in column)
    if transform not in ("NONE", "LOGISTIC", "SOFTMAX"):
        raise InputError(
            f"post_transform {transform} has no Forest link; thrifty imports NONE (probabilities), "
            "LOGISTIC (binary) and SOFTMAX (multiclass)"
        )
    if n_columns > 2:
        if transform == "SOFTMAX":
            return "multiclass", "softmax", None, classes
        if transform == "NONE" and positive:
            return "multiclass", "proba", None, classes
        raise InputError(
            f"a {n_columns}-class ONNX classifier with post_transform {transform}"
            f"{' and negative weights' if transform == 'NONE' else ''} has no Forest link; "
            "multiclass models need SOFTMAX or probabilities (NONE, non-negative weights)"
        )
    if n_columns != 2:
        raise InputError(f"an ONNX classifier with {n_columns} class label(s); thrifty needs two or more")
    column = 1 if 1 in used else 0
    return "binary", _binary_link(transform, positive, base, column), column, classes


def _binary_link(transform: str, positive: bool, base: np.ndarray, column: int) -> str:
    """onnxruntime's binary cases (tree_ensemble_aggregator.h) that are a link of one score."""
    if column == 1:
        if transform == "NONE" and positive and not np.any(base != 0):
            return "proba"
        raise InputError(
            "a binary ONNX classifier scoring both classes needs post_transform NONE, non-negative "
            "weights and no base_values (onnxruntime then outputs the scores as probabilities)"
        )
    if base.size > 1:
        raise InputError("a binary ONNX classifier scoring one column takes one base value, got two")
    if transform == "LOGISTIC" and not positive:
        return "sigmoid"
    if transform == "NONE" and positive:
        return "proba"
    raise InputError(
        f"onnxruntime outputs no link of the score for a binary classifier with post_transform "
        f"{transform} and {'non-negative' if positive else 'signed'} weights (it writes "
        f"{'1 - s, s' if positive else '-s, s'}); thrifty imports LOGISTIC with signed weights "
        "or NONE with non-negative ones"
    )
