"""Fixed orders of base models that QWYC's Algorithm 2 can be given (the paper's Appendix B).

Every order is computed from the score matrix ``F[i, t]`` (base model ``t`` on example ``i``).
The MSE orderings need labels; they measure the *partial ensemble* -- what the runtime adds up,
``s_S(x) = base_score + sum_{t in S} F[x, t]`` -- against a target on the same scale as the
decision threshold ``beta`` (the full ensemble decides positive when ``s > beta``):

    target(x) = beta + h * (+1 if y(x) is the positive class else -1)

with ``h = 1`` for margin scores (LightGBM, XGBoost, gradient boosting: ``beta = 0``, targets
``-1/+1``) and ``h = 1/2`` for forests that average probabilities (``beta = 1/2``, targets
``0/1``, Fan et al.'s setting). ``MSE(S) = mean_i (s_S(x_i) - target(x_i))^2``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty._validation import as_forest
from thrifty.exceptions import InputError
from thrifty.forest.scores import tree_scores

FIXED_ORDERINGS = ("given", "random", "individual_mse", "greedy_mse")
LABELLED_ORDERINGS = ("individual_mse", "greedy_mse")


def fixed_order(model: Any, X: Any, y: Any = None, *, kind: str, random_state: Any = None) -> np.ndarray:
    """A fixed evaluation order of the trees of a binary forest (Appendix B of QWYC).

    Parameters
    ----------
    model : Forest or fitted model
        A single-output binary classifier (thrifty ``Forest`` or anything ``Forest.from_model``
        imports); base model ``t`` is tree ``t``.
    X : array-like of shape (n, n_features)
        Examples the MSE orderings are measured on (unused by ``"given"``, ``"random"``).
    y : array-like of shape (n,), optional
        Labels of ``X``: the forest's classes, or ``{0, 1}``, ``{-1, 1}``, booleans. Needed by
        the MSE orderings only.
    kind : {"given", "random", "individual_mse", "greedy_mse"}
        * ``"given"``: trees ``0..T-1`` (for boosted trees the "GBT ordering": "each base
          regression tree f_t is selected to be the one that most improves the training
          objective when added to the subensemble of size t - 1").
        * ``"random"``: "a random permutation drawn uniformly from all possible
          permutations", from ``random_state``.
        * ``"individual_mse"``: "choose the ordering of the base models based on each base
          model's individual accuracy or MSE" (Fan et al.): increasing ``MSE({t})``, ties by
          tree index.
        * ``"greedy_mse"``: "first choose the best individual model (by MSE), and then
          greedily choose each subsequent base model to minimize the MSE of the partial
          ensemble": position ``r`` takes the unused tree ``t`` minimising
          ``MSE({order[0..r-1], t})``, ties by tree index.

        MSE is that of the partial score (base score included) against labels mapped to the
        score scale: see the module docstring.
    random_state : int, Generator or None
        Seed of ``"random"``.

    Returns
    -------
    ndarray of int64, shape (T,)
        Tree indices in evaluation order.
    """
    forest = as_forest(model, who="fixed_order")
    if forest.n_outputs != 1 or forest.task != "binary":
        raise InputError(
            f"fixed_order needs a binary classifier; this forest's task is {forest.task!r} "
            f"with {forest.n_outputs} outputs (multiclass is not supported yet)"
        )
    check_kind(kind, y)
    T = forest.n_trees
    if kind not in LABELLED_ORDERINGS:
        return order_from_scores(np.empty((0, T)), kind=kind, random_state=random_state)
    if not hasattr(X, "shape"):
        X = np.asarray(X)
    F = tree_scores(forest, X)
    if forest.accumulate == "float32":  # as qwyc sees them, so both give the same order
        F = F.astype(np.float32).astype(np.float64)
    return order_from_scores(
        F,
        positive_labels(y, forest.classes, F.shape[0]),
        kind=kind,
        base_score=float(forest.base_score[0]),
        threshold=forest.decision_threshold,
        half_margin=0.5 if forest.link == "proba" else 1.0,
    )


def check_kind(kind: str, y: Any) -> None:
    """Raise a ValueError for an unknown ordering, or a labelled one without labels."""
    if kind not in FIXED_ORDERINGS:
        raise InputError(f"unknown fixed ordering {kind!r}; use one of {FIXED_ORDERINGS}")
    if kind in LABELLED_ORDERINGS and y is None:
        raise InputError(
            f"ordering={kind!r} needs labels: pass y (the labels of X); the orderings "
            "'optimize', 'given' and 'random' need none"
        )


def positive_labels(y: Any, classes: Any, n: int) -> np.ndarray:
    """Boolean "is the positive class" of binary labels ``y``."""
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise InputError(f"y must be a 1-d array of {n} labels (one per row of X), got shape {y.shape}")
    seen = np.unique(y)
    if classes is not None and len(classes) == 2 and np.all(np.isin(seen, classes)):
        return y == np.asarray(classes)[1]
    if (
        y.dtype.kind in "biuf"
        and np.all(np.isin(seen, [-1, 0, 1]))
        and not (np.isin(-1, seen) and np.isin(0, seen))
    ):
        return y > 0
    known = None if classes is None else list(classes)
    raise InputError(
        f"y must hold binary labels (the forest's classes {known}, 0/1, -1/+1 or "
        f"booleans), got values {seen[:5].tolist()}"
    )


def order_from_scores(
    F: np.ndarray,
    positive: np.ndarray | None = None,
    *,
    kind: str,
    base_score: float = 0.0,
    threshold: float = 0.0,
    half_margin: float = 1.0,
    random_state: Any = None,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """A fixed order of the columns of ``F`` (see ``fixed_order``; ``positive`` are the labels).

    With ``weight`` (one per row of ``F``) the MSEs are weighted means."""
    T = F.shape[1]
    if kind == "given":
        return np.arange(T, dtype=np.int64)
    if kind == "random":
        return np.random.default_rng(random_state).permutation(T).astype(np.int64)
    check_kind(kind, positive)
    assert positive is not None  # check_kind refused the labelled orderings without labels
    target = threshold + half_margin * np.where(positive, 1.0, -1.0)
    resid = base_score - target  # partial score minus target of the empty ensemble
    w = np.ones(F.shape[0]) if weight is None else weight
    if kind == "individual_mse":
        mse = w @ (resid[:, None] + F) ** 2
        return np.argsort(mse, kind="stable").astype(np.int64)
    # greedy_mse: n MSE = sum w (resid + f_t)^2 = sum w resid^2 + 2 sum w resid f_t + sum w f_t^2;
    # the first term is shared by all candidates of a step, so only the other two decide.
    sq = w @ (F * F)
    order = np.empty(T, dtype=np.int64)
    used = np.zeros(T, dtype=bool)
    for r in range(T):
        gain = 2.0 * ((w * resid) @ F) + sq
        gain[used] = np.inf
        t = int(np.argmin(gain))
        order[r] = t
        used[t] = True
        resid = resid + F[:, t]
    return order
