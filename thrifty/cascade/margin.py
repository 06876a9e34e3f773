"""A margin cascade of two models: a cheap model answers unless its score lies in a band around
its decision threshold, where an expensive model answers instead (an "IDK" cascade).

The plan is two nested ``Gated`` plans whose gates are the cheap model itself, shifted and
negated, so the runtime, the compiler and the JSON format need nothing new.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.runtime.plans import Gated, Plan, as_plan

__all__ = ["margin_band", "margin_cascade"]

#: Two calibration scores closer than this (relative to their size) are one score: a band's end
#: is set midway between two distinct scores, and the gates compute ``hi - f`` and ``f - lo``
#: in their own order of additions, which may round a score within a few ulps of an end to the
#: other side (more for a forest that sums in float32, as XGBoost does).
_TIE = {"float64": 1e-9, "float32": 1e-5}
#: The widest band's half-width: finite, so the gates' base scores stay finite, and far beyond
#: any raw score.
_WIDEST = float(np.finfo(np.float64).max) / 4


def margin_cascade(low: Forest, high: Any, lo: float, hi: float) -> Gated:
    """The plan "answer with ``low`` unless its raw score lies in ``(lo, hi)``; then with
    ``high``".

    An IDK cascade (Wang et al., "IDK Cascades: Fast Deep Learning by Learning not to
    Overthink", UAI 2018): a cheap classifier answers where it is sure and says "I don't know"
    elsewhere, and those examples go on to the expensive one, as the early-reject stages of a
    Viola-Jones cascade pass on the windows they are unsure of. Here "unsure" is a raw score
    near the cheap model's decision threshold (``margin_band`` sets the band from calibration
    rows).

    The plan is ``Gated(hi - f_low, low, Gated(f_low - lo, low, high))``: each gate is ``low``'s
    own trees with its tree weights (or a ``base_last`` forest's scale) negated or not and its
    base score shifted, so an example goes to ``high`` exactly when ``lo < f_low(x) < hi``.
    Features the gates acquire are free for the model they pick, so each example pays ``low``'s
    features once and, when routed, ``high``'s other features. The gates re-evaluate ``low``'s
    trees: a cost model with ``tree_cost`` or ``split_cost`` charges ``low``'s trees two or
    three times (twice for examples routed to ``high`` or scored at or above ``hi``, three
    times below ``lo``), as the runtime evaluates them.

    Parameters
    ----------
    low : Forest
        The cheap model: a binary classifier (one output) as a Forest.
    high : Forest or Plan
        The model for the examples in the band; it must read the same features (columns) and
        predict the same classes.
    lo, hi : float
        The band of ``low``'s raw scores sent on, ``lo <= hi`` (``lo == hi``: none is).

    Returns
    -------
    Gated
    """
    _check_pair(low, high)
    lo, hi = float(lo), float(hi)
    if np.isnan(lo) or np.isnan(hi) or lo > hi:
        raise InputError(f"the band must have lo <= hi (got lo={lo!r}, hi={hi!r}); use margin_band to set it")
    lo, hi = max(lo, -_WIDEST), min(hi, _WIDEST)  # infinite ends: the gates' bases stay finite
    below_hi = _shifted(low, -1.0, hi)  # hi - f_low > 0: below the band's top
    above_lo = _shifted(low, 1.0, -lo)  # f_low - lo > 0: above its bottom
    return Gated(below_hi, low, Gated(above_lo, low, high))


def margin_band(low: Forest, X: Any, share: float, *, raw: Any = None) -> tuple[float, float]:
    """The band ``(lo, hi)`` of ``low``'s raw scores, symmetric about its decision threshold,
    that holds the fraction ``share`` of the rows ``X`` (to within ties of the scores).

    Symmetric about the threshold ``t`` (0 for a sigmoid link, 0.5 for averaged
    probabilities) because the examples most likely to be misclassified are those of smallest
    ``|f_low(x) - t|``: for a calibrated model the chance that the label is wrong is
    ``1 - sigmoid(|f_low(x)|)``, a function of the distance alone, so the rows of smallest
    distance are the IDK cascade's "don't know" rows (Wang et al. 2018, Section 3: the IDK
    classifier abstains below a confidence threshold). Taking the distance rather than a
    separate quantile on each side keeps the rule free of labels.

    The band's half-width lies midway between the ``k``-th and ``(k+1)``-th smallest distance,
    ``k = round(share * n)``; where several rows share the distance at that point, ``k`` moves
    to the nearest count at which they are all in or all out. ``share=1`` sends every example on.

    Parameters
    ----------
    low : Forest
        The cheap binary classifier.
    X : array-like or DataFrame
        Calibration rows, read as ``low`` reads them.
    share : float
        The fraction of the rows to send on, in ``[0, 1]``.
    raw : array-like of shape (n,), optional
        ``low``'s raw scores of ``X``, when computed already (``X`` is then not read): one
        model's bands for several shares read its scores once.

    Returns
    -------
    (lo, hi) : tuple of float
    """
    _check_low(low)
    share = float(share)
    if not 0.0 <= share <= 1.0:
        raise InputError(f"share must be in [0, 1] (the fraction of rows sent on), got {share!r}")
    t = float(low.decision_threshold)
    scores = low.predict_raw(X) if raw is None else raw
    dist = np.sort(np.abs(np.asarray(scores, dtype=np.float64).reshape(-1) - t))
    n = len(dist)
    if n == 0:
        raise InputError("margin_band needs at least one calibration row")
    if not np.isfinite(dist).all():
        raise InputError("the cheap model's raw scores on the calibration rows are not all finite")
    k = int(round(share * n))
    tie = _TIE[low.accumulate] * (1.0 + dist)
    # Counts at which the band can end: before any row, after all, or between two distinct scores.
    cuts = np.r_[0, np.flatnonzero(np.diff(dist) > tie[1:]) + 1, n]
    k = int(cuts[np.argmin(np.abs(cuts - k))])
    if k == 0:
        return t, t
    half = _WIDEST if k == n else 0.5 * (dist[k - 1] + dist[k])
    return t - half, t + half


def _shifted(low: Forest, sign: float, shift: float) -> Forest:
    """``sign * f_low(x) + shift`` as a forest of one output with an identity link (a gate)."""
    weighted = low if low.base_last else replace(low, tree_weight=sign * low.tree_weight)
    return replace(
        weighted,
        scale=sign * low.scale if low.base_last else 1.0,
        base_score=sign * low.base_score + shift,
        link="identity",
        task="regression",
        classes=None,
    )


def _check_low(low: Any) -> None:
    if not isinstance(low, Forest):
        raise InputError(
            f"the cheap model must be a thrifty Forest, got {type(low).__name__}; "
            "use Forest.from_model(model)"
        )
    if low.task != "binary" or low.n_outputs != 1:
        raise InputError(
            f"a margin cascade needs a binary classifier as its cheap model, got a {low.task} model "
            f"of {low.n_outputs} outputs: the band is around one score's decision threshold"
        )


def _check_pair(low: Any, high: Any) -> None:
    _check_low(low)
    plan: Plan = as_plan(high)
    if plan.task != "binary":
        raise InputError(
            f"the expensive model must be a binary classifier like the cheap one, got a {plan.task} model"
        )
    names_low, names_high = low.feature_names, plan.feature_names
    if low.n_features != plan.n_features or (names_low and names_high and names_low != names_high):
        raise InputError(
            f"the two models read different features ({low.n_features} against {plan.n_features} "
            f"columns{'' if not (names_low and names_high) else ', or other names'}); fit both on the "
            "same columns (blank the columns the cheap model should not use)"
        )
