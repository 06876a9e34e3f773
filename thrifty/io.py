"""Saving and loading forests and plans as versioned JSON files that carry a checksum of their content."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from thrifty.cascade.early_exit import EARLY_EXIT_FORMAT, EarlyExitRanker
from thrifty.exceptions import InputError
from thrifty.forest import Forest
from thrifty.forest.io import forest_from_dict
from thrifty.runtime.plans import Plan, as_plan, check_classes, plan_from_dict

# The member of a saved document holding the checksum of the rest.
CHECKSUM = "checksum"
# The first byte of a pickle of protocol 2 or later (what pickle.dump and joblib write).
_PICKLE = b"\x80"


def save(model: Any, path: str | Path) -> Path:
    """Write a Forest, a plan, a fitted thrifty estimator or an importable model as JSON.

    The document carries ``"checksum": "sha256:<hex>"`` of its content (see
    :func:`content_checksum`), which :func:`load` verifies.
    """
    path = Path(path)
    obj = model if isinstance(model, (Forest, Plan, EarlyExitRanker)) else as_plan(model)
    # The checksum covers the document as load will parse it back.
    document = json.loads(obj.to_json())
    document[CHECKSUM] = content_checksum(document)
    path.write_text(json.dumps(document))
    return path


def load(path: str | Path, *, verify: bool = True) -> Forest | Plan | EarlyExitRanker:
    """Read a Forest or plan written by :func:`save` (or ``to_json``).

    Parameters
    ----------
    path : str or Path
        The JSON file. It is parsed as JSON only: a pickle renamed as a model is refused, never
        unpickled.
    verify : bool, default=True
        Check the document's checksum against its content: a file changed since it was saved
        (a damaged disk or copy, an edit) is refused. ``verify=False`` accepts a deliberate
        edit; save the model again to record a new checksum. Documents without a checksum
        (saved by earlier versions of thrifty, or written with ``to_json``) load either way.

    Returns
    -------
    Forest, Plan, or EarlyExitRanker (a ranker with per-query early exits)

    Raises
    ------
    InputError
        When the file is not a thrifty JSON model, was changed since it was saved, or describes
        a model that cannot be evaluated (for instance fewer classes than its outputs).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model file {str(path)!r} does not exist")
    data = path.read_bytes()
    if data.startswith(_PICKLE):
        raise InputError(
            f"{str(path)!r} is a pickle, not a thrifty JSON model; thrifty never unpickles a file "
            "(unpickling runs code from it): save the model with thrifty.save"
        )
    try:
        d = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise InputError(f"{str(path)!r} is not a thrifty JSON model ({reason})") from None
    if not isinstance(d, dict):
        raise InputError(f"{str(path)!r} is not a thrifty JSON model")
    recorded = d.pop(CHECKSUM, None)
    if verify and recorded is not None and recorded != content_checksum(d):
        raise InputError(
            f"{str(path)!r} was changed since it was saved (its checksum does not match its "
            "content); if the change was deliberate, load it with thrifty.load(path, "
            "verify=False) (on the command line: --accept-edited) and save it again"
        )
    model = _model(d, path)
    if not isinstance(model, EarlyExitRanker):  # a ranker lists no classes
        _check_classes(model, path)
    return model


def content_checksum(document: dict[str, Any]) -> str:
    """``"sha256:<hex>"`` of a saved document less its ``checksum`` member.

    The digest is of the canonical JSON text (Python's ``json.dumps`` with ``sort_keys=True``,
    ``separators=(",", ":")`` and ASCII escapes), so it depends on the document's content, not
    on its spacing or the order of its members.
    """
    body = {k: v for k, v in document.items() if k != CHECKSUM}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def _model(d: dict[str, Any], path: Path) -> Forest | Plan | EarlyExitRanker:
    """The model a parsed document describes; InputError for one that describes none."""
    try:
        if d.get("format") == "thrifty.forest":
            return forest_from_dict(d)
        if d.get("format") == EARLY_EXIT_FORMAT:
            return EarlyExitRanker.from_dict(d)
        return plan_from_dict(d)
    except InputError:
        raise
    except (LookupError, TypeError, AttributeError, ArithmeticError, ValueError, RecursionError) as exc:
        raise InputError(f"{str(path)!r} is a malformed thrifty model document: {exc!r:.200}") from None


def _check_classes(model: Forest | Plan, path: Path) -> None:
    """``check_classes``, naming the file."""
    try:
        check_classes(as_plan(model))
    except InputError as exc:
        raise InputError(f"{str(path)!r}: {exc}") from None
