"""Importing fitted LightGBM, XGBoost, CatBoost, YDF and scikit-learn tree models into a :class:`Forest`."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from thrifty.forest._catboost import from_catboost
from thrifty.forest._forest import Forest
from thrifty.forest._lightgbm import from_lightgbm
from thrifty.forest._onnx import from_onnx, is_onnx
from thrifty.forest._sklearn import from_sklearn
from thrifty.forest._xgboost import from_xgboost
from thrifty.forest._ydf import from_ydf
from thrifty.forest.builder import unsupported
from thrifty.forest.names import restore_names


def from_model(model: Any, *, feature_names: Sequence[Any] | None = None) -> Forest:
    """Convert a fitted tree-ensemble model into a :class:`Forest`.

    Parameters
    ----------
    model : object
        A fitted LightGBM, XGBoost, CatBoost, YDF or scikit-learn tree model (see
        ``builder.SUPPORTED``; ``from_catboost`` takes the values of text categories); a
        ``Forest`` is returned as is (renamed when ``feature_names`` is given).
    feature_names : sequence of str, optional
        The names of the columns the model was trained on, in order. LightGBM keeps only its
        own form of a name (spaces become underscores), so a LightGBM model trained on
        ``"blood pressure"`` reads ``"blood_pressure"`` unless its names are given here; each
        name must equal the model's stored name or LightGBM's form of it.

    Returns
    -------
    Forest
        A forest whose ``predict_raw`` reproduces the library's raw scores (margins) and whose
        ``predict_proba`` reproduces its probabilities.

    Raises
    ------
    UnsupportedModelError
        If ``model`` is not of a supported type (a ``TypeError``).
    InputError
        If the model is of a supported type but uses something the forest cannot represent
        (an unsupported objective or link, linear trees, multi-output targets, ...), or if
        ``feature_names`` do not match its features.
    """
    forest = _import(model)
    if feature_names is None:
        return forest
    names = restore_names(forest.feature_names, feature_names, forest.n_features)
    return dataclasses.replace(forest, feature_names=names)


def _import(model: Any) -> Forest:
    if isinstance(model, Forest):
        return model
    if isinstance(getattr(model, "forest_", None), Forest):  # a fitted thrifty estimator
        return model.forest_
    # Dispatch on the defining module rather than isinstance so that thrifty never imports a
    # library the user does not have (xgboost is optional); the MRO also catches subclasses.
    roots = [cls.__module__.split(".")[0] for cls in type(model).__mro__]
    if "lightgbm" in roots:
        return from_lightgbm(model)
    if "xgboost" in roots:
        return from_xgboost(model)
    if "catboost" in roots:
        return from_catboost(model)
    if "ydf" in roots:
        return from_ydf(model)
    if "sklearn" in roots:
        return from_sklearn(model)
    if is_onnx(model):
        return from_onnx(model)
    raise unsupported(model)
