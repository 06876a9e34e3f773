"""Budget search: the trade-off whose model's measured mean cost meets a budget (CEGB, GreedyMiser).

A model trained with a larger trade-off ``lambda`` uses fewer and cheaper features, so its mean
cost per example falls (roughly like a power of ``lambda``). The search brackets the budget in
log space, then shrinks the bracket: the next trial is where the straight line through the two
ends of the bracket in (log lambda, log cost) crosses the budget, clamped to the bracket's
middle 80% so every step removes at least a fifth of it; after two steps moving the same end
(the secant stalls on a step of the cost curve), or when the line is unusable, the next trial is
the plain log-space midpoint (a safeguarded bisection). Cost is never assumed monotone:
every trial is kept and returned; the estimator chooses among them with the shared selection
rule (:meth:`thrifty._estimator.ThriftyEstimator._select`: the feasible trial of highest cost).
The curve from trade-off to cost does not depend on the budget, so a sweep of budgets hands
each search the trials of the earlier ones (``history``): they bracket the next budget at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thrifty.exceptions import BudgetError, InputError

__all__ = ["BudgetError", "SearchResult", "search_tradeoff"]

# Bracket expansion: at most this factor per step (log-log extrapolation is clamped to it).
_STEP = 100.0


@dataclass
class SearchResult:
    """The trials of :func:`search_tradeoff`, in the order they were trained.

    Attributes
    ----------
    history : list of (float, float)
        ``(tradeoff, mean cost)`` of every trial.
    models : list
        What ``fit(tradeoff)`` returned for every trial, in the order of ``history``.
    """

    history: list[tuple[float, float]] = field(default_factory=list)
    models: list[Any] = field(default_factory=list)

    @property
    def n_fits(self) -> int:
        """Models trained."""
        return len(self.history)


def search_tradeoff(
    fit: Callable[[float], tuple[Any, float]],
    budget: float,
    *,
    start: float,
    tolerance: float = 0.05,
    max_fits: int = 12,
    floor: float = 0.0,
    progress: bool = True,
    desc: str = "budget search",
    history: Sequence[tuple[float, float]] = (),
) -> SearchResult:
    """Train models at trade-offs searched for the smallest one whose mean cost is within ``budget``.

    Stops at the first model with ``(1 - tolerance) * budget <= cost <= budget``, after
    ``max_fits`` models, or once the bracket's ends are within a factor ``1 + tolerance`` (a
    model's cost is a step function of the trade-off: it jumps when a feature enters or
    leaves, so a finer trade-off rarely helps). ``lambda = 0`` (no cost penalty at all) is
    tried when a model comes in under the tolerance band, since no trade-off can buy more than
    it. Every trial is returned; none may meet the budget (the caller's selection then raises
    :class:`BudgetError`).

    Parameters
    ----------
    fit : callable
        ``fit(tradeoff) -> (model, mean_cost)``; the cost is measured on calibration data.
    budget : float
        Target mean cost per example (``> 0``, or ``>= floor``).
    start : float
        First trade-off tried (``> 0``); a good guess saves fits.
    tolerance : float, default=0.05
        Relative width of the acceptance band below the budget, and the relative width of
        the trade-off bracket at which the search stops.
    max_fits : int, default=12
        Most models trained.
    floor : float, default=0
        Mean cost of the cheapest model of the family (no features: only the evaluation cost
        of its constant trees); a budget below it raises :class:`BudgetError` before any fit.
    progress : bool, default=True
        Progress bar over the fits (shown only when stderr is a terminal).
    desc : str
        Label of the progress bar.
    history : sequence of (float, float), optional
        ``(tradeoff, mean cost)`` of models trained before on the same data and calibration
        rows (an earlier budget's search: the trade-off path is one curve for every budget).
        They bracket the budget as the search's own trials do, so a history that brackets it
        leaves a few fits (one that holds a model within the tolerance band, none; ``start``
        is then not used). They are not trained again nor returned: the caller keeps their
        models and chooses among them and the returned trials alike.

    Returns
    -------
    SearchResult
        The models trained by this call (not ``history``'s).

    Raises
    ------
    BudgetError
        When the budget is below ``floor`` (before any model is trained).
    """
    from tqdm.auto import tqdm

    if not (budget > 0 and math.isfinite(budget)):
        raise InputError(f"budget must be a finite number > 0, got {budget!r}")
    if not 0 < tolerance < 1:
        raise InputError(f"tolerance must be in (0, 1), got {tolerance!r}")
    if int(max_fits) < 2:
        raise InputError(f"max_fits must be >= 2, got {max_fits!r}")
    if not (start > 0 and math.isfinite(start)):
        raise InputError(f"start must be a finite number > 0, got {start!r}")
    if budget < floor:
        raise BudgetError(
            f"budget {budget:g} is below {floor:g}, the mean cost of the cheapest "
            "possible model (no features, only the evaluation cost of its trees); "
            "raise the budget or lower the tree/split costs or the number of trees"
        )
    lower_band = (1.0 - tolerance) * budget
    known = [(float(lam), float(c)) for lam, c in history]
    for lam, c in known:
        if not (lam >= 0 and math.isfinite(lam) and c >= 0 and math.isfinite(c)):
            raise InputError(
                f"history holds ({lam!r}, {c!r}); give (tradeoff >= 0, mean cost >= 0) pairs, both finite"
            )
    trials: list[tuple[float, float]] = []
    models: list[Any] = []

    def trial(lam: float) -> float:
        model, cost = fit(lam)
        trials.append((lam, float(cost)))
        models.append(model)
        bar.update()
        bar.set_postfix_str(f"lambda={lam:.3g} cost={cost:.4g} budget={budget:.4g}")
        return float(cost)

    # disable=None hides the bar when stderr is not a terminal (logs, CI).
    with tqdm(
        total=int(max_fits), desc=desc, unit="fit", disable=None if progress else True, leave=False
    ) as bar:
        if not any(lam > 0 for lam, _ in known):  # nothing to bracket from yet
            trial(start)
        sides: list[bool] = []  # per bracket step: did the trial come in over budget?
        while len(trials) < max_fits:
            points = known + trials
            if any(lower_band <= c <= budget for _, c in points):
                break  # a model spends the budget within the tolerance
            if any(lam == 0 and c <= budget for lam, c in points):
                break  # the unpenalised model fits: no trade-off can buy more than it
            lo, hi = _bracket(points, budget)
            if lo is None and hi is not None and not any(lam == 0 for lam, _ in points):
                # Every trial is under the band: the unpenalised model may fit the budget.
                trial(0.0)
                continue
            if lo is None:  # every trial is feasible and under the band: go down
                assert hi is not None  # a positive trade-off was tried (start, or the history's)
                lam = _extrapolate(hi, points, budget, down=True)
            elif hi is None:  # every trial is over budget: go up
                lam = _extrapolate(lo, points, budget, down=False)
            elif hi[0] / lo[0] < 1.0 + tolerance:
                break
            else:
                # Two steps in a row moving the same end: the secant is stalling on a
                # step of the cost curve, so bisect plainly.
                stalled = len(sides) >= 2 and sides[-1] == sides[-2]
                sides.append(trial(_split(lo, hi, budget, secant=not stalled)) > budget)
                continue
            trial(lam)
    return SearchResult(trials, models)


def _bracket(
    history: list[tuple[float, float]], budget: float
) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """``(lo, hi)``: the over-budget trial of largest trade-off, and the feasible trial of
    smallest trade-off above it. Rebuilt from every trial, so a non-monotone step (a feasible
    trial below an infeasible one) cannot invert the bracket: the search stays above the
    largest trade-off known to miss the budget."""
    pts = [(lam, c) for lam, c in history if lam > 0]
    over = [p for p in pts if p[1] > budget]
    lo = max(over) if over else None
    feasible = [p for p in pts if p[1] <= budget and (lo is None or p[0] > lo[0])]
    hi = min(feasible) if feasible else None
    return lo, hi


def _positive(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    return [(lam, c) for lam, c in points if lam > 0 and c > 0]


def _extrapolate(
    anchor: tuple[float, float], history: list[tuple[float, float]], budget: float, down: bool
) -> float:
    """Next trade-off outside the bracket: along the log-log slope of the two nearest trials,
    at most a factor ``_STEP`` away (a factor 10 when no slope is known)."""
    lam, cost = anchor
    pts = sorted(_positive(history), key=lambda p: abs(math.log(p[0] / lam)))
    factor = 10.0
    others = [p for p in pts if p[0] != lam and p[1] != cost]
    if others and cost > 0:
        slope = math.log(others[0][1] / cost) / math.log(others[0][0] / lam)
        if slope < -0.05:  # cost falls with lambda, as it should
            factor = math.exp(min(math.log(_STEP), abs(math.log(budget / cost) / slope)))
            factor = max(factor, 2.0)
    return lam / factor if down else lam * factor


def _split(lo: tuple[float, float], hi: tuple[float, float], budget: float, secant: bool = True) -> float:
    """A point inside ``(lo, hi)`` in log space: the log-log secant's crossing of the budget,
    clamped to the middle 80% of the bracket (its midpoint when the secant is unusable)."""
    a, b = math.log(lo[0]), math.log(hi[0])
    t = 0.5
    if secant and lo[1] > 0 and hi[1] > 0 and lo[1] != hi[1]:
        # fraction of the way from lo to hi where log cost reaches log budget
        t = math.log(lo[1] / budget) / math.log(lo[1] / hi[1])
        if not math.isfinite(t):
            t = 0.5
    t = min(0.8, max(0.2, t))
    return math.exp(a + t * (b - a))
