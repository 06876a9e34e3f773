"""ONNX trees as decisions and leaves, and their unrolling into a Forest tree of ``x <= t`` splits."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

# ai.onnx.ml's node modes, in TreeEnsemble's code order (0..6).
MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "BRANCH_MEMBER")


@dataclass(eq=False)
class Split:
    """One ONNX decision: ``mode`` of ``x[feature]`` against ``value`` (a set for MEMBER); NaN
    takes the true branch when ``nan_true``, else the comparison's outcome."""

    feature: int
    mode: str
    value: Any
    nan_true: bool
    true: Split | Leaf
    false: Split | Leaf


@dataclass(eq=False)
class Leaf:
    """Weights a leaf adds, by score column."""

    weights: dict[int, float]


@dataclass(eq=False)
class _Member:
    """``x in values`` (sorted, finite or infinite, no NaN), NaN counting as in when
    ``nan_in``: the form EQ, NEQ and MEMBER are unrolled through."""

    feature: int
    values: tuple[float, ...]
    nan_in: bool
    inside: Split | Leaf
    outside: Split | Leaf


@dataclass(eq=False)
class _Cut:
    """A Forest split: ``x[feature] <= cut`` goes to ``low``, NaN to ``low`` when ``nan_low``."""

    feature: int
    cut: float
    nan_low: bool
    low: Any
    high: Any


def _walk(tree: Split | Leaf) -> list[Split | Leaf]:
    """Every distinct decision and leaf below ``tree`` (ONNX trees may share subtrees)."""
    seen: dict[int, Split | Leaf] = {}
    stack = [tree]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        if isinstance(node, Split):
            stack.extend((node.true, node.false))
    return list(seen.values())


def leaves(tree: Split | Leaf) -> list[Leaf]:
    return [n for n in _walk(tree) if isinstance(n, Leaf)]


def features(tree: Split | Leaf) -> list[int]:
    return [n.feature for n in _walk(tree) if isinstance(n, Split)]


def single_target(tree: Split | Leaf) -> int | None:
    """The one score column the tree's leaves add to (0 when none adds), else None."""
    targets = {k for leaf in leaves(tree) for k in leaf.weights}
    return None if len(targets) > 1 else next(iter(targets), 0)


def keep_column(tree: Split | Leaf, column: int) -> Split | Leaf:
    """The tree with each leaf's weight of ``column`` only, as column 0."""
    nodes = _walk(tree)
    copies: dict[int, Split | Leaf] = {}
    for n in nodes:
        if isinstance(n, Leaf):
            copies[id(n)] = Leaf({0: n.weights[column]} if column in n.weights else {})
    # Splits are copied once both children are (a shared subtree stays shared).
    order = [n for n in nodes if isinstance(n, Split)]
    while order:
        rest = []
        for node in order:
            if id(node.true) in copies and id(node.false) in copies:
                copies[id(node)] = Split(
                    node.feature,
                    node.mode,
                    node.value,
                    node.nan_true,
                    copies[id(node.true)],
                    copies[id(node.false)],
                )
            else:
                rest.append(node)
        order = rest
    return copies[id(tree)]


def _below(t: float, precision: Any) -> float:
    """The largest number of ``precision`` below ``t`` (NaN below -inf: no number is)."""
    if t == -np.inf:
        return np.nan
    return float(np.nextafter(precision(t), precision(-np.inf)))


def _above(t: float, precision: Any) -> float:
    return float(np.nextafter(precision(t), precision(np.inf)))


def _translate(node: Split, precision: Any) -> _Member | _Cut:
    """EQ, NEQ and MEMBER as set membership, comparisons with a NaN threshold (false for every
    number but under NEQ) as membership of the empty set, other comparisons as a Forest split:
    inputs are numbers of ``precision``, so ``x < t`` is ``x <= below(t)``, and ``x > t`` and
    ``x >= t`` are the negations of ``x <= t`` and ``x < t``.

    MEMBER is ONNX's: ``x`` equals a member. (onnxruntime 1.32 rewrites member sets into nodes
    of its own that, for some sets, truncate ``x`` or miss members; thrifty keeps the standard.)
    """
    t = node.value
    if node.mode == "BRANCH_MEMBER":
        values = tuple(sorted({float(precision(v)) for v in t if not np.isnan(v)}))
        return _Member(node.feature, values, node.nan_true, node.true, node.false)
    if node.mode in ("BRANCH_EQ", "BRANCH_NEQ") or np.isnan(t):
        values = () if np.isnan(t) else (float(precision(t)),)
        if node.mode == "BRANCH_NEQ":  # NaN != t holds: NaN is outside the set {t}
            return _Member(node.feature, values, False, node.false, node.true)
        return _Member(node.feature, values, node.nan_true, node.true, node.false)
    t = float(precision(t))
    true_low = node.mode in ("BRANCH_LEQ", "BRANCH_LT")
    cut = t if node.mode in ("BRANCH_LEQ", "BRANCH_GT") else _below(t, precision)
    low, high = (node.true, node.false) if true_low else (node.false, node.true)
    return _Cut(node.feature, cut, node.nan_true == true_low, low, high)


