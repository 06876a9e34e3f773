"""The registry of :func:`thrifty.compare`'s methods: what a method is (:class:`Method`), what it
offers (:class:`Candidate`) and the decorator that registers it (:func:`method`)."""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import joblib

from thrifty.comparison.context import Context
from thrifty.exceptions import InputError

__all__ = [
    "METHODS",
    "TASKS",
    "Candidate",
    "CostOrder",
    "Method",
    "Run",
    "fitted",
    "method",
    "same_model",
    "spread",
    "timed",
]

TASKS = ("binary", "multiclass", "ranking", "regression")


@dataclass
class Candidate:
    """One model a method offers, with what produced it.

    Attributes
    ----------
    name : str
        Unique within its method (e.g. ``"budget=12.5"``).
    model : object
        Anything :func:`thrifty.evaluate` takes (a Forest, a plan, a fitted thrifty estimator).
    params : dict
        The parameters behind it (a budget, alpha, lambda...), shown in the table.
    fit_seconds : float
        Wall-clock seconds to produce it, excluding the shared base models.
    base : object, optional
        The model a composition built it on (a CEGB model, a pruned forest), so that it is
        handed back (:func:`fitted`) only to a run on the same base.
    """

    name: str
    model: Any
    params: dict[str, Any] = field(default_factory=dict)
    fit_seconds: float = 0.0
    base: Any = field(default=None, repr=False)


Run = Callable[[Context], Iterator[Candidate]]


@dataclass(frozen=True)
class Method:
    """A registered method.

    Attributes
    ----------
    key : str
        Short id used to select it (``methods=["qwyc"]``, ``--methods qwyc``).
    name : str
        Its series name in tables and plots.
    family : {"reference", "train", "post-hoc", "composition"}
    tasks : tuple of str
        The tasks it supports.
    run : callable
        ``run(ctx) -> iterator of Candidate``.
    after : str, optional
        Key of the method whose shared models this one builds on (``ctx.lightgbm()``, the CEGB
        models, the BudgetRF forest): when both run, :func:`thrifty.compare` fits that method
        first on the same rows and hands its models over instead of fitting them again.
    fits : bool
        Whether it fits models of its own. A composition that only combines the models of the
        methods it runs after (the margin cascade of the two baselines) is as cheap as a
        post-hoc method and is scheduled with them (``compare``'s order of families), not
        after every training.
    """

    key: str
    name: str
    family: str
    tasks: tuple[str, ...]
    run: Run
    after: str | None = None
    fits: bool = True


#: Every method ``thrifty.compare`` knows, by key, in the order they run.
METHODS: dict[str, Method] = {}


def method(
    key: str,
    name: str,
    family: str,
    tasks: Sequence[str] = TASKS,
    *,
    after: str | None = None,
    fits: bool = True,
) -> Callable[[Run], Run]:
    """Register ``run(ctx)`` as the method ``key`` of :func:`thrifty.compare` (``after`` and
    ``fits``: see :class:`Method`)."""
    bad = set(tasks) - set(TASKS)
    if bad or family not in ("reference", "train", "post-hoc", "composition") or "," in key:
        raise InputError(f"bad registration of {key!r}: tasks {sorted(bad)}, family {family!r}")

    def register(run: Run) -> Run:
        METHODS[key] = Method(key, name, family, tuple(tasks), run, after, fits)
        return run

    return register


def timed(name: str, build: Callable[..., Any], **params: Any) -> Candidate:
    """Run ``build()`` and wrap its result as a Candidate with its wall-clock time."""
    start = time.perf_counter()
    model = build()
    return Candidate(name, model, params, time.perf_counter() - start)


def fitted(
    ctx: Context, name: str, build: Callable[..., Any], *, base: Any = None, **params: Any
) -> Candidate:
    """The candidate ``name`` of this method on ``ctx``'s rows: the one fitted before on the
    same rows (``ctx.replay``: the first pass of a time-limited sweep, handed back with its
    model, parameters and seconds) when built on the same ``base`` (a composition's model,
    :func:`same_model`), else ``build()`` run and timed (:func:`timed`).

    The second pass of a time-limited sweep runs each method again from its first setting;
    it used to fit that setting again (on flights ADAPT-GBRT's first gate took 36 s, Cronus's
    first cascade 23 s) before any new one. A method's ``build`` depends only on the rows and
    the settings, so the first pass's model is the one a new fit would give."""
    done = ctx.replay.get(name)
    if done is not None and same_model(done.base, base):
        # The parameters as given now: a composition's base, the same model, may come with
        # other search figures (CEGB's ``n_fits``: 0 where the first pass asked the path again).
        done.params = dict(params)
        return done
    cand = timed(name, build, **params)
    cand.base = base
    return cand


