"""The registry of :func:`thrifty.compare`'s methods: what a method is (:class:`Method`), what it
offers (:class:`Candidate`) and the decorator that registers it (:func:`method`)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from thrifty.comparison.context import Context
from thrifty.exceptions import InputError

__all__ = ["METHODS", "TASKS", "Candidate", "Method", "Run", "method", "spread", "timed"]

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
    """

    name: str
    model: Any
    params: dict[str, Any] = field(default_factory=dict)
    fit_seconds: float = 0.0


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
    """

    key: str
    name: str
    family: str
    tasks: tuple[str, ...]
    run: Run
    after: str | None = None


#: Every method ``thrifty.compare`` knows, by key, in the order they run.
METHODS: dict[str, Method] = {}


def method(
    key: str, name: str, family: str, tasks: Sequence[str] = TASKS, *, after: str | None = None
) -> Callable[[Run], Run]:
    """Register ``run(ctx)`` as the method ``key`` of :func:`thrifty.compare` (``after``: see
    :class:`Method`)."""
    bad = set(tasks) - set(TASKS)
    if bad or family not in ("reference", "train", "post-hoc", "composition") or "," in key:
        raise InputError(f"bad registration of {key!r}: tasks {sorted(bad)}, family {family!r}")

    def register(run: Run) -> Run:
        METHODS[key] = Method(key, name, family, tuple(tasks), run, after)
        return run

    return register


def timed(name: str, build: Callable[..., Any], **params: Any) -> Candidate:
    """Run ``build()`` and wrap its result as a Candidate with its wall-clock time."""
    start = time.perf_counter()
    model = build()
    return Candidate(name, model, params, time.perf_counter() - start)


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
