"""The HTTP server of ``thrifty serve``: uvicorn with deadlines on connections, not a connection limit.

uvicorn (0.54) waits for a request head without limit: a client that connects and sends
nothing, or sends half a head and stalls, holds its connection for ever. Its httptools protocol
(or h11's, without httptools) is kept and given one deadline: ``header_timeout`` seconds from
the connection (or the first byte of a later request) to the end of the request head; past it
the connection is closed. What follows
the head (the body, the evaluation) is bounded by the application's request timeout. Idle
keep-alive connections are closed after ``keep_alive`` seconds, longer than clients keep theirs
(see ``KEEP_ALIVE``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from thrifty.exceptions import InputError
from thrifty.providers.base import missing_extra

# Seconds an idle keep-alive connection stays open. A client that reuses a connection the server
# is closing at that very moment gets EOF, so the server must wait longer than clients do:
# httpx keeps idle connections 5 s, aiohttp 15 s, nginx's upstream keepalive and an AWS ALB 60 s.
KEEP_ALIVE = 75
# Seconds from a connection (or the first byte of a request) to the end of the request head.
HEADER_TIMEOUT = 10.0


class Coalescing:
    """A transport whose writes of one turn of the event loop leave as one ``send``.

    uvicorn writes a response's head and its body in two calls; the socket transport sends
    each at once, so a one-row answer took two system calls and woke its client twice (on a
    loaded machine each wake-up of the client on loopback can preempt the server). Written
    bytes are held until the loop's next turn (``call_soon``), or until the transport is
    closed: nothing waits longer than the rest of the turn that wrote it.
    """

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        if not self._held:
            asyncio.get_running_loop().call_soon(self._flush)
        self._held.append(bytes(data))

    def _flush(self) -> None:
        held, self._held = self._held, []
        if held and not self._transport.is_closing():
            self._transport.write(b"".join(held))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._held))

    def __getattr__(self, name: str) -> Any:  # everything else is the transport's own
        return getattr(self._transport, name)


# Most bytes of a request head still incomplete (h11's limit, which the httptools protocol
# enforces too: like h11, it reads a longer head that arrives whole with its end).
MAX_HEAD = 16 * 1024
_BAD_HTTP = json.dumps({"error": "the request is not valid HTTP/1.1 (or its head exceeds 16 KiB)"}).encode()


class _HeadDeadline:
    """The deadline on each request head, shared by both protocols: armed when a head may
    begin (once per head: a client trickling a byte at a time does not push it back), stopped
    at its end; when it passes, a connection still waiting for its head is closed.
    ``_waiting_for_head`` says whether it is (each parser knows in its own way)."""

    _head_timer: asyncio.TimerHandle | None = None
    _header_timeout: float = HEADER_TIMEOUT
    transport: Any
    loop: Any

    def _waiting_for_head(self) -> bool:
        raise NotImplementedError

    def _await_head(self) -> None:
        if self._head_timer is None and not self.transport.is_closing():
            self._head_timer = self.loop.call_later(self._header_timeout, self._head_timed_out)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._waiting_for_head() and not self.transport.is_closing():
            self.transport.close()


def guarded_protocol(header_timeout: float = HEADER_TIMEOUT, http: str = "auto") -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with a deadline on each request head and JSON for malformed HTTP.

    ``http="auto"`` takes httptools' (a C parser: the server's CPU per one-row request fell
    by 7-17% against h11's with 32 clients, in paired runs) when it is installed, else h11's
    (pure Python); ``"h11"`` or ``"httptools"`` chooses.
    """
    if http not in ("auto", "h11", "httptools"):
        raise InputError(f"http must be 'auto', 'h11' or 'httptools', got {http!r}")
    if http != "h11":
        try:
            return _httptools_protocol(header_timeout)
        except ImportError:
            if http == "httptools":
                raise missing_extra("httptools", "serve") from None
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(_HeadDeadline, H11Protocol):
        _header_timeout = header_timeout

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(Coalescing(transport))  # type: ignore[arg-type]
            self._await_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            # IDLE: the next request's head has not ended yet (its first bytes may be here).
            if self.conn.their_state is h11.IDLE:
                self._await_head()
            else:
                self._stop_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head_timer()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(_BAD_HTTP)).encode()),
                (b"connection", b"close"),
            ]
            self.transport.write(self.conn.send(h11.Response(status_code=400, headers=headers)))
            self.transport.write(self.conn.send(h11.Data(data=_BAD_HTTP)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
            self.transport.close()

        def _waiting_for_head(self) -> bool:
            return self.conn.their_state is h11.IDLE

    return GuardedH11Protocol


def _httptools_protocol(header_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol (a C parser) with the guarantees of the h11 one: the same
    deadline on each request head, heads of at most 16 KiB, JSON for malformed HTTP."""
    import httptools
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpToolsProtocol(_HeadDeadline, HttpToolsProtocol):
        _header_timeout = header_timeout
        _in_head = True  # from the first byte of a request (or the connection) to its head's end
        _head_bytes = 0

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(Coalescing(transport))  # type: ignore[arg-type]
            self._await_head()

        _ended = False  # a request ended within the bytes being parsed

        def data_received(self, data: bytes) -> None:
            self._ended = False
            super().data_received(data)
            # The head has not ended: what came counts towards its 16 KiB, unless a request
            # ended in it too (pipelined: the new head's share of it is unknown, not counted).
            if self._in_head and not self._ended and not self.transport.is_closing():
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEAD:
                    self.send_400_response("head too large")

        def on_message_complete(self) -> None:
            self._ended = True
            super().on_message_complete()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._in_head, self._head_bytes = True, 0
            self._await_head()

        def on_headers_complete(self) -> None:
            self._in_head = False
            self._stop_head_timer()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_head_timer()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            self.transport.write(
                b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%b" % (len(_BAD_HTTP), _BAD_HTTP)
            )
            self.transport.close()

        def _waiting_for_head(self) -> bool:
            return self._in_head

    assert httptools  # imported above so that a missing module falls back to h11 there
    return GuardedHttpToolsProtocol


def build_server(
    app: Any,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    keep_alive: int = KEEP_ALIVE,
    header_timeout: float = HEADER_TIMEOUT,
    log_level: str = "warning",
    http: str = "auto",
) -> Any:
    """A ``uvicorn.Server`` for ``app`` (from :func:`create_app`), not started.

    Parameters
    ----------
    app : ASGI application
    host, port
        Where to listen.
    keep_alive : int, default=75
        Seconds an idle keep-alive connection is kept open; longer than clients keep theirs,
        so that none reuses a connection as the server closes it.
    header_timeout : float, default=10
        Seconds allowed from a connection (or the first byte of a request) to the end of the
        request head; past them the connection is closed.
    log_level : str, default="warning"
        uvicorn's log level.
    http : {"auto", "httptools", "h11"}, default="auto"
        The HTTP parser: httptools' (C, in the ``serve`` extra) when installed, else h11's; the
        same guarantees either way (head deadline, 16 KiB heads, JSON for malformed HTTP).

    Returns
    -------
    uvicorn.Server
        ``.run()`` serves until interrupted; admission control is the application's (no
        connection limit: an idle connection costs a file descriptor, not a slot).
    """
    import uvicorn

    if not header_timeout > 0 or not keep_alive > 0:
        raise InputError(
            f"header_timeout and keep_alive must be positive, got {header_timeout}, {keep_alive}"
        )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(header_timeout, http),
        timeout_keep_alive=keep_alive,
        log_level=log_level,
    )
    return uvicorn.Server(config)


def run(app: Any, **kwargs: Any) -> None:
    """Serve ``app`` until interrupted (what ``thrifty serve`` runs); options as for :func:`build_server`."""
    build_server(app, **kwargs).run()
