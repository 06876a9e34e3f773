"""What every feature provider shares: keys per row, the store's name of each feature."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from thrifty.exceptions import InputError
from thrifty.runtime.plans import as_plan


def missing_extra(package: str, extra: str) -> ImportError:
    """The error raised when an optional dependency is not installed."""
    return ImportError(f"{package} is not installed; install it with: pip install 'thrifty[{extra}]'")


def feature_columns(columns: Sequence[str] | None, model: Any) -> list[str]:
    """The store's column (or feature-service name) of each model feature, in model order."""
    if columns is not None:
        return [str(c) for c in columns]
    if model is None:
        raise InputError(
            "give columns=[...] (the store's name of each model feature, in model order) "
            "or model= (a model whose feature names are the store's column names)"
        )

    names = as_plan(model).feature_names
    if names is None:
        raise InputError(
            "the model has no feature names; give columns=[...] (the store's name of "
            "each model feature, in model order)"
        )
    return list(names)


def as_keys(keys: Any) -> np.ndarray:
    """Keys of the rows, position ``i`` for row ``i`` (any values JSON and SQL can carry)."""
    out = np.asarray(keys, dtype=object).reshape(-1)
    if any(k is None for k in out):
        raise InputError("keys must not contain None; every row needs the key of its record")
    return out


def plain_key(key: Any) -> Any:
    """A key as a plain Python value (drivers and JSON reject numpy scalars)."""
    return key.item() if isinstance(key, np.generic) else key
