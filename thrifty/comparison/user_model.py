"""The user's own fitted model as :func:`thrifty.compare`'s plain model (``model=``,
``thrifty compare --model FILE``).

The model becomes the reference series (its first k trees), the baseline of every report and
the starting model of every post-hoc method; training-time methods still fit their own models.
Before anything is fitted it is checked against the data: its features must be the data's
columns (by name where it has names, else by count) and its task the data's task. Its features
are then renumbered to the data's columns, so that it reads the same tables (and is priced by
the same cost model) as every other candidate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from thrifty.comparison.inputs import infer_task
from thrifty.exceptions import InputError, UnsupportedModelError
from thrifty.forest import Forest
from thrifty.forest.names import align, is_generic
from thrifty.runtime.plans import Full, Plan

__all__ = ["UserModel", "named_reference", "user_model", "user_model_lines", "yours"]

#: What the report says of the user's model: compare cannot know the rows it was trained on.
OVERLAP_NOTE = (
    "the test rows may overlap the rows your model was trained on, which would flatter it and "
    "the methods built on it; give compare rows it did not see"
)
#: Libraries' placeholder names for unnamed columns (``f0`` XGBoost, ``Column_0`` LightGBM,
#: ``feature_0``): such a model's features are matched to the data's by position.
_PLACEHOLDERS = ("f", "Column_", "feature_")


@dataclass(frozen=True)
class UserModel:
    """The user's model, checked against the data.

    Attributes
    ----------
    forest : Forest
        The model, reading the data's columns (its features renumbered to them).
    task : str
        The task of the run (the data's, which the model's agrees with).
    description : str
        What the report calls it, e.g. ``"your LightGBM model (200 trees, from model.txt)"``.
    """

    forest: Forest
    task: str
    description: str


def user_model(
    model: Any, X: pd.DataFrame, y: np.ndarray, qid: Any, task: str | None, *, trust_pickle: bool = False
) -> UserModel:
    """Check ``model`` against the rows ``X, y`` and make it read ``X``'s columns.

    Parameters
    ----------
    model : object, str or Path
        A fitted model ``Forest.from_model`` takes (LightGBM, XGBoost, CatBoost, YDF,
        scikit-learn, a thrifty Forest), or a model file :func:`thrifty.model_files.load_model`
        reads.
    X : DataFrame
        Every row given (the test rows included), with the data's columns.
    y : ndarray
        Their labels.
    qid : array-like or None
        Query ids (ranking).
    task : str or None
        The task asked for (None: inferred from ``y``, or the model's own when the labels
        leave it open).
    trust_pickle : bool, default=False
        Allow a pickled model file (see ``load_model``).

    Returns
    -------
    UserModel

    Raises
    ------
    InputError
        A file or object that is not a tree model thrifty imports; a plan rather than a plain
        model; a feature the data lacks (named); a different number of features; a task or
        classes that differ from the data's.
    """
    source = ""
    if isinstance(model, (str, Path)):
        from thrifty.model_files import load_model

        source = f", from {Path(model).name}"
        model = load_model(model, trust_pickle=trust_pickle)
    if isinstance(model, Full):  # every tree of one forest (thrifty.save of a model): that forest
        model = model.forest
    if isinstance(model, Plan):
        raise InputError(
            f"model is a thrifty plan ({type(model).__name__}), not a plain model: compare builds "
            "plans itself; give the forest it was built from"
        )
    try:
        forest = Forest.from_model(model)
    except UnsupportedModelError:
        raise InputError(
            f"model must be a fitted tree model (LightGBM, XGBoost, CatBoost, YDF, scikit-learn) "
            f"or a model file, got {type(model).__name__}"
        ) from None
    forest = _read_columns(forest, X)
    task = _task(forest, y, qid, task)
    kind = forest.source.split(":")[0] or "tree"
    kind = {"lightgbm": "LightGBM", "xgboost": "XGBoost", "catboost": "CatBoost", "ydf": "YDF"}.get(
        kind, "scikit-learn" if kind == "sklearn" else kind
    )
    return UserModel(forest, task, f"your {kind} model ({forest.n_trees:,} trees{source})")


def _read_columns(forest: Forest, X: pd.DataFrame) -> Forest:
    """``forest`` with its features renumbered to ``X``'s columns (by name, else position)."""
    columns = [str(c) for c in X.columns]
    names = forest.feature_names
    # By name; by position (all of them, in order) for a model without names of its own.
    if names is not None and not _placeholders(names):
        order = align(names, columns)
        if order is None:
            missing = [n for n in names if align([n], columns) is None]
            raise InputError(
                f"the model's feature(s) {missing[:5]} are not columns of the data "
                f"({len(missing)} of its {len(names)} features missing); give the data the "
                "model was trained on, with the same column names"
            )
    else:
        if forest.n_features != len(columns):
            raise InputError(
                f"the model has {forest.n_features} features (unnamed) but the data has "
                f"{len(columns)} feature columns; give the data's columns in the order the model "
                "was trained on, and only those"
            )
        order = list(range(len(columns)))
    where = np.asarray(order, dtype=np.int64)
    feature = np.where(forest.feature >= 0, where[np.maximum(forest.feature, 0)], -1).astype(np.int32)
    # The model's own categories where it has them (its splits test their codes); the data's
    # for the columns it does not read, so that it takes the same tables as every candidate.
    categories = {
        j: list(dt.categories) for j, dt in enumerate(X.dtypes) if isinstance(dt, pd.CategoricalDtype)
    }
    categories.update({int(where[j]): cats for j, cats in forest.categories.items()})
    return dataclasses.replace(
        forest, feature=feature, n_features=len(columns), feature_names=columns, categories=categories
    )


