"""What the importers and the methods that grow trees share: assembling a :class:`Forest` tree by
tree (:class:`ForestBuilder`, :func:`flatten_tree`, :func:`bitset_words`), and the error for a model
of a type no importer handles."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from thrifty.exceptions import InputError, UnsupportedModelError
from thrifty.forest._forest import MISSING_NAN, NODE_ARRAYS, Forest

SUPPORTED = (
    "lightgbm: Booster, LGBMClassifier, LGBMRegressor, LGBMRanker",
    "xgboost: Booster, XGBClassifier, XGBRegressor, XGBRanker (gbtree and dart boosters)",
    "catboost: CatBoost, CatBoostClassifier, CatBoostRegressor, CatBoostRanker (symmetric trees)",
    "ydf: GradientBoostedTreesModel, RandomForestModel",
    (
        "scikit-learn: DecisionTreeClassifier/Regressor, ExtraTreeClassifier/Regressor, "
        "RandomForestClassifier/Regressor, ExtraTreesClassifier/Regressor, "
        "GradientBoostingClassifier/Regressor, HistGradientBoostingClassifier/Regressor"
    ),
    "onnx: a ModelProto or .onnx file of one TreeEnsembleRegressor/Classifier or TreeEnsemble node",
)


def unsupported(model: Any) -> UnsupportedModelError:
    """The error raised for a model of a type no importer handles."""
    kind = f"{type(model).__module__}.{type(model).__qualname__}"
    return UnsupportedModelError(
        f"cannot import a model of type {kind}; supported models are:\n  - " + "\n  - ".join(SUPPORTED)
    )


def bitset_words(codes: Iterable[int]) -> np.ndarray:
    """32-bit words of the bitset holding the non-negative integer ``codes``.

    Bit ``c % 32`` of word ``c // 32`` is set for each code ``c``; at least one word is
    returned so that an empty set is still a valid categorical node.
    """
    codes = np.asarray(list(codes), dtype=np.int64)
    if codes.size and codes.min() < 0:
        raise InputError(f"negative category code {int(codes.min())} in a categorical split")
    n_words = int(codes.max()) // 32 + 1 if codes.size else 1
    words = np.zeros(n_words, dtype=np.uint32)
    np.bitwise_or.at(words, codes // 32, (np.uint32(1) << (codes % 32).astype(np.uint32)))
    return words


class ForestBuilder:
    """Collects trees given as local node arrays and assembles one :class:`Forest`.

    Each tree is given with node indices local to the tree (its root is node 0 unless stated)
    and children ``-1`` at leaves; the builder offsets them into the global arrays.
    """

    def __init__(self, width: int = 1) -> None:
        self.width = width
        self.parts: dict[str, list[np.ndarray]] = {name: [] for name in NODE_ARRAYS}
        self.bitsets: list[np.ndarray] = []
        self.n_words = 0
        self.n_nodes = 0
        self.roots: list[int] = []
        self.weights: list[float] = []
        self.classes: list[int] = []

    def add_tree(
        self,
        feature: np.ndarray,
        threshold: np.ndarray,
        left: np.ndarray,
        right: np.ndarray,
        value: np.ndarray,
        *,
        missing_left: Any = False,
        missing_type: Any = MISSING_NAN,
        cat_words: Mapping[int, np.ndarray] | None = None,
        root: int = 0,
        weight: float = 1.0,
        tree_class: int = 0,
    ) -> None:
        """Append one tree.

        Parameters
        ----------
        feature, threshold, left, right : array-like, shape (n_local,)
            Local node arrays; a node is a leaf when ``left == -1``.
        value : array-like, shape (n_local,) or (n_local, width)
            Leaf values (rows of internal nodes are ignored).
        missing_left, missing_type : array-like or scalar
            Default direction and missing-value rule of each node.
        cat_words : mapping of local node -> uint32 words, optional
            Categorical nodes and the bitset of the codes that go left.
        root : int
            Local index of the root.
        weight : float
            Tree weight (learning rate, ``1/T`` for averages).
        tree_class : int
            Output the tree adds to, ``-1`` for vector leaves.
        """
        left = np.asarray(left, dtype=np.int64)
        n = left.shape[0]
        leaf = left < 0
        offset = self.n_nodes
        right = np.asarray(right, dtype=np.int64)
        feature = np.where(leaf, -1, np.asarray(feature, dtype=np.int64))
        cat_start = np.full(n, -1, dtype=np.int64)
        cat_size = np.zeros(n, dtype=np.int64)
        for node, words in (cat_words or {}).items():
            words = np.asarray(words, dtype=np.uint32)
            cat_start[node], cat_size[node] = self.n_words, words.shape[0]
            self.bitsets.append(words)
            self.n_words += words.shape[0]
        value = np.asarray(value, dtype=np.float64).reshape(n, -1)
        if value.shape[1] != self.width:
            raise InputError(f"leaf values of width {value.shape[1]}, expected {self.width}")
        parts = {
            "feature": feature,
            "threshold": np.where(leaf, 0.0, np.asarray(threshold, dtype=np.float64)),
            "children_left": np.where(leaf, -1, left + offset),
            "children_right": np.where(leaf, -1, right + offset),
            "missing_left": np.broadcast_to(np.asarray(missing_left, dtype=bool), (n,)) & ~leaf,
            "missing_type": np.where(leaf, MISSING_NAN, np.broadcast_to(np.asarray(missing_type), (n,))),
            "cat_start": cat_start,
            "cat_size": cat_size,
            "value": np.where(leaf[:, None], value, 0.0),
        }
        for key, array in parts.items():
            self.parts[key].append(array)
        self.roots.append(offset + root)
        self.weights.append(weight)
        self.classes.append(tree_class)
        self.n_nodes += n

    def build(self, *, base_score: Any, n_features: int, **meta: Any) -> Forest:
        """The assembled forest; ``meta`` holds the remaining :class:`Forest` fields."""

        def cat(name: str, dtype: Any) -> np.ndarray:
            arrays = self.parts[name]
            empty = (0, self.width) if name == "value" else (0,)
            return np.concatenate(arrays).astype(dtype) if arrays else np.zeros(empty, dtype)

        nodes: dict[str, Any] = {name: cat(name, dtype) for name, dtype in NODE_ARRAYS.items()}
        return Forest(
            **nodes,
            cat_bitsets=(np.concatenate(self.bitsets) if self.bitsets else np.zeros(0, dtype=np.uint32)),
            roots=np.asarray(self.roots, dtype=np.int32),
            tree_weight=np.asarray(self.weights, dtype=np.float64),
            tree_class=np.asarray(self.classes, dtype=np.int32),
            base_score=base_score,
            n_features=n_features,
            **meta,
        )


def flatten_tree(
    root: Any, children: Callable[[Any], tuple[Any, Any] | None]
) -> tuple[list, np.ndarray, np.ndarray]:
    """Number the nodes of a pointer-based tree in preorder.

    ``children(node)`` returns ``(left, right)`` for a split and ``None`` for a leaf. Returns
    the nodes in local order with the local indices of their children (``-1`` at leaves).
    Iterative, so deep trees do not hit Python's recursion limit.
    """
    nodes: list[Any] = []
    left: list[int] = []
    right: list[int] = []
    stack: list[tuple[Any, int, int]] = [(root, -1, 0)]  # (node, parent index, 0=left 1=right)
    while stack:
        node, parent, side = stack.pop()
        index = len(nodes)
        nodes.append(node)
        left.append(-1)
        right.append(-1)
        if parent >= 0:
            (left if side == 0 else right)[parent] = index
        kids = children(node)
        if kids is not None:
            stack.append((kids[1], index, 1))
            stack.append((kids[0], index, 0))
    return nodes, np.asarray(left, dtype=np.int64), np.asarray(right, dtype=np.int64)
