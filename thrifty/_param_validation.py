"""Declared parameter constraints, checked once at ``fit`` (scikit-learn's ``_parameter_constraints``).

An estimator lists, for each ``__init__`` parameter, the kinds of value it accepts::

    _parameter_constraints = {
        "p_full": [Interval(Real, 0, 1, closed="neither")],
        "method": [StrOptions({"gbrt", "lin"})],
        "budget": [None, Interval(Real, 0, None, closed="neither")],
    }

and :func:`validate_params` raises one :class:`~thrifty.exceptions.InvalidParameterError`
naming the parameter, the value and what is allowed. scikit-learn's own validator is private
(``sklearn.utils._param_validation``), so thrifty keeps this small one, as imbalanced-learn does.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from thrifty.exceptions import InvalidParameterError

__all__ = ["HasMethods", "Interval", "Options", "StrOptions", "validate_params"]


class Interval:
    """Numbers of one kind (``numbers.Integral`` or ``numbers.Real``) in an interval.

    ``None`` for ``left`` or ``right`` leaves that side open to infinity; ``closed`` says
    which finite ends belong to the interval. Booleans are never numbers here, and a
    ``Real`` interval accepts integers but not NaN.
    """

    def __init__(self, kind: type, left: float | None, right: float | None, *, closed: str = "both") -> None:
        if kind not in (numbers.Integral, numbers.Real):
            raise ValueError(f"Interval kind must be numbers.Integral or numbers.Real, got {kind!r}")
        if closed not in ("left", "right", "both", "neither"):
            raise ValueError(f"closed must be 'left', 'right', 'both' or 'neither', got {closed!r}")
        self.kind, self.left, self.right, self.closed = kind, left, right, closed

    def accepts(self, value: Any) -> bool:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, self.kind):
            return False
        v = float(value)
        if math.isnan(v):
            return False
        left_in = self.closed in ("left", "both")
        right_in = self.closed in ("right", "both")
        if self.left is not None and (v < self.left or (v == self.left and not left_in)):
            return False
        return not (self.right is not None and (v > self.right or (v == self.right and not right_in)))

    def __str__(self) -> str:
        what = "an int" if self.kind is numbers.Integral else "a float"
        if self.left is not None and self.right is None:
            return f"{what} {'>=' if self.closed in ('left', 'both') else '>'} {self.left}"
        if self.left is None and self.right is not None:
            return f"{what} {'<=' if self.closed in ('right', 'both') else '<'} {self.right}"
        if self.left is None and self.right is None:
            return what
        lo = "[" if self.closed in ("left", "both") else "("
        hi = "]" if self.closed in ("right", "both") else ")"
        return f"{what} in the range {lo}{self.left}, {self.right}{hi}"


class StrOptions:
    """One of a set of strings."""

    def __init__(self, options: Iterable[str]) -> None:
        self.options = set(options)

    def accepts(self, value: Any) -> bool:
        return isinstance(value, str) and value in self.options

    def __str__(self) -> str:
        return "a str among " + ", ".join(repr(o) for o in sorted(self.options))


class Options:
    """One of a set of values of one type (``Options(bool, {True})``, ``Options(int, {-1})``)."""

    def __init__(self, kind: type, options: Iterable[Any]) -> None:
        self.kind, self.options = kind, set(options)

    def accepts(self, value: Any) -> bool:
        return isinstance(value, self.kind) and value in self.options

    def __str__(self) -> str:
        return "one of " + ", ".join(repr(o) for o in sorted(self.options, key=repr))


class HasMethods:
    """Any object with these methods (a duck-typed model)."""

    def __init__(self, methods: str | Iterable[str]) -> None:
        self.methods = [methods] if isinstance(methods, str) else list(methods)

    def accepts(self, value: Any) -> bool:
        return all(callable(getattr(value, m, None)) for m in self.methods)

    def __str__(self) -> str:
        return "an object with " + ", ".join(f"{m}()" for m in self.methods)


def _is_array_like(value: Any) -> bool:
    return hasattr(value, "__len__") or hasattr(value, "shape") or hasattr(value, "__array__")


def _is_random_state(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, np.random.RandomState | np.random.Generator)
        or (isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= int(value) < 2**32)
    )


def _is_cost_model(value: Any) -> bool:
    from thrifty.costs import CostModel

    return isinstance(value, CostModel | Mapping) or (_is_array_like(value) and not isinstance(value, str))


# Named constraints: the strings an estimator may put in its lists.
_NAMED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "array-like": (lambda v: _is_array_like(v) and not isinstance(v, str), "an array-like"),
    "boolean": (lambda v: isinstance(v, bool | np.bool_), "a bool"),
    "random_state": (_is_random_state, "an int in [0, 2**32), a numpy RandomState or Generator, or None"),
    "cost-model": (_is_cost_model, "a CostModel, a dict of name -> cost, or one cost per feature"),
}


def _accepts(constraint: Any, value: Any) -> bool:
    if constraint is None:
        return value is None
    if isinstance(constraint, str):
        return _NAMED[constraint][0](value)
    if constraint is callable:
        return callable(value)
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    return bool(constraint.accepts(value))


def _describe(constraint: Any) -> str:
    if constraint is None:
        return "None"
    if isinstance(constraint, str):
        return _NAMED[constraint][1]
    if constraint is callable:
        return "a callable"
    if isinstance(constraint, type):
        return f"an instance of {constraint.__name__}"
    return str(constraint)


def validate_params(constraints: Mapping[str, list[Any]], params: Mapping[str, Any], caller: str) -> None:
    """Check every parameter against its declared constraints.

    Parameters
    ----------
    constraints : mapping of str to list
        For each parameter, the constraints of which its value must meet one: ``None``, a
        type, ``callable``, a named constraint (``"array-like"``, ``"boolean"``,
        ``"random_state"``, ``"cost-model"``), an :class:`Interval`, :class:`StrOptions`,
        :class:`Options` or :class:`HasMethods`.
    params : mapping of str to object
        The values (``estimator.get_params(deep=False)`` or a function's arguments).
    caller : str
        Named in the message (the estimator's class or the function).

    Raises
    ------
    InvalidParameterError
        For the first parameter with no constraint met, naming it, its value and what is
        allowed; also for a parameter with no declared constraints (a bug in the caller).
    """
    for name, value in params.items():
        if name not in constraints:
            raise InvalidParameterError(f"{caller}: parameter {name!r} has no declared constraints")
        allowed = constraints[name]
        if any(_accepts(c, value) for c in allowed):
            continue
        if len(allowed) == 1:
            want = _describe(allowed[0])
        else:
            want = ", ".join(_describe(c) for c in allowed[:-1]) + " or " + _describe(allowed[-1])
        raise InvalidParameterError(f"{caller}: {name} must be {want}, got {value!r}")
