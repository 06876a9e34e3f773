"""Reading a fitted model from a file, whatever library wrote it: one loader for every command
that takes a model file (``thrifty compare --model``, ``thrifty evaluate``, ``thrifty info``).

The form is told by the file's content where it can be (a LightGBM text model, JSON, a pickle)
and by its name otherwise (``.cbm``, ``.ubj``, ``.onnx``, a YDF model directory). Each library
is imported only when its form is found, so a user without CatBoost can still load the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from thrifty.exceptions import InputError, UnsupportedModelError

__all__ = ["FORMS", "load_model", "model_form"]

#: The forms :func:`load_model` reads, as its error messages list them.
FORMS = (
    "a thrifty JSON model or plan (thrifty.save)",
    "a LightGBM text model (Booster.save_model, .txt)",
    "an XGBoost model (save_model as .json or .ubj)",
    "a CatBoost model (.cbm; needs catboost)",
    "a YDF model directory (ydf model.save; needs ydf)",
    "an ONNX tree ensemble (.onnx; needs onnx)",
    "a pickled or joblib model (.pkl, .joblib; only with trust_pickle=True / --trust-pickle)",
)
#: The first bytes of a LightGBM text model (Booster.save_model), on any platform's line ends.
_LIGHTGBM = (b"tree\nversion=", b"tree\r\nversion=")
#: The first byte of a pickle of protocol 2 or later (pickle.dump and joblib.dump write it).
_PICKLE = b"\x80"
#: CatBoost's binary models open with this signature.
_CATBOOST = b"CBM1"


def model_form(path: str | Path) -> str:
    """The form of the model file ``path``: ``"thrifty"``, ``"lightgbm"``, ``"xgboost"``,
    ``"catboost"``, ``"ydf"``, ``"onnx"`` or ``"pickle"``.

    Raises
    ------
    FileNotFoundError
        When ``path`` does not exist.
    InputError
        When the file is none of the forms of :data:`FORMS` (the message lists them).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model file {str(path)!r} does not exist")
    if path.is_dir():
        # YDF saves a model as a directory holding its header and data specification.
        if (path / "header.pb").exists() or (path / "data_spec.pb").exists():
            return "ydf"
        raise _unknown(path, "a directory that is not a YDF model (no header.pb)")
    suffix = path.suffix.lower()
    with path.open("rb") as f:
        head = f.read(64)
    if head.startswith(_LIGHTGBM):
        return "lightgbm"
    if head.startswith(_CATBOOST) or suffix == ".cbm":
        return "catboost"
    if suffix == ".onnx":
        return "onnx"
    if suffix == ".ubj":
        return "xgboost"
    if head.startswith(_PICKLE) or suffix in (".pkl", ".pickle", ".joblib"):
        return "pickle"
    if head.lstrip().startswith(b"{"):
        # Both thrifty's documents and XGBoost's JSON models are JSON objects: XGBoost's
        # holds a "learner", thrifty's a "format" or a plan's "kind".
        try:
            document = json.loads(path.read_bytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            raise _unknown(path, "not valid JSON") from None
        if isinstance(document, dict) and "learner" in document:
            return "xgboost"
        return "thrifty"
    raise _unknown(path, "an unknown form")


def load_model(path: str | Path, *, trust_pickle: bool = False, verify: bool = True) -> Any:
    """Read a fitted tree model from a file, as a :class:`~thrifty.forest.Forest` (or the
    thrifty plan a plan file holds).

    Parameters
    ----------
    path : str or Path
        A file (or YDF model directory) of one of the forms of :data:`FORMS`; see
        :func:`model_form` for how the form is told.
    trust_pickle : bool, default=False
        Unpickling runs code the file chooses, so a pickled model (``.pkl``/``.joblib``,
        e.g. a scikit-learn forest saved with ``joblib.dump``) is refused unless you say the
        file is your own (or as trusted as code you would run). Prefer a form that is data:
        the library's own model file, or ``thrifty.save`` of the imported forest.
    verify : bool, default=True
        For thrifty's own files: check their checksum (see :func:`thrifty.load`).

    Returns
    -------
    Forest or Plan
        The imported forest (``Forest.from_model`` of the library's model), or a thrifty file's
        forest or plan.

    Raises
    ------
    InputError
        An unknown form (the message lists the supported ones); a pickle without
        ``trust_pickle``; a file its library cannot read; a library that is not installed;
        a model the importers cannot represent.
    """
    from thrifty.forest import Forest

    path = Path(path)
    form = model_form(path)
    if form == "thrifty":
        from thrifty.io import load

        return load(path, verify=verify)
    if form == "pickle" and not trust_pickle:
        raise InputError(
            f"{str(path)!r} is a pickle: loading it runs code the file chooses, so thrifty does not "
            "unless you trust it: pass trust_pickle=True (--trust-pickle) for a file you made, or "
            "save the model in its library's own format (or with thrifty.save)"
        )
    try:
        model = _read(form, path)
    except (ImportError, InputError, UnsupportedModelError):
        raise
    except Exception as exc:  # the library's own reader failed: a damaged or foreign file
        raise InputError(f"{str(path)!r} could not be read as a {form} model ({exc!s:.200})") from None
    try:
        return Forest.from_model(model)
    except UnsupportedModelError:
        raise InputError(
            f"{str(path)!r} holds a {type(model).__module__}.{type(model).__name__}, which is not "
            "a tree model thrifty imports (LightGBM, XGBoost, CatBoost, YDF, ONNX, scikit-learn trees)"
        ) from None


def _read(form: str, path: Path) -> Any:
    """The library's own model object read from ``path`` (the library imported only now)."""
    if form == "lightgbm":
        import lightgbm

        return lightgbm.Booster(model_file=str(path))
    if form == "xgboost":
        xgboost = _library("xgboost", "pip install xgboost")
        booster = xgboost.Booster()
        booster.load_model(str(path))
        return booster
    if form == "catboost":
        catboost = _library("catboost", "pip install 'thrifty[catboost]'")
        return catboost.CatBoost().load_model(str(path))
    if form == "ydf":
        ydf = _library("ydf", "pip install 'thrifty[ydf]'")
        return ydf.load_model(str(path))
    if form == "onnx":
        onnx = _library("onnx", "pip install 'thrifty[onnx]'")
        return onnx.load(str(path))
    import joblib  # reads plain pickles too

    return joblib.load(path)


def _library(name: str, install: str) -> Any:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        raise InputError(f"reading a {name} model needs the {name} package: {install}") from None


def _unknown(path: Path, what: str) -> InputError:
    return InputError(
        f"{str(path)!r} is {what}, not a model file thrifty reads; give one of: " + "; ".join(FORMS)
    )
