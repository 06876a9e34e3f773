"""Random oblivious (symmetric) forests for the compiled runtime's oblivious path: every level of
a tree tests one rule (numerical with any missing-value type, or a category set), optionally
mixed with trees that are nearly oblivious (one split differs) and with ordinary random trees."""

from __future__ import annotations

import numpy as np

from tests._helpers.reference import random_forest
from thrifty import Forest

THRESHOLDS = (-1.0, 0.0, 0.5, 1.0, 2.5, np.nan)


def _rule(rng: np.random.Generator, n_features: int, categorical: bool) -> dict:
    rule = {"feature": int(rng.integers(n_features)), "missing_left": bool(rng.random() < 0.5)}
    if categorical and rng.random() < 0.25:
        words = int(rng.integers(1, 3))
        rule["cats"] = [int(w) for w in rng.integers(0, 2**32, size=words, dtype=np.uint64)]
    else:
        rule["threshold"] = float(rng.choice(THRESHOLDS))
        rule["missing_type"] = int(rng.integers(0, 3))
    return rule


def oblivious_forest(
    rng: np.random.Generator,
    n_features: int,
    depths: list[int],
    *,
    n_outputs: int = 1,
    vector_leaves: bool = False,
    categorical: bool = True,
    broken: tuple[int, ...] = (),
    others: int = 0,
    float32: bool = False,
) -> Forest:
    """A forest of one oblivious tree per entry of ``depths``; the trees at the positions
    ``broken`` have one split (not the first of its level) given another threshold, so they
    are complete but not oblivious; ``others`` ordinary random trees (``random_forest``) follow.
    With ``vector_leaves`` every leaf holds ``n_outputs`` values (CatBoost's multiclass trees)."""
    arrays: dict[str, list] = {
        k: []
        for k in (
            "feature",
            "threshold",
            "children_left",
            "children_right",
            "missing_left",
            "missing_type",
            "cat_start",
            "cat_size",
        )
    }
    values: list[list[float]] = []
    bitsets: list[int] = []
    roots, tclass = [], []
    width = n_outputs if vector_leaves else 1
    for t, depth in enumerate(depths):
        base = len(arrays["feature"])
        roots.append(base)
        tclass.append(-1 if vector_leaves else t % n_outputs)
        rules = [_rule(rng, n_features, categorical) for _ in range(depth)]
        n_internal = (1 << depth) - 1
        for i in range(2 * n_internal + 1):
            if i >= n_internal:
                row = dict(feature=-1, threshold=0.0, children_left=-1, children_right=-1)
                row.update(missing_left=False, missing_type=0, cat_start=-1, cat_size=0)
                values.append(np.round(rng.normal(size=width), 3).tolist())
            else:
                rule = rules[int(np.log2(i + 1))]
                row = dict(feature=rule["feature"], threshold=rule.get("threshold", 0.0))
                row.update(children_left=base + 2 * i + 1, children_right=base + 2 * i + 2)
                row.update(missing_left=rule["missing_left"], missing_type=rule.get("missing_type", 0))
                if "cats" in rule:
                    row.update(cat_start=len(bitsets), cat_size=len(rule["cats"]))
                    bitsets.extend(rule["cats"])
                else:
                    row.update(cat_start=-1, cat_size=0)
                values.append([0.0] * width)
            for k, v in row.items():
                arrays[k].append(v)
        if t in broken and depth >= 2:
            # The last split of level 1 gets a threshold no rule uses (and no category set).
            node = base + 2
            arrays["threshold"][node], arrays["cat_start"][node], arrays["cat_size"][node] = 1.75, -1, 0
    weights = rng.uniform(0.5, 1.5, size=len(depths)).round(3).tolist()
    forest = Forest(
        **arrays,
        cat_bitsets=np.asarray(bitsets, dtype=np.uint32),
        value=np.asarray(values, dtype=np.float64).reshape(-1, width),
        roots=roots,
        tree_weight=weights,
        tree_class=tclass,
        base_score=np.round(rng.normal(size=n_outputs), 3),
        n_features=n_features,
        link="sigmoid" if n_outputs == 1 else "softmax",
        task="binary" if n_outputs == 1 else "multiclass",
        input_dtype="float32" if float32 else "float64",
    )
    if not others:
        return forest
    return _append(forest, random_forest(rng, n_features, n_trees=others, n_outputs=n_outputs))


def _append(a: Forest, b: Forest) -> Forest:
    """``a``'s trees then ``b``'s (``a``'s base score and metadata)."""
    n, m = a.n_nodes, len(a.cat_bitsets)
    width = max(a.value.shape[1], b.value.shape[1])

    def widen(v: np.ndarray) -> np.ndarray:
        out = np.zeros((len(v), width))
        out[:, : v.shape[1]] = v
        return out

    shift = np.where(b.children_left >= 0, n, 0)
    return Forest(
        feature=np.concatenate([a.feature, b.feature]),
        threshold=np.concatenate([a.threshold, b.threshold]),
        children_left=np.concatenate([a.children_left, b.children_left + shift]),
        children_right=np.concatenate([a.children_right, b.children_right + shift]),
        missing_left=np.concatenate([a.missing_left, b.missing_left]),
        missing_type=np.concatenate([a.missing_type, b.missing_type]),
        cat_start=np.concatenate([a.cat_start, np.where(b.cat_start >= 0, b.cat_start + m, -1)]),
        cat_size=np.concatenate([a.cat_size, b.cat_size]),
        cat_bitsets=np.concatenate([a.cat_bitsets, b.cat_bitsets]),
        value=np.concatenate([widen(a.value), widen(b.value)]),
        roots=np.concatenate([a.roots, b.roots + n]),
        tree_weight=np.concatenate([a.tree_weight, b.tree_weight]),
        tree_class=np.concatenate([a.tree_class, b.tree_class]),
        base_score=a.base_score,
        n_features=a.n_features,
        link=a.link,
        task=a.task,
        input_dtype=a.input_dtype,
    )
