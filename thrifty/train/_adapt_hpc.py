"""ADAPT's expensive model ``f0`` (the "hpc") as a plan: imported trees, or an ``Opaque`` black box."""

from __future__ import annotations

from typing import Any

import numpy as np

from thrifty.exceptions import InputError, UnsupportedModelError
from thrifty.forest import Forest
from thrifty.runtime.models import Opaque
from thrifty.runtime.plans import Plan, as_plan

__all__ = ["hpc_plan"]


def hpc_plan(
    hpc: Any,
    n_features: int,
    classes: np.ndarray | None,
    hpc_features: Any = None,
    *,
    feature_names: list[str] | None = None,
    categories: dict[int, list] | None = None,
) -> Plan:
    """The plan that evaluates the expensive model, charged exactly what it acquires.

    A thrifty Forest or plan is used as is; tree models that ``Forest.from_model`` imports
    (LightGBM, XGBoost, scikit-learn trees and forests, thrifty's own forest estimators)
    become ``Full`` plans, so their per-example cost is what the runtime measures on each
    example's paths. Any other model with ``predict_proba`` (an SVM, a neural network, ...) is a
    black box: an ``Opaque`` plan that acquires the features ``hpc_features`` (default: all),
    every one of them, on every example it predicts, and asks the model for its
    probabilities on those columns (rebuilt as a DataFrame with ``feature_names`` and the
    ``categories`` of categorical columns when the model was fitted on one). A tree model the
    importer supports but cannot represent raises the importer's error.

    The plan's classes are checked against ``classes`` (the labels ADAPT is fitted on);
    ``classes=None`` asks for a regressor (a black box then answers with its ``predict``).
    """
    if isinstance(hpc, (Forest, Plan)):
        plan = as_plan(hpc)
    else:
        try:
            plan = as_plan(Forest.from_model(hpc))
        except UnsupportedModelError:
            plan = _black_box(hpc, n_features, classes, hpc_features, feature_names, categories or {})
    if plan.n_features != n_features:
        raise InputError(f"the hpc reads {plan.n_features} features but X has {n_features}")
    _check_classes(plan, classes)
    return plan


def hpc_columns(hpc_features: Any, n_features: int) -> np.ndarray:
    """Indices of the features a black-box hpc reads (``hpc_features``: indices, a mask or None)."""
    if hpc_features is None:
        return np.arange(n_features)
    hf = np.asarray(hpc_features)
    if hf.dtype == bool:
        if hf.shape != (n_features,):
            raise InputError(f"hpc_features as a mask needs {n_features} entries, got {hf.shape}")
        return np.flatnonzero(hf)
    idx = hf.reshape(-1).astype(np.int64)
    if idx.size == 0 or idx.min() < 0 or idx.max() >= n_features or len(np.unique(idx)) != idx.size:
        raise InputError(
            f"hpc_features must be distinct feature indices in [0, {n_features}), got {hf.tolist()[:10]}"
        )
    return np.sort(idx)


class BlackBox:
    """``predict`` of an ``Opaque`` plan: a classifier's probabilities (``output="binary"``: the
    positive class's, ``"proba"``: every class's) or a regressor's predictions (``"predict"``)
    on the columns it reads.

    The runtime hands the columns as float64 (category codes for categorical columns); a
    model fitted on a DataFrame gets one back, with its column names and categories.
    """

    def __init__(self, model: Any, names: list[str] | None, categories: dict[int, list], output: str) -> None:
        self.model, self.names, self.categories, self.output = model, names, categories, output

    def __call__(self, Z: np.ndarray) -> np.ndarray:
        rows: Any = Z
        if self.names is not None:
            import pandas as pd

            rows = pd.DataFrame(Z, columns=self.names)
            for j, cats in self.categories.items():
                codes = np.where(np.isnan(Z[:, j]), -1, Z[:, j]).astype(np.int64)
                rows[self.names[j]] = pd.Categorical.from_codes(codes, categories=cats)
        if self.output == "predict":
            return np.asarray(self.model.predict(rows), dtype=np.float64).reshape(-1)
        proba = np.asarray(self.model.predict_proba(rows), dtype=np.float64)
        return proba[:, 1] if self.output == "binary" else proba


def _black_box(
    hpc: Any,
    n_features: int,
    classes: np.ndarray | None,
    hpc_features: Any,
    feature_names: list[str] | None,
    categories: dict[int, list],
) -> Plan:
    method = "predict" if classes is None else "predict_proba"
    if not hasattr(hpc, method):
        raise UnsupportedModelError(
            f"the hpc {type(hpc).__name__} has no {method}; ADAPT needs the expensive model's "
            f"{'predictions' if classes is None else 'class probabilities'} (pass a "
            f"{'regressor' if classes is None else 'classifier'}, a thrifty Forest or a plan)"
        )
    columns = hpc_columns(hpc_features, n_features)
    fitted_on = getattr(hpc, "n_features_in_", len(columns))
    if fitted_on != len(columns):
        raise InputError(
            f"the hpc was fitted on {fitted_on} features but hpc_features lists {len(columns)}: "
            "a black-box hpc reads exactly its hpc_features; fit it on those columns"
        )
    own = getattr(hpc, "classes_", None)
    if classes is not None and own is not None and not np.array_equal(np.asarray(own), np.asarray(classes)):
        raise InputError(
            f"the hpc predicts classes {list(own)[:10]} but y has classes {list(classes)[:10]}; "
            "fit both on the same labels"
        )
    frame = hasattr(hpc, "feature_names_in_") and feature_names is not None
    local = {int(np.searchsorted(columns, j)): cats for j, cats in categories.items() if j in set(columns)}
    names = [feature_names[j] for j in columns] if frame else None  # type: ignore[index]
    if classes is None:
        return Opaque(
            BlackBox(hpc, names, local, "predict"),
            columns,
            width=1,
            link="identity",
            task="regression",
            n_features=n_features,
            feature_names=feature_names,
        )
    classes = np.asarray(classes)
    binary = len(classes) == 2
    return Opaque(
        BlackBox(hpc, names, local, "binary" if binary else "proba"),
        columns,
        width=1 if binary else len(classes),
        link="proba",
        task="binary" if binary else "multiclass",
        classes=classes,
        n_features=n_features,
        feature_names=feature_names,
    )


def _check_classes(high: Plan, classes: np.ndarray | None) -> None:
    """InputError unless the hpc predicts exactly ``classes``, in that order (``None``: unless
    it is a single-output regressor)."""
    if classes is None:
        if high.task != "regression" or high.n_outputs != 1:
            raise InputError(f"the hpc must be a single-output regressor; its task is {high.task!r}")
        return
    n_classes = len(classes)
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
    if len(hc) != n_classes or not np.array_equal(np.asarray(hc), classes):
        raise InputError(
            f"the hpc predicts classes {list(hc)[:10]} but y has classes "
            f"{list(classes)[:10]}; fit both on the same labels"
        )
