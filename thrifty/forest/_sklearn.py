"""Import of scikit-learn decision trees, forests and gradient-boosting models into a Forest."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted

from thrifty.exceptions import InputError
from thrifty.forest._forest import MISSING_NAN, Forest
from thrifty.forest.builder import ForestBuilder, bitset_words, unsupported

_TREES = ("DecisionTreeClassifier", "DecisionTreeRegressor", "ExtraTreeClassifier", "ExtraTreeRegressor")
_FORESTS = ("RandomForestClassifier", "RandomForestRegressor", "ExtraTreesClassifier", "ExtraTreesRegressor")
_GB = ("GradientBoostingClassifier", "GradientBoostingRegressor")
_HGB = ("HistGradientBoostingClassifier", "HistGradientBoostingRegressor")
# Category values up to this bound are split on directly (see _hgb_categories).
_MAX_RAW_CATEGORY = 1 << 16


def from_sklearn(model: Any) -> Forest:
    """Convert a fitted scikit-learn tree model.

    Trees, random forests and extra-trees compare features in float32 (``input_dtype``); their
    classifiers average the leaves' class distributions (link ``"proba"``). Gradient boosting
    adds ``learning_rate`` times each tree to the init estimator's raw prediction;
    histogram gradient boosting adds its predictors to ``_baseline_prediction``.

    HistGradientBoosting categorical features: fitted on a NumPy array of non-negative integer
    values, splits test those raw values (unknown values follow the missing direction, as in
    scikit-learn); otherwise (DataFrames, strings, other values) the training categories go to
    ``forest.categories`` and DataFrame inputs are coded with them, NumPy inputs being read as
    codes. Non-integer inputs to a categorical feature are truncated, not treated as unknown.

    Parameters
    ----------
    model : sklearn estimator
        One of the supported scikit-learn estimators, fitted, with a single output.

    Returns
    -------
    Forest

    Raises
    ------
    TypeError
        For estimators that are not supported tree models (pipelines, linear models, ...).
    ValueError
        For unfitted models, multi-output targets, GradientBoostingClassifier with
        ``loss="exponential"``, gradient boosting with a custom ``init`` estimator, and
        HistGradientBoostingRegressor losses with a non-identity link (poisson, gamma).
    """
    kind = type(model).__name__
    bases = {cls.__name__ for cls in type(model).__mro__ if cls.__module__.startswith("sklearn.")}
    name = next((n for n in _TREES + _FORESTS + _GB + _HGB if n in bases), None)
    if name is None:
        raise unsupported(model)
    check_is_fitted(model)
    names = getattr(model, "feature_names_in_", None)
    meta = {
        "source": f"sklearn:{kind}",
        "n_features": int(model.n_features_in_),
        "feature_names": None if names is None else [str(n) for n in names],
    }
    if name in _HGB:
        return _from_hgb(model, name, meta)
    if name in _GB:
        return _from_gb(model, name, meta)
    trees = [model] if name in _TREES else list(model.estimators_)
    return _from_trees(model, name, trees, meta)


def _tree_arrays(tree: Any, estimator: str) -> tuple:
    """Node arrays of a fitted ``sklearn.tree._tree.Tree`` (single output only)."""
    if tree.n_outputs != 1:
        raise InputError(f"{estimator} has {tree.n_outputs} outputs; only single-output models are supported")
    n = tree.node_count
    missing_left = getattr(tree, "missing_go_to_left", np.zeros(n, dtype=np.uint8))
    return (
        tree.feature,
        tree.threshold,
        tree.children_left,
        tree.children_right,
        np.asarray(missing_left, dtype=bool),
    )


def _from_trees(model: Any, name: str, trees: list, meta: dict) -> Forest:
    """Decision trees and averaging forests (random forests, extra-trees)."""
    is_clf = name.endswith("Classifier")
    n_classes = len(model.classes_) if is_clf else 1
    if is_clf and n_classes < 2:
        raise InputError(f"{name} was fitted on a single class; nothing to import")
    width = n_classes if n_classes > 2 else 1
    builder = ForestBuilder(width)
    weight = 1.0 / len(trees)
    for est in trees:
        feature, threshold, left, right, missing_left = _tree_arrays(est.tree_, name)
        raw = est.tree_.value[:, 0, :]
        if is_clf:
            # predict_proba normalizes every leaf's (weighted) class counts; so do we.
            total = raw.sum(axis=1, keepdims=True)
            proba = raw / np.where(total == 0.0, 1.0, total)
            value = proba[:, 1] if n_classes == 2 else proba
        else:
            value = raw[:, 0]
        builder.add_tree(
            feature,
            threshold,
            left,
            right,
            value,
            missing_left=missing_left,
            weight=weight,
            tree_class=-1 if width > 1 else 0,
        )
    if is_clf:
        task = "binary" if n_classes == 2 else "multiclass"
        return builder.build(
            base_score=np.zeros(width),
            link="proba",
            task=task,
            classes=model.classes_,
            input_dtype="float32",
            aggregation="mean",
            **meta,
        )
    return builder.build(
        base_score=np.zeros(1),
        link="identity",
        task="regression",
        input_dtype="float32",
        aggregation="mean",
        **meta,
    )


def _from_gb(model: Any, name: str, meta: dict) -> Forest:
    """GradientBoostingClassifier/Regressor: init raw prediction + learning_rate * trees."""
    is_clf = name.endswith("Classifier")
    if is_clf and model.loss == "exponential":
        raise InputError(
            f"{name} with loss='exponential' is unsupported: its probability is "
            "sigmoid(2 * raw score), not a plain sigmoid link"
        )
    if model.init is not None and not (isinstance(model.init, str) and model.init == "zero"):
        raise InputError(
            f"{name} with a custom init estimator ({type(model.init).__name__}) "
            "is unsupported: its raw prediction varies with X"
        )
    # The default init (a Dummy prior/mean/quantile) ignores X: one row gives the constant.
    probe = np.zeros((1, model.n_features_in_), dtype=np.float32)
    base = np.asarray(model._raw_predict_init(probe), dtype=np.float64)[0]
    stages = model.estimators_[: model.n_estimators_]
    builder = ForestBuilder()
    for stage in stages:
        for k, est in enumerate(stage):
            feature, threshold, left, right, missing_left = _tree_arrays(est.tree_, name)
            builder.add_tree(
                feature,
                threshold,
                left,
                right,
                est.tree_.value[:, 0, 0],
                missing_left=missing_left,
                weight=float(model.learning_rate),
                tree_class=k,
            )
    if is_clf:
        binary = len(model.classes_) == 2
        return builder.build(
            base_score=base,
            link="sigmoid" if binary else "softmax",
            task="binary" if binary else "multiclass",
            classes=model.classes_,
            input_dtype="float32",
            **meta,
        )
    return builder.build(base_score=base, link="identity", task="regression", input_dtype="float32", **meta)


def _from_hgb(model: Any, name: str, meta: dict) -> Forest:
    """HistGradientBoostingClassifier/Regressor: baseline + the sum of all predictors."""
    is_clf = name.endswith("Classifier")
    link_name = type(model._loss.link).__name__
    if not is_clf and link_name != "IdentityLink":
        raise InputError(
            f"{name} with loss={model.loss!r} is unsupported: its prediction "
            f"applies a {link_name} (e.g. exp), not the identity"
        )
    n_out = int(model.n_trees_per_iteration_)
    original, raw_space, categories = _hgb_categories(model)
    builder = ForestBuilder()
    for predictors in model._predictors:
        for k, predictor in enumerate(predictors):
            nodes = predictor.nodes
            leaf = nodes["is_leaf"].astype(bool)
            left = np.where(leaf, -1, nodes["left"].astype(np.int64))
            right = np.where(leaf, -1, nodes["right"].astype(np.int64))
            missing_left = nodes["missing_go_to_left"].astype(bool)
            feature = original[nodes["feature_idx"]]
            cat_words: dict[int, np.ndarray] = {}
            for i in np.flatnonzero(nodes["is_categorical"].astype(bool) & ~leaf):
                words = predictor.raw_left_cat_bitsets[nodes["bitset_idx"][i]]
                values = raw_space.get(int(feature[i]))
                if values is None:  # codes = positions in forest.categories
                    cat_words[int(i)] = np.trim_zeros(words, "b") if words.any() else words[:1]
                    continue
                # Split on the raw category values. Unknown values count as missing in
                # scikit-learn but go right in the forest, so when missing goes left the node
                # is stored mirrored: its set holds the values that go right.
                codes = np.arange(len(values))
                goes_left = ((words[codes // 32] >> (codes % 32).astype(np.uint32)) & 1) == 1
                if missing_left[i]:
                    cat_words[int(i)] = bitset_words(values[~goes_left])
                    left[i], right[i] = right[i], left[i]
                    missing_left[i] = False
                else:
                    cat_words[int(i)] = bitset_words(values[goes_left])
            builder.add_tree(
                feature,
                nodes["num_threshold"],
                left,
                right,
                nodes["value"],
                missing_left=missing_left,
                missing_type=MISSING_NAN,
                cat_words=cat_words,
                tree_class=k,
            )
    base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
    if is_clf:
        binary = n_out == 1
        return builder.build(
            base_score=base,
            link="sigmoid" if binary else "softmax",
            task="binary" if binary else "multiclass",
            classes=model.classes_,
            categories=categories,
            **meta,
        )
    return builder.build(base_score=base, link="identity", task="regression", categories=categories, **meta)


def _hgb_categories(model: Any) -> tuple[np.ndarray, dict[int, np.ndarray], dict[int, list]]:
    """How a HistGradientBoosting model's categorical features reach the forest.

    scikit-learn ordinal-encodes categorical columns (unknown values become NaN, i.e. missing)
    and moves them in front of the numerical ones. Returns the original column of each
    encoded feature, and for each categorical column either its raw values (when it was
    fitted on a NumPy array of small non-negative integers, so that NumPy inputs holding those
    values split right) or its categories for ``forest.categories`` (DataFrames, other values).
    """
    n = int(model.n_features_in_)
    pre = getattr(model, "_preprocessor", None)
    if pre is None:
        return np.arange(n), {}, {}
    original = np.empty(n, dtype=np.int64)
    columns = np.arange(n)
    for label, mask in (("encoder", model.is_categorical_), ("numerical", ~model.is_categorical_)):
        original[pre.output_indices_[label]] = columns[mask]
    encoder = pre.named_transformers_["encoder"]
    from_frame = getattr(model, "feature_names_in_", None) is not None
    raw_space: dict[int, np.ndarray] = {}
    categories: dict[int, list] = {}
    for column, cats in zip(columns[model.is_categorical_], encoder.categories_):
        cats = np.asarray(cats)
        # The encoder lists a missing marker (NaN, None) last when training had missing
        # values; it is not a category (missing values must stay NaN to follow the default).
        while len(cats) and _is_missing(cats[-1]):
            cats = cats[:-1]
        numeric = cats.dtype.kind in "iuf"
        if (
            not from_frame
            and numeric
            and np.all(cats >= 0)
            and np.all(cats == np.floor(cats))
            and np.all(cats < _MAX_RAW_CATEGORY)
        ):
            raw_space[int(column)] = cats.astype(np.int64)
        else:
            categories[int(column)] = [c.item() if isinstance(c, np.generic) else c for c in cats]
    return original, raw_space, categories


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))
