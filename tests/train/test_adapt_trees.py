"""The cost-aware trees of ADAPT-GBRT against a brute-force evaluation of impurity (1)/(2)."""

import numpy as np
import pytest

from thrifty.costs import CostModel
from thrifty.train._adapt_trees import Binner, grow_tree


def _root_split(X, r, costs, acquired, gamma, min_leaf):
    """Brute force: the (feature, threshold) maximising the penalized reduction of
    1/2 sum (r - h)^2 over the mean, or None when no split has a positive score."""
    n = len(r)
    base = 0.5 * np.sum((r - r.mean()) ** 2)
    best, arg = 1e-12, None
    for f in range(X.shape[1]):
        units = costs.closure_units[costs.closure_ptr[f] : costs.closure_ptr[f + 1]]
        price = sum(costs.unit_cost[u] for u in units if not acquired[u])
        for t in np.unique(X[:, f])[:-1]:
            left = X[:, f] <= t
            if left.sum() < min_leaf or (~left).sum() < min_leaf:
                continue
            sse = 0.5 * (np.sum((r[left] - r[left].mean()) ** 2) + np.sum((r[~left] - r[~left].mean()) ** 2))
            score = (base - sse) / n - gamma * price
            if score > best + 1e-12:
                best, arg = score, (f, t)
    return arg


def _grow(X, r, costs, acquired, gamma, depth=1, min_leaf=3):
    binner = Binner(X)
    acq = acquired.copy()
    tree = grow_tree(
        binner.transform(X),
        binner.n_bins,
        r,
        np.ones_like(r),
        -r,
        np.ones_like(r),
        acq,
        (costs.closure_ptr, costs.closure_units, costs.unit_cost),
        gamma,
        (depth, min_leaf, 0.0),
        float(len(r)),
    )
    return tree, binner, acq


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("gamma", [0.0, 0.02, 0.2])
def test_root_split_matches_brute_force(seed, gamma):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 12, size=(80, 4)).astype(float)
    r = X[:, 0] * 0.1 - X[:, 2] * 0.08 + 0.3 * rng.standard_normal(80)
    # feature 3 is derived from 0 and 1; 1 and 2 form a group
    costs = CostModel([1.0, 0.5, 0.5, 0.0], groups={"panel": [1, 2]}, dependencies={3: [0, 1]})
    acquired = np.zeros(len(costs.unit_cost), dtype=bool)
    tree, binner, _ = _grow(X, r, costs, acquired, gamma)
    feature, bins = tree[0], tree[1]
    expected = _root_split(X, r, costs, acquired, gamma, 3)
    if expected is None:
        assert feature[0] == -1
    else:
        assert (feature[0], binner.threshold(feature[0], bins[0])) == expected


def test_acquired_features_are_free_and_marked():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((200, 3))
    r = np.where(X[:, 1] > 0, 1.0, -1.0)
    costs = CostModel([1.0, 50.0, 1.0])
    none = np.zeros(3, dtype=bool)
    tree, _, acq = _grow(X, r, costs, none, gamma=0.05)
    assert tree[0][0] != 1  # too expensive when new...
    paid = none.copy()
    paid[1] = True
    tree, _, acq = _grow(X, r, costs, paid, gamma=0.05)
    assert tree[0][0] == 1  # ...free once the other model has bought it
    assert acq[1]


def test_leaf_values_are_newton_steps_and_nan_goes_left():
    X = np.array([[np.nan], [0.0], [1.0], [2.0], [3.0], [4.0]])
    r = np.array([-1.0, -1.0, -1.0, 1.0, 1.0, 1.0])
    costs = CostModel([0.0])
    tree, binner, _ = _grow(X, r, costs, np.zeros(1, dtype=bool), gamma=0.0, min_leaf=1)
    feature, bins, left, right, value, leaf_of_row = tree
    assert binner.threshold(feature[0], bins[0]) == 1.0
    np.testing.assert_array_equal(leaf_of_row[:3], left[0])
    # grad = -r, hess = 1, lam = 0: each leaf's value is the mean residual
    assert value[left[0]] == pytest.approx(-1.0) and value[right[0]] == pytest.approx(1.0)
