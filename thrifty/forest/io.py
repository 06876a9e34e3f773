"""Versioned JSON serialization of forests (no pickle: a saved model is data, not code)."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from thrifty.forest._forest import Forest

FORMAT = "thrifty.forest"
VERSION = 1

_ARRAYS = {
    "feature": np.int32, "threshold": np.float64, "children_left": np.int32,
    "children_right": np.int32, "missing_left": np.bool_, "missing_type": np.int8,
    "cat_start": np.int32, "cat_size": np.int32, "cat_bitsets": np.uint32, "value": np.float64,
    "roots": np.int32, "tree_weight": np.float64, "tree_class": np.int32,
    "base_score": np.float64,
}


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """Exact, compact encoding of an array: little-endian bytes in base64 with dtype and shape."""
    a = np.ascontiguousarray(a)
    return {"dtype": a.dtype.newbyteorder("<").str, "shape": list(a.shape),
            "data": base64.b64encode(a.astype(a.dtype.newbyteorder("<")).tobytes()).decode("ascii")}


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
        "arrays": {name: encode_array(getattr(forest, name)) for name in _ARRAYS},
    }


def forest_from_dict(d: dict[str, Any]) -> Forest:
    """The Forest of a document written by :func:`forest_to_dict`; ValueError if malformed."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        got = d.get("format") if isinstance(d, dict) else type(d).__name__
        raise ValueError(f"not a thrifty forest document (format={got!r})")
    version = d.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ValueError(f"forest document version must be an integer, got {version!r}")
    if version > VERSION:
        raise ValueError(f"forest document version {version} is newer than this thrifty "
                         f"understands ({VERSION}); upgrade thrifty")
    missing = [k for k in ("n_features", "link", "task", "arrays") if k not in d]
    if not missing and isinstance(d["arrays"], dict):
        missing = [f"arrays.{k}" for k in _ARRAYS if k not in d["arrays"]]
    if missing:
        raise ValueError(f"forest document lacks {', '.join(missing)}")
    try:
        arrays = {name: decode_array(d["arrays"][name]).astype(dtype) for name, dtype in _ARRAYS.items()}
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"forest document has a malformed array: {exc}") from exc
    return Forest(**arrays, n_features=d["n_features"], link=d["link"], task=d["task"],
                  classes=None if d.get("classes") is None else np.asarray(d["classes"]),
                  feature_names=d.get("feature_names"),
                  categories={int(k): v for k, v in (d.get("categories") or {}).items()},
                  input_dtype=d.get("input_dtype", "float64"),
                  accumulate=d.get("accumulate", "float64"),
                  aggregation=d.get("aggregation", "sum"), source=d.get("source", ""))


def forest_to_json(forest: Forest) -> str:
    return json.dumps(forest_to_dict(forest))


def forest_from_json(text: str) -> Forest:
    return forest_from_dict(json.loads(text))