def same_model(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same model (or both None): the same object, or the same
    contents (``joblib.hash``: a model handed between processes is a copy).

    A composition's base can differ between the two passes of a sweep: the Cronus cascade of
    CEGB's largest-budget model takes it from the first pass's search of that budget alone,
    and from CEGB's whole path in the second, where the path's other budgets' trials may
    offer another model."""
    if a is b:
        return True
    if a is None or b is None:
        return False
    return bool(joblib.hash(a) == joblib.hash(b))


T = TypeVar("T")


def spread(values: Sequence[T]) -> list[T]:
    """``values`` (a grid in order: budgets, alphas...) coarse to fine: the middle one, then the
    middles of the two halves, and so on, each level before the next.

    A method yields its candidates in this order so that a time allowance that stops it after
    a few still leaves a spread of settings across the range, rather than its cheapest end
    only (e.g. 6 budgets run as the 3rd, 1st, 5th, 2nd, 4th and 6th). Without an allowance the
    order changes nothing: every candidate is fitted on its own.
    """
    out: list[T] = []
    halves = deque([(0, len(values) - 1)])
    while halves:
        lo, hi = halves.popleft()
        if lo > hi:
            continue
        mid = (lo + hi) // 2
        out.append(values[mid])
        halves.extend([(lo, mid - 1), (mid + 1, hi)])
    return out


class CostOrder(Generic[T]):
    """A method's settings (a grid in order: alphas, lambdas...) in the order that covers the
    range of their costs first: the middle setting, then the two ends of the grid, then, time
    after time, the setting in the middle of the two fitted neighbours whose costs are furthest
    apart.

    :func:`spread` halves the grid by position, as if the cost fell evenly along it. It seldom
    does: on flights QWYC's plans of alpha=0.05, 0.1, 0.15 and 0.2 cost 9.0, 5.4, 3.2 and 0.1
    of the plain model's 12 per flight, the cost falling between the 7th and the 10th of its
    11 alphas. Spread's order (0.02, 0.002, 0.15, 0, 0.005, 0.05, 0.2, 0.001, 0.01, 0.1, 0.3)
    spent its second, fourth and fifth fits on small alphas, and a time allowance that stopped
    it after six left no plan between 9.0 and 3.2, where two of compare's six budgets lie
    (alpha=0.1 came tenth). Halving the widest gap in *cost* instead bisects the axis the
    budgets are on: after each fit, no budget is further from a fitted cost below it than the
    widest gap left (measured on flights' validation split: 0.02, 0, 0.3, 0.1, 0.15, 0.05...).

    Iterate it, and after each setting it yields (before asking for the next) give that
    setting's cost with :meth:`cost`; a setting without one (the method could not fit it) is
    not a neighbour. Costs are measured without labels (``Context.order_cost``), so the
    order is the same in every run on the same rows; without an allowance every setting is
    fitted and the order changes nothing.

    ``known``: costs known without a fit, by position (Cronus at ``lambda_max`` keeps no
    tree: 0). Those settings bound the gaps from the start and come last: a fit would tell
    nothing new (a Cronus fit took 23 s on flights).
    """

    def __init__(self, values: Sequence[T], known: dict[int, float] | None = None) -> None:
        self.values = list(values)
        self.costs: dict[int, float] = {}  # fitted settings (by position): their cost, or nan
        self.known = {i: float(c) for i, c in (known or {}).items() if 0 <= i < len(self.values)}
        self._last: int | None = None

    def __iter__(self) -> Iterator[T]:
        while (i := self._next()) is not None:
            self._last = i
            self.costs[i] = math.nan
            yield self.values[i]

    def cost(self, value: float) -> None:
        """The cost of the setting yielded last."""
        if self._last is not None:
            self.costs[self._last] = float(value)

    def _next(self) -> int | None:
        n = len(self.values)
        left = [i for i in range(n) if i not in self.costs and i not in self.known]
        if not left:  # the settings of known cost, last
            return next((i for i in sorted(self.known) if i not in self.costs), None)
        for i in ((n - 1) // 2, 0, n - 1):  # the middle (spread's first), then the range's ends
            if i in left:
                return i
        costs = {**self.known, **{i: c for i, c in self.costs.items() if math.isfinite(c)}}
        known = sorted(i for i, c in costs.items() if math.isfinite(c))
        best, best_key = None, None
        for a, b in zip(known, known[1:]):
            inner = [i for i in range(a + 1, b) if i in left]
            if not inner:
                continue
            key = (abs(costs[b] - costs[a]), len(inner))
            if best_key is None or key > best_key:  # the first of equal gaps (the grid's order)
                best, best_key = inner[(len(inner) - 1) // 2], key
        # Settings between neighbours without a cost (fits that failed): coarse to fine.
        return best if best is not None else spread(left)[0]
