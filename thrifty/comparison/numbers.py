"""How a comparison's figures are written: one format per kind of number, never in scientific
notation. Costs to the cent after their unit (``$1,234.50``); errors in the target's units to
three significant digits (``$612``, ``0.000123``); R², NDCG and precision as plain decimals
(``0.712``); accuracy-like proportions as percentages (``78.0%``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

__all__ = [
    "DISPLAY",
    "IN_TARGET_UNITS",
    "PROPORTIONS",
    "cost_unit",
    "decimals",
    "display",
    "money",
    "quantity",
    "shown",
    "target_unit",
    "units",
]

#: Shown as percentages (a share of rows).
PROPORTIONS = ("accuracy", "balanced_accuracy", "auc")
#: Metrics in the target's units (regression's errors).
IN_TARGET_UNITS = ("rmse", "mae", "mse")
#: How a metric's name is written in a sentence or an axis label.
DISPLAY = {"rmse": "RMSE", "mae": "MAE", "mse": "MSE", "r2": "R²", "ndcg@10": "NDCG@10"}
#: Currency symbols written before a number (other units after it, with a space).
_PREFIX = ("$", "€", "£", "¥")


def display(metric: str) -> str:
    """``"RMSE"`` for ``"rmse"``, ``"NDCG@k"`` for ``"ndcg@k"``; other names as they are."""
    metric = str(metric)
    if metric.startswith("ndcg@"):
        return "NDCG@" + metric.partition("@")[2]
    return DISPLAY.get(metric, metric)


def decimals(x: float, significant: int = 3) -> int:
    """Decimals that show ``x`` to ``significant`` digits in fixed notation (none for whole
    figures of ``significant`` digits or more: ``612.3`` -> 0, ``0.000123`` -> 6)."""
    if not math.isfinite(x) or x == 0:
        return 0
    return max(0, significant - 1 - math.floor(math.log10(abs(x))))


def _with_unit(text: str, negative: bool, unit: str | None) -> str:
    sign = "-" if negative else ""
    if not unit:
        return sign + text
    return f"{sign}{unit}{text}" if unit in _PREFIX else f"{sign}{text} {unit}"


def money(x: float, unit: str | None) -> str:
    """A cost in the report's one format: thousands separated, to the cent, after ``unit``
    (``"$1,234.50"``; ``"1,234.50"`` without one); below 0.01 two significant digits
    (``"0.0012"``), so that small prices (seconds, say) do not all read 0.00."""
    if pd.isna(x):
        return "n/a"
    digits = 2 if x == 0 or abs(x) >= 0.01 else decimals(x, 2)
    return _with_unit(f"{abs(x):,.{digits}f}", x < 0, unit)


def quantity(x: float, unit: str | None = None, places: int | None = None) -> str:
    """A figure in the target's units: three significant digits in fixed notation (or
    ``places`` decimals, to write an interval as its figure is), thousands separated, with
    ``unit`` (``"$612"``, ``"$1,441"``, ``"0.000123"``, ``"61.2 kg"``)."""
    if pd.isna(x):
        return "n/a"
    if math.isinf(x):
        return _with_unit("inf", x < 0, unit)
    digits = decimals(x) if places is None else places
    return _with_unit(f"{abs(x):,.{digits}f}", x < 0 and round(abs(x), digits) != 0, unit)


def shown(value: float, metric: str, unit: str | None = None, places: int | None = None) -> str:
    """A metric value in its one format: a percentage for accuracy-like proportions, the
    target's units for an error (:func:`quantity`), three decimals otherwise (R², NDCG,
    precision@k)."""
    if pd.isna(value):
        return "n/a"
    metric = str(metric)
    if metric in PROPORTIONS:
        return f"{value:.1%}"
    if metric in IN_TARGET_UNITS:
        return quantity(value, unit, places)
    return f"{value:,.3f}"


def cost_unit(meta: Mapping[str, Any] | None) -> str | None:
    """The unit :func:`money` writes a dataset's costs in: ``"$"`` when its ``meta`` prices
    them in dollars, else None (plain numbers)."""
    return "$" if "dollar" in str((meta or {}).get("cost_unit", "")).lower() else None


def target_unit(meta: Mapping[str, Any] | None) -> str | None:
    """The unit a dataset's regression errors are written in: ``"$"`` when its ``meta``'s
    ``target_unit`` says dollars, the unit itself when it is short (``"kg"``), else None."""
    given = str((meta or {}).get("target_unit", "") or "")
    if "dollar" in given.lower():
        return "$"
    return given if 0 < len(given) <= 8 else None


def units(meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """What a dataset's ``meta`` says of how to write a comparison of it, as the keyword
    arguments of ``Comparison.summary`` and ``Comparison.write``: ``cost_unit``,
    ``target_unit`` and ``noun`` (what a row is: ``"diamond"``; ``meta["row_noun"]``)."""
    meta = meta or {}
    return {
        "cost_unit": cost_unit(meta),
        "target_unit": target_unit(meta),
        "noun": str(meta.get("row_noun") or "example"),
    }