def _placeholders(names: list[str]) -> bool:
    """True when ``names`` are a library's placeholders for unnamed columns (f0, f1, ...)."""
    if is_generic(names):
        return True
    return any(all(n == f"{p}{i}" for i, n in enumerate(names)) for p in _PLACEHOLDERS)


def _task(forest: Forest, y: np.ndarray, qid: Any, task: str | None) -> str:
    """The run's task, once the model's agrees with it (and its classes with the labels)."""
    try:
        data = infer_task(y, qid, task)
    except InputError:
        if task is not None or forest.task == "ranking":
            raise
        data = infer_task(y, qid, forest.task)  # labels that leave it open: the model's task
    has = forest.task
    if has == data or (has == "regression" and data == "ranking"):
        pass
    elif has == "ranking":
        raise InputError(
            "the model is a ranker but the data has no query ids; give them (qid=, --qid COLUMN)"
        )
    elif has == "regression":
        raise InputError(
            f"the model is a regressor but the task is {data} (y holds classes); give the numeric "
            "target it predicts, or task='regression' (--task regression) if y's numbers are it"
        )
    elif data in ("regression", "ranking"):
        raise InputError(
            f"the model is a {has} classifier but the task is {data}; give the class labels it "
            "was trained on (or a regressor)"
        )
    else:
        n = len(np.unique(y))
        raise InputError(
            f"the model is a {has} classifier but y holds {n} classes; give a model trained on "
            "these classes, or the labels it was trained on"
        )
    if forest.is_classifier:
        _check_classes(forest, y)
    return data


def _check_classes(forest: Forest, y: np.ndarray) -> None:
    """Every label must be one of the model's classes (else its figures would be silently 0)."""
    labels = np.unique(np.asarray(y))  # sorted, as the message lists them
    if forest.classes is not None:
        known = set(forest.classes.tolist())
        where = "its classes are " + ", ".join(str(c) for c in forest.classes[:10])
    else:  # a booster saved without its labels predicts class indices
        known = set(range(max(2, forest.n_outputs)))
        where = f"it keeps no class labels, so its classes are 0..{max(2, forest.n_outputs) - 1}"
    strange = [v for v in labels.tolist() if v not in known]
    if strange:
        raise InputError(
            f"label(s) {strange[:5]} of y are not classes of the model ({where}); encode y as "
            "the model was trained on"
        )


def named_reference(table: pd.DataFrame, front: pd.DataFrame, models: dict, name: str) -> tuple:
    """The reference series renamed ``name`` (after the user's model's library) in the table,
    the front and the models' keys; the run itself names it ``REFERENCE``."""
    from thrifty.comparison.methods import REFERENCE  # not at the top: methods loads every trainer

    rename = {REFERENCE: name}
    table = table.assign(method=table["method"].replace(rename)) if len(table) else table
    front = front.assign(method=front["method"].replace(rename)) if len(front) else front
    models = {(rename.get(m, m), n): mdl for (m, n), mdl in models.items()}
    return table, front, models


def user_model_lines(description: str, series: str) -> list[str]:
    """The report's lines on the user's model: what it is in the run (its first k trees are
    the series ``series``), and what compare cannot know of it (the rows it was trained on)."""
    return [
        f"the plain model is {description}: the series '{series}' is its first k "
        "trees, its row with every tree is the baseline, and QWYC, Fan, margin exit, Cronus, "
        "ADAPT (as f0) and, for a random forest, BudgetPrune start from it, fitted on calibration "
        "rows and never refitting it; CEGB, GreedyMiser, BudgetRF, cheapest k features and "
        "ADAPT's gates fit their own models on the training rows, as alternatives to it",
        OVERLAP_NOTE,
    ]


def yours(text: str, description: str | None) -> str:
    """``text`` calling the plain model "your model" when it is the user's."""
    return text if not description else text.replace("the plain model", "your model")
