"""The Forest: one flat structure-of-arrays representation of any tree ensemble."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest import _predict
from thrifty.forest._inputs import as_matrix
from thrifty.forest._traverse import fast_thresholds
from thrifty.forest.links import LINKS, TASKS, decision_threshold, labels_from, raw_to_proba

# How a numerical split treats NaN (mirrors LightGBM's ``missing_type``; every other library is "nan").
MISSING_NAN = 0  # NaN goes to the default child, other values are compared
MISSING_AS_ZERO = 1  # NaN is replaced by 0.0, then compared (LightGBM "None")
MISSING_ZERO = 2  # NaN and |x| <= 1e-35 go to the default child (LightGBM "Zero")


# The arrays of a Forest and their dtypes, written once: one entry per node, per tree, and the
# category sets the nodes point into and the base score. They are read-only once constructed.
NODE_ARRAYS = {
    "feature": np.int32,
    "threshold": np.float64,
    "children_left": np.int32,
    "children_right": np.int32,
    "missing_left": np.bool_,
    "missing_type": np.int8,
    "cat_start": np.int32,
    "cat_size": np.int32,
    "value": np.float64,
}
TREE_ARRAYS = {"roots": np.int32, "tree_weight": np.float64, "tree_class": np.int32}
_ARRAYS = {**NODE_ARRAYS, "cat_bitsets": np.uint32, **TREE_ARRAYS, "base_score": np.float64}


@dataclass(eq=False)
class Forest:
    """A tree ensemble as flat arrays, shared by every method and by the runtime.

    Nodes of all trees are stored in one set of arrays (global node indices); tree ``t``
    starts at node ``roots[t]``. An internal node sends an example left when
    ``x[feature] <= threshold`` (numerical) or when ``x[feature]`` is in the node's category
    set (categorical); NaN follows ``missing_left``. A leaf has ``feature == -1``.

    The raw score of an example is ``base_score + sum_t tree_weight[t] * value[leaf_t]``,
    added to output ``tree_class[t]`` (or to every output when ``tree_class[t] == -1`` and the
    leaves hold one value per output, as in a random-forest classifier), the trees added one
    by one onto the base score in tree order. With ``base_last`` the trees are summed from zero
    instead and the base comes after: ``scale * (sum_t tree_weight[t] * value[leaf_t]) +
    base_score``, as CatBoost forms ``RawFormulaVal``. ``link`` turns raw scores into
    probabilities.

    Attributes
    ----------
    feature : ndarray of int32, shape (n_nodes,)
        Feature tested by each node, ``-1`` for leaves.
    threshold : ndarray of float64, shape (n_nodes,)
        Split threshold of numerical nodes (go left when ``x <= threshold``).
    children_left, children_right : ndarray of int32, shape (n_nodes,)
        Global indices of the children, ``-1`` for leaves.
    missing_left : ndarray of bool, shape (n_nodes,)
        Where a missing value goes (the default direction).
    missing_type : ndarray of int8, shape (n_nodes,)
        ``0``: NaN is missing; ``1``: NaN is read as 0.0; ``2``: NaN and zero are missing
        (LightGBM's ``missing_type`` NaN / None / Zero).
    cat_start, cat_size : ndarray of int32, shape (n_nodes,)
        For categorical nodes, the slice of ``cat_bitsets`` (32-bit words) holding the set of
        category codes that go left; ``cat_start == -1`` for numerical nodes. A code ``c``
        is in the set when bit ``c % 32`` of word ``c // 32`` is set; NaN follows
        ``missing_left``; negative or out-of-range codes go right.
    cat_bitsets : ndarray of uint32
    value : ndarray of float64, shape (n_nodes, leaf_width)
        Leaf values (``leaf_width`` is 1, or ``n_outputs`` for vector leaves).
    roots : ndarray of int32, shape (n_trees,)
    tree_weight : ndarray of float64, shape (n_trees,)
        Multiplier of each tree's leaf values (learning rate, ``1/T`` for averaging forests).
    tree_class : ndarray of int32, shape (n_trees,)
        The output each tree adds to, ``-1`` for vector leaves.
    base_score : ndarray of float64, shape (n_outputs,)
    n_features : int
    link : {"identity", "sigmoid", "softmax", "catboost_softmax", "proba"}
        ``proba``: raw scores already are probabilities (averaged class distributions);
        a binary model then has one output, the probability of the positive class.
    task : {"regression", "binary", "multiclass", "ranking"}
    classes : ndarray or None
        Class labels of a classifier, in output order.
    feature_names : list of str or None
    categories : dict[int, list]
        For categorical features given as pandas categories: the categories whose codes the
        splits test (code = position in the list).
    input_dtype : {"float64", "float32"}
        The precision the source library compares features in (scikit-learn trees and
        XGBoost compare in float32); inputs are rounded to it before traversal.
    accumulate : {"float64", "float32"}
        The precision raw scores are summed in. XGBoost adds each tree's (weighted) leaf value
        to a float32 margin; ``"float32"`` reproduces its margins bit for bit.
    aggregation : {"sum", "mean"}
        How the source combines trees (weights already hold the ``1/T`` of a mean).
    base_last : bool
        Sum the trees from zero and add ``base_score`` after them (times ``scale``), rather than
        start from the base score (the default, as LightGBM, XGBoost and scikit-learn do).
        Early exits compare the score as it would be if the row stopped there:
        ``scale * (sum so far) + base_score`` (``thrifty.Sequential``).
    scale : float
        Multiplier of the trees' sum of a ``base_last`` forest (CatBoost's ``scale``); 1.0 for
        every other forest.
    source : str
        Where the forest came from (``"lightgbm"``, ``"xgboost"``, ``"sklearn:..."``, ...).
    """

    feature: np.ndarray
    threshold: np.ndarray
    children_left: np.ndarray
    children_right: np.ndarray
    missing_left: np.ndarray
    missing_type: np.ndarray
    cat_start: np.ndarray
    cat_size: np.ndarray
    cat_bitsets: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    tree_weight: np.ndarray
    tree_class: np.ndarray
    base_score: np.ndarray
    n_features: int
    link: str = "identity"
    task: str = "regression"
    classes: np.ndarray | None = None
    feature_names: list[str] | None = None
    categories: dict[int, list] = field(default_factory=dict)
    input_dtype: str = "float64"
    accumulate: str = "float64"
    aggregation: str = "sum"
    source: str = ""
    base_last: bool = False
    scale: float = 1.0

    #: Every array of a Forest and its dtype, nodes' first (``NODE_ARRAYS``), then
    #: ``cat_bitsets``, the trees' (``TREE_ARRAYS``) and ``base_score``.
    ARRAYS: ClassVar[dict[str, Any]] = _ARRAYS

    def __post_init__(self) -> None:
        n = np.asarray(self.feature).shape[0]
        value = np.asarray(self.value, dtype=np.float64)
        self.value = value.reshape(n, -1) if value.ndim == 1 else value
        self.base_score = np.atleast_1d(self.base_score)
        for name, dtype in _ARRAYS.items():
            setattr(self, name, _frozen(getattr(self, name), dtype))
        self.n_features = int(self.n_features)
        self.base_last = bool(self.base_last)
        self.scale = float(self.scale)
        if self.classes is not None:
            self.classes = np.asarray(self.classes)
        if self.feature_names is not None:
            self.feature_names = [str(f) for f in self.feature_names]
        self.categories = {int(k): list(v) for k, v in (self.categories or {}).items()}
        self._validate()
        self._derive()

    def _derive(self) -> None:
        """Arrays derived from the (read-only) node arrays, computed once at construction."""
        # Thresholds of the kernels' fast path (see ``_traverse.fast_thresholds``).
        self._fast_threshold = _frozen(
            fast_thresholds(self.threshold, self.missing_type, self.cat_start), np.float64
        )
        self._usage = _frozen(
            np.bincount(self.feature[self.feature >= 0], minlength=self.n_features), np.int64
        )
        # The node record every kernel takes (one argument instead of ten arrays).
        self._nodes = (
            self.feature,
            self._fast_threshold,
            self.threshold,
            self.children_left,
            self.children_right,
            self.missing_left,
            self.missing_type,
            self.cat_start,
            self.cat_size,
            self.cat_bitsets,
        )

    def __getstate__(self) -> dict[str, Any]:
        # Derived data (and the Full plan ``as_plan`` caches here) is rebuilt, not pickled.
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Unpickled arrays come back writable: freeze them again.
        self.__dict__.update(state)
        for name, dtype in _ARRAYS.items():
            setattr(self, name, _frozen(getattr(self, name), dtype))
        self._derive()

    # ------------------------------------------------------------------ shape
    @property
    def nodes(self) -> tuple[np.ndarray, ...]:
        """The node arrays as the kernels take them, in one tuple: ``feature``, the fast-path
        thresholds, ``threshold``, ``children_left``, ``children_right``, ``missing_left``,
        ``missing_type``, ``cat_start``, ``cat_size``, ``cat_bitsets`` (read-only)."""
        return self._nodes

    @property
    def n_nodes(self) -> int:
        return int(self.feature.shape[0])

    @property
    def n_trees(self) -> int:
        return int(self.roots.shape[0])

    @property
    def n_outputs(self) -> int:
        return int(self.base_score.shape[0])

    @property
    def start(self) -> np.ndarray:
        """The value the trees are added onto: ``base_score``, or zeros when ``base_last``."""
        return np.zeros_like(self.base_score) if self.base_last else self.base_score

    def finish(self, acc: np.ndarray) -> np.ndarray:
        """Raw scores of tree sums ``acc`` (shape (..., n_outputs)) started from ``start``:
        ``acc`` itself, or ``scale * acc + base_score`` when ``base_last`` (in this order, one
        rounding each, as CatBoost's ``ApplyScaleAndBias``)."""
        if not self.base_last:
            return acc
        return self.scale * acc + self.base_score

    @property
    def contribution_weight(self) -> np.ndarray:
        """What tree ``t`` adds to the raw score per unit of its leaf value: ``tree_weight``,
        times ``scale`` for a ``base_last`` forest (the per-tree scores methods re-order and
        re-weight; a ``base_last`` forest's raw score rounds the scaled sum once, not per tree)."""
        return self.tree_weight * self.scale if self.base_last else self.tree_weight

    def base_first(self) -> Forest:
        """This forest summing its trees onto the base score (``base_last=False``, the scale in
        ``tree_weight``): the same model, its raw scores rounded as LightGBM's order rounds
        them, which differs from a ``base_last`` forest's by a few ulps at most."""
        if not self.base_last:
            return self
        return replace(self, tree_weight=self.contribution_weight, base_last=False, scale=1.0)

    @property
    def is_classifier(self) -> bool:
        return self.task in ("binary", "multiclass")

    @property
    def decision_threshold(self) -> float:
        """Raw score above which a binary model predicts the positive class."""
        return decision_threshold(self.link)

    def _validate(self) -> None:
        for names, n, what in ((NODE_ARRAYS, self.n_nodes, "node"), (TREE_ARRAYS, self.n_trees, "tree")):
            for name in names:
                shape = getattr(self, name).shape
                if shape[:1] != (n,):
                    raise InputError(f"Forest.{name} must have one entry per {what} ({n}), got shape {shape}")
        n, t = self.n_nodes, self.n_trees
        if self.link not in LINKS:
            raise InputError(f"unknown link {self.link!r}; expected one of {LINKS}")
        if self.task not in TASKS:
            raise InputError(f"unknown task {self.task!r}; expected one of {TASKS}")
        internal = self.feature >= 0
        if n and (np.any(self.feature >= self.n_features)):
            raise InputError(
                f"a node tests feature {int(self.feature.max())} but n_features={self.n_features}"
            )
        for name in ("children_left", "children_right"):
            c = getattr(self, name)
            if np.any(c[internal] < 0) or np.any(c >= n) or np.any(c[~internal] != -1):
                raise InputError(
                    f"Forest.{name} is inconsistent: internal nodes need children in "
                    f"[0, {n}) and leaves need -1"
                )
        if t and (self.roots.min() < 0 or self.roots.max() >= n):
            raise InputError("Forest.roots point outside the node arrays")
        # Traversal terminates only if what hangs below each root is a tree: no node may have
        # two parents and no root a parent (a corrupted document could otherwise loop forever).
        indegree = np.bincount(
            np.concatenate([self.children_left[internal], self.children_right[internal]]), minlength=n
        )
        if n and (indegree.max() > 1 or (t and indegree[self.roots].max() > 0)):
            raise InputError("Forest nodes do not form trees: a node has two parents or a root has a parent")
        width = self.value.shape[1]
        if np.any(self.tree_class >= self.n_outputs) or np.any(self.tree_class < -1):
            raise InputError("Forest.tree_class must be -1 or an output index")
        if np.any(self.tree_class == -1) and width != self.n_outputs:
            raise InputError("trees with tree_class == -1 need leaves of width n_outputs")
        for name in ("input_dtype", "accumulate"):
            if getattr(self, name) not in ("float64", "float32"):
                raise InputError(f"Forest.{name} must be 'float64' or 'float32', got {getattr(self, name)!r}")
        if not np.isfinite(self.scale) or (self.scale != 1.0 and not self.base_last):
            raise InputError(
                f"Forest.scale must be finite, and 1.0 unless base_last=True (got {self.scale!r}); "
                "a forest that adds its base first carries a scale in tree_weight"
            )
        if self.feature_names is not None and len(self.feature_names) != self.n_features:
            raise InputError(f"{len(self.feature_names)} feature names for {self.n_features} features")

    # ------------------------------------------------------------------ inputs
    def _as_matrix(self, X: Any) -> np.ndarray:
        """Validated float64 C-contiguous matrix, categories coded and rounded to input_dtype."""
        return as_matrix(X, self)

    # ------------------------------------------------------------------ prediction
    def predict_raw(self, X: Any, *, n_threads: int | None = None) -> np.ndarray:
        """Raw scores (margins): shape (n,) for one output, (n, n_outputs) otherwise."""
        raw = _predict.predict_raw(self, self._as_matrix(X), n_threads=n_threads)
        return raw[:, 0] if self.n_outputs == 1 else raw

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, shape (n, n_classes), as the source library computes them."""
        if not self.is_classifier:
            raise InputError(f"predict_proba needs a classifier; this forest's task is {self.task!r}")
        return raw_to_proba(self.predict_raw(X), self.link)

    def predict(self, X: Any) -> np.ndarray:
        """Class labels for classifiers, raw scores otherwise."""
        raw = self.predict_raw(X)
        if not self.is_classifier:
            return raw
        return self.labels_from_raw(raw)

    def labels_from_raw(self, raw: np.ndarray) -> np.ndarray:
        """Class labels of raw scores (binary: ``raw > decision_threshold``; else argmax)."""
        return labels_from(raw, None, self.link, self.classes, self.n_outputs)

    def apply(self, X: Any) -> np.ndarray:
        """Global index of the leaf each example reaches in each tree, shape (n, n_trees)."""
        return _predict.apply(self, self._as_matrix(X))

    def feature_usage(self) -> np.ndarray:
        """Number of split nodes testing each feature, shape (n_features,) (read-only)."""
        return self._usage

    def tree_features(self, t: int) -> np.ndarray:
        """Sorted features tested anywhere in tree ``t``."""
        return np.unique(self.feature[self._tree_nodes(t)][self.feature[self._tree_nodes(t)] >= 0])

    def _tree_nodes(self, t: int) -> np.ndarray:
        stack, out = [int(self.roots[t])], []
        while stack:
            node = stack.pop()
            out.append(node)
            if self.feature[node] >= 0:
                stack.extend((int(self.children_left[node]), int(self.children_right[node])))
        return np.asarray(sorted(out), dtype=np.int64)

    def tree_depths(self) -> np.ndarray:
        """Depth of each tree (a stump has depth 1, a single leaf depth 0)."""
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        out = np.zeros(self.n_trees, dtype=np.int64)
        for t in range(self.n_trees):
            stack = [int(self.roots[t])]
            depth[stack[0]] = 0
            while stack:
                node = stack.pop()
                out[t] = max(out[t], depth[node])
                if self.feature[node] >= 0:
                    for c in (self.children_left[node], self.children_right[node]):
                        depth[c] = depth[node] + 1
                        stack.append(int(c))
        return out

    def subset(self, trees: Sequence[int]) -> Forest:
        """A forest of the given trees (in that order); a mean-aggregated forest is re-averaged."""
        order = np.asarray(trees, dtype=np.int64)
        weight = self.tree_weight[order].copy()
        if self.aggregation == "mean" and len(order):
            weight = weight * self.n_trees / len(order)
        return _rebuild(
            self, [self._tree_nodes(int(t)) for t in order], self.roots[order], weight, self.tree_class[order]
        )

    # ------------------------------------------------------------------ io
    def to_json(self) -> str:
        """Serialize to a versioned JSON document (see ``thrifty.forest.io``)."""
        from thrifty.forest.io import forest_to_json  # not at the top: io imports this module

        return forest_to_json(self)

    @classmethod
    def from_json(cls, text: str) -> Forest:
        from thrifty.forest.io import forest_from_json  # not at the top: io imports this module

        return forest_from_json(text)

    @classmethod
    def from_model(cls, model: Any, *, feature_names: Sequence[Any] | None = None) -> Forest:
        """Import a fitted LightGBM, XGBoost or scikit-learn tree model (see
        ``thrifty.forest.importers.from_model``; ``feature_names`` restores the training
        columns' names where the library changed them)."""
        # Not at the top: the importers (and the per-library modules they use) import this module.
        from thrifty.forest.importers import from_model

        return from_model(model, feature_names=feature_names)

    def __repr__(self) -> str:
        return (
            f"Forest(n_trees={self.n_trees}, n_nodes={self.n_nodes}, n_features={self.n_features}, "
            f"n_outputs={self.n_outputs}, task={self.task!r}, link={self.link!r}, "
            f"source={self.source!r})"
        )


def _frozen(a: Any, dtype: Any) -> np.ndarray:
    """A read-only C-contiguous copy of ``a`` (a copy, so the caller's array stays writable)."""
    a = np.asarray(a)
    if a.dtype == dtype and a.flags.c_contiguous and not a.flags.writeable:
        return a
    out = np.array(a, dtype=dtype, order="C")
    out.flags.writeable = False
    return out


def _rebuild(
    forest: Forest,
    node_lists: list[np.ndarray],
    roots: np.ndarray,
    weight: np.ndarray,
    tree_class: np.ndarray,
) -> Forest:
    """A new forest holding only the given nodes of each tree, renumbered contiguously.

    Each entry of ``node_lists`` (sorted node indices of one tree) becomes its own copy, so a
    tree listed twice is duplicated rather than shared between two roots.
    """
    nodes = np.concatenate(node_lists) if node_lists else np.zeros(0, dtype=np.int64)
    lefts: list[np.ndarray] = []
    rights: list[np.ndarray] = []
    new_roots, offset = [], 0
    for tree_nodes, root in zip(node_lists, roots):
        for c, out in (
            (forest.children_left[tree_nodes], lefts),
            (forest.children_right[tree_nodes], rights),
        ):
            out.append(np.where(c >= 0, offset + np.searchsorted(tree_nodes, c), -1))
        new_roots.append(offset + int(np.searchsorted(tree_nodes, root)))
        offset += len(tree_nodes)
    empty = np.zeros(0, dtype=np.int64)
    children_left = np.concatenate(lefts) if lefts else empty
    children_right = np.concatenate(rights) if rights else empty

    kept = {name: getattr(forest, name)[nodes] for name in NODE_ARRAYS}
    return Forest(
        **{**kept, "children_left": children_left, "children_right": children_right},
        cat_bitsets=forest.cat_bitsets,
        roots=np.asarray(new_roots, dtype=np.int64),
        tree_weight=weight,
        tree_class=tree_class,
        base_score=forest.base_score.copy(),
        n_features=forest.n_features,
        link=forest.link,
        task=forest.task,
        classes=forest.classes,
        feature_names=forest.feature_names,
        categories=forest.categories,
        input_dtype=forest.input_dtype,
        accumulate=forest.accumulate,
        aggregation=forest.aggregation,
        source=forest.source,
        base_last=forest.base_last,
        scale=forest.scale,
    )
