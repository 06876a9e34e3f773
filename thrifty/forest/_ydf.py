"""Import of YDF (Yggdrasil Decision Forests) gradient-boosted trees and random forests."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest._forest import MISSING_NAN, Forest
from thrifty.forest.builder import ForestBuilder, bitset_words, flatten_tree, unsupported

# Gradient-boosted losses whose prediction is the logit, its sigmoid or its softmax.
_LOSSES = {
    "BINOMIAL_LOG_LIKELIHOOD",
    "BINARY_FOCAL_LOSS",
    "MULTINOMIAL_LOG_LIKELIHOOD",
    "SQUARED_ERROR",
    "MEAN_AVERAGE_ERROR",
    "LAMBDA_MART_NDCG",
    "LAMBDA_MART_NDCG5",
    "XE_NDCG_MART",
}


def from_ydf(model: Any) -> Forest:
    """Convert a YDF ``GradientBoostedTreesModel`` or ``RandomForestModel`` (CART models are
    random forests of one tree).

    Trees are read through YDF's tree inspection API (``model.iter_trees()``). YDF serves in
    float32: features are read as float32 (``input_dtype="float32"``), a
    ``NumericalHigherThanCondition`` sends ``x >= threshold`` to its positive child, so the
    forest keeps the negative child on the left under the float32 just below the threshold,
    and scores are summed in float32 (``accumulate="float32"``) from the initial predictions,
    tree by tree, as YDF's engines do.

    Missing values follow each condition's ``missing`` flag (YDF's ``na_value``), as YDF's
    generic engine does; its fast engines replace them by the training mean or most frequent
    category, which goes the same way for models trained with global imputation (the default;
    other models have only the generic engine). Categorical features are coded by YDF's
    dictionary (code 0 is out-of-dictionary): ``forest.categories`` holds the dictionary, so a
    DataFrame's categories are coded as YDF codes them. An unseen category of a DataFrame becomes
    NaN and takes the missing-value side, where YDF sends it with out-of-dictionary (code 0);
    the two sides are the same in the models we have seen, and a warning names the features
    of a model where some split parts them (give code 0 in an array for YDF's route).

    Gradient-boosted trees: raw scores are YDF's logits (``set_output_logits(True)``), with a
    sigmoid (binary) or softmax (multiclass) link; regression and ranking scores are the
    prediction. Random forests average their trees: YDF divides each leaf by the number of
    trees ``T`` in float32 when it loads the model (a vote ``1/T`` with ``winner_take_all``, else
    the class distribution divided by ``T``) and sums those. The forest stores ``T`` times YDF's
    float32 leaf (a class distribution, as every averaging forest's leaves are) with weight
    ``1/T``: ``float32(w * leaf)`` gives back YDF's leaf exactly, so the float32 sums are YDF's.

    Parameters
    ----------
    model : ydf.GradientBoostedTreesModel or ydf.RandomForestModel

    Returns
    -------
    Forest

    Raises
    ------
    InputError
        For other model kinds (isolation forests), tasks other than classification,
        regression and ranking, losses whose prediction is not the logit, its sigmoid or softmax
        (Poisson, ...), and conditions a forest cannot represent (oblique, categorical-set,
        vector-sequence).
    """
    # Not at the top: ydf is an optional extra, and the importers load this module for every
    # library's model.
    import ydf

    if isinstance(model, ydf.GradientBoostedTreesModel):
        boosted = True
    elif isinstance(model, ydf.RandomForestModel):
        boosted = False
    else:
        raise unsupported(model)
    task = model.task()
    spec = model.data_spec()
    features = list(model.input_features())
    column = {f.column_idx: j for j, f in enumerate(features)}
    names = [f.name for f in features]
    classes = None
    if task == ydf.Task.CLASSIFICATION:
        classes = _labels(model.label_classes())
        k = len(classes)
        forest_task = "binary" if k == 2 else "multiclass"
        link = ("sigmoid" if k == 2 else "softmax") if boosted else "proba"
        n_outputs = 1 if k == 2 else k
    elif task in (ydf.Task.REGRESSION, ydf.Task.RANKING):
        forest_task = "regression" if task == ydf.Task.REGRESSION else "ranking"
        link, n_outputs = "identity", 1
    else:
        raise InputError(
            f"YDF models of task {task.name} are unsupported (classification, regression, ranking)"
        )
    if boosted:
        _check_loss(model)

    n_trees = model.num_trees()
    per_iteration = model.num_trees_per_iteration() if boosted else 1
    width = n_outputs if not boosted and n_outputs > 1 else 1
    builder = ForestBuilder(width=width)
    leaf = _boosted_leaf if boosted else _forest_leaf(model, n_trees, n_outputs, classes is not None)
    weight = 1.0 if boosted else 1.0 / n_trees
    apart: set[int] = set()  # features where out-of-dictionary and missing values part ways
    for t, tree in enumerate(model.iter_trees()):
        if boosted:  # a multiclass iteration grows one tree per class, in class order
            tree_class = t % per_iteration if n_outputs > 1 else 0
        else:  # a forest's trees hold every class
            tree_class = -1 if width > 1 else 0
        apart |= _add_tree(builder, tree, leaf, spec, column, width, tree_class, weight)
    if apart:
        shown = ", ".join(names[j] for j in sorted(apart))
        warnings.warn(
            f"YDF sends out-of-dictionary and missing values of {shown} different ways at some "
            "splits; the forest reads a DataFrame's unseen category as missing, so give such rows "
            "code 0 (out-of-dictionary) in an array to follow YDF",
            stacklevel=2,
        )
    base = np.zeros(n_outputs)
    if boosted:
        base = np.asarray(model.initial_predictions(), dtype=np.float32).astype(np.float64).reshape(-1)
    return builder.build(
        base_score=base,
        n_features=len(features),
        link=link,
        task=forest_task,
        classes=classes,
        feature_names=names,
        categories=_categories(spec, features),
        input_dtype="float32",
        accumulate="float32",
        aggregation="sum" if boosted else "mean",
        source="ydf:gbt" if boosted else "ydf:rf",
    )


def _labels(labels: list[str]) -> np.ndarray:
    """Class labels, as integers when YDF's (text) dictionary holds integers only."""
    try:
        return np.asarray([int(v) for v in labels])
    except ValueError:
        return np.asarray(labels)


def _check_loss(model: Any) -> None:
    """InputError for a gradient-boosted loss whose prediction is not its logit's link."""
    from yggdrasil_decision_forests.model.gradient_boosted_trees import gradient_boosted_trees_pb2

    loss = gradient_boosted_trees_pb2.Loss.Name(model._model.loss())
    if loss not in _LOSSES:
        raise InputError(
            f"YDF gradient-boosted loss {loss} is unsupported: its prediction is not the raw "
            f"score, a sigmoid or a softmax of it (supported: {', '.join(sorted(_LOSSES))})"
        )


def _boosted_leaf(value: Any) -> np.ndarray:
    return np.asarray([np.float32(value.value)], dtype=np.float64)


def _forest_leaf(model: Any, n_trees: int, n_outputs: int, classification: bool) -> Any:
    """``T`` times the leaf of a random-forest tree as YDF's engines store it (divided by ``T``
    in float32).

    Classification leaves drop YDF's out-of-dictionary class (index 0 of the distribution);
    a binary model keeps the positive class only.
    """
    winner = classification and bool(model.winner_takes_all())

    def leaf(value: Any) -> np.ndarray:
        if not classification:
            return np.asarray([np.float32(value.value) / np.float32(n_trees)], dtype=np.float64) * n_trees
        probability = np.asarray(value.probability, dtype=np.float64)
        if winner:  # the first most probable class gets the vote, as YDF's top_value
            out = np.zeros(probability.shape[0], dtype=np.float32)
            out[int(np.argmax(probability))] = np.float32(1.0) / np.float32(n_trees)
        else:  # counts / (sum * T) in float64, then float32, as YDF computes it
            total = float(value.num_examples)
            counts = probability * total
            counts = np.where(np.abs(counts - np.round(counts)) < 1e-6, np.round(counts), counts)
            out = (counts / (total * n_trees)).astype(np.float32)
        # T times the float32 leaf: (1/T) * it rounds back to the leaf in float32.
        out64 = out.astype(np.float64) * n_trees
        return out64[-1:] if n_outputs == 1 else out64

    return leaf


def _add_tree(
    builder: ForestBuilder,
    tree: Any,
    leaf: Any,
    spec: Any,
    column: dict[int, int],
    width: int,
    tree_class: int,
    weight: float,
) -> set[int]:
    """Append one tree; returns the categorical features of its splits that send
    out-of-dictionary (code 0) and missing values different ways."""
    # Negative child first: it is the left one, the side of "x < threshold".
    nodes, left, right = flatten_tree(
        tree.root, lambda n: (n.neg_child, n.pos_child) if hasattr(n, "condition") else None
    )
    n = len(nodes)
    feature = np.full(n, -1, dtype=np.int64)
    threshold = np.zeros(n)
    value = np.zeros((n, width))
    missing_left = np.zeros(n, dtype=bool)
    cat_words: dict[int, np.ndarray] = {}
    apart: set[int] = set()
    for i, node in enumerate(nodes):
        if not hasattr(node, "condition"):
            value[i] = leaf(node.value)
            continue
        cond = node.condition
        kind = type(cond).__name__
        if getattr(cond, "attribute", None) not in column:
            raise InputError(f"YDF condition {kind} on a column that is not an input feature is unsupported")
        feature[i] = column[cond.attribute]
        missing_left[i] = not cond.missing
        if kind == "NumericalHigherThanCondition":
            threshold[i] = _below(cond.threshold)
        elif kind == "DiscretizedNumericalHigherThanCondition":
            boundaries = spec.columns[cond.attribute].discretized_numerical.boundaries
            threshold[i] = _below(boundaries[cond.threshold_idx - 1])
        elif kind == "IsTrueCondition":
            threshold[i] = 0.5  # booleans read as 0/1: true is higher
        elif kind == "IsMissingInCondition":
            threshold[i] = np.inf  # every value goes left (negative); only NaN goes right
            missing_left[i] = False
        elif kind == "CategoricalIsInCondition":
            # The mask's categories go to the positive child: make it the left one.
            cat_words[i] = bitset_words(int(c) for c in cond.mask)
            left[i], right[i] = right[i], left[i]
            missing_left[i] = bool(cond.missing)
            if (0 in cond.mask) != bool(cond.missing):
                apart.add(int(feature[i]))
        else:
            raise InputError(
                f"YDF condition {kind} is unsupported: a forest splits on one feature against a "
                "threshold or a category set (train with split_axis='AXIS_ALIGNED' and without "
                "categorical-set or vector-sequence features)"
            )
    builder.add_tree(
        feature,
        threshold,
        left,
        right,
        value,
        missing_left=missing_left,
        missing_type=MISSING_NAN,
        cat_words=cat_words,
        weight=weight,
        tree_class=tree_class,
    )
    return apart


def _below(threshold: float) -> float:
    """The float32 just below ``threshold``: ``x >= t`` in float32 is ``not x <= _below(t)``."""
    return float(np.nextafter(np.float32(threshold), np.float32(-np.inf)))


def _categories(spec: Any, features: list) -> dict[int, list]:
    """YDF's dictionary of each categorical feature, in code order (code 0: out-of-dictionary).

    Integer categories are stored as text by YDF; they are given back as integers when every
    item is one, so a DataFrame's integer column is coded as YDF codes it.
    """
    from yggdrasil_decision_forests.dataset import data_spec_pb2  # ships with ydf

    out: dict[int, list] = {}
    for j, f in enumerate(features):
        col = spec.columns[f.column_idx]
        if col.type != data_spec_pb2.CATEGORICAL:
            continue
        items = col.categorical.items
        if not items:  # integerized: the values are the codes themselves
            continue
        keys = [""] * (max(v.index for v in items.values()) + 1)
        for key, v in items.items():
            keys[v.index] = key
        rest = keys[1:]
        if rest and all(k.lstrip("-").isdigit() for k in rest):
            out[j] = [keys[0], *(int(k) for k in rest)]
        else:
            out[j] = keys
    return out
