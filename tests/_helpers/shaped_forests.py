"""Forests of a chosen shape for the choice of block kind: chains (skewed trees a coin-flip walk
leaves after about two splits) and complete balanced trees, numeric or with categorical splits."""

from __future__ import annotations

import numpy as np

from thrifty import Forest


def shaped_forest(
    rng: np.random.Generator,
    shape: str,
    *,
    n_trees: int = 6,
    n_features: int = 5,
    splits: int = 20,
    depth: int = 5,
    categorical: bool = False,
    n_outputs: int = 1,
) -> Forest:
    """``shape`` "chain": each tree ``splits`` splits, one child of each a leaf (the side drawn);
    "balanced": complete trees of ``depth`` levels. Thresholds, missing-value types and
    directions are drawn as ``reference.random_forest`` draws them; with ``categorical`` every
    third split tests a category set."""
    arrays: dict[str, list] = {k: [] for k in ("feature", "threshold", "left", "right", "mleft", "mtype")}
    cstart: list[int] = []
    value: list[float] = []
    bitsets: list[int] = []

    def new(is_leaf: bool) -> int:
        i = len(value)
        value.append(float(np.round(rng.normal(), 3)) if is_leaf else 0.0)
        arrays["feature"].append(-1 if is_leaf else int(rng.integers(n_features)))
        arrays["threshold"].append(float(rng.choice([-1.0, 0.0, 0.5, 1.0, 2.5])))
        arrays["mleft"].append(bool(rng.random() < 0.5))
        arrays["mtype"].append(int(rng.integers(0, 3)))
        arrays["left"].append(-1)
        arrays["right"].append(-1)
        cat = categorical and not is_leaf and i % 3 == 0
        cstart.append(len(bitsets) if cat else -1)
        if cat:
            bitsets.append(int(rng.integers(0, 2**32, dtype=np.uint64)))
        return i

    def balanced(level: int) -> int:
        i = new(level == depth)
        if level < depth:
            arrays["left"][i] = balanced(level + 1)
            arrays["right"][i] = balanced(level + 1)
        return i

    def chain(k: int) -> int:
        i = new(k == 0)
        if k:
            leaf, rest = new(True), chain(k - 1)
            side = rng.random() < 0.5
            arrays["left"][i], arrays["right"][i] = (leaf, rest) if side else (rest, leaf)
        return i

    roots = [chain(splits) if shape == "chain" else balanced(0) for _ in range(n_trees)]
    return Forest(
        feature=arrays["feature"],
        threshold=arrays["threshold"],
        children_left=arrays["left"],
        children_right=arrays["right"],
        missing_left=arrays["mleft"],
        missing_type=arrays["mtype"],
        cat_start=cstart,
        cat_size=[1 if c >= 0 else 0 for c in cstart],
        cat_bitsets=np.asarray(bitsets, dtype=np.uint32),
        value=value,
        roots=roots,
        tree_weight=rng.uniform(0.5, 1.5, size=n_trees).round(3),
        tree_class=[t % n_outputs for t in range(n_trees)],
        base_score=np.round(rng.normal(size=n_outputs), 3),
        n_features=n_features,
        link="sigmoid" if n_outputs == 1 else "softmax",
        task="binary" if n_outputs == 1 else "multiclass",
    )
