"""The ``thrifty serve`` application: a plan behind HTTP, fetching missing features lazily."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.providers.base import missing_extra
from thrifty.providers.http import HTTPProvider
from thrifty.runtime.async_eval import evaluate_async
from thrifty.runtime.evaluate import Evaluation, costs_for, evaluate
from thrifty.runtime.plans import Full, Plan, as_plan
from thrifty.runtime.rounds import Requests
from thrifty.serve.rows import BadRequest, RowReader

# Starlette and httpx are the optional extra thrifty[serve]: imported where used, so that this
# module imports without them and create_app() names the extra to install.


def create_app(
    model: Any,
    provider: Any = None,
    *,
    costs: CostModel | None = None,
    key: str = "id",
    max_rows: int = 1000,
    max_body: int = 1 << 20,
    timeout: float = 10.0,
    trees: str = "in-order",
    n_threads: int = 1,
) -> Any:
    """A Starlette application predicting with ``model``, fetching missing features lazily.

    ``POST /predict`` with ``{"rows": [{"id": ..., "feature": value, ...}, ...]}`` answers
    ``{"results": [{"id", "prediction", "probabilities", "cost", "feature_cost", "latency",
    "trees", "exit", "acquired"}, ...]}``. A feature a row does not give is fetched from
    ``provider`` for the row's key, only if an evaluated tree needs it. ``GET /health``
    describes the model. Every failure is answered with ``{"error": "<one line>"}`` and a
    4xx/5xx status.

    Parameters
    ----------
    model : Plan, Forest or fitted model
        Loaded once, here.
    provider : SQLProvider or HTTPProvider, optional
        A provider built for no keys (``sql_provider(url, table, key_column, [], model=plan)``);
        each request binds its rows' keys. Without one, rows must give every feature an
        evaluated tree needs.
    costs : CostModel, optional
        Prices reported per prediction (default: 1 per feature).
    key : str, default="id"
        Field of a row holding its key in the provider.
    max_rows, max_body : int
        Most rows per request, most bytes per request body (413 above).
    timeout : float, default=10
        Seconds one request may take (504 after).
    trees : {"in-order", "parallel"}
        As for :func:`thrifty.evaluate_async` (``"parallel"`` for Full plans).
    n_threads : int, default=1
        Kernel threads per request. One suits small requests: waking a thread pool costs more
        than a few rows take, and concurrent requests already share the cores.
    """
    try:
        from starlette.applications import Starlette
        from starlette.routing import Route
    except ImportError:
        raise missing_extra("starlette", "serve") from None
    if provider is not None and not hasattr(provider, "with_keys"):
        raise TypeError(
            "provider must be a thrifty store provider (sql_provider or http_provider), "
            f"got {type(provider).__name__}"
        )
    if not timeout > 0 or int(max_rows) < 1 or int(max_body) < 1:
        raise InputError("timeout, max_rows and max_body must be positive")
    plan = as_plan(model)
    _check_classes(plan)
    if trees == "parallel" and not isinstance(plan, Full):
        raise InputError(f"trees='parallel' needs a Full plan, got {type(plan).__name__}")
    service = _Service(
        plan, provider, costs, key, int(max_rows), int(max_body), float(timeout), trees, n_threads
    )
    return Starlette(
        routes=[
            Route("/predict", service.predict, methods=["POST"]),
            Route("/health", service.health, methods=["GET"]),
        ],
        lifespan=service.lifespan,
    )


def _check_classes(plan: Plan) -> None:
    """Refuse a classifier whose list of classes does not match its outputs (a label past its
    end would fail at the first prediction that picks it, long after start-up)."""
    if plan.is_classifier and plan.classes is not None and len(plan.classes) != max(2, plan.n_outputs):
        raise InputError(
            f"the model lists {len(plan.classes)} classes ({plan.classes[:10].tolist()}) but its trees "
            f"score {max(2, plan.n_outputs)}; fix its 'classes' list (one label per class, in the "
            "order the model was trained with) and save it again"
        )


class _Service:
    def __init__(
        self,
        plan: Plan,
        provider: Any,
        costs: CostModel | None,
        key: str,
        max_rows: int,
        max_body: int,
        timeout: float,
        trees: str,
        n_threads: int,
    ) -> None:
        self.plan, self.provider = plan, provider
        self.costs = costs_for(plan, costs)
        self.names = plan.feature_names or [f"Column_{j}" for j in range(plan.n_features)]
        self.reader = RowReader(self.names, plan.categories, key, max_rows)
        self.key, self.max_body, self.timeout, self.trees = key, max_body, timeout, trees
        self.n_threads = n_threads

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        client = None
        if isinstance(self.provider, HTTPProvider) and self.provider.client is None:
            import httpx

            # One connection pool for every request to the feature service.
            client = httpx.AsyncClient(timeout=self.provider.timeout)
            self.provider = copy.copy(self.provider)
            self.provider.client = client
        await self._warm_up()
        try:
            yield
        finally:
            if client is not None:
                await client.aclose()

    async def _warm_up(self) -> None:
        """Compile the kernels before the first request (numba loads them from its cache)."""
        row = np.full((1, self.plan.n_features), np.nan)
        evaluate(self.plan, row, self.costs, n_threads=self.n_threads)
        given = np.ones_like(row, dtype=np.bool_)
        await evaluate_async(
            self.plan,
            _RequestProvider(row, given, [None], None, self),
            self.costs,
            n_rows=1,
            trees=self.trees,
            n_threads=self.n_threads,
        )

    async def health(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse(
            {
                "status": "ok",
                "plan": type(self.plan).__name__,
                "task": self.plan.task,
                "features": self.names,
                "provider": type(self.provider).__name__ if self.provider else None,
            }
        )

    async def predict(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            body = await self._body(request)
            keys, values, given = self.reader.read(body)
            ev = await asyncio.wait_for(self._evaluate(keys, values, given), self.timeout)
            return JSONResponse({"results": self._results(keys, ev)})
        except BadRequest as exc:
            return _error(exc.status, str(exc))
        except TimeoutError as exc:
            return _error(
                504,
                str(exc)
                or f"the prediction did not finish within {self.timeout:g} s (is the feature provider slow?)",
            )
        except LookupError as exc:
            return _error(404, str(exc))
        except (ConnectionError, ValueError) as exc:
            return _error(502, f"the feature provider failed: {exc}")
        except Exception as exc:  # the server must answer, whatever went wrong
            return _error(500, f"internal error: {type(exc).__name__}: {exc}")

    async def _body(self, request: Any) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise BadRequest(
                f"the request body has {declared} bytes; at most {self.max_body} are "
                "accepted (send fewer rows per request)",
                413,
            )
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > self.max_body:
                raise BadRequest(
                    f"the request body exceeds {self.max_body} bytes (send fewer rows per request)", 413
                )
            chunks.append(chunk)
        try:
            return json.loads(b"".join(chunks))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequest(f"malformed JSON: {exc}", 400) from None

    async def _evaluate(self, keys: list[Any], values: np.ndarray, given: np.ndarray) -> Evaluation:
        if given.all():
            ev = evaluate(self.plan, values, self.costs, n_threads=self.n_threads)
            ev.cost.latency = np.zeros(len(keys))
            return ev
        store, kind = None, _RequestProvider
        if self.provider is not None:
            store = self.provider.with_keys(["" if k is None else k for k in keys]).fetch
            if inspect.iscoroutinefunction(store):
                kind = _AsyncRequestProvider
        return await evaluate_async(
            self.plan,
            kind(values, given, keys, store, self),
            self.costs,
            n_rows=len(keys),
            trees=self.trees,
            n_threads=self.n_threads,
        )

    def _results(self, keys: list[Any], ev: Evaluation) -> list[dict[str, Any]]:
        c, proba, latency = ev.cost, ev.proba, ev.cost.latency
        assert latency is not None  # _evaluate always measures it
        out = []
        for i, k in enumerate(keys):
            r: dict[str, Any] = {self.key: k, "prediction": _plain(ev.predictions[i])}
            if proba is not None:
                r["probabilities"] = proba[i].tolist()
            r.update(
                cost=float(c.total[i]),
                feature_cost=float(c.feature[i]),
                latency=float(latency[i]),
                trees=int(c.n_trees[i]),
                exit=int(ev.exit[i]),
                acquired=[self.names[j] for j in np.flatnonzero(c.acquired[i])],
            )
            out.append(r)
        return out


class _RequestProvider:
    """Values the request gives first; the others from the store, for the request's keys.

    Synchronous, for a synchronous store (SQL) or none: the evaluation then runs in one worker
    thread (see ``evaluate_async``).
    """

    def __init__(
        self, values: np.ndarray, given: np.ndarray, keys: list[Any], store: Any, service: _Service
    ) -> None:
        self.values, self.given, self.keys, self.store, self.service = values, given, keys, store, service

    def fetch(self, requests: Requests) -> list[np.ndarray]:
        out, forward, slots = self._split(requests)
        if forward:
            self._merge(out, slots, self.store(forward))
        return out

    def _split(self, requests: Requests) -> tuple[list[np.ndarray], Requests, list[Any]]:
        """Given values per request, what to ask the store, and where its answers go."""
        out, forward, slots = [], [], []
        for f, rows in requests:
            out.append(self.values[rows, f].copy())
            lacking = ~self.given[rows, f]
            if lacking.any():
                forward.append((f, rows[lacking]))
                slots.append((len(out) - 1, lacking))
        if forward:
            self._check(forward)
        return out, forward, slots

    @staticmethod
    def _merge(out: list[np.ndarray], slots: list[Any], answers: list[np.ndarray]) -> None:
        for (i, lacking), values in zip(slots, answers):
            out[i][lacking] = values

    def _check(self, forward: Requests) -> None:
        f, rows = forward[0]
        if self.store is None:
            raise BadRequest(
                f"row {rows[0]} needs feature {self.service.names[f]!r}, which the request "
                "does not give, and the server has no feature provider (start it with "
                "--provider)"
            )
        for f, rows in forward:
            unkeyed = [int(r) for r in rows if self.keys[r] is None]
            if unkeyed:
                raise BadRequest(
                    f"row {unkeyed[0]} needs feature {self.service.names[f]!r} from the "
                    f"feature provider but has no {self.service.key!r}"
                )


class _AsyncRequestProvider(_RequestProvider):
    """The same over an async store (an HTTP feature service): rounds are awaited."""

    async def fetch(self, requests: Requests) -> list[np.ndarray]:  # type: ignore[override]
        out, forward, slots = self._split(requests)
        if forward:
            self._merge(out, slots, await self.store(forward))
        return out


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _error(status: int, message: str) -> Any:
    from starlette.responses import JSONResponse

    return JSONResponse({"error": " ".join(str(message).split())}, status_code=status)
