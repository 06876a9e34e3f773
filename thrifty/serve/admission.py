"""Admission control of ``thrifty serve``: requests at work are counted, not connections.

uvicorn's ``limit_concurrency`` counts open connections, so clients holding idle connections (or
a burst of new ones) turned every request away, ``/health`` included. Here only requests that
evaluate are counted: at most ``limit`` at work, up to ``queue`` more waiting for a slot in order
of arrival, and any beyond that refused at once with 503.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator

from thrifty.serve.errors import Busy


class Admission:
    """At most ``limit`` requests at work at once and ``queue`` waiting; more are refused.

    Not bound to an event loop until a request waits, and then only for that wait (one app can be
    served by several loops in turn, as tests do).

    Parameters
    ----------
    limit : int
        Requests evaluated at once.
    queue : int
        Requests allowed to wait for a slot; one arriving when as many wait is refused at once,
        so a full server answers in microseconds instead of piling up work.
    """

    def __init__(self, limit: int, queue: int) -> None:
        self.limit, self.queue = limit, queue
        self.at_work = 0
        self._waiting: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Requests waiting for a slot now."""
        return len(self._waiting)

    @contextlib.asynccontextmanager
    async def slot(self, deadline: float) -> AsyncIterator[None]:
        """Hold a slot for the block, waiting for one until ``deadline`` (the event loop's clock).

        Raises
        ------
        Busy
            The queue is full, or no slot came free before ``deadline``.
        """
        if self.at_work < self.limit:
            self.at_work += 1
        else:
            await self._wait(deadline)
        try:
            yield
        finally:
            self._release()

    async def _wait(self, deadline: float) -> None:
        if len(self._waiting) >= self.queue:
            raise Busy(
                f"the server is busy ({self.at_work} requests at work, {len(self._waiting)} "
                "waiting); retry in a moment"
            )
        turn = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            async with asyncio.timeout_at(deadline):
                await turn
        except BaseException as exc:
            if turn.done() and not turn.cancelled():
                self._release()  # the slot was handed over as this request gave up: pass it on
            else:
                self._waiting.remove(turn)
            if isinstance(exc, TimeoutError):
                raise Busy("the server is busy: no slot came free in time; retry in a moment") from None
            raise

    def _release(self) -> None:
        """Hand the slot to the longest-waiting request, or free it."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self.at_work -= 1
