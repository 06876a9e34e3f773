"""Import of XGBoost boosters and their scikit-learn wrappers into a Forest."""

from __future__ import annotations

import json
import math
from itertools import pairwise
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest._forest import MISSING_NAN, Forest
from thrifty.forest.builder import ForestBuilder, bitset_words, unsupported

# Objectives whose prediction is the margin itself, and whose base_score is a margin already.
_IDENTITY = {
    "reg:squarederror",
    "reg:linear",
    "reg:squaredlogerror",
    "reg:pseudohubererror",
    "reg:absoluteerror",
    "reg:quantileerror",
}


def from_xgboost(model: Any) -> Forest:
    """Convert an XGBoost ``Booster`` or ``XGBModel`` (classifier/regressor/ranker).

    The model is read from its JSON form (``save_raw("json")``), whose numbers are the
    shortest decimals that round back to XGBoost's float32 values. XGBoost compares features
    in float32 as ``x < split_condition``; the forest rounds inputs to float32 and stores the
    float32 predecessor of each condition so that ``x <= threshold`` is the same test.

    Categorical splits list the categories that go *right* (everything else, including
    negative and out-of-range codes, goes left); they are stored with their children swapped.
    (Fractional codes in (-1, 0) are the one difference: XGBoost calls them invalid, the forest
    reads them as category 0.) DataFrame categories come from the model's category encoder.
    Several targets (``num_target``) or classes become one output each.

    XGBoost accumulates margins in float32, tree by tree; the forest does the same
    (``accumulate="float32"``), so its margins equal XGBoost's bit for bit. Probabilities agree
    to float32 precision only: XGBoost applies its sigmoid/softmax in float32 with the C
    library's ``expf``, which the forest does not imitate (it applies the link in float64).

    Parameters
    ----------
    model : xgboost.Booster or xgboost.XGBModel
        A fitted gbtree or dart model. Scikit-learn wrappers keep only the trees up to
        ``best_iteration`` when early stopping recorded one, as their ``predict`` does; a
        ``Booster`` keeps all trees, as ``Booster.predict`` does, and is assumed to be fed
        DMatrices whose missing value is NaN (their default).

    Returns
    -------
    Forest

    Raises
    ------
    ValueError
        For gblinear boosters, vector-leaf (multi_output_tree) models, a non-NaN ``missing``
        value, and objectives whose prediction is not the margin, a sigmoid or a softmax of it
        (count:poisson, reg:gamma, reg:tweedie, reg:logistic, binary:hinge, survival:*).
    """
    # Not at the top: xgboost is optional (thrifty[test] only), and the importers load this
    # module for every library's model.
    import xgboost

    classes, end = None, None
    if isinstance(model, xgboost.XGBModel):
        booster = model.get_booster()  # raises NotFittedError when not fitted
        if isinstance(model, xgboost.XGBClassifier):
            classes = np.asarray(model.classes_)
        missing = model.missing
        if missing is not None and not math.isnan(float(missing)):
            raise InputError(
                f"XGBoost models with missing={missing!r} are unsupported; only "
                "NaN marks missing values in a forest"
            )
        try:
            end = model.best_iteration + 1
        except AttributeError:
            end = None
    elif isinstance(model, xgboost.Booster):
        booster = model
    else:
        raise unsupported(model)
    learner = json.loads(bytes(booster.save_raw("json")))["learner"]
    gb = learner["gradient_booster"]
    if gb["name"] == "gblinear":
        raise InputError("XGBoost gblinear boosters are linear models, not trees; unsupported")
    weight_drop = gb.get("weight_drop") if gb["name"] == "dart" else None
    trees_model = gb["gbtree"]["model"] if gb["name"] == "dart" else gb["model"]

    param = learner["learner_model_param"]
    n_classes = int(param.get("num_class", "0"))
    n_outputs = max(n_classes, int(param.get("num_target", "1")), 1)
    task, link, margin_of = _objective(learner["objective"]["name"])
    if task == "binary" and n_outputs > 1:
        raise InputError(
            f"XGBoost multi-label models ({n_outputs} logistic targets) are "
            "unsupported: the forest's sigmoid link has one output"
        )
    base = _exact_base(booster, _base_score(param["base_score"], n_outputs, margin_of))

    trees = trees_model["trees"]
    tree_info = trees_model.get("tree_info", [0] * len(trees))
    if end is not None:
        trees = trees[: _iteration_end(trees_model, end, n_outputs)]
    builder = ForestBuilder()
    for t, tree in enumerate(trees):
        weight = float(np.float32(weight_drop[t])) if weight_drop is not None else 1.0
        _add_tree(builder, tree, weight, int(tree_info[t]) if n_outputs > 1 else 0)

    n_features = int(param["num_feature"])
    names = learner.get("feature_names") or None
    types = learner.get("feature_types") or []
    return builder.build(
        base_score=base,
        n_features=n_features,
        link=link,
        task=task,
        classes=classes,
        feature_names=names if names and len(names) == n_features else None,
        categories=_categories(trees_model.get("cats"), types),
        input_dtype="float32",
        accumulate="float32",
        aggregation="sum",
        source="xgboost" if gb["name"] == "gbtree" else "xgboost:dart",
    )


def _objective(name: str) -> tuple[str, str, str]:
    """``(task, link, base_score space)`` of an objective, or ValueError."""
    if name == "binary:logistic":
        return "binary", "sigmoid", "logit"
    if name == "binary:logitraw":
        return "binary", "sigmoid", "identity"
    if name in ("multi:softprob", "multi:softmax"):
        return "multiclass", "softmax", "identity"
    if name.startswith("rank:"):
        return "ranking", "identity", "identity"
    if name in _IDENTITY:
        return "regression", "identity", "identity"
    raise InputError(
        f"XGBoost objective {name!r} is unsupported: its prediction is not the "
        "margin, a sigmoid or a softmax of it (supported: binary:logistic, "
        "binary:logitraw, multi:softprob, multi:softmax, rank:*, " + ", ".join(sorted(_IDENTITY)) + ")"
    )


