"""Input checks shared by the estimators: labels, frames, and X's width against costs and models."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest import is_dataframe


def class_labels(y: Any, who: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(y, classes, codes)`` of classification labels, with scikit-learn's errors.

    NaN (or None) among the labels is "Input y contains NaN." whatever the labels' dtype; a
    single class is an error naming it and ``who`` (the estimator).
    """
    import pandas as pd
    from sklearn.utils.multiclass import check_classification_targets
    from sklearn.utils.validation import column_or_1d

    y = column_or_1d(np.asarray(y), warn=True)
    if len(y) == 0:
        raise InputError("y is empty (0 samples); fit needs at least 2 examples")
    if pd.isna(y).any():
        raise InputError("Input y contains NaN.")
    check_classification_targets(y)
    classes, codes = np.unique(y, return_inverse=True)
    if len(classes) < 2:
        only = classes[0].item() if isinstance(classes[0], np.generic) else classes[0]
        raise InputError(f"y has one class only ({only!r}); {who} needs examples of at least 2 classes")
    return y, classes, codes


def check_width(n_columns: int, n_features: int, what: str) -> None:
    """ValueError blaming X when it has not the ``n_features`` columns ``what`` is for."""
    if n_columns != n_features:
        raise InputError(
            f"X has {n_columns} features, but {what} {n_features}; pass X with "
            f"those {n_features} columns, in the same order"
        )


def costs_for_X(costs: Any, names: list[str] | None, n_features: int) -> Any:
    """An estimator's ``costs`` as a CostModel aligned to the columns of ``X``.

    ``None`` prices every feature at 1; a sequence gives one price per column; a mapping
    prices features by name (``X`` needs column names); a CostModel is matched by name when it
    and ``X`` both have names, else by position.
    """
    from thrifty.costs import CostModel

    if costs is None:
        return CostModel.uniform(n_features, feature_names=names)
    if isinstance(costs, Mapping):
        if names is None:
            raise InputError(
                "costs are given by feature name but X has no column names; pass X as a DataFrame, or "
                "give one cost per column"
            )
        return CostModel(dict(costs), feature_names=names)
    if isinstance(costs, CostModel):
        if names is None or costs.feature_names is None:
            check_width(n_features, costs.n_features, "the cost model prices")
        return costs.for_features(names, n_features)
    values = np.asarray(costs, dtype=object)
    if values.ndim != 1:
        raise InputError(f"costs must be a CostModel or one cost per feature, got shape {values.shape}")
    check_width(n_features, len(values), "costs= prices")
    return CostModel(values, feature_names=names)


def validate_frame(est: Any, X: Any, y: Any = "no_validation") -> Any:
    """scikit-learn's input checks, letting DataFrames through unconverted.

    A DataFrame keeps its categorical columns (the forest codes them by its stored categories);
    its column names and count are recorded (``fit``: ``y`` given) or checked (``y`` omitted)
    like any other input. Arrays are validated to float64, NaN allowed (trees route it).
    """
    from sklearn.utils.validation import validate_data

    X = to_frame(X)
    reset = not isinstance(y, str)
    frame = is_dataframe(X)
    out = validate_data(
        est,
        X,
        y,
        reset=reset,
        skip_check_array=frame,
        ensure_all_finite="allow-nan",
        dtype=None if frame else np.float64,
    )
    if frame and reset and y is not None:
        y = np.asarray(y)
        if y.ndim == 2 and y.shape[1] == 1:
            y = y.ravel()
        if y.ndim != 1 or len(y) != X.shape[0]:
            raise InputError(f"y must be 1-d with one label per row of X ({X.shape[0]}), got shape {y.shape}")
        return X, y
    return out


def to_frame(X: Any) -> Any:
    """``X`` with polars and pyarrow tables turned into pandas DataFrames; anything else as is.

    Column names are kept, and dictionary / categorical columns become pandas categoricals,
    so costs can be matched by name and categories coded as the forest stores them.
    """
    module = type(X).__module__.split(".")[0]
    if module == "polars" and hasattr(X, "to_pandas"):
        return X.to_pandas()
    if module == "pyarrow" and hasattr(X, "to_pandas") and hasattr(X, "column_names"):
        return X.to_pandas()
    return X


