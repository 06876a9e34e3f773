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
    "MissingKeyError",
    "ProviderError",
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


class MissingKeyError(InputError, LookupError):
    """Keys of rows for which the feature store has no record (or can have none).

    A ``LookupError`` too, so that a server can answer it per request (``thrifty serve``: 404)
    rather than as a failure of the store.

    Attributes
    ----------
    keys : list
        The missing keys, as they were given (each once).
    """

    def __init__(self, message: str, keys: list) -> None:
        super().__init__(message)
        self.keys = keys

    def __reduce__(self) -> tuple:
        # Pickled (a Dask worker's error reaching the client) with its keys.
        return (type(self), (str(self), self.keys))


class ProviderError(ThriftyError, ValueError):
    """A feature store answered with what cannot be feature values: a value that is not a
    number, one value too many or too few, a record that is not unique.

    The store (or its configuration) is at fault, not the caller's rows: a server answers it
    as a bad gateway (``thrifty serve``: 502).
    """
