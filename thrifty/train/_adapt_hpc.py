"""ADAPT's expensive model ``f0`` (the "hpc") as a thrifty plan: imported trees, or a black box."""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty.exceptions import InputError, UnsupportedModelError
from thrifty.forest import Forest
from thrifty.runtime.plans import Linear, Plan, as_plan

__all__ = ["hpc_plan"]


def hpc_plan(hpc: Any, n_features: int, classes: np.ndarray, hpc_features: Any = None) -> tuple[Plan, bool]:
    """The plan that evaluates (or stands in for) the expensive model, and whether it is exact.

    A thrifty Forest or plan is used as is; tree models that ``Forest.from_model`` imports
    (LightGBM, XGBoost, scikit-learn trees and forests, thrifty's own forest estimators)
    become ``Full`` plans, so their per-example cost is what the runtime measures on each
    example's paths. Any other model with ``predict_proba`` (an SVM, a neural network, ...) is a
    black box: it is charged the features ``hpc_features`` (default: all), every one of them,
    on every example it predicts, through a stand-in ``Linear`` plan whose coefficients touch
    exactly those features; its predictions come from the model itself (``exact`` is False).
    A tree model the importer supports but cannot represent raises the importer's error.

    The plan's classes are checked against ``classes`` (the labels ADAPT is fitted on).
    """
    if isinstance(hpc, (Forest, Plan)):
        plan, exact = as_plan(hpc), True
    else:
        try:
            plan, exact = as_plan(Forest.from_model(hpc)), True
        except UnsupportedModelError:
            plan, exact = _black_box(hpc, n_features, classes, hpc_features), False
    if plan.n_features != n_features:
        raise InputError(f"the hpc reads {plan.n_features} features but X has {n_features}")
    _check_classes(hpc, plan, exact, classes)
    return plan, exact


def _black_box(hpc: Any, n_features: int, classes: np.ndarray, hpc_features: Any) -> Plan:
    if not hasattr(hpc, "predict_proba"):
        raise UnsupportedModelError(
            f"the hpc {type(hpc).__name__} has no predict_proba; ADAPT needs the expensive "
            "model's class probabilities (pass a classifier, a thrifty Forest or a plan)"
        )
    used = np.ones(n_features, dtype=bool)
    if hpc_features is not None:
        hf = np.asarray(hpc_features)
        if hf.dtype == bool:
            if hf.shape != (n_features,):
                raise InputError(f"hpc_features as a mask needs {n_features} entries, got {hf.shape}")
            used = hf
        else:
            used = np.zeros(n_features, dtype=bool)
            used[hf.astype(np.int64)] = True
    classes = np.asarray(classes)
    width = 1 if len(classes) == 2 else len(classes)
    coef = np.zeros((n_features, width))
    # Any non-zero coefficient makes the runtime acquire (and charge) the feature.
    coef[used] = 1e-300
    return Linear(
        coef,
        0.0,
        link="sigmoid" if width == 1 else "softmax",
        task="binary" if width == 1 else "multiclass",
        classes=classes,
    )


def _check_classes(hpc: Any, high: Plan, exact: bool, classes: np.ndarray) -> None:
    """InputError unless the hpc predicts exactly ``classes``, in that order."""
    n_classes = len(classes)
    if exact:
        if not high.is_classifier:
            raise InputError(f"the hpc must be a classifier; its task is {high.task!r}")
        hc = high.classes
        if hc is None:
            if not np.array_equal(classes, np.arange(max(2, high.n_outputs))):
                raise InputError(
                    f"the hpc has no class labels (it predicts 0..{max(2, high.n_outputs) - 1}) "
                    f"but y has classes {list(classes)[:10]}; encode y as 0..K-1"
                )
            return
    else:
        hc = getattr(hpc, "classes_", None)
        if hc is None:
            return
    if len(hc) != n_classes or not np.array_equal(np.asarray(hc), classes):
        raise InputError(
            f"the hpc predicts classes {list(hc)[:10]} but y has classes "
            f"{list(classes)[:10]}; fit both on the same labels"
        )