def _base_score(text: str, n_outputs: int, space: str) -> np.ndarray:
    """The margin each output starts from.

    XGBoost 3 stores ``base_score`` as a vector (``"[a,b]"``), older versions as a scalar; for
    logistic objectives it is a probability, turned into a margin in float32 arithmetic as
    XGBoost's ``ProbToMargin`` does.
    """
    values = json.loads(text) if text.lstrip().startswith("[") else [float(text)]
    base = np.asarray(values, dtype=np.float32)
    if base.size == 1:
        base = np.repeat(base, n_outputs)
    if base.size != n_outputs:
        raise InputError(f"XGBoost base_score has {base.size} values for {n_outputs} outputs")
    if space == "logit":
        with np.errstate(divide="ignore"):
            base = -np.log(np.float32(1.0) / base - np.float32(1.0))
    return base.astype(np.float32).astype(np.float64)


def _exact_base(booster: Any, formula: np.ndarray) -> np.ndarray:
    """XGBoost's own float32 base margin, or ``formula`` when it cannot be had.

    ``ProbToMargin`` runs the C library's ``logf``, which may differ by an ulp from any log
    numpy offers; a prediction over the empty iteration range ``[1, 1)`` yields the margin
    XGBoost really starts from. It is used only when it agrees with the formula to float32
    precision, in case that range ever means something else.
    """
    import xgboost  # optional, as in from_xgboost

    n_features = booster.num_features()
    try:
        empty = xgboost.DMatrix(
            np.full((1, n_features), np.nan, dtype=np.float32),
            feature_names=booster.feature_names,
            feature_types=booster.feature_types,
            enable_categorical=True,
        )
        margin = np.asarray(
            booster.predict(empty, output_margin=True, iteration_range=(1, 1)), dtype=np.float64
        ).reshape(-1)
    except (ValueError, TypeError):  # XGBoostError is a ValueError; e.g. no boosting round
        return formula
    if margin.shape != formula.shape or not np.allclose(margin, formula, rtol=1e-5, atol=1e-6):
        return formula
    return margin


def _iteration_end(trees_model: dict, n_iterations: int, n_outputs: int) -> int:
    """Number of leading trees that make up the first ``n_iterations`` boosting rounds."""
    indptr = trees_model.get("iteration_indptr")
    if indptr:
        return int(indptr[min(n_iterations, len(indptr) - 1)])
    per_iter = int(trees_model["gbtree_model_param"].get("num_parallel_tree", "1")) * n_outputs
    return n_iterations * per_iter


def _add_tree(builder: ForestBuilder, tree: dict, weight: float, tree_class: int) -> None:
    if int(tree["tree_param"].get("size_leaf_vector", "1")) > 1:
        raise InputError("XGBoost vector-leaf trees (multi_strategy='multi_output_tree') are unsupported")
    left = np.asarray(tree["left_children"], dtype=np.int64)
    right = np.asarray(tree["right_children"], dtype=np.int64)
    cond = np.asarray(tree["split_conditions"], dtype=np.float64).astype(np.float32)
    feature = np.asarray(tree["split_indices"], dtype=np.int64)
    default_left = np.asarray(tree["default_left"], dtype=bool)
    # Deleted nodes (pruned in place) stay in the arrays; make everything unreachable a leaf.
    reachable = np.zeros(left.shape[0], dtype=bool)
    stack = [0]
    while stack:
        node = stack.pop()
        reachable[node] = True
        if left[node] >= 0:
            stack.extend((int(left[node]), int(right[node])))
    is_leaf = (left < 0) | ~reachable
    left, right = np.where(is_leaf, -1, left), np.where(is_leaf, -1, right)
    # x < c in float32  <=>  x <= (the float32 just below c)
    threshold = np.nextafter(cond, np.float32(-np.inf)).astype(np.float64)
    value = np.where(is_leaf, cond.astype(np.float64), 0.0)

    cat_words: dict[int, np.ndarray] = {}
    segments, sizes = tree.get("categories_segments", []), tree.get("categories_sizes", [])
    for k, node in enumerate(tree.get("categories_nodes", [])):
        if is_leaf[node]:
            continue
        chosen = tree["categories"][segments[k] : segments[k] + sizes[k]]
        # The chosen categories go right in XGBoost; the forest sends its set left, so swap.
        cat_words[node] = bitset_words(int(c) for c in chosen)
        left[node], right[node] = right[node], left[node]
        default_left[node] = not default_left[node]
    builder.add_tree(
        feature,
        threshold,
        left,
        right,
        value,
        missing_left=default_left,
        missing_type=MISSING_NAN,
        cat_words=cat_words,
        weight=weight,
        tree_class=tree_class,
    )


def _categories(cats: dict | None, types: list[str]) -> dict[int, list]:
    """Training categories of the DataFrame ``category`` columns (XGBoost >= 3.1 stores them).

    ``enc[f]`` holds feature ``f``'s categories in code order: strings as UTF-8 bytes cut at
    ``offsets``, numbers as plain values.
    """
    out: dict[int, list] = {}
    for j, enc in enumerate((cats or {}).get("enc") or []):
        values = enc.get("values") or []
        if not values or (types and j < len(types) and types[j] != "c"):
            continue
        offsets = enc.get("offsets") or []
        if offsets:
            raw = bytes(values)
            out[j] = [raw[a:b].decode("utf-8") for a, b in pairwise(offsets)]
        else:
            out[j] = list(values)
    return out
