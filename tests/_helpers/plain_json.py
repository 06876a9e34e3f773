"""Reading JSON as the standard defines it, to check that thrifty's documents are plain JSON."""

from __future__ import annotations

import json
from typing import Any


def _reject(constant: str) -> Any:
    raise ValueError(f"{constant} is not JSON: a document holding it is unreadable outside Python")


def loads_plain_json(text: str) -> Any:
    """``json.loads`` without Python's extensions: ``NaN``, ``Infinity`` and ``-Infinity`` (which
    ``json.dumps`` writes and ``json.loads`` reads by default) raise ``ValueError``."""
    return json.loads(text, parse_constant=_reject)
