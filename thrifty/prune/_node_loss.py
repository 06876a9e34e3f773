"""What a node of (IP3) predicts when it is made a leaf, and what it then loses: the errors of a
class vote (classification) or the squared errors of a mean (regression).

Both losses read the same per-node sums, which ``_problem._walk`` accumulates: every example
adds its row of ``stats`` into the columns ``col[i] : col[i] + stats.shape[1]`` of each node it
reaches. A class vote puts the example's weight in its class's column (one-hot counts); a mean
puts ``(w, w y, w y^2)`` in columns 0-2, the sufficient statistics of a squared error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class ClassVote:
    """Classification: ``e_h`` counts the (weighted) examples of ``S_h`` the node's class misses.

    A node votes for the majority class of its voters; ``leaf_class`` (per node, ``-1`` where
    free) fixes the vote of some nodes (the original leaves when their values are kept), and a
    split may then raise the error.
    """

    n_classes: int
    leaf_class: np.ndarray | None = None

    def stats(self, target: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """``(col, stats, n_columns)``: each example's weight in its class's column."""
        return target.astype(np.int64), weight[:, None], self.n_classes

    def weight(self, sums: np.ndarray) -> np.ndarray:
        """The total weight of each node's examples in ``sums``."""
        return sums.sum(axis=1)

    def node_errors(
        self, forest: Any, counted: np.ndarray, voters: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(e_h, class distribution of each node's voters)`` for every node."""
        vote = np.argmax(voters, axis=1)
        if self.leaf_class is not None:
            fixed = self.leaf_class >= 0
            vote = np.where(fixed, self.leaf_class, vote)
        errors = counted.sum(axis=1) - counted[np.arange(counted.shape[0]), vote]
        return errors, node_distributions(forest, voters)

    def split_change(self, errors: np.ndarray, counted: np.ndarray, parent, left, right) -> np.ndarray:
        """``a_h = e_left + e_right - e_h`` of each split node."""
        return errors[left] + errors[right] - errors[parent]


@dataclass
class SquaredError:
    """Regression: a leaf predicts ``v_h`` and loses ``e_h = sum_{i in S_h} w_i (y_i - v_h)^2``.

    ``v_h`` is the weighted mean of the node's voters' targets, or for the nodes where
    ``leaf_value`` (per node, NaN where free) is set, that value (the original leaves when
    their values are kept). ``e_h`` is a constant of the node, so (IP3) stays linear in ``z``.
    ``stats`` sets ``offset``: targets are centred on their weighted mean before the sums are
    taken, which keeps ``sum w y^2 - (sum w y)^2 / sum w`` from cancelling catastrophically.
    """

    leaf_value: np.ndarray | None = None
    offset: float = 0.0

    def stats(self, target: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """``(col, stats, n_columns)``: ``(w, w y, w y^2)`` of each centred target in columns 0-2."""
        self.offset = float(np.average(target, weights=weight))
        y = target - self.offset
        stats = np.column_stack([weight, weight * y, weight * y * y])
        return np.zeros(target.shape[0], dtype=np.int64), stats, 3

    def weight(self, sums: np.ndarray) -> np.ndarray:
        """The total weight of each node's examples in ``sums``."""
        return sums[:, 0]

    def node_errors(
        self, forest: Any, counted: np.ndarray, voters: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``(e_h, v_h)`` for every node (``v_h`` as a column, in target units)."""
        value = _inherit(forest, _mean(voters), voters[:, 0] <= 0, 0.0)
        if self.leaf_value is not None:
            fixed = ~np.isnan(self.leaf_value)
            value[fixed] = self.leaf_value[fixed] - self.offset
        w, mean = counted[:, 0], _mean(counted)
        # the counted rows' squared error around their own mean, plus the mean's distance to v_h
        within = np.maximum(counted[:, 2] - w * mean * mean, 0.0)
        errors = within + w * (mean - value) ** 2
        return errors, (value + self.offset)[:, None]

    def split_change(self, errors: np.ndarray, counted: np.ndarray, parent, left, right) -> np.ndarray:
        """``a_h = e_left + e_right - e_h`` of each split node, with the within-node parts
        cancelled exactly: their change is ``-w_l w_r / w_h (mean_l - mean_r)^2`` (Huygens), never
        positive, so rounding cannot make a split that helps look harmful."""
        w, mean = counted[:, 0], _mean(counted)
        wl, wr, wh = w[left], w[right], w[parent]
        between = np.where(wh > 0, wl * wr / np.where(wh > 0, wh, 1.0) * (mean[left] - mean[right]) ** 2, 0.0)
        within = np.maximum(counted[:, 2] - w * mean * mean, 0.0)
        fit = errors - within
        return fit[left] + fit[right] - fit[parent] - between


def _mean(stats: np.ndarray) -> np.ndarray:
    """Weighted mean ``sum w y / sum w`` of each node (0 where it holds no weight)."""
    w = stats[:, 0]
    return np.where(w > 0, stats[:, 1] / np.where(w > 0, w, 1.0), 0.0)


def node_distributions(forest: Any, counts: np.ndarray) -> np.ndarray:
    """Class distribution of each node's examples; an empty node inherits its parent's."""
    total = counts.sum(axis=1, keepdims=True)
    dist = counts / np.where(total == 0, 1, total)
    return _inherit(forest, dist, total[:, 0] == 0, 1.0 / counts.shape[1])


def _inherit(forest: Any, value: np.ndarray, empty: np.ndarray, root_default: float) -> np.ndarray:
    """``value`` with every ``empty`` node given its parent's (an empty root: ``root_default``)."""
    for t in range(forest.n_trees):
        stack = [int(forest.roots[t])]
        if empty[stack[0]]:
            value[stack[0]] = root_default
        while stack:
            node = stack.pop()
            if forest.feature[node] < 0:
                continue
            for c in (int(forest.children_left[node]), int(forest.children_right[node])):
                if empty[c]:
                    value[c] = value[node]
                stack.append(c)
    return value
