"""thrifty's own errors: what the user gave is wrong, and the message says how to fix it.

Every error thrifty raises about its input derives from :class:`ThriftyError`, and from the
built-in type scikit-learn and NumPy users already catch (``ValueError`` or ``TypeError``), so
``except ValueError`` keeps working while the CLI can report exactly these (and nothing that is
a bug) as one line.
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "InputError",
    "InvalidParameterError",
    "ThriftyError",
    "UnsupportedModelError",
]


class ThriftyError(Exception):
    """Base of the errors thrifty raises about what it was given."""


class InputError(ThriftyError, ValueError):
    """Data, costs, names or options that cannot be used as given."""


class InvalidParameterError(InputError, TypeError):
    """An estimator or function parameter outside its declared constraints.

    A ``TypeError`` too, as scikit-learn's own ``InvalidParameterError`` is.
    """


class BudgetError(InputError):
    """No model of the family meets the budget (even the cheapest one costs more)."""


class UnsupportedModelError(ThriftyError, TypeError):
    """A model thrifty cannot import as a tree ensemble or use as a plan."""
