"""Feature names as users write them, and as LightGBM stores them.

LightGBM (4.x, ``Dataset::set_feature_names``) replaces every space of a feature name by an
underscore (``"blood pressure"`` is stored as ``"blood_pressure"``) and refuses names holding
one of the JSON characters ``" , : [ ] { }``; a LightGBM model (Booster or scikit-learn
wrapper, whose ``feature_names_in_`` is the Booster's) keeps only the stored form. XGBoost and
scikit-learn keep names exactly (XGBoost refuses ``[``, ``]`` and ``<``). The helpers here
check names, give LightGBM names it accepts, and match a model's stored names back to the
names users wrote.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from thrifty.exceptions import InputError

# Characters LightGBM refuses in a feature name (Common::CheckAllowedJSON), and "=", which its
# parser may cut away ("a=" is stored as "a", a name "=" fails).
_LIGHTGBM_REFUSED = frozenset('",:[]{}=')


def is_dataframe(X: Any) -> bool:
    """True for a pandas DataFrame (or one alike: columns and ``iloc``)."""
    return hasattr(X, "columns") and hasattr(X, "iloc")


def duplicates(names: Sequence[str]) -> list[str]:
    """The names that occur more than once, in order of first occurrence."""
    counts = Counter(names)
    return [n for n in dict.fromkeys(names) if counts[n] > 1]


def check_unique(names: Sequence[str], what: str = "X") -> None:
    """ValueError naming the duplicated names, if any."""
    dup = duplicates(list(names))
    if dup:
        raise InputError(f"{what} has duplicate name(s) {dup[:10]}; give every column a unique name")


def lightgbm_name(name: str) -> str:
    """The name LightGBM stores for a feature called ``name`` (spaces become underscores)."""
    return str(name).replace(" ", "_")


def is_generic(names: Sequence[str]) -> bool:
    """True for LightGBM's placeholder names (Column_0, ...) given to unnamed training data."""
    return all(n.startswith("Column_") and n[7:].isdigit() for n in names)


def lightgbm_frame(X: Any) -> Any:
    """``X`` with column names LightGBM accepts and stores unchanged up to spaces.

    A DataFrame whose names LightGBM would refuse or alter beyond spaces (empty names, JSON
    characters, ``=``, control characters, names that collide once spaces become underscores)
    gets LightGBM's placeholder names ``Column_0, ...``, which :func:`restore_names` accepts for
    any names; anything else is returned as is.
    """
    if not is_dataframe(X):
        return X
    names = [str(c) for c in X.columns]
    stored = [lightgbm_name(n) for n in names]
    refused = any(not n or any(ch in _LIGHTGBM_REFUSED or not ch.isprintable() for ch in n) for n in names)
    if refused or duplicates(stored):
        return X.set_axis([f"Column_{i}" for i in range(len(names))], axis=1)
    return X


def align(model_names: Sequence[str], names: Sequence[str]) -> list[int] | None:
    """Position in ``names`` of each of ``model_names``, or None when one is not found.

    A model name matches the same name, else the one name of ``names`` that LightGBM stores as
    it (``"blood_pressure"`` matches ``"blood pressure"``); a stored name that several user
    names share is not matched.
    """
    where = {n: i for i, n in enumerate(names)}
    stored: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        stored.setdefault(lightgbm_name(n), []).append(i)
    out = []
    for n in model_names:
        if n in where:
            out.append(where[n])
        elif len(stored.get(n, ())) == 1:
            out.append(stored[n][0])
        else:
            return None
    return out


def restore_names(stored: Sequence[str] | None, names: Sequence[Any], n_features: int) -> list[str]:
    """The user's ``names`` for a model whose library stored ``stored``; ValueError if they differ.

    ``names`` must hold one unique name per feature, each equal to the stored name or to the
    name LightGBM stores it as; placeholder names (``Column_0``, ...) and models without names
    accept any names.
    """
    names = [str(n) for n in names]
    if len(names) != n_features:
        raise InputError(
            f"feature_names has {len(names)} names but the model has {n_features} "
            "features; give one name per feature, in column order"
        )
    check_unique(names, "feature_names")
    if stored is None or is_generic(stored):
        return names
    for i, (s, n) in enumerate(zip(stored, names)):
        if s not in (n, lightgbm_name(n)):
            raise InputError(
                f"feature_names[{i}] is {n!r} but the model's feature {i} is {s!r}; "
                "give the names of the columns the model was trained on, in order"
            )
    return names


def named_as(forest: Any, X: Any) -> Any:
    """``forest`` under the names ``X``'s columns give its features, when ``X`` is a DataFrame
    whose columns a LightGBM model stored differently (``blood pressure`` as ``blood_pressure``).
    """
    if forest.feature_names is None or not is_dataframe(X):
        return forest
    columns = [str(c) for c in X.columns]
    order = align(forest.feature_names, columns)
    if order is None:
        return forest
    names = [columns[j] for j in order]
    return forest if names == forest.feature_names else replace(forest, feature_names=names)
