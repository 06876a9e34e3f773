"""How ``thrifty serve`` answers a failure: its status, one public line of JSON, details in the log.

What a client may read is what it sent and what it can do about it. A provider's exception text
holds what is none of its business (the SQL, the table and column names, a database path, the
feature service's address, other rows' keys): such failures are answered with a generic line and
a reference, and the exception goes to the server log (logger ``thrifty.serve``) under the same
reference.
"""

from __future__ import annotations

import logging
import sys
import uuid
from typing import Any

from thrifty.exceptions import MissingKeyError, ThriftyError
from thrifty.providers.base import StoreUnavailable
from thrifty.serve.rows import BadRequest

log = logging.getLogger("thrifty.serve")

# Seconds a client is asked to wait before retrying a 503 (a full queue drains in well under this).
RETRY_AFTER = 1


class Busy(Exception):
    """Every evaluation slot is taken and the queue of waiting requests is full (or did not move)."""


def is_missing_key(exc: BaseException) -> bool:
    """True when ``exc`` is a provider's "no record for this key" (a 404, the client's keys):
    ``thrifty.providers`` raise ``MissingKeyError`` for it, a provider of your own may raise any
    ``LookupError``; a ``KeyError`` or an ``IndexError`` is a bug, a 500."""
    if isinstance(exc, MissingKeyError):
        return True
    return isinstance(exc, LookupError) and not isinstance(exc, (KeyError, IndexError))


def failure(exc: BaseException, *, timeout: float, key: str) -> tuple[int, str, dict[str, str]]:
    """The status, the one-line public message and the extra headers answering ``exc``.

    ``timeout`` is the request's time limit and ``key`` the rows' key field, both named in the
    messages that concern them.
    """
    if isinstance(exc, BadRequest):
        # A body that was not read to its end cannot be followed by another request.
        close = {"connection": "close"} if exc.status in (408, 413) else {}
        return exc.status, str(exc), close
    if isinstance(exc, Busy):
        return 503, str(exc), {"retry-after": str(RETRY_AFTER)}
    if is_missing_key(exc):
        return 404, f"no record in the feature store for the {key!r} of a row; check the rows' keys", {}
    if isinstance(exc, TimeoutError):
        return (
            504,
            f"the prediction did not finish within {timeout:g} s (the feature provider is slow); "
            "retry later or send fewer rows",
            {},
        )
    status, what, headers = _provider_failure(exc)
    return status, _logged(exc, status, what), headers


def _logged(exc: BaseException, status: int, what: str) -> str:
    """``what`` with a reference to the log entry of ``exc`` (its text and traceback)."""
    reference = uuid.uuid4().hex[:12]
    log.error("request %s answered %d: %s: %s", reference, status, type(exc).__name__, exc, exc_info=exc)
    return f"{what} (reference {reference} in the server log)"


def _provider_failure(exc: BaseException) -> tuple[int, str, dict[str, str]]:
    sa_exc = sys.modules.get("sqlalchemy.exc")
    # The SQL provider raises StoreUnavailable over the database's OperationalError (whose text,
    # SQL and keys included, it keeps out of the message).
    if isinstance(exc, StoreUnavailable) or (sa_exc is not None and isinstance(exc, sa_exc.OperationalError)):
        # Locked, deleted or unreachable: the store may be back soon, the request was fine.
        return 503, "the feature store cannot be read now", {"retry-after": str(5 * RETRY_AFTER)}
    if (sa_exc is not None and isinstance(exc, sa_exc.SQLAlchemyError)) or isinstance(
        exc, (ConnectionError, ThriftyError)
    ):
        # ThriftyError here is a provider's answer that cannot be used (not a number, a key twice).
        return 502, "the feature provider failed", {}
    return 500, "internal error", {}


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Any:
    """``{"error": message}`` on one line, with ``status``."""
    from starlette.responses import JSONResponse

    return JSONResponse({"error": " ".join(str(message).split())}, status_code=status, headers=headers)


async def http_error(request: Any, exc: Any) -> Any:
    """Starlette's own refusals (no such path, a method the path does not take) as JSON."""
    path = request.url.path
    if exc.status_code == 404:
        message = f"no such path {path[:60]!r}; this server answers POST /predict and GET /health"
    elif exc.status_code == 405:
        allowed = sorted((exc.headers or {}).get("Allow", "").split(", "))  # a set: any order
        message = f"{request.method} is not allowed on {path}; use {' or '.join(allowed)}"
    else:
        message = str(exc.detail)
    return error_response(exc.status_code, message, exc.headers)


async def server_error(request: Any, exc: BaseException) -> Any:
    """What escaped every handler: a bug, answered 500 without its text."""
    return error_response(500, _logged(exc, 500, "internal error"))
