"""The ``thrifty serve`` application: a plan behind HTTP, fetching missing features lazily."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
from collections.abc import AsyncIterator
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.exceptions import InputError
from thrifty.providers.base import missing_extra
from thrifty.providers.http import HTTPProvider
from thrifty.runtime.compiled.plan import native_engine
from thrifty.runtime.evaluate import Evaluation, costs_for, evaluate
from thrifty.runtime.plans import Full, Plan, as_plan, check_classes
from thrifty.serve.admission import Admission
from thrifty.serve.batcher import Batcher
from thrifty.serve.errors import error_response, failure, http_error, server_error
from thrifty.serve.rows import BadRequest, RowReader, read_json

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
    max_depth: int = 16,
    timeout: float = 10.0,
    max_concurrency: int = 64,
    max_queue: int = 256,
    trees: str = "in-order",
    rounds: Any = "in_order",
    n_threads: int = 1,
) -> Any:
    """A Starlette application predicting with ``model``, fetching missing features lazily.

    Requests in flight are evaluated together, one store round for all of them each round
    (:class:`thrifty.serve.batcher.Batcher`); each answer is what the request alone would get.

    ``POST /predict`` with ``{"rows": [{"id": ..., "feature": value, ...}, ...]}`` answers
    ``{"results": [{"id", "prediction", "probabilities", "cost", "feature_cost", "latency",
    "trees", "exit", "acquired"}, ...]}``. A feature a row does not give is fetched from
    ``provider`` for the row's key, only if an evaluated tree needs it. ``GET /health``
    describes the model and the load. Every failure is answered with ``{"error": "<one line>"}``
    and the status docs/deploy.md lists; what a provider's error says goes to the log only.
    Serve it with :func:`thrifty.serve.run`, which bounds connections in time.

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
    max_depth : int, default=16
        Deepest nesting of a JSON body (400 above), checked before it is parsed.
    timeout : float, default=10
        Seconds one request may take from its head to its answer: its body must arrive within
        them (408), and past them it is answered 504 at once; its rows are fetched no more
        (its batch answers them NaN without asking the store, see ``thrifty.serve.batcher``).
    max_concurrency : int, default=64
        Requests evaluated at once. Idle connections do not count, nor does ``/health``.
    max_queue : int, default=256
        Requests waiting for an evaluation slot; more are answered 503 at once, as is one that
        found no slot within its ``timeout``.
    trees : {"in-order", "parallel"}
        As for :func:`thrifty.evaluate_async` (``"parallel"`` for Full plans: ``rounds="parallel"``).
    rounds : {"in_order", "parallel"} or Prefetch
        What each round fetches, as :func:`thrifty.runtime.lazy.lazy_rounds` takes it: in the
        plan's order, every tree up to the next exit at once, or a
        :func:`thrifty.prefetch_plan` fetched in the first round (and charged to every row).
    n_threads : int, default=1
        Kernel threads per request. One suits small requests: waking a thread pool costs more
        than a few rows take, and concurrent requests already share the cores.
    """
    try:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.routing import Route
    except ImportError:
        raise missing_extra("starlette", "serve") from None
    if provider is not None and not hasattr(provider, "with_keys"):
        raise TypeError(
            "provider must be a thrifty store provider (sql_provider or http_provider), "
            f"got {type(provider).__name__}"
        )
    limits = {"max_rows": max_rows, "max_body": max_body, "max_concurrency": max_concurrency}
    if not timeout > 0 or min(limits.values()) < 1 or max_queue < 0 or max_depth < 3:
        raise InputError(
            "timeout, max_rows, max_body and max_concurrency must be positive, max_queue at least 0 "
            f"and max_depth at least 3; got timeout={timeout}, {limits}, max_queue={max_queue}, "
            f"max_depth={max_depth}"
        )
    plan = as_plan(model)
    check_classes(plan)
    if trees == "parallel":
        if not isinstance(plan, Full):
            raise InputError(f"trees='parallel' needs a Full plan, got {type(plan).__name__}")
        rounds = "parallel"
    names = plan.feature_names or [f"Column_{j}" for j in range(plan.n_features)]
    service = _Service(
        plan,
        provider,
        costs,
        RowReader(names, plan.categories, key, int(max_rows)),
        Admission(int(max_concurrency), int(max_queue)),
        rounds=rounds,
        n_threads=n_threads,
        max_body=int(max_body),
        max_depth=int(max_depth),
        timeout=float(timeout),
    )
    app = Starlette(
        routes=[
            Route("/predict", service.predict, methods=["POST"]),
            Route("/health", service.health, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error, Exception: server_error},
        lifespan=service.lifespan,
    )
    # Starlette answers "/predict/" with an empty 307 to "/predict": a 404 in JSON says more.
    app.router.redirect_slashes = False
    return app


class _Service:
    def __init__(
        self,
        plan: Plan,
        provider: Any,
        costs: CostModel | None,
        reader: RowReader,
        admission: Admission,
        *,
        rounds: Any,
        n_threads: int,
        max_body: int,
        max_depth: int,
        timeout: float,
    ) -> None:
        self.plan, self.provider, self.costs = plan, provider, costs_for(plan, costs)
        # Dense and lazy evaluation run the plan's native code where it compiles.
        self.engine = native_engine(plan, self.costs)
        self.reader, self.admission = reader, admission
        self.names, self.key = reader.names, reader.key
        self.n_threads = n_threads
        self.max_body, self.max_depth, self.timeout = max_body, max_depth, timeout
        # The store is looked up per round: the lifespan may give the provider its client.
        store = None if provider is None else (lambda keys: self.provider.with_keys(keys))
        self.batcher = Batcher(
            self.engine, self.costs, store, self.names, self.key, rounds=rounds, n_threads=n_threads
        )

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
        # The plan, its compiled code and the libraries loaded are some 150,000 objects that live
        # as long as the server; each full collection walked them all (0.4-0.6 s measured on a
        # loaded machine), a pause every request in flight waited for: the 32-client p99. Frozen,
        # a collection walks only what requests allocate.
        gc.collect()
        gc.freeze()
        try:
            yield
        finally:
            gc.unfreeze()
            if client is not None:
                await client.aclose()

    async def _warm_up(self) -> None:
        """Compile the kernels before the first request (numba loads them from its cache)."""
        row = np.full((1, self.plan.n_features), np.nan)
        evaluate(self.engine, row, self.costs, n_threads=self.n_threads)
        # Every value given: the lazy kernels run, the store is not asked.
        job = self.batcher.submit(
            row, np.ones_like(row, dtype=np.bool_), [None], asyncio.get_running_loop().time() + 600
        )
        await job.future

    async def health(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        return JSONResponse(
            {
                "status": "ok",
                "plan": type(self.plan).__name__,
                "task": self.plan.task,
                "features": self.names,
                "provider": type(self.provider).__name__ if self.provider else None,
                "requests": {"at_work": self.admission.at_work, "waiting": self.admission.waiting},
                "store_rounds": self.batcher.rounds,
            }
        )

    async def predict(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        # One deadline from the head to the answer: the body, the wait for a slot, the evaluation.
        deadline = asyncio.get_running_loop().time() + self.timeout
        try:
            body = await self._body(request, deadline)
            async with self.admission.slot(deadline):
                keys, values, given = self.reader.read(read_json(body, self.max_depth))
                ev, lo = await self._evaluate(keys, values, given, deadline)
                return JSONResponse({"results": self._results(keys, ev, lo)})
        except Exception as exc:  # the server must answer, whatever went wrong
            return error_response(*failure(exc, timeout=self.timeout, key=self.key))

    async def _body(self, request: Any, deadline: float) -> bytes:
        """The body, read before taking a slot: a client slow to send it holds none."""
        from starlette.requests import ClientDisconnect

        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            raise BadRequest(
                f"the request body has {declared} bytes; at most {self.max_body} are "
                "accepted (send fewer rows per request)",
                413,
            )
        chunks, size = [], 0
        try:
            async with asyncio.timeout_at(deadline):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > self.max_body:
                        raise BadRequest(
                            f"the request body exceeds {self.max_body} bytes (send fewer rows per request)",
                            413,
                        )
                    chunks.append(chunk)
        except TimeoutError:
            raise BadRequest(f"the request body did not arrive within {self.timeout:g} s", 408) from None
        except ClientDisconnect:
            raise BadRequest("the client disconnected before the end of the body", 400) from None
        return b"".join(chunks)

    async def _evaluate(
        self, keys: list[Any], values: np.ndarray, given: np.ndarray, deadline: float
    ) -> tuple[Evaluation, int]:
        """The evaluation holding the request's rows, and where they start in it."""
        if given.all():
            ev = evaluate(self.engine, values, self.costs, n_threads=self.n_threads)
            ev.cost.latency = np.zeros(len(keys))
            return ev, 0
        job = self.batcher.submit(values, given, keys, deadline)
        try:
            # The batch never waits for this request: past its deadline the handler answers
            # 504 and the batch answers its rows NaN without asking the store.
            async with asyncio.timeout_at(deadline):
                return await job.future
        finally:
            job.future.cancel()

    def _results(self, keys: list[Any], ev: Evaluation, lo: int) -> list[dict[str, Any]]:
        c, proba, latency = ev.cost, ev.proba, ev.cost.latency
        assert latency is not None  # _evaluate always measures it
        out = []
        for i, k in enumerate(keys, start=lo):
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


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