def check_sample_weight(sample_weight: Any, n: int) -> np.ndarray | None:
    """``sample_weight`` as float64 of shape ``(n,)``: finite, ``>= 0``, not all zero (``None`` stays)."""
    from sklearn.utils.validation import column_or_1d

    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 0:
        w = np.full(n, float(w))
    w = column_or_1d(w)
    if w.shape != (n,):
        raise InputError(f"sample_weight has {w.shape[0]} values for {n} rows of X; give one weight per row")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise InputError("sample_weight must be finite and >= 0")
    if w.sum() <= 0:
        raise InputError(
            "sample_weight is zero for every row (all weights zero); give at least one row a positive weight"
        )
    return w


def is_fitted_model(model: Any) -> bool:
    """Whether ``model`` can be used as it is: a thrifty Forest or plan, a model with no ``fit``,
    a ``FrozenEstimator``, or a fitted estimator (scikit-learn's ``check_is_fitted``)."""
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    from thrifty.forest import Forest
    from thrifty.runtime.plans import Plan

    if isinstance(model, Forest | Plan) or not hasattr(model, "fit") or _is_frozen(model):
        return True
    try:
        check_is_fitted(model)
    except NotFittedError:
        return False
    except TypeError:  # not a scikit-learn estimator (e.g. a raw booster): usable as it is
        return True
    return True


def _is_frozen(model: Any) -> bool:
    return type(model).__name__ == "FrozenEstimator" and hasattr(model, "estimator")


def as_forest(model: Any, *, feature_names: Any = None, who: str = "thrifty") -> Any:
    """The Forest of ``model``, the one conversion every method uses.

    A Forest passes through; a ``FrozenEstimator`` is unwrapped; a fitted thrifty estimator
    gives its ``forest_``; a fitted LightGBM, XGBoost or scikit-learn tree model is imported
    with ``Forest.from_model`` (``feature_names`` as there).

    Raises
    ------
    UnsupportedModelError
        For a model of a type no importer handles (a ``TypeError``).
    InputError
        For an unfitted model, naming ``who`` needs it fitted.
    """
    from thrifty.forest import Forest

    if isinstance(model, Forest):
        return model
    if _is_frozen(model):
        model = model.estimator
    if type(model).__module__.startswith("thrifty."):
        inner = getattr(model, "forest_", None)
        if not isinstance(inner, Forest):
            raise InputError(f"{who} needs a fitted {type(model).__name__}; call its fit first")
        return inner
    if not is_fitted_model(model):
        raise InputError(f"{who} needs a fitted {type(model).__name__}; fit it first (or let {who} fit it)")
    if feature_names is None:
        return Forest.from_model(model)
    return Forest.from_model(model, feature_names=feature_names)


def as_plan(model: Any, *, who: str = "thrifty") -> Any:
    """A plan for ``model``: a plan passes through, a fitted thrifty estimator gives its ``plan_``,
    anything else is ``Full(as_forest(model))``."""
    from thrifty.runtime.plans import Full, Plan

    if isinstance(model, Plan):
        return model
    if type(model).__module__.startswith("thrifty.") and isinstance(getattr(model, "plan_", None), Plan):
        return model.plan_
    return Full(as_forest(model, who=who))


