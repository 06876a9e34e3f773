"""``thrifty serve``: a plan behind HTTP (Starlette on uvicorn), fetching missing features lazily."""

from typing import TYPE_CHECKING

from thrifty._lazy import attach

if TYPE_CHECKING:
    from thrifty.serve.app import create_app
    from thrifty.serve.server import build_server, run
    from thrifty.serve.store import store_provider

__all__ = ["build_server", "create_app", "run", "store_provider"]

__getattr__, __dir__ = attach(__name__, __file__)
