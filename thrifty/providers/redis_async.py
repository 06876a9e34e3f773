"""A Redis connection on the event loop, for the server's rounds: one command written and its
reply parsed on an asyncio protocol, no thread and no redis-py call per round.

The server's batcher awaits each round. A synchronous redis-py call must run in a worker thread
(``asyncio.to_thread``): measured on loopback, the hop to the thread and back and redis-py's
packing and parsing cost more than the round trip itself (about 125 µs per one-row round against
a 35 µs ``PING``). Here the command is written on a connection the event loop watches, and the
reply, parsed as it arrives (RESP2: simple strings, errors, integers, bulk strings, arrays),
resolves the round's future: the batcher resumes on the loop's next turn.

One connection per event loop, one command at a time (the batcher asks one round at a time; a
lock orders other callers). A command cancelled or failed while its reply is under way leaves
the connection's state unknown: it is closed, and the next command opens a new one. Only plain
TCP and Unix-socket clients are served here (no TLS, no credential provider):
:func:`async_link` says None for others, which keep the worker thread.
"""

from __future__ import annotations

import asyncio
from typing import Any


class RespError(Exception):
    """An error reply of Redis (``-NOSCRIPT ...``, ``-WRONGTYPE ...``): its text."""


class _Incomplete(Exception):
    """The buffer ends inside a reply."""


def encode_command(args: tuple[Any, ...]) -> bytes:
    """``args`` as a RESP array of bulk strings (str as UTF-8, int in decimal)."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        raw = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%b\r\n" % (len(raw), raw))
    return b"".join(parts)


def parse_reply(buf: bytes | bytearray, pos: int = 0) -> tuple[Any, int]:
    """One RESP2 reply of ``buf`` from ``pos``: the value (an error reply as a
    :class:`RespError`, nil as None) and the position after it.

    Raises ``_Incomplete`` when ``buf`` ends before the reply does.
    """
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise _Incomplete
    kind, line = buf[pos : pos + 1], bytes(buf[pos + 1 : end])
    pos = end + 2
    if kind == b"$":
        n = int(line)
        if n < 0:
            return None, pos
        if len(buf) < pos + n + 2:
            raise _Incomplete
        return bytes(buf[pos : pos + n]), pos + n + 2
    if kind == b":":
        return int(line), pos
    if kind == b"*":
        n = int(line)
        if n < 0:
            return None, pos
        items = []
        for _ in range(n):
            item, pos = parse_reply(buf, pos)
            items.append(item)
        return items, pos
    if kind == b"+":
        return line, pos
    if kind == b"-":
        return RespError(line.decode("utf-8", "replace")), pos
    raise ConnectionError(f"not a Redis reply: {bytes(buf[pos - 2 - len(line) - 1 : pos])[:40]!r}")


class _Protocol(asyncio.Protocol):
    """Replies parsed as they arrive; ``waiter`` gets the reply of the command in flight."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiter: asyncio.Future[Any] | None = None
        self.transport: asyncio.Transport | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        try:
            reply, pos = parse_reply(self.buf)
        except _Incomplete:
            return
        except Exception as exc:  # not Redis speaking
            waiter.set_exception(exc)
            return
        del self.buf[:pos]
        waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError(f"the connection was closed ({exc or 'EOF'})"))


class AsyncLink:
    """Commands to one Redis server from the running event loop (see the module's docstring).

    Parameters
    ----------
    options : dict
        Where and how to connect: ``host``, ``port`` or ``path``, ``db``, ``username``,
        ``password``, ``socket_connect_timeout`` (redis-py's connection keywords).
    """

    def __init__(self, options: dict[str, Any]) -> None:
        self.options = options
        self._loop: asyncio.AbstractEventLoop | None = None
        self._proto: _Protocol | None = None
        self._lock: asyncio.Lock | None = None

    async def call(self, *args: Any) -> Any:
        """Send one command and return its reply (an error reply is returned as a RespError)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a server may be run by several loops in turn (tests do)
            self._loop, self._proto, self._lock = loop, None, asyncio.Lock()
        assert self._lock is not None
        async with self._lock:
            proto = self._proto
            if proto is None or proto.closed:
                proto = self._proto = await self._connect(loop)
            try:
                return await _send(proto, loop, encode_command(args))
            except BaseException:
                # Cancelled (a deadline) or failed with the reply under way: state unknown.
                self._close()
                raise

    def _close(self) -> None:
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.close()
        self._proto = None

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Protocol:
        o = self.options
        timeout = o.get("socket_connect_timeout") or 10.0
        async with asyncio.timeout(timeout):
            if o.get("path"):
                _, proto = await loop.create_unix_connection(_Protocol, o["path"])
            else:
                _, proto = await loop.create_connection(
                    _Protocol, o.get("host") or "localhost", int(o.get("port") or 6379)
                )
            try:
                if o.get("password"):
                    auth = (o["username"], o["password"]) if o.get("username") else (o["password"],)
                    _ok(await _send(proto, loop, encode_command(("AUTH", *auth))))
                if int(o.get("db") or 0):
                    _ok(await _send(proto, loop, encode_command(("SELECT", int(o["db"])))))
            except BaseException:
                assert proto.transport is not None
                proto.transport.close()
                raise
        return proto


async def _send(proto: _Protocol, loop: asyncio.AbstractEventLoop, command: bytes) -> Any:
    if proto.closed or proto.transport is None:
        raise ConnectionError("the connection was closed")
    proto.waiter = loop.create_future()
    proto.transport.write(command)
    return await proto.waiter


def _ok(reply: Any) -> None:
    if isinstance(reply, RespError):
        raise ConnectionError(f"Redis refused the connection's set-up: {reply}")


def async_link(client: Any) -> AsyncLink | None:
    """An :class:`AsyncLink` to the server a redis-py client connects to, or None when the
    client connects in a way this link does not (TLS, a credential provider, a custom
    connection class): that client's rounds keep running in a worker thread."""
    try:
        import redis.connection as rc
    except ImportError:
        return None
    pool = getattr(client, "connection_pool", None)
    if pool is None or pool.connection_class not in (rc.Connection, rc.UnixDomainSocketConnection):
        return None
    options = dict(pool.connection_kwargs)
    if options.get("credential_provider") is not None:
        return None
    return AsyncLink(options)