def unroll(tree: Split | Leaf, precision: Any, width: int) -> tuple[np.ndarray, ...]:
    """Forest node arrays (feature, threshold, left, right, value, missing_left) of ``tree``.

    Comparisons become one split each (``_translate``). Set membership (EQ, NEQ, MEMBER) splits
    at a member ``t``: ``x <= below(t)`` sends the smaller members one way, ``x <= t`` then
    isolates ``t`` from the larger ones; each branch keeps the interval of values that can still
    reach it, so membership tests it decides are dropped and a chain of ``k`` equalities on one
    feature (onnxmltools' categorical splits) unrolls into ``O(k)`` nodes. A leaf holds its one
    weight when ``width == 1``, else its weights by column.
    """
    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []
    value: list[np.ndarray] = []
    missing_left: list[bool] = []
    # Stack of (node, region, parent, side): region maps a feature to (lo, hi, NaN possible).
    stack: list[tuple[Any, dict[int, tuple[float, float, bool]], int, int]] = [(tree, {}, -1, 0)]
    while stack:
        node, region, parent, side = stack.pop()
        if isinstance(node, Split):
            node = _translate(node, precision)
        if isinstance(node, _Member):
            decided = _decide(node, region.get(node.feature, (-np.inf, np.inf, True)))
            if decided is not None:
                stack.append((decided, region, parent, side))
                continue
            node = _member_cut(node, region, precision)
        index = len(feature)
        leaf = np.zeros(width)
        if isinstance(node, Leaf):
            for k, w in node.weights.items():
                leaf[0 if width == 1 else k] = precision(w)
            feature.append(-1)
            threshold.append(0.0)
            missing_left.append(False)
        else:
            feature.append(node.feature)
            threshold.append(node.cut)
            missing_left.append(node.nan_low)
            low, high = _split_region(region, node.feature, node.cut, node.nan_low, precision)
            stack.append((node.high, high, index, 1))
            stack.append((node.low, low, index, 0))
        value.append(leaf)
        left.append(-1)
        right.append(-1)
        if parent >= 0:
            (left if side == 0 else right)[parent] = index
    return (
        np.asarray(feature, dtype=np.int64),
        np.asarray(threshold, dtype=np.float64),
        np.asarray(left, dtype=np.int64),
        np.asarray(right, dtype=np.int64),
        np.asarray(value, dtype=np.float64).reshape(len(feature), width),
        np.asarray(missing_left, dtype=bool),
    )


def _split_region(
    region: dict[int, tuple[float, float, bool]], f: int, cut: float, nan_low: bool, precision: Any
) -> tuple[dict[int, tuple[float, float, bool]], dict[int, tuple[float, float, bool]]]:
    """The regions of the two children of ``x[f] <= cut`` (a NaN cut sends every number high)."""
    lo, hi, nan = region.get(f, (-np.inf, np.inf, True))
    if np.isnan(cut):
        low = (np.inf, -np.inf, nan and nan_low)
        high = (lo, hi, nan and not nan_low)
    else:
        low = (lo, min(hi, cut), nan and nan_low)
        high = (max(lo, _above(cut, precision)), hi, nan and not nan_low)
    return {**region, f: low}, {**region, f: high}


def _decide(node: _Member, bounds: tuple[float, float, bool]) -> Any:
    """The branch every value in ``bounds`` takes, or None when they differ."""
    lo, hi, nan = bounds
    inside = [v for v in node.values if lo <= v <= hi]
    if lo > hi:  # no number reaches here; NaN does if anything does
        return node.inside if nan and node.nan_in else node.outside
    if not inside and (not nan or not node.nan_in):
        return node.outside
    if inside and lo == hi and (not nan or node.nan_in):  # the one number that can come is in
        return node.inside
    return None


def _member_cut(node: _Member, region: dict[int, tuple[float, float, bool]], precision: Any) -> _Cut:
    """Splits testing ``x in values`` at its middle member ``t``: ``x <= below(t)`` (smaller
    members), then ``x <= t`` (``t`` itself against the larger members)."""
    lo, hi, _ = region.get(node.feature, (-np.inf, np.inf, True))
    values = [v for v in node.values if lo <= v <= hi]
    f, nan_in = node.feature, node.nan_in
    if not values:  # only NaN can be in: every number goes low (outside), NaN high (inside)
        return _Cut(f, np.inf, False, node.outside, node.inside)
    t = values[len(values) // 2]
    smaller = _Member(f, tuple(v for v in values if v < t), nan_in, node.inside, node.outside)
    larger = _Member(f, tuple(v for v in values if v > t), nan_in, node.inside, node.outside)
    second = _Cut(f, t, nan_in, node.inside, larger)
    cut = _below(t, precision)
    if np.isnan(cut):  # t is -inf: no number is below it
        return second
    return _Cut(f, cut, not nan_in, smaller, second)
