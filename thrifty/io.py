"""Saving and loading forests and plans as versioned JSON files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.io import forest_from_dict
from thrifty.runtime.plans import Plan, as_plan, plan_from_dict


def save(model: Any, path: str | Path) -> Path:
    """Write a Forest, a plan, a fitted thrifty estimator or an importable model as JSON."""
    path = Path(path)
    obj = model if isinstance(model, (Forest, Plan)) else as_plan(model)
    path.write_text(obj.to_json())
    return path


def load(path: str | Path) -> Forest | Plan:
    """Read a Forest or plan written by :func:`save` (or ``to_json``)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model file {str(path)!r} does not exist")
    try:
        d = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{str(path)!r} is not a thrifty JSON model: {exc}") from exc
    if not isinstance(d, dict):
        raise InputError(f"{str(path)!r} is not a thrifty JSON model")
    if d.get("format") == "thrifty.forest":
        return forest_from_dict(d)
    try:
        return plan_from_dict(d)
    except (KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{str(path)!r} is a malformed thrifty plan document: {exc!r}") from exc
