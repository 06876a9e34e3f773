"""Label shift between the rows a model learns from and the latest rows held out from them.

Under a time split, :func:`thrifty.compare` holds out the latest rows (its validation rows, and
within each method's fitting rows its calibration rows), and their class shares are those of
one window of time. :func:`prior_weights` gives such rows the class shares of every row given:
:mod:`~thrifty.comparison.selection` weighs the validation rows with it, and QWYC's exits are
fitted on calibration rows weighed with it (``methods._quit``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["prior_weights"]


def prior_weights(y_val: np.ndarray, y_all: np.ndarray, task: str) -> np.ndarray | None:
    """Per validation row, the weight that gives the validation rows the class shares of all
    the rows given (``y_all``), or None when they already have them (or the task is not a
    classification).

    The weight of a row of class ``c`` is ``share_all(c) / share_val(c)``, the importance
    weight of label shift (Saerens et al. 2002, eq. 1; Lipton et al. 2018, sec. 2): a class's
    rows then count in a weighted accuracy as much as the class weighs among all the rows.
    Under a time split the validation rows are the latest few weeks, and their class shares
    that window's: on flights September and October are calm (15% of flights late, 23% over
    January to October). Accuracy at a model's own threshold then rewards the models that
    answer "on time" nearly always and penalises those that learned when flights are late;
    weighted, the validation rows speak for the class shares of the whole history instead.
    The weights average 1 (classes missing from the validation rows are left out).
    """
    if task not in ("binary", "multiclass") or not len(y_val):
        return None
    classes, counts = np.unique(np.asarray(y_all), return_counts=True)
    y_val = np.asarray(y_val)
    where = np.searchsorted(classes, y_val)
    if np.any(where >= len(classes)) or np.any(classes[np.minimum(where, len(classes) - 1)] != y_val):
        return None  # a validation class absent from y_all: no share to give it
    share_val = np.bincount(where, minlength=len(classes)) / len(y_val)
    weights = (counts / counts.sum())[where] / share_val[where]
    weights /= weights.mean()
    return None if np.allclose(weights, 1.0, rtol=0, atol=1e-9) else weights
