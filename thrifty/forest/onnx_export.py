"""Export of a Forest (or a plan that evaluates every tree) to ONNX, as one ai.onnx.ml
``TreeEnsemble`` node that onnxruntime evaluates to the forest's raw scores exactly."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest._forest import MISSING_AS_ZERO, MISSING_ZERO, Forest
from thrifty.forest._onnx import META
from thrifty.forest._traverse import ZERO
from thrifty.forest.links import SOFTMAX_LINKS


def export_onnx(model: Any, path: str | os.PathLike | None = None) -> Any:
    """An ONNX model computing ``model``'s raw scores (and probabilities) exactly.

    The graph is one ``TreeEnsemble`` node (ai.onnx.ml opset 5, onnxruntime 1.21 and later),
    with a ``raw`` output of shape ``(n, n_outputs)`` and, for classifiers, a ``probabilities``
    output (standard ``Sigmoid``/``Softmax`` nodes). Precision follows the forest:

    - a forest that sums in float32 (XGBoost's) becomes a ``float`` model: inputs, thresholds,
      leaf weights and the sums in float32, as XGBoost's own;
    - every other forest becomes a ``double`` model (thresholds and sums in float64), whose
      input is ``float`` and cast to double when the forest compares in float32 (scikit-learn),
      ``double`` otherwise (LightGBM's float64 thresholds).

    Raw scores then equal ``forest.predict_raw`` bit for bit on onnxruntime with one thread
    (``SessionOptions.intra_op_num_threads = 1``; with more, onnxruntime sums the trees in
    per-thread parts, in an order that depends on the thread count). The base score is a
    leading constant tree (a ``base_last`` forest's trees are summed alone, then ``Mul`` by its
    scale and ``Add`` of its base, as ``Forest.finish``); each tree of vector leaves becomes
    one tree per output, as a ``TreeEnsemble`` leaf has one weight. Categorical splits become
    comparisons on the intervals of codes that go left (a code ``c`` covers ``[c, c + 1)``, as
    the forest truncates). Probabilities agree to the precision of onnxruntime's ``exp``.

    Parameters
    ----------
    model : Forest, Full plan, or anything ``Forest.from_model`` imports
        Plans with exits (Sequential/QWYC, Cascade, Gated) are refused: ONNX evaluates every
        node of a graph, so an early exit saves nothing there; export their forest instead.
    path : str or path-like, optional
        Where to write the model as well.

    Returns
    -------
    onnx.ModelProto

    Raises
    ------
    InputError
        For plans with exits, LightGBM zero-as-missing splits whose default side is not where
        values near zero compare to (ONNX has no "near zero" test), and a forest that sums in
        float32 but compares in float64.
    """
    # Not at the top: onnx is optional (thrifty[onnx]).
    import onnx
    from onnx import TensorProto, helper

    forest = _forest_of(model)
    if forest.accumulate == "float32" and forest.input_dtype != "float32":
        raise InputError("a forest that sums in float32 must compare in float32 to be exported")
    precision = np.float32 if forest.accumulate == "float32" else np.float64
    elem = TensorProto.FLOAT if precision is np.float32 else TensorProto.DOUBLE
    arrays = _Arrays(forest, precision)
    base = forest.base_score.astype(precision)
    # First, so onnxruntime's sums start from it as the forest's; a base_last forest's comes after.
    for start in [] if forest.base_last else np.flatnonzero(base):
        arrays.constant(float(base[start]), int(start))
    for t in range(forest.n_trees):
        k = int(forest.tree_class[t])
        for column in range(forest.n_outputs) if k < 0 else [k]:
            arrays.tree(int(forest.roots[t]), float(forest.tree_weight[t]), k < 0, column)
    if not arrays.roots:  # a TreeEnsemble needs a tree
        arrays.constant(0.0, 0)
    nodes = [
        helper.make_node(
            "TreeEnsemble",
            ["X_trees"],
            ["sums" if forest.base_last else "raw"],
            domain="ai.onnx.ml",
            name="trees",
            n_targets=forest.n_outputs,
            aggregate_function=1,  # SUM: the weights hold the 1/T of a mean
            post_transform=0,  # NONE: raw scores
            tree_roots=arrays.roots,
            nodes_featureids=arrays.feature,
            nodes_modes=_tensor(np.zeros(len(arrays.feature), dtype=np.uint8)),
            nodes_splits=_tensor(np.asarray(arrays.split, dtype=precision)),
            nodes_truenodeids=arrays.true,
            nodes_trueleafs=arrays.true_leaf,
            nodes_falsenodeids=arrays.false,
            nodes_falseleafs=arrays.false_leaf,
            nodes_missing_value_tracks_true=arrays.nan_true,
            leaf_targetids=arrays.target,
            leaf_weights=_tensor(np.asarray(arrays.weight, dtype=precision)),
        )
    ]
    initializers = []
    if forest.base_last:
        # ``Forest.finish``: the trees' sums (from zero) times the scale, then plus the base, one
        # rounding each, as CatBoost forms its raw scores.
        scale = np.full((1, forest.n_outputs), forest.scale, dtype=precision)
        initializers = [_tensor(scale), _tensor(base.reshape(1, -1))]
        initializers[0].name, initializers[1].name = "scale", "base"
        nodes += [
            helper.make_node("Mul", ["sums", "scale"], ["scaled"], name="times_scale"),
            helper.make_node("Add", ["scaled", "base"], ["raw"], name="plus_base"),
        ]
    x_elem = TensorProto.FLOAT if forest.input_dtype == "float32" else TensorProto.DOUBLE
    if x_elem != elem:
        nodes.insert(0, helper.make_node("Cast", ["X"], ["X_trees"], to=elem, name="to_double"))
    else:
        nodes.insert(0, helper.make_node("Identity", ["X"], ["X_trees"], name="input"))
    outputs = [helper.make_tensor_value_info("raw", elem, [None, forest.n_outputs])]
    if forest.is_classifier:
        nodes += _probability_nodes(forest, elem)
        n_classes = max(2, forest.n_outputs)
        outputs.append(helper.make_tensor_value_info("probabilities", elem, [None, n_classes]))
    graph = helper.make_graph(
        nodes,
        "thrifty_forest",
        [helper.make_tensor_value_info("X", x_elem, [None, forest.n_features])],
        outputs,
        initializer=initializers,
    )
    onnx_model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("ai.onnx.ml", 5)],
        producer_name="thrifty",
    )
    onnx_model.ir_version = 10  # what onnxruntime 1.21 reads
    meta = {
        "task": forest.task,
        "link": forest.link,
        "classes": None if forest.classes is None else forest.classes.tolist(),
        "feature_names": forest.feature_names,
    }
    for key, value in meta.items():
        onnx_model.metadata_props.add(key=META + key, value=json.dumps(value))
    onnx.checker.check_model(onnx_model)
    if path is not None:
        onnx.save(onnx_model, os.fspath(path))
    return onnx_model


def _forest_of(model: Any) -> Forest:
    # Plans are known by name: the runtime imports forests, so forests never import the runtime.
    kinds = {f"{cls.__module__}.{cls.__qualname__}" for cls in type(model).__mro__}
    if "thrifty.runtime.plans.Full" in kinds:
        return model.forest
    if "thrifty.runtime.plans.Plan" in kinds:
        raise InputError(
            f"a {type(model).__name__} plan stops early per example, and ONNX has no early exit: "
            "onnxruntime evaluates the whole graph, so the exits would save nothing; export its "
            "forest (plan.forest) for the full model's scores, or serve the plan with thrifty"
        )
    return Forest.from_model(model)


def _tensor(array: np.ndarray) -> Any:
    from onnx import numpy_helper

    return numpy_helper.from_array(array)


class _Arrays:
    """The TreeEnsemble's node and leaf arrays, filled tree by tree."""

    def __init__(self, forest: Forest, precision: Any) -> None:
        self.forest, self.precision = forest, precision
        self.roots: list[int] = []
        self.feature: list[int] = []
        self.split: list[float] = []
        self.true: list[int] = []
        self.true_leaf: list[int] = []
        self.false: list[int] = []
        self.false_leaf: list[int] = []
        self.nan_true: list[int] = []
        self.target: list[int] = []
        self.weight: list[float] = []

    def _leaf(self, weight: float, column: int) -> int:
        self.target.append(column)
        self.weight.append(weight)
        return len(self.weight) - 1

    def _split(self, feature: int, split: float, nan_true: bool) -> int:
        self.feature.append(feature)
        self.split.append(split)
        self.nan_true.append(int(nan_true))
        for array in (self.true, self.true_leaf, self.false, self.false_leaf):
            array.append(0)
        return len(self.feature) - 1

    def _link(self, parent: int, side: int, child: int, is_leaf: bool) -> None:
        ids, leafs = (self.true, self.true_leaf) if side == 0 else (self.false, self.false_leaf)
        ids[parent], leafs[parent] = child, int(is_leaf)

    def constant(self, weight: float, column: int) -> None:
        """A tree adding ``weight`` to ``column`` (a root must be a split: both sides alike)."""
        root = self._split(0, 0.0, True)
        self._link(root, 0, self._leaf(weight, column), True)
        self._link(root, 1, self._leaf(weight, column), True)
        self.roots.append(root)

    def tree(self, root: int, w: float, vector: bool, column: int) -> None:
        """Forest tree ``root`` of weight ``w`` adding to ``column`` its leaves' values of that
        column (vector leaves) or their one value."""
        f = self.forest
        if f.feature[root] < 0:
            self.constant(self._value(root, w, vector, column), column)
            return
        first = len(self.feature)
        # Stack of (Forest node, parent ONNX split, side); categorical nodes push the splits of
        # their intervals, whose ends are copies of the node's children.
        stack: list[tuple[int, int, int]] = [(root, -1, 0)]
        while stack:
            node, parent, side = stack.pop()
            if f.feature[node] < 0:
                self._link(parent, side, self._leaf(self._value(node, w, vector, column), column), True)
                continue
            index, ends = self._decision(node)
            if parent >= 0:
                self._link(parent, side, index, False)
            for split, split_side, goes_left in ends:
                child = f.children_left[node] if goes_left else f.children_right[node]
                stack.append((int(child), split, split_side))
        self.roots.append(first)

    def _value(self, leaf: int, w: float, vector: bool, column: int) -> float:
        # The forest adds w * value; float32 forests round that product, as XGBoost does.
        v = self.forest.value[leaf, column if vector else 0]
        return float(self.precision(w * v))

    def _decision(self, node: int) -> tuple[int, list[tuple[int, int, bool]]]:
        """ONNX splits of Forest node ``node``: the first's index and the open ends as (split,
        side, whether it is the node's left child)."""
        f = self.forest
        feature, t, left = int(f.feature[node]), float(f.threshold[node]), bool(f.missing_left[node])
        if f.cat_start[node] >= 0:
            return self._categorical(node, feature, left)
        mtype = int(f.missing_type[node])
        if mtype == MISSING_AS_ZERO:
            left = 0.0 <= t  # NaN is read as zero
        elif mtype == MISSING_ZERO and not ((left and t >= ZERO) or (not left and t < -ZERO)):
            raise InputError(
                f"node {node} sends values within 1e-35 of zero to its default side, which its "
                f"threshold {t!r} does not; ONNX cannot express LightGBM's zero_as_missing there"
            )
        if self.precision is np.float32 and f.input_dtype == "float32":
            t = float(_round_down32(t))
        index = self._split(feature, t, left)
        return index, [(index, 0, True), (index, 1, False)]

    def _categorical(self, node: int, feature: int, nan_left: bool) -> tuple[int, list]:
        """``x <= inf`` (false only for NaN), then a search over the interval ends of the codes
        going left: code ``c`` covers ``[c, c + 1)`` (``(-1, 1)`` for 0), as the forest truncates."""
        f = self.forest
        start, size = int(f.cat_start[node]), int(f.cat_size[node])
        words = f.cat_bitsets[start : start + size]
        codes = [c for c in range(32 * size) if (int(words[c >> 5]) >> (c & 31)) & 1]
        # Cut points x <= cut; the segments between them alternate outside / inside.
        cuts: list[float] = []
        inside: list[bool] = [False]
        for c in codes:
            lower = -1.0 if c == 0 else float(np.nextafter(self.precision(c), self.precision(-np.inf)))
            upper = float(np.nextafter(self.precision(c + 1), self.precision(-np.inf)))
            if cuts and inside[-1] and cuts[-1] == lower:  # extends the previous run
                cuts[-1] = upper
                continue
            cuts += [lower, upper]
            inside += [True, False]
        nan_split = self._split(feature, np.inf, False)
        ends: list[tuple[int, int, bool]] = [(nan_split, 1, nan_left)]
        self._segments(feature, cuts, inside, nan_split, 0, ends)
        return nan_split, ends

    def _segments(
        self, feature: int, cuts: list[float], inside: list[bool], parent: int, side: int, ends: list
    ) -> None:
        """A balanced search over ``cuts``: the segment a number falls in decides its side."""
        work = [(0, len(cuts), parent, side)]  # segments lo..hi (inclusive) remain
        while work:
            lo, hi, parent, side = work.pop()
            if lo == hi:
                ends.append((parent, side, inside[lo]))
                continue
            mid = (lo + hi) // 2  # cut mid separates segments lo..mid and mid+1..hi
            index = self._split(feature, cuts[mid], False)
            self._link(parent, side, index, False)
            work.append((lo, mid, index, 0))
            work.append((mid + 1, hi, index, 1))


def _round_down32(t: float) -> np.float32:
    """The largest float32 not above ``t``: ``x <= t`` and ``x <= that`` agree on float32 ``x``."""
    r = np.float32(t)
    return r if float(r) <= t or np.isnan(t) else np.nextafter(r, np.float32(-np.inf))


def _probability_nodes(forest: Forest, elem: int) -> list[Any]:
    """Nodes computing ``probabilities`` from ``raw`` under the forest's link."""
    from onnx import helper

    one = helper.make_tensor("one", elem, [], [1.0])
    if forest.link in SOFTMAX_LINKS:
        return [helper.make_node("Softmax", ["raw"], ["probabilities"], axis=1)]
    if forest.link == "proba" and forest.n_outputs > 1:
        return [helper.make_node("Identity", ["raw"], ["probabilities"])]
    positive = "raw"
    nodes = [helper.make_node("Constant", [], ["one"], value=one)]
    if forest.link == "sigmoid":
        nodes.append(helper.make_node("Sigmoid", ["raw"], ["positive"]))
        positive = "positive"
    nodes += [
        helper.make_node("Sub", ["one", positive], ["negative"]),
        helper.make_node("Concat", ["negative", positive], ["probabilities"], axis=1),
    ]
    return nodes
