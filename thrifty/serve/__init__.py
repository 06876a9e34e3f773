"""``thrifty serve``: a plan behind HTTP (Starlette on uvicorn), fetching missing features lazily."""

from thrifty.serve.app import create_app, store_provider

__all__ = ["create_app", "store_provider"]
