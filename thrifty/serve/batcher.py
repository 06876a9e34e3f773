"""Requests in flight advance together: one lazy evaluation per batch of requests, one store query
per round for every batch.

``thrifty serve`` used to evaluate each request on its own, so each of its rounds was one query
to the store: with 32 clients, 32 queries a round, each paying the store's and the driver's
per-query overhead. Here one driver task (on the event loop, alive while there is work) runs
rounds:

1. requests that arrived since the last round form a new *batch*: their rows are stacked and
   one ``lazy_rounds`` generator advances them (a request never waits behind a long batch
   more than the round in flight);
2. every batch's pending feature requests are merged by feature and sent to the store as
   **one** round (one SQL query, one Redis pipeline), keyed by the keys of the rows asking;
3. the answers go back to each batch's generator, which advances its rows to their next block.

Rows are evaluated independently by the kernels, so each request's answer (predictions, costs,
latency) is bit for bit what it would be alone. A request past its deadline is answered 504 by
its handler, which never waits on the batch; its rows stay in their batch but are answered NaN
without asking the store, and a batch whose requests have all gone is closed. A store failure
in a merged round is retried request by request, so a request with a bad key fails alone.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from thrifty.costs import CostModel
from thrifty.runtime.evaluation import Evaluation
from thrifty.runtime.lazy import Requests, RoundLatency, lazy_rounds
from thrifty.serve.rows import BadRequest

Rounds = Generator[Requests, list[np.ndarray], Evaluation]


@dataclass
class Job:
    """One request's rows: what it gives, its keys, and the future its handler awaits.

    The future's result is ``(evaluation, lo)``: the request's rows are ``lo:lo + n`` of the
    batch's evaluation.
    """

    values: np.ndarray
    given: np.ndarray
    keys: list[Any]
    deadline: float
    future: asyncio.Future[tuple[Evaluation, int]]

    @property
    def gone(self) -> bool:
        """Answered already (failed, or abandoned by its handler past its deadline)."""
        return self.future.done()


@dataclass
class _Batch:
    """Requests evaluated by one generator, their rows stacked in arrival order."""

    jobs: list[Job]
    gen: Rounds
    values: np.ndarray
    given: np.ndarray
    keys: list[Any]
    owner: np.ndarray  # row -> index of its job
    clock: RoundLatency
    unkeyed: bool  # some row has no key (it fails if it needs a fetch)
    requests: Requests = field(default_factory=list)
    finished: bool = False

    def live_rows(self) -> np.ndarray:
        """Per row: its request still waits for the answer."""
        alive = np.array([not job.gone for job in self.jobs])
        return alive[self.owner]


@dataclass
class _Part:
    """Rows of one batch blocked on one feature that the store must answer."""

    batch: _Batch
    slot: int  # index of the (feature, rows) pair in the batch's round
    where: np.ndarray  # positions in that pair's rows that the store answers
    feature: int
    keys: list[Any]


class Batcher:
    """Evaluates requests in batches, one store round for every batch in flight.

    Parameters
    ----------
    model, costs
        What is evaluated (a Plan, or the compiled plan ``lazy_rounds`` runs natively) and
        priced.
    store : callable or None
        ``store(keys)``: a round provider for rows keyed by ``keys`` (a thrifty store provider's
        ``with_keys``), or None when rows must give every feature.
    names, key : list of str, str
        Feature names and the rows' key field, for messages.
    rounds : {"in_order", "parallel"} or a round policy
        What each round fetches, as ``lazy_rounds(rounds=...)`` takes it.
    n_threads : int
        Kernel threads.
    max_batch_rows : int
        Most rows a new batch takes; requests beyond wait for the next round's batch.
    """

    def __init__(
        self,
        model: Any,
        costs: CostModel,
        store: Callable[[list[Any]], Any] | None,
        names: list[str],
        key: str,
        *,
        rounds: Any = "in_order",
        n_threads: int = 1,
        max_batch_rows: int = 4096,
    ) -> None:
        self.model, self.costs, self.store = model, costs, store
        self.names, self.key = names, key
        self.policy, self.n_threads, self.max_batch_rows = rounds, n_threads, max_batch_rows
        self.is_async, self.method = False, "fetch"
        if store is not None:
            probe = store([])
            # A provider that can await a round on the event loop (Redis) is asked so: no
            # worker thread per round.
            if inspect.iscoroutinefunction(getattr(probe, "fetch_async", None)):
                self.method = "fetch_async"
            self.is_async = inspect.iscoroutinefunction(getattr(probe, self.method))
        self._pending: list[Job] = []
        self._batches: list[_Batch] = []
        self._task: asyncio.Task[None] | None = None
        self.rounds = 0  # store rounds sent (for /health)

    def submit(self, values: np.ndarray, given: np.ndarray, keys: list[Any], deadline: float) -> Job:
        """Queue a request's rows for the next batch; await ``job.future`` for its evaluation."""
        loop = asyncio.get_running_loop()
        job = Job(values, given, keys, deadline, loop.create_future())
        self._pending.append(job)
        # One driver per loop, alive while there is work (an app may be served by several
        # loops in turn, as tests do).
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:
            self._task = loop.create_task(self._drive())
        return job

    async def _drive(self) -> None:
        try:
            while self._pending or self._batches:
                if self._pending:
                    self._start_batch()
                self._batches = [b for b in self._batches if self._keep(b)]
                if not self._batches:
                    continue
                await self._round()
        except BaseException as exc:  # a bug: every waiting request must still be answered
            for job in self._pending + [j for b in self._batches for j in b.jobs]:
                _fail(job, exc)
            self._pending, self._batches = [], []
            if not isinstance(exc, Exception):
                raise

    def _start_batch(self) -> None:
        jobs: list[Job] = []
        size = 0
        while self._pending and (not jobs or size + len(self._pending[0].keys) <= self.max_batch_rows):
            job = self._pending.pop(0)
            if not job.gone:
                jobs.append(job)
                size += len(job.keys)
        if not jobs:
            return
        values = np.concatenate([j.values for j in jobs])
        given = np.concatenate([j.given for j in jobs])
        owner = np.repeat(np.arange(len(jobs)), [len(j.keys) for j in jobs])
        gen = self._generator(len(values))
        clock = RoundLatency(self.costs, len(given), "max", given)
        keys = [k for j in jobs for k in j.keys]
        batch = _Batch(jobs, gen, values, given, keys, owner, clock, any(k is None for k in keys))
        self._advance(batch, None)
        self._batches.append(batch)

    def _generator(self, n: int) -> Rounds:
        return lazy_rounds(self.model, self.costs, n_rows=n, n_threads=self.n_threads, rounds=self.policy)

    def _keep(self, batch: _Batch) -> bool:
        """False (and the generator closed) once the batch is finished or all its requests gone."""
        if batch.finished:
            return False
        if all(job.gone for job in batch.jobs):
            batch.gen.close()
            return False
        return True

    def _advance(self, batch: _Batch, answers: list[np.ndarray] | None) -> None:
        """Send the round's answers (None: start) and keep the next round, or settle the jobs."""
        try:
            if answers is None:
                batch.requests = next(batch.gen)
            else:
                batch.clock.add(batch.requests)
                batch.requests = batch.gen.send(answers)
        except StopIteration as stop:
            batch.finished = True
            ev: Evaluation = stop.value
            ev.cost.latency = batch.clock.latency
            lo = 0
            for job in batch.jobs:
                if not job.gone:
                    job.future.set_result((ev, lo))
                lo += len(job.keys)
        except Exception as exc:
            batch.finished = True
            for job in batch.jobs:
                _fail(job, exc)

    async def _round(self) -> None:
        """One store round for every batch: given values first, one merged fetch for the rest."""
        out: list[list[np.ndarray]] = []
        parts: list[_Part] = []
        for batch in self._batches:
            answers, wanted = self._split(batch)
            out.append(answers)
            parts += wanted
        if parts:
            self.rounds += 1
            await self._fetch(parts, out)
        else:
            await asyncio.sleep(0)  # every value at hand: still let the loop take requests
        for batch, answers in zip(list(self._batches), out):
            if not all(job.gone for job in batch.jobs):
                self._advance(batch, answers)

    def _split(self, batch: _Batch) -> tuple[list[np.ndarray], list[_Part]]:
        """The values at hand for each pair of the batch's round (NaN for rows whose request is
        gone), and the parts the store must answer."""
        # Every request of the batch waiting (the common case): no mask of live rows.
        live = batch.live_rows() if any(job.gone for job in batch.jobs) else None
        answers, parts = [], []
        for slot, (f, rows) in enumerate(batch.requests):
            answers.append(batch.values[rows, f])  # a copy (fancy indexing)
            lacking = ~batch.given[rows, f]
            if live is not None:
                lacking &= live[rows]
            if not lacking.any():
                continue
            where = np.flatnonzero(lacking)
            if self.store is None or batch.unkeyed:  # a row may be unable to fetch: find it
                for j in np.unique(batch.owner[rows[where]]):
                    problem = self._problem(batch, int(f), rows[where], int(j))
                    if problem is not None:
                        _fail(batch.jobs[j], problem)
                where = where[~_gone_rows(batch, rows[where])]  # requests failed just now
            if len(where):
                keys = [batch.keys[r] for r in rows[where]]
                parts.append(_Part(batch, slot, where, int(f), keys))
        return answers, parts

    def _problem(self, batch: _Batch, f: int, rows: np.ndarray, j: int) -> BadRequest | None:
        """Why job ``j``'s rows among ``rows`` cannot be fetched ``f`` (None when they can)."""
        first = batch.jobs[j]
        lo = int(np.flatnonzero(batch.owner == j)[0])
        mine = rows[batch.owner[rows] == j] - lo
        if self.store is None:
            return BadRequest(
                f"row {mine[0]} needs feature {self.names[f]!r}, which the request "
                "does not give, and the server has no feature provider (start it with "
                "--provider)"
            )
        unkeyed = [int(r) for r in mine if first.keys[r] is None]
        if unkeyed:
            return BadRequest(
                f"row {unkeyed[0]} needs feature {self.names[f]!r} from the "
                f"feature provider but has no {self.key!r}"
            )
        return None

    async def _fetch(self, parts: list[_Part], out: list[list[np.ndarray]]) -> None:
        """One merged store round; when it fails, each request's parts alone, so that a
        failure that is a request's own (a key with no record) fails that request only."""
        index = {id(b): i for i, b in enumerate(self._batches)}
        deadline = max(j.deadline for b in self._batches for j in b.jobs if not j.gone)
        try:
            self._place(parts, await self._ask(parts, deadline), out, index)
            return
        except TimeoutError as exc:
            for p in parts:
                for job in p.batch.jobs:
                    _fail(job, exc)
            return
        except Exception:
            pass
        for job, own in _by_job(parts):
            if not job.gone:
                try:
                    self._place(own, await self._ask(own, job.deadline), out, index)
                except Exception as exc:
                    _fail(job, exc)

    async def _ask(self, parts: list[_Part], deadline: float) -> list[np.ndarray]:
        """The store's values of each part, asked as one round of one pair per feature."""
        assert self.store is not None
        keys: list[Any] = []
        spans: list[tuple[int, int, int]] = []  # per part: its index, its pair, where it starts
        requests: Requests = []
        by_feature: dict[int, list[int]] = {}
        for i, p in enumerate(parts):
            by_feature.setdefault(p.feature, []).append(i)
        for f in sorted(by_feature):
            lo = len(keys)
            for i in by_feature[f]:
                spans.append((i, len(requests), len(keys) - lo))
                keys += parts[i].keys
            requests.append((f, np.arange(lo, len(keys), dtype=np.int64)))
        fetch = getattr(self.store(keys), self.method)
        loop = asyncio.get_running_loop()
        # Bounded by the latest deadline of the requests asking: past it nobody waits for the
        # answer (a query under way in a worker thread finishes there, unread).
        async with asyncio.timeout_at(max(deadline, loop.time())):
            if self.is_async:
                answers = await fetch(requests)
            else:
                answers = await asyncio.to_thread(fetch, requests)
        placed: list[np.ndarray] = [np.empty(0)] * len(parts)
        for i, pair, at in spans:
            placed[i] = np.asarray(answers[pair], dtype=np.float64)[at : at + len(parts[i].keys)]
        return placed

    @staticmethod
    def _place(
        parts: list[_Part], values: list[np.ndarray], out: list[list[np.ndarray]], index: dict[int, int]
    ) -> None:
        for p, v in zip(parts, values):
            out[index[id(p.batch)]][p.slot][p.where] = v


def _by_job(parts: list[_Part]) -> list[tuple[Job, list[_Part]]]:
    """The parts split by the request their rows belong to."""
    by_job: dict[int, tuple[Job, list[_Part]]] = {}
    for p in parts:
        owners = p.batch.owner[p.batch.requests[p.slot][1][p.where]]
        for j in np.unique(owners):
            mine = owners == j
            job = p.batch.jobs[int(j)]
            keys = [k for k, m in zip(p.keys, mine) if m]
            by_job.setdefault(id(job), (job, []))[1].append(
                _Part(p.batch, p.slot, p.where[mine], p.feature, keys)
            )
    return list(by_job.values())


def _gone_rows(batch: _Batch, rows: np.ndarray) -> np.ndarray:
    return np.array([batch.jobs[j].gone for j in batch.owner[rows]], dtype=np.bool_)


def _fail(job: Job, exc: BaseException) -> None:
    if not job.gone:
        job.future.set_exception(exc)
