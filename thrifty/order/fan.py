"""Fan et al. (2002) dynamic scheduling: early exits from per-bin statistics of the partial score.

As the QWYC paper's Appendix C describes it: with ``g_r(x)`` the partial score after the
``r``-th base model of a fixed order and ``f(x)`` the full score, the partial scores of a set of
representative examples are binned as ``b_r(x) = floor(g_r(x) / lambda)``; in each bin the mean
``mu`` and standard deviation ``sigma`` of the differences ``g_r(x) - f(x)`` give the exit
thresholds ``eps+ = mu + gamma sigma`` and ``eps- = mu - gamma sigma``. After the ``r``-th model an
example is classified positive when ``g_r(x) > beta + eps+``, negative when ``g_r(x) < beta +
eps-``, and otherwise evaluation continues; an example whose bin holds no representative example
is evaluated in full (Fan et al.'s rule for a bin missing from the hash table).

Multiclass (beyond the paper): the base models are boosting rounds (one tree per class) and the
binary score becomes the *margin* of the leading class, ``m_r(x) = g_{r,c}(x) - max_{j != c}
g_{r,j}(x)`` with ``c`` the partial leader, and ``f`` the full margin of that same class,
``M_r(x) = f_c(x) - max_{j != c} f_j(x)`` (negative when the full model picks another class).
Binning ``m_r`` and taking ``mu``, ``sigma`` of ``m_r - M_r`` per bin, Fan's rule says exit when
the lower bound of the full margin is positive, ``m_r > mu + gamma sigma``. A multiclass exit of
the runtime is one threshold on the margin per position, so the rule is made monotone: after
round ``r`` an example exits when its margin exceeds every margin at which the rule kept a
representative example going (``eps_r``), so every representative example above ``eps_r``
exits as Fan's rule says and none below it does; above the representative examples' margins
(bins the table has not seen) it exits too.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np

from thrifty._param_validation import Interval, validate_params
from thrifty._validation import as_forest
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.links import SOFTMAX_LINKS
from thrifty.forest.scores import partial_scores, tree_scores
from thrifty.order._qwyc_multiclass import rounds_of
from thrifty.runtime.plans import BinnedExits, Sequential


def fan(model: Any, X: Any, *, order: Any = None, bin_width: float = 0.01, gamma: float = 2.0) -> Sequential:
    """Fan et al.'s dynamic scheduling as a ``Sequential`` plan (QWYC paper, Appendix C).

    Parameters
    ----------
    model : Forest or fitted model
        A single-output binary classifier, or a boosted multiclass one (rounds of one tree per
        class; see the module's note), anything ``Forest.from_model`` imports.
    X : array-like of shape (n, n_features)
        Representative examples; labels are not needed.
    order : array-like of int, optional
        Evaluation order of the trees (of the boosting rounds for a multiclass model;
        default: the ensemble's own). Fan et al. recommend
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
        A plan whose per-bin exits (``plan.bins``) implement the decision rule above; for a
        multiclass model, a margin threshold after each round (``plan.eps_pos``).
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
    if forest.task == "multiclass":
        return _fan_multiclass(forest, X, order, float(bin_width), float(gamma))
    if forest.n_outputs != 1 or forest.task != "binary":
        raise InputError(
            "fan needs a classifier, binary with one output or multiclass boosted "
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


def _fan_multiclass(forest: Forest, X: Any, order: Any, bin_width: float, gamma: float) -> Sequential:
    """Fan's rule on the margin of the leading class, one threshold after each round (see the
    module's note)."""
    K = forest.n_outputs
    rounds = rounds_of(forest.tree_class, K)
    if forest.link not in SOFTMAX_LINKS or len(rounds[0]) != K:
        raise InputError(
            "fan needs a boosted multiclass model whose rounds add one tree to each class "
            f"(LightGBM, XGBoost, scikit-learn gradient boosting); this one has link {forest.link!r} "
            f"and {forest.n_trees} trees over {K} classes"
        )
    R = len(rounds)
    order = np.arange(R) if order is None else np.asarray(order, dtype=np.int64)
    if sorted(order.tolist()) != list(range(R)):
        raise InputError(f"order must be a permutation of the {R} boosting rounds of a multiclass model")
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    if X.shape[0] == 0:
        raise InputError("fan needs at least one representative example in X")
    F = tree_scores(forest, X)
    acc32 = forest.accumulate == "float32"
    g = np.tile(forest.base_score.astype(np.float64), (F.shape[0], 1))
    partial = []
    for r in order:  # summed tree by tree in the plan's order, as the runtime does
        for t in rounds[r]:
            c = forest.tree_class[t]
            g[:, c] = g[:, c] + F[:, t]
            if acc32:
                g[:, c] = g[:, c].astype(np.float32).astype(np.float64)
        partial.append(g.copy())
    eps = np.array([margin_threshold(G, g, bin_width, gamma) for G in partial])
    eps[-1] = np.inf  # after the last round the full score decides
    tree_order = np.concatenate([rounds[r] for r in order])
    eps_pos = np.full(len(tree_order), np.inf)
    eps_pos[np.arange(1, R + 1) * K - 1] = eps
    return Sequential(forest, tree_order, eps_pos)


def margin_threshold(G: np.ndarray, full: np.ndarray, bin_width: float, gamma: float) -> float:
    """The monotone multiclass Fan threshold from partial class scores ``G`` and full ones
    ``full`` (both (n, K)): the largest margin of a representative example that Fan's binned
    rule ``m > mu + gamma sigma`` keeps going (0 when it lets every example go)."""
    n = G.shape[0]
    lead = np.argmax(G, axis=1)
    top2 = np.sort(G, axis=1)[:, -2:]
    m = top2[:, 1] - top2[:, 0]
    others = full.copy()
    others[np.arange(n), lead] = -np.inf
    M = full[np.arange(n), lead] - others.max(axis=1)
    _, inverse = np.unique(np.floor(m / bin_width), return_inverse=True)
    count = np.bincount(inverse)
    d = m - M
    mu = np.bincount(inverse, weights=d) / count
    sigma = np.sqrt(np.maximum(np.bincount(inverse, weights=d * d) / count - mu * mu, 0.0))
    stays = ~(m > mu[inverse] + gamma * sigma[inverse])
    return float(max(0.0, m[stays].max())) if stays.any() else 0.0
