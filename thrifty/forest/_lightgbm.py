"""Import of LightGBM boosters and their scikit-learn wrappers into a Forest."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest._forest import MISSING_AS_ZERO, MISSING_NAN, MISSING_ZERO, Forest
from thrifty.forest.builder import ForestBuilder, bitset_words, flatten_tree, unsupported

_MISSING = {"None": MISSING_AS_ZERO, "Zero": MISSING_ZERO, "NaN": MISSING_NAN}
# Objectives whose prediction is the raw score itself.
_IDENTITY = {"regression", "regression_l2", "regression_l1", "huber", "fair", "quantile", "mape"}
_RANKING = {"lambdarank", "rank_xendcg"}
# LightGBM's kZeroThreshold (1e-35f). Its predictor builds sparse rows that drop every value
# with |x| <= this, so such inputs are compared as exactly 0.0.
_ZERO = float(np.float32(1e-35))
# What LightGBM's JSON dump writes for an infinite threshold (``Common::AvoidInf``).
_HUGE = 1e300


def from_lightgbm(model: Any) -> Forest:
    """Convert a LightGBM ``Booster`` or ``LGBMModel`` (classifier/regressor/ranker).

    The trees come from ``Booster.dump_model()``, which prints thresholds and leaf values
    with 17 significant digits, so they parse back to the exact doubles LightGBM compares
    and sums. As in ``predict``, only the first ``best_iteration`` iterations are kept when
    early stopping recorded one. LightGBM folds ``boost_from_average`` into the first tree, so
    the base score is zero.

    Two prediction-time details of LightGBM are reproduced: inputs with ``|x| <= 1e-35`` are
    read as 0.0 (see ``_zero_band``), and categorical splits send NaN and negative codes right.
    For random forests (``boosting="rf"``) the forest's raw score is the *average* of the
    trees, whose sigmoid/softmax is LightGBM's probability; LightGBM's own
    ``raw_score=True`` output is the unaveraged sum.

    Parameters
    ----------
    model : lightgbm.Booster or lightgbm.LGBMModel
        A fitted model.

    Returns
    -------
    Forest

    Raises
    ------
    ValueError
        For linear trees and objectives whose prediction is not the raw score, a sigmoid or
        a softmax of it (poisson/gamma/tweedie, cross_entropy, multiclassova, ``reg_sqrt``,
        ``sigmoid != 1``), custom objectives on classifiers, and pandas categorical columns
        that cannot be matched to features.
    """
    # Not at the top: the importers load this module for every library's model, and
    # converting a scikit-learn or XGBoost model need not load LightGBM (1 s).
    import lightgbm

    classes = None
    if isinstance(model, lightgbm.LGBMModel):
        booster = model.booster_  # raises sklearn's NotFittedError when not fitted
        if isinstance(model, lightgbm.LGBMClassifier):
            classes = np.asarray(model.classes_)
    elif isinstance(model, lightgbm.Booster):
        booster = model
    else:
        raise unsupported(model)
    dump = _dump(booster)
    task, link, n_outputs = _objective(dump, classes is not None)
    n_per_iter = int(dump["num_tree_per_iteration"])
    infos = dump["tree_info"]
    n_iter = max(1, len(infos) // n_per_iter)
    weight = 1.0 / n_iter if dump.get("average_output") else 1.0

    builder = ForestBuilder()
    for t, info in enumerate(infos):
        _add_tree(builder, info["tree_structure"], weight, t % n_per_iter if n_outputs > 1 else 0)
    # The Booster's own list: the dump's JSON mangles backslashes in names.
    names = list(booster.feature_name())
    n_features = int(dump["max_feature_idx"]) + 1
    return builder.build(
        base_score=np.zeros(n_outputs),
        n_features=n_features,
        link=link,
        task=task,
        classes=classes,
        feature_names=names if len(names) == n_features else None,
        categories=_pandas_categories(booster, dump),
        input_dtype="float64",
        aggregation="mean" if dump.get("average_output") else "sum",
        source="lightgbm",
    )


def _dump(booster: Any) -> dict:
    """``booster.dump_model()``, also for feature names LightGBM writes into invalid JSON.

    The dump embeds the names unescaped, so a name holding a control character (a tab) makes
    it unreadable; the dump of a copy with placeholder names then gives the same trees.
    ``dump_model()`` defaults to ``best_iteration``, exactly as ``predict()`` does.
    """
    import lightgbm  # as in from_lightgbm

    try:
        return booster.dump_model()
    except json.JSONDecodeError:
        lines = booster.model_to_string().splitlines()
        at = next(i for i, line in enumerate(lines) if line.startswith("feature_names="))
        n = len(booster.feature_name())
        lines[at] = "feature_names=" + " ".join(f"Column_{i}" for i in range(n))
        copy = lightgbm.Booster(model_str="\n".join(lines) + "\n")
        best = booster.best_iteration
        return copy.dump_model(num_iteration=best if best > 0 else None)


def _objective(dump: dict, is_classifier: bool) -> tuple[str, str, int]:
    """``(task, link, n_outputs)`` of the dumped objective string, or ValueError."""
    text = dump.get("objective")
    num_class = int(dump["num_class"])
    if text is None:  # a custom (Python) objective: LightGBM returns raw scores
        if is_classifier or num_class > 1:
            raise InputError(
                "LightGBM classifier with a custom objective: its probabilities "
                "are not defined, only raw scores; unsupported"
            )
        return "regression", "identity", 1
    name, *params = text.split()
    options = dict(p.split(":", 1) for p in params if ":" in p)
    flags = {p for p in params if ":" not in p}
    if name == "binary":
        if float(options.get("sigmoid", 1)) != 1.0:
            raise InputError(
                f"LightGBM objective 'binary' with sigmoid={options['sigmoid']} "
                "is unsupported (only sigmoid=1 maps to a plain sigmoid link)"
            )
        return "binary", "sigmoid", 1
    if name in ("multiclass", "softmax"):
        return "multiclass", "softmax", num_class
    if name in _IDENTITY and not flags:
        return "regression", "identity", 1
    if name in _RANKING:
        return "ranking", "identity", 1
    if name in _IDENTITY:  # e.g. "regression sqrt": prediction is sign(raw) * raw**2
        raise InputError(
            f"LightGBM objective {text!r} (reg_sqrt) is unsupported: its prediction is not the raw score"
        )
    raise InputError(
        f"LightGBM objective {name!r} is unsupported: its prediction applies a "
        "link (exp, sigmoid of a regression, one-vs-all sigmoid) the forest has not; "
        "supported are binary, multiclass, regression-type and ranking objectives"
    )


def _add_tree(builder: ForestBuilder, root: dict, weight: float, tree_class: int) -> None:
    nodes, left, right = flatten_tree(
        root, lambda n: (n["left_child"], n["right_child"]) if "split_index" in n else None
    )
    n = len(nodes)
    feature = np.full(n, -1, dtype=np.int64)
    threshold = np.zeros(n)
    value = np.zeros(n)
    missing_left = np.zeros(n, dtype=bool)
    missing_type = np.full(n, MISSING_NAN, dtype=np.int8)
    cat_words: dict[int, np.ndarray] = {}
    for i, node in enumerate(nodes):
        if "split_index" not in node:
            if "leaf_coeff" in node:
                raise InputError(
                    "LightGBM linear trees (linear_tree=True) are unsupported: "
                    "their leaves are linear models, not constants"
                )
            value[i] = float(node["leaf_value"])
            continue
        feature[i] = int(node["split_feature"])
        if node["decision_type"] == "==":
            # The listed categories go left; LightGBM sends NaN and negative codes right.
            cat_words[i] = bitset_words(int(c) for c in str(node["threshold"]).split("||"))
        elif node["decision_type"] == "<=":
            threshold[i] = _infinite(_zero_band(float(node["threshold"])))
            missing_left[i] = bool(node["default_left"])
            missing_type[i] = _MISSING[node["missing_type"]]
        else:
            raise InputError(f"unknown LightGBM decision type {node['decision_type']!r}")
    builder.add_tree(
        feature,
        threshold,
        left,
        right,
        value,
        missing_left=missing_left,
        missing_type=missing_type,
        cat_words=cat_words,
        weight=weight,
        tree_class=tree_class,
    )


def _zero_band(t: float) -> float:
    """A threshold that sends every input of the band ``|x| <= 1e-35f`` the way 0.0 goes.

    LightGBM reads such inputs as 0.0; only thresholds inside the band can tell them from
    zero, and moving them to the band's edge makes the band follow 0.0 while leaving every
    input outside the band on the same side.
    """
    if -_ZERO <= t < 0.0:
        return float(np.nextafter(-_ZERO, -np.inf))
    if 0.0 <= t < _ZERO:
        return _ZERO
    return t


def _infinite(t: float) -> float:
    """``±inf`` for the thresholds LightGBM's JSON dump writes as ``±1e300``.

    A split whose bin bound is infinite (it separates the missing values from every number)
    holds a threshold of ``+inf`` in the model (``model_to_string`` shows it), but JSON has no
    infinity and ``dump_model`` writes ``1e300`` instead. Compared with ``1e300``, infinity and
    ``1e301`` would go right where LightGBM sends them left.
    """
    return float(np.copysign(np.inf, t)) if abs(t) == _HUGE else t


def _pandas_categories(booster: Any, dump: dict) -> dict[int, list]:
    """Feature index -> training categories of the pandas ``category`` columns.

    LightGBM codes every ``category`` column of a DataFrame by its training categories, in
    column order, and stores only the lists (``pandas_categorical``). The columns are the
    categorical features recorded in the model's parameters; when their count differs (ordered
    categoricals, or an explicit ``categorical_feature`` mixing in integer columns) the match
    is ambiguous and we refuse rather than code the wrong column.
    """
    lists = dump.get("pandas_categorical") or []
    if not lists:
        return {}
    found = re.search(r"^\[categorical_feature: ([^\]]*)\]$", booster.model_to_string(), re.MULTILINE)
    tokens = found.group(1).replace(" ", "").split(",") if found and found.group(1) else []
    if all(tok.lstrip("-").isdigit() for tok in tokens) and tokens:
        indices = sorted(int(tok) for tok in tokens)
    else:  # names: fall back on the features whose info lists category values
        names = list(dump["feature_names"])
        indices = [names.index(f) for f, info in dump["feature_infos"].items() if info.get("values")]
    if len(indices) != len(lists):
        raise InputError(
            f"cannot match LightGBM's {len(lists)} pandas categorical column(s) to its "
            f"{len(indices)} categorical feature(s) {indices}; train with unordered pandas "
            "'category' columns only, or with integer-coded categories"
        )
    return {j: list(cats) for j, cats in zip(indices, lists)}
