"""Import of CatBoost models (symmetric trees of numerical and one-hot categorical splits)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest._forest import MISSING_NAN, Forest
from thrifty.forest.builder import ForestBuilder, bitset_words, unsupported

# Losses whose RawFormulaVal is the prediction itself (regression and ranking scores).
_REGRESSION = {"RMSE", "MAE", "Quantile", "MAPE", "Huber", "Lq", "Expectile", "LogCosh", "FairLoss"}
_RANKING = {
    "YetiRank",
    "YetiRankPairwise",
    "PairLogit",
    "PairLogitPairwise",
    "QueryRMSE",
    "QuerySoftMax",
    "LambdaMart",
    "StochasticFilter",
    "StochasticRank",
}
_BINARY = {"Logloss", "CrossEntropy"}
_MULTICLASS = {"MultiClass"}
# Integer category values searched for when a one-hot split's hashed value is resolved without
# the training categories: CatBoost hashes the decimal text of an integer category.
_INTEGER_CODES = 1 << 16


def from_catboost(model: Any, *, categories: Mapping[Any, Sequence[Any]] | None = None) -> Forest:
    """Convert a fitted CatBoost model (``CatBoost``, ``CatBoostClassifier``/``Regressor``/``Ranker``).

    CatBoost grows symmetric (oblivious) trees: every level of a tree tests one split, and the
    leaf index is the bit pattern of the outcomes, level ``d`` giving bit ``d``. Each tree
    becomes a full binary tree of depth ``D`` whose leaf along the outcomes ``b_0..b_{D-1}``
    holds CatBoost's leaf ``sum_d b_d 2^d`` (for multiclass, that leaf's ``n_classes`` values,
    stored leaf after leaf: a vector leaf).

    A numerical split sets its bit when ``float32(x) > border``; borders are float32 values,
    so the forest compares inputs rounded to float32 (``input_dtype="float32"``) with
    ``x <= border`` going left (bit 0). NaN follows the model's ``nan_mode``: ``Min`` and
    ``Forbidden`` send it to bit 0 (left), ``Max`` to bit 1 (right). A one-hot split sets its
    bit when the category equals the split's value; the forest stores it as a categorical node
    whose one-category set goes left (children swapped), so unseen and negative categories and
    NaN (an unseen category of a DataFrame) take the "not equal" side, as in CatBoost.

    The raw score is ``scale * sum_t leaf_t + bias`` (``get_scale_and_bias``), the leaves summed
    from zero in tree order, then scaled, then the bias added (CatBoost's ``ApplyScaleAndBias``).
    A model with a bias (``boost_from_average``, the default for RMSE) or a scale other than 1
    becomes a ``base_last`` forest: trees of weight 1, ``Forest.scale`` the scale and the bias
    the base score, so raw scores are CatBoost's ``RawFormulaVal`` bit for bit. Other models
    are plain forests (the same sums either way).

    Binary models take the ``sigmoid`` link (the C library's ``exp``, as CatBoost's
    ``CalcSigmoid``), multiclass ones ``catboost_softmax`` (CatBoost's ``CalcSoftmax`` with its
    own exponential, ``thrifty.forest.catboost_softmax``): ``predict_proba`` bit for bit.

    Parameters
    ----------
    model : catboost.CatBoost
        A fitted model with symmetric trees.
    categories : mapping of feature (name or index) -> sequence, optional
        The training values of categorical features whose one-hot splits test values other
        than the integers ``0..65535``. CatBoost stores only a hash of each category; the
        values are matched to it through CatBoost's own prediction, and a value's position in
        the sequence becomes its code (``Forest.categories``). Features not given here are
        resolved among the integers ``0..65535``, which become their own codes.

    Returns
    -------
    Forest

    Raises
    ------
    InputError
        For non-symmetric trees (``grow_policy`` other than ``SymmetricTree``), CTR (target
        statistics) features of categoricals, text or embedding features, multi-target and
        uncertainty losses, losses whose prediction applies an exponent (Poisson, Tweedie,
        LogLinQuantile, ...) or per-class sigmoids (MultiClassOneVsAll), and one-hot values that
        cannot be resolved to a category.
    """
    # Not at the top: catboost is an optional extra, and the importers load this module for
    # every library's model.
    import catboost

    if not isinstance(model, catboost.CatBoost):
        raise unsupported(model)
    if not model.is_fitted():
        raise InputError("the CatBoost model is not fitted; call fit before importing it")
    doc = _json(model)
    if "oblivious_trees" not in doc:
        raise InputError(
            "CatBoost models with non-symmetric trees (grow_policy 'Depthwise' or 'Lossguide') are "
            "unsupported; train with grow_policy='SymmetricTree' (the default)"
        )
    info = doc["features_info"]
    _refuse_other_features(info)
    loss = doc["model_info"].get("params", {}).get("loss_function", {}).get("type", "RMSE")
    task, link = _objective(loss)
    trees = doc["oblivious_trees"]
    scale, bias = doc.get("scale_and_bias", [1.0, [0.0]])
    n_outputs = max(1, len(bias)) if task == "multiclass" else 1
    if task != "multiclass" and len(bias) > 1:
        raise InputError(f"CatBoost loss {loss!r} with {len(bias)} outputs is unsupported")

    floats = {f["feature_index"]: f for f in info.get("float_features", [])}
    cats = {f["feature_index"]: f for f in info.get("categorical_features", [])}
    n_features = 1 + max([f["flat_feature_index"] for f in (*floats.values(), *cats.values())], default=-1)
    names = _names(floats, cats, n_features)
    _refuse_ctrs(trees, info, cats, names)
    codes, stored = _onehot_codes(model, trees, floats, cats, n_features, names, categories or {})

    base = np.asarray(bias if bias else [0.0], dtype=np.float64).reshape(-1)
    builder = ForestBuilder(width=n_outputs)
    for tree in trees:
        _add_tree(builder, tree, floats, cats, codes, n_outputs)
    classes = doc["model_info"].get("class_params", {}).get("class_names")
    # With zero bias and unit scale, summing onto the base is summing from zero: a plain forest.
    last = bool(float(scale) != 1.0 or np.any(base != 0.0))
    return builder.build(
        base_score=base,
        base_last=last,
        scale=float(scale) if last else 1.0,
        n_features=n_features,
        link=link,
        task=task,
        classes=np.asarray(classes) if task in ("binary", "multiclass") and classes else None,
        feature_names=names if any(names) else None,
        categories=stored,
        input_dtype="float32",
        aggregation="sum",
        source="catboost",
    )


def _json(model: Any) -> dict:
    """The model's JSON export (``save_model(format="json")``): borders and leaves as doubles."""
    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        model.save_model(path, format="json")
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    finally:
        os.unlink(path)


def _objective(loss: str) -> tuple[str, str]:
    """``(task, link)`` of a CatBoost loss, or InputError."""
    if loss in _BINARY:
        return "binary", "sigmoid"
    if loss in _MULTICLASS:
        # CatBoost's softmax takes its own exp: probabilities bit for bit need its link.
        return "multiclass", "catboost_softmax"
    if loss in _RANKING:
        return "ranking", "identity"
    if loss in _REGRESSION:
        return "regression", "identity"
    known = ", ".join(sorted(_BINARY | _MULTICLASS | _REGRESSION | _RANKING))
    raise InputError(
        f"CatBoost loss {loss!r} is unsupported: its prediction is not the raw score, a sigmoid or "
        f"a softmax of it (supported: {known})"
    )


def _refuse_other_features(info: dict) -> None:
    for kind in ("text_features", "embedding_features"):
        if info.get(kind):
            raise InputError(f"CatBoost models with {kind.replace('_', ' ')} are unsupported")


def _names(floats: dict, cats: dict, n_features: int) -> list[str]:
    names = [""] * n_features
    for f in (*floats.values(), *cats.values()):
        names[f["flat_feature_index"]] = str(f.get("feature_id") or "")
    return names


def _refuse_ctrs(trees: list[dict], info: dict, cats: dict, names: list[str]) -> None:
    """InputError naming the categorical features behind any CTR (target statistic) split."""
    if not any(s["split_type"] == "OnlineCtr" for tree in trees for s in tree["splits"]):
        return
    used = sorted(
        {
            cats[e["cat_feature_index"]]["flat_feature_index"]
            for ctr in info.get("ctrs", [])
            for e in ctr.get("elements", [])
            if "cat_feature_index" in e and e["cat_feature_index"] in cats
        }
    ) or sorted(f["flat_feature_index"] for f in cats.values())
    shown = ", ".join(names[j] or f"column {j}" for j in used)
    raise InputError(
        f"the CatBoost model splits on CTR (target statistics) features of the categorical "
        f"feature(s) {shown}: a CTR's value comes from counts stored in the model, which a forest "
        "cannot represent; retrain with one_hot_max_size at least each feature's number of "
        "categories (one-hot splits import exactly) or encode the categories as numbers"
    )


def _onehot_codes(
    model: Any,
    trees: list[dict],
    floats: dict,
    cats: dict,
    n_features: int,
    names: list[str],
    given: Mapping[Any, Sequence[Any]],
) -> tuple[dict[tuple[int, int], int], dict[int, list]]:
    """The code of each one-hot split ``(feature, hashed value)``, and the categories to store.

    CatBoost keeps only ``CalcCatFeatureHash(text of the category)``. Each candidate category is
    put in a row of its own and the model's ``calc_leaf_indexes`` tells which one-hot splits it
    satisfies: the category of a split is the candidate that sets its bit. Candidates are the
    given training values (coded by position) or else the integers ``0..65535`` (their own
    codes).
    """
    categorical = {f["flat_feature_index"] for f in cats.values()}
    by_name = {name: j for j, name in enumerate(names) if name}
    lists: dict[int, list] = {}
    for key, values in given.items():
        j = by_name.get(key, -1) if isinstance(key, str) else int(key)
        if j not in categorical:
            raise InputError(f"categories given for {key!r}, which is not a categorical feature of the model")
        lists[j] = list(values)
        if len({str(v) for v in lists[j]}) < len(lists[j]):
            raise InputError(f"the categories given for {key!r} repeat a value; give each once")
    wanted = {
        cats[s["cat_feature_index"]]["flat_feature_index"]
        for tree in trees
        for s in tree["splits"]
        if s["split_type"] == "OneHotFeature"
    }
    if not wanted:
        return {}, lists
    candidates = {j: [str(v) for v in lists.get(j, range(_INTEGER_CODES))] for j in wanted}
    n_rows = max(len(c) for c in candidates.values())
    table = np.zeros((n_rows, n_features), dtype=object)
    table[:, sorted(categorical)] = "0"  # CatBoost reads categories as text, floats as numbers
    for j, column in candidates.items():
        table[:, j] = column + column[-1:] * (n_rows - len(column))
    import catboost  # optional, as in from_catboost

    pool = catboost.Pool(table, cat_features=sorted(categorical))
    leaves = np.asarray(model.calc_leaf_indexes(pool), dtype=np.int64)
    codes: dict[tuple[int, int], int] = {}
    for t, tree in enumerate(trees):
        for level, s in enumerate(tree["splits"]):
            if s["split_type"] != "OneHotFeature":
                continue
            j = cats[s["cat_feature_index"]]["flat_feature_index"]
            hits = np.flatnonzero((leaves[: len(candidates[j]), t] >> level) & 1)
            if hits.size != 1:
                raise InputError(_unresolved(names[j] or f"column {j}", j in lists))
            codes[(j, int(s["value"]))] = int(hits[0])
    return codes, lists


def _unresolved(name: str, given: bool) -> str:
    if given:
        return (
            f"a one-hot split of the CatBoost categorical feature {name} tests a value that is "
            "not among the categories given for it; give all its training categories"
        )
    return (
        f"a one-hot split of the CatBoost categorical feature {name} tests a category that is "
        "not an integer in 0..65535 (CatBoost stores only its hash); give the training "
        f"categories: thrifty.forest.importers.from_catboost(model, categories={{{name!r}: [...]}})"
    )


def _add_tree(
    builder: ForestBuilder,
    tree: dict,
    floats: dict,
    cats: dict,
    codes: dict[tuple[int, int], int],
    width: int,
) -> None:
    """Unfold a symmetric tree into a full binary tree, nodes numbered as a heap.

    Node ``i`` at level ``d`` has children ``2i+1`` (bit ``d`` clear) and ``2i+2`` (set); the
    leaf reached along bits ``b_0..b_{D-1}`` is CatBoost's leaf ``sum_d b_d 2^d``.
    """
    splits = tree["splits"]
    depth = len(splits)
    n_internal = (1 << depth) - 1
    n = 2 * n_internal + 1
    feature = np.full(n, -1, dtype=np.int64)
    threshold = np.zeros(n)
    left = np.full(n, -1, dtype=np.int64)
    right = np.full(n, -1, dtype=np.int64)
    missing_left = np.zeros(n, dtype=bool)
    cat_words: dict[int, np.ndarray] = {}
    for level, s in enumerate(splits):
        for i in range((1 << level) - 1, (1 << (level + 1)) - 1):
            clear, set_ = 2 * i + 1, 2 * i + 2
            if s["split_type"] == "FloatFeature":
                f = floats[s["float_feature_index"]]
                feature[i] = f["flat_feature_index"]
                threshold[i] = float(np.float32(s["border"]))
                left[i], right[i] = clear, set_
                missing_left[i] = f.get("nan_value_treatment") != "AsTrue"
            elif s["split_type"] == "OneHotFeature":
                j = cats[s["cat_feature_index"]]["flat_feature_index"]
                feature[i] = j
                cat_words[i] = bitset_words([codes[(j, int(s["value"]))]])
                left[i], right[i] = set_, clear  # the category (bit set) goes left
            else:
                raise InputError(f"unsupported CatBoost split type {s['split_type']!r}")
    leaf_values = np.asarray(tree["leaf_values"], dtype=np.float64).reshape(1 << depth, width)
    # Heap leaf n_internal + p is reached by the bits of p read from the top level down.
    bits = np.arange(1 << depth)
    catboost_leaf = np.zeros(1 << depth, dtype=np.int64)
    for level in range(depth):
        catboost_leaf |= ((bits >> (depth - 1 - level)) & 1) << level
    value = np.zeros((n, width))
    value[n_internal:] = leaf_values[catboost_leaf]
    builder.add_tree(
        feature,
        threshold,
        left,
        right,
        value,
        missing_left=missing_left,
        missing_type=MISSING_NAN,
        cat_words=cat_words,
        weight=1.0,
        tree_class=-1 if width > 1 else 0,
    )
