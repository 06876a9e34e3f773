"""Versioned JSON serialization of forests (no pickle: a saved model is data, not code)."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.forest._forest import _ARRAYS, NODE_ARRAYS, Forest

FORMAT = "thrifty.forest"
# Version 2 adds ``base_last`` and ``scale`` (a forest that adds its base after the trees, as
# CatBoost); a version-1 document has neither and loads as it always did (base first, scale 1).
VERSION = 2
# The arrays saved are the Forest's own (`_ARRAYS`), in the dtypes it holds them in.


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """Exact, compact encoding of an array: little-endian bytes in base64 with dtype and shape."""
    a = np.ascontiguousarray(a)
    return {
        "dtype": a.dtype.newbyteorder("<").str,
        "shape": list(a.shape),
        "data": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes()).decode("ascii"),
    }


def decode_array(d: dict[str, Any]) -> np.ndarray:
    raw = base64.b64decode(d["data"])
    return np.frombuffer(raw, dtype=np.dtype(d["dtype"])).reshape(d["shape"]).copy()


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


def forest_to_dict(forest: Forest) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "n_features": forest.n_features,
        "link": forest.link,
        "task": forest.task,
        "classes": None if forest.classes is None else [_plain(c) for c in forest.classes.tolist()],
        "feature_names": forest.feature_names,
        "categories": {str(k): [_plain(c) for c in v] for k, v in forest.categories.items()},
        "input_dtype": forest.input_dtype,
        "accumulate": forest.accumulate,
        "aggregation": forest.aggregation,
        "source": forest.source,
        "base_last": forest.base_last,
        "scale": forest.scale,
        "arrays": {name: encode_array(getattr(forest, name)) for name in _ARRAYS},
    }


def forest_from_dict(d: dict[str, Any]) -> Forest:
    """The Forest of a document written by :func:`forest_to_dict`; ValueError if malformed."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        got = d.get("format") if isinstance(d, dict) else type(d).__name__
        raise InputError(f"not a thrifty forest document (format={got!r})")
    version = d.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise InputError(f"forest document version must be an integer, got {version!r}")
    if version > VERSION:
        raise InputError(
            f"forest document version {version} is newer than this thrifty "
            f"understands ({VERSION}); upgrade thrifty"
        )
    missing = [k for k in ("n_features", "link", "task", "arrays") if k not in d]
    if not missing and isinstance(d["arrays"], dict):
        missing = [f"arrays.{k}" for k in _ARRAYS if k not in d["arrays"]]
    if missing:
        raise InputError(f"forest document lacks {', '.join(missing)}")
    try:
        arrays: dict[str, np.ndarray] = {
            name: decode_array(d["arrays"][name]).astype(dtype) for name, dtype in _ARRAYS.items()
        }
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"forest document has a malformed array: {exc}") from exc
    _check_values(arrays)
    return Forest(
        **arrays,
        n_features=d["n_features"],
        link=d["link"],
        task=d["task"],
        classes=None if d.get("classes") is None else np.asarray(d["classes"]),
        feature_names=d.get("feature_names"),
        categories={int(k): v for k, v in (d.get("categories") or {}).items()},
        input_dtype=d.get("input_dtype", "float64"),
        accumulate=d.get("accumulate", "float64"),
        aggregation=d.get("aggregation", "sum"),
        source=d.get("source", ""),
        base_last=_flag(d.get("base_last", False)),
        scale=_number(d.get("scale", 1.0)),
    )


def _flag(v: Any) -> bool:
    if not isinstance(v, bool):
        raise InputError(f"forest document's base_last must be true or false, got {v!r}")
    return v


def _number(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
        raise InputError(f"forest document's scale must be a finite number, got {v!r}")
    return float(v)


def _check_values(a: dict[str, np.ndarray]) -> None:
    """ValueError naming the first node (and its tree) whose stored numbers cannot be right.

    A NaN threshold sends every example right, a NaN or infinite leaf value poisons every
    score, and a category set outside the bitsets reads other nodes' memory; none can come
    from a fitted model, so a document holding one was damaged or hand-edited.
    """
    n = a["feature"].shape[0]
    if any(a[k].shape[:1] != (n,) for k in NODE_ARRAYS):
        return  # Forest's own shape checks name the array
    internal = a["feature"] >= 0
    numerical = internal & (a["cat_start"] < 0)
    categorical = internal & (a["cat_start"] >= 0)
    leaf_bad = ~internal & ~np.isfinite(a["value"].reshape(n, -1)).all(axis=1)
    end = a["cat_start"].astype(np.int64) + a["cat_size"]
    problems = [
        (numerical & np.isnan(a["threshold"]), "has a NaN threshold"),
        (leaf_bad, "has a NaN or infinite leaf value"),
        (internal & ~np.isin(a["missing_type"], (0, 1, 2)), "has an unknown missing_type"),
        (
            categorical & ((a["cat_size"] < 1) | (end > a["cat_bitsets"].shape[0])),
            "has a category set outside cat_bitsets",
        ),
    ]
    for bad, what in problems:
        if bad.any():
            node = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"forest document is invalid: node {node} ({_tree_of(a['roots'], node)}) "
                f"{what}; re-save the model from its source"
            )
    for name in ("tree_weight", "base_score"):
        if not np.isfinite(a[name]).all():
            raise InputError(
                f"forest document is invalid: {name} holds NaN or infinity; re-save the model from its source"
            )


def _tree_of(roots: np.ndarray, node: int) -> str:
    """The tree holding ``node``, assuming trees are stored contiguously from their roots."""
    before = np.flatnonzero(roots <= node)
    return f"tree {int(before[np.argmax(roots[before])])}" if before.size else "no tree"


def forest_to_json(forest: Forest) -> str:
    return json.dumps(forest_to_dict(forest))


def forest_from_json(text: str) -> Forest:
    return forest_from_dict(json.loads(text))
