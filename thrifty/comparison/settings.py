"""The settings of one :func:`thrifty.compare` run, one record from the caller to each method,
and the checks of the settings a user gives (for the ``thrifty compare`` command too)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.exceptions import InputError

__all__ = ["Settings", "check_budgets", "check_n_jobs", "check_time_limit"]


@dataclass(frozen=True)
class Settings:
    """What every method of one :func:`thrifty.compare` run is fitted with, whatever its rows.

    :func:`thrifty.compare` builds it once; each fit task carries it (plain data, so it travels
    to worker processes) and each method reads it through its :class:`~thrifty.comparison.Context`.

    Attributes
    ----------
    task : {"binary", "multiclass", "ranking", "regression"}
    costs : CostModel
    budgets : tuple of float
        Mean costs per example the budgeted methods aim at, increasing. Empty until priced:
        the default budgets are fractions of the plain model's cost, which the final fit's
        context measures first.
    lightgbm_params : mapping
        Parameters of the plain LightGBM model (post-hoc methods start from it).
    n_jobs : int
        Threads per fit (LightGBM, the random forests, the CEGB searches). ``thrifty.compare``
        sets 1: its fit tasks run side by side in worker processes instead, and the result
        must not depend on how many.
    random_state : int
    quick : bool
        Fewer points per method.
    plain_model : Forest, optional
        The user's own model (``compare(model=...)``), reading the data's columns: the plain
        model in place of a LightGBM fit, and the random forest BudgetPrune prunes when it is
        an averaging forest (see ``thrifty.comparison.user_model``).
    split : str
        How rows are held out (``thrifty.comparison.splits``): ``"random"``, ``"ordered"``
        or ``"time=COLUMN[,COLUMN...]"``; under a time split every method's calibration rows
        are the latest of its fitting rows.
    """

    task: str
    costs: CostModel
    budgets: tuple[float, ...] = ()
    lightgbm_params: Mapping[str, Any] = field(default_factory=dict)
    n_jobs: int = 1
    random_state: int = 0
    quick: bool = False
    plain_model: Any = None
    split: str = "random"


def check_budgets(budgets: Sequence[float], *, option: str | None = None) -> list[float]:
    """``budgets`` in increasing order, once each is known to be a positive mean cost per example.

    Parameters
    ----------
    budgets : sequence of float
    option : str, optional
        The command-line option and the text it was given (``"--budgets '5,0'"``): the error
        then quotes it and names the first value at fault, in the command line's terms.

    Returns
    -------
    list of float

    Raises
    ------
    InputError
        When there is no budget, or one is not a positive finite number.
    """
    values = [float(b) for b in budgets]
    bad = [b for b in values if not (np.isfinite(b) and b > 0)]
    if bad and option is not None:
        raise InputError(
            f"{option}: {bad[0]:g} is not a positive cost; give positive mean costs per example, "
            "e.g. --budgets 5,10,20 (or leave --budgets out)"
        )
    if bad or not values:
        raise InputError(
            f"budgets must be positive mean costs per example, got {list(budgets)}; "
            "e.g. budgets=[5, 10, 20] (or leave them out for fractions of the "
            "plain model's cost)"
        )
    return sorted(values)


def check_n_jobs(n_jobs: int | None) -> int:
    """How many worker processes ``n_jobs`` asks for: None or -1 is every core.

    Raises
    ------
    InputError
        When ``n_jobs`` is not a positive whole number, None or -1.
    """
    if n_jobs is None or n_jobs == -1:
        return max(
            1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        )
    if isinstance(n_jobs, (int, np.integer)) and not isinstance(n_jobs, bool) and n_jobs >= 1:
        return int(n_jobs)
    raise InputError(f"n_jobs must be a positive number of processes or -1 (every core), got {n_jobs!r}")


def check_time_limit(seconds: float | None, *, option: str | None = None) -> float | None:
    """``seconds`` as a float, once known to be positive (None: no limit).

    Parameters
    ----------
    seconds : float or None
    option : str, optional
        The command-line option and the text it was given (``"--time-limit '-1'"``), which the
        error then quotes, in the command line's terms.

    Returns
    -------
    float or None

    Raises
    ------
    InputError
        When ``seconds`` is not a positive finite number.
    """
    if seconds is None:
        return None
    value = float(seconds)
    if np.isfinite(value) and value > 0:
        return value
    if option is not None:
        raise InputError(
            f"{option} is not a positive number of seconds; e.g. --time-limit 120 "
            "(or leave it out for no limit)"
        )
    raise InputError(
        f"time_limit must be a positive number of seconds, got {seconds}; "
        "e.g. time_limit=120 (or None for no limit)"
    )
