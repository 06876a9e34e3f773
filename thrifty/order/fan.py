"""Fan et al. (2002) dynamic scheduling: early exits from per-bin statistics of the partial score.

As the QWYC paper's Appendix C describes it: with ``g_r(x)`` the partial score after the
``r``-th base model of a fixed order and ``f(x)`` the full score, the partial scores of a set of
representative examples are binned as ``b_r(x) = floor(g_r(x) / lambda)``; in each bin the mean
``mu`` and standard deviation ``sigma`` of the differences ``g_r(x) - f(x)`` give the exit
thresholds ``eps+ = mu + gamma sigma`` and ``eps- = mu - gamma sigma``. After the ``r``-th model an
example is classified positive when ``g_r(x) > beta + eps+``, negative when ``g_r(x) < beta +
eps-``, and otherwise evaluation continues; an example whose bin holds no representative example
is evaluated in full (Fan et al.'s rule for a bin missing from the hash table).
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np

from thrifty._param_validation import Interval, validate_params
from thrifty._validation import as_forest
from thrifty.exceptions import InputError
from thrifty.forest.scores import partial_scores, tree_scores
from thrifty.runtime.plans import BinnedExits, Sequential


def fan(model: Any, X: Any, *, order: Any = None, bin_width: float = 0.01, gamma: float = 2.0) -> Sequential:
    """Fan et al.'s dynamic scheduling as a ``Sequential`` plan (QWYC paper, Appendix C).

    Parameters
    ----------
    model : Forest or fitted model
        A single-output binary classifier (anything ``Forest.from_model`` imports).
    X : array-like of shape (n, n_features)
        Representative examples; labels are not needed.
    order : array-like of int, optional
        Evaluation order of the trees (default: the ensemble's own). Fan et al. recommend
        ordering by individual MSE (``thrifty.order.orderings.fixed_order(..., kind=
        "individual_mse")``); QWYC's order (``qwyc(...).order``) also works.
    bin_width : float, default=0.01
        The knob ``lambda`` of ``b_r(x) = floor(g_r(x) / lambda)``; the paper varies it from 0.1
        to 0.001 and found 0.01 best for most experiments.
    gamma : float, default=2.0
        Confidence: thresholds are ``mu +- gamma sigma``; larger is more faithful and slower.

    Returns
    -------
    Sequential
        A plan whose per-bin exits (``plan.bins``) implement the decision rule above.
    """
    validate_params(
        {
            "bin_width": [Interval(Real, 0, math.inf, closed="neither")],
            "gamma": [Interval(Real, 0, math.inf, closed="left")],
        },
        {"bin_width": bin_width, "gamma": gamma},
        "fan",
    )
    forest = as_forest(model, who="fan")
    if forest.n_outputs != 1 or forest.task != "binary":
        raise InputError(
            "fan needs a binary classifier with one output "
            f"(got task {forest.task!r} with {forest.n_outputs} outputs)"
        )
    order = np.arange(forest.n_trees) if order is None else np.asarray(order, dtype=np.int64)
    if sorted(order.tolist()) != list(range(forest.n_trees)):
        raise InputError(f"order must be a permutation of the {forest.n_trees} trees")
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    if X.shape[0] == 0:
        raise InputError("fan needs at least one representative example in X")
    G = partial_scores(forest, tree_scores(forest, X), order)
    tables = bin_tables(G, bin_width, gamma, forest.decision_threshold)
    T = len(order)
    return Sequential(
        forest,
        order,
        np.full(T, np.inf),
        np.full(T, -np.inf),
        bins=BinnedExits(np.full(T, float(bin_width)), tables),
    )


def bin_tables(
    G: np.ndarray, bin_width: float, gamma: float, threshold: float
) -> list[dict[int, tuple[float, float]]]:
    """Per-position tables ``{bin: (beta + mu + gamma sigma, beta + mu - gamma sigma)}``.

    ``G`` holds the partial scores after each position, ``G[:, -1]`` the full scores.
    """
    full = G[:, -1]
    tables = []
    for r in range(G.shape[1]):
        g = G[:, r]
        bins, inverse = np.unique(np.floor(g / bin_width), return_inverse=True)
        count = np.bincount(inverse)
        d = g - full
        mu = np.bincount(inverse, weights=d) / count
        var = np.maximum(np.bincount(inverse, weights=d * d) / count - mu * mu, 0.0)
        sigma = np.sqrt(var)
        ok = np.isfinite(bins)
        tables.append(
            {
                int(b): (threshold + m + gamma * s, threshold + m - gamma * s)
                for b, m, s in zip(bins[ok], mu[ok], sigma[ok])
            }
        )
    return tables