def fitted_model(model: Any, X: Any, y: Any, sample_weight: Any = None, *, who: str, qid: Any = None) -> Any:
    """``model`` when it is fitted, else a clone of it fitted on ``(X, y, sample_weight)``.

    The one way the wrapping estimators (QWYC, Cronus, BudgetPrune, ADAPT) accept an unfitted
    model; ``y=None`` (a method that needs no labels) then is an error saying how to fix it.
    With ``qid`` (a ranker's queries) the clone gets them as its ``fit`` takes them: ``qid``
    (XGBoost) or ``group`` sizes of consecutive queries (LightGBM).
    """
    from sklearn.base import clone
    from sklearn.utils.validation import has_fit_parameter

    if is_fitted_model(model):
        return model
    name = type(model).__name__
    if y is None:
        raise InputError(
            f"{who} requires y to be passed, but the target y is None: the estimator {name} is not "
            "fitted; pass a fitted model, or labels (fit(X, y)) to fit a clone of it first"
        )
    kw: dict[str, Any] = {} if qid is None else _queries_for(model, qid)
    if sample_weight is None:
        return clone(model).fit(X, y, **kw)
    if not has_fit_parameter(model, "sample_weight"):
        raise InputError(f"{name}.fit takes no sample_weight: fit the model yourself and pass it fitted")
    if qid is not None and type(model).__module__.startswith("xgboost"):
        raise InputError(
            f"{name} weighs queries, not documents, so it cannot be fitted with the documents' "
            "sample_weight; fit it yourself (with one weight per query) and pass it fitted"
        )
    return clone(model).fit(X, y, sample_weight=sample_weight, **kw)


def _xgboost_classifier(model: Any) -> bool:
    from sklearn.frozen import FrozenEstimator

    inner = model.estimator if isinstance(model, FrozenEstimator) else model
    return type(inner).__module__.startswith("xgboost")


def _queries_for(model: Any, qid: Any) -> dict[str, Any]:
    """A ranker's queries as its ``fit`` takes them: ``qid``, or ``group`` sizes of consecutive
    queries (an error naming the fix when a query's rows are not consecutive)."""
    from sklearn.utils.validation import has_fit_parameter

    q = np.asarray(qid).reshape(-1)
    if has_fit_parameter(model, "qid"):
        return {"qid": q}
    if not has_fit_parameter(model, "group"):
        return {}
    starts = np.flatnonzero(np.r_[True, q[1:] != q[:-1]]) if len(q) else np.zeros(0, dtype=np.int64)
    if len(np.unique(q)) != len(starts):
        raise InputError("the rows of each query must be consecutive (sort the data by qid)")
    return {"group": np.diff(np.r_[starts, len(q)]).astype(np.int64)}


def fitted_forest(
    model: Any, X: Any, y: Any, sample_weight: Any = None, *, who: str, qid: Any = None
) -> tuple[Any, Any]:
    """``(fitted model, its Forest)`` for the columns of ``X``: :func:`fitted_model`, then
    :func:`as_forest`, checked to have ``X``'s width and named as ``X``'s columns.

    An unfitted XGBoost classifier takes only the labels ``0..K-1``: its clone is fitted on
    the codes of ``y`` and the Forest is given ``y``'s own labels back.
    """
    from sklearn.base import is_classifier

    from thrifty.forest.names import named_as

    labels = None
    if y is not None and not is_fitted_model(model) and _xgboost_classifier(model) and is_classifier(model):
        labels, y = np.unique(np.asarray(y), return_inverse=True)
    model = fitted_model(model, X, y, sample_weight, who=who, qid=qid)
    forest = as_forest(model, who=who)
    if labels is not None and forest.classes is not None and len(forest.classes) == len(labels):
        forest.classes = labels
    check_width(X.shape[1], forest.n_features, "the estimator's model was fitted on")
    return model, named_as(forest, X)


def relevance_labels(y: Any, name: str) -> np.ndarray:
    """``y`` as finite float relevance labels (a ranker's ``y``)."""
    try:
        labels = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name} must hold numeric relevance labels (0 = irrelevant): {exc}") from None
    if labels.ndim != 1 or not np.all(np.isfinite(labels)):
        raise InputError(f"{name} must be 1-d finite relevance labels, got shape {labels.shape}")
    return labels


def query_ids(qid: Any, n: int, name: str) -> np.ndarray:
    """The query of each of ``n`` documents; all in one query when ``qid`` is None."""
    if qid is None:
        return np.zeros(n, dtype=np.int64)
    q = np.asarray(qid).reshape(-1)
    if len(q) != n:
        raise InputError(f"{name} must give the query of each of the {n} documents, got {len(q)} values")
    return q
