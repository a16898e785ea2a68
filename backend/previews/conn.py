"""One client's connection to the preview listener: reading its requests with h11 under one
bound, answering what the proxy answers itself, and the connection to the app it keeps
between requests. What each request is for is the front's (front.py) to decide.

A request head (its request line and headers together) of at most :data:`MAX_HEAD`
(64 KiB): 431 past it, 400 for a head h11 refuses. A client that sends nothing for
:data:`IDLE` seconds between requests, or takes longer than ``PREVIEW_BODY_TIMEOUT`` between
two pieces of a head or a body, is cut off; what a client gets wrong is counted
(``planact_preview_malformed_requests``) and logged at debug level only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

import h11

from backend.observe import preview_metrics as metrics
from backend.previews.handoff import readable_now, receive_connection
from backend.previews.headers import own_answer
from backend.previews.splice import Splicer

if TYPE_CHECKING:
    from backend.previews.proxy import Found, PreviewProxy

log = logging.getLogger(__name__)

IDLE = 5.0  # seconds a kept-alive connection may wait for its next request (uvicorn's own)
HEAD_TIMEOUT = 30.0  # seconds a request head may take from its first byte on, at most
MAX_HEAD = 65536  # bytes of a request or answer head
HEAD_READ = 16384  # bytes read at once while a head is awaited (the body after it is spliced)
STREAM_READ = 1 << 20  # bytes read at once of a body relayed through h11
NOT_FOUND = b"Not found."  # the answer to anything that names no live preview


class Connection:
    """One client's connection: its requests in turn (kept alive, pipelined)."""

    def __init__(
        self, proxy: PreviewProxy, client: socket.socket, peer: Any, body_timeout: float
    ) -> None:
        self.proxy = proxy
        self.client = client
        self.peer = peer
        self.body_timeout = body_timeout
        self.loop = asyncio.get_running_loop()
        self.pending = b""  # bytes of the client's read past the last request
        self.answered = 0  # requests answered on this connection
        self.upstream = AppConnection(self)

    # -- reading -------------------------------------------------------------------------
    async def next_head(self) -> tuple[h11.Connection, h11.Request] | None:
        """The next request's head and the h11 connection that read it; None when the
        client is gone, idle too long, or sent a head it was answered an error for."""
        server = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        if self.pending:  # (nothing fed means nothing: b"" would mean the end)
            server.receive_data(self.pending)
            self.pending = b""
        head_by: float | None = None  # when the head must be in, from its first byte on
        while True:
            try:
                event = server.next_event()
            except h11.RemoteProtocolError as exc:
                await self._refuse(server, exc)
                return None
            if isinstance(event, h11.Request):
                return server, event
            if event is not h11.NEED_DATA:
                return None  # the client closed between requests
            started = bool(server.trailing_data[0]) or head_by is not None
            if self.answered and not started:  # between two requests
                until = self.loop.time() + IDLE
            else:
                head_by = head_by or self.loop.time() + HEAD_TIMEOUT
                until = min(head_by, self.loop.time() + self.body_timeout)
            try:
                async with asyncio.timeout_at(until):
                    data = await self.loop.sock_recv(self.client, HEAD_READ)
            except TimeoutError:
                if started or not self.answered:
                    metrics.malformed("timeout")
                return None
            if not data:
                return None
            server.receive_data(data)

    async def _refuse(self, server: h11.Connection, exc: h11.RemoteProtocolError) -> None:
        status = exc.error_status_hint
        metrics.malformed("too_large" if status == 431 else "malformed")
        log.debug("previews: a request refused (%d): %s", status, exc)
        message = b"Request head too large." if status == 431 else b"Bad request."
        metrics.request(status)
        with contextlib.suppress(OSError, h11.ProtocolError):
            await self.send_answer(server, status, message, close=True)

    async def recv(self, size: int) -> bytes:
        """The client's next bytes (at most ``size``), within the body timeout."""
        async with asyncio.timeout(self.body_timeout):
            return await self.loop.sock_recv(self.client, size)

    async def body_events(self, server: h11.Connection) -> Any:
        """The request body's h11 events (Data, then EndOfMessage), read as needed."""
        while True:
            event = server.next_event()
            if event is h11.NEED_DATA:
                data = await self.recv(STREAM_READ)
                server.receive_data(data)
                if not data:
                    raise h11.RemoteProtocolError("the client closed mid-body")
                continue
            yield event
            if isinstance(event, h11.EndOfMessage):
                return

    # -- answering -----------------------------------------------------------------------
    async def send(self, data: bytes | None) -> None:
        if data:
            await self.loop.sock_sendall(self.client, data)

    async def send_answer(
        self,
        server: h11.Connection,
        status: int,
        message: bytes,
        *,
        close: bool,
        kind: bytes = b"text/plain; charset=utf-8",
    ) -> None:
        headers = own_answer(kind, len(message), close=close)
        reason = HTTPStatus(status).phrase.encode()
        data = server.send(h11.Response(status_code=status, headers=headers, reason=reason))
        try:
            body = server.send(h11.Data(data=message)) or b""
        except h11.LocalProtocolError:  # the answer to a HEAD: its head alone
            body = b""
        await self.send((data or b"") + body)
        await self.send(server.send(h11.EndOfMessage()))

    async def answer(
        self,
        server: h11.Connection,
        status: int,
        message: bytes,
        kind: bytes = b"text/plain; charset=utf-8",
    ) -> bool:
        """An answer of the proxy's own; whether the connection goes on (the request's body,
        when it has one, is read and dropped first, so that the next request is found)."""
        try:
            await self._drain(server)
        except (h11.ProtocolError, OSError, TimeoutError):
            with contextlib.suppress(OSError, h11.ProtocolError):
                await self.send_answer(server, status, message, close=True)
            return False
        await self.send_answer(server, status, message, close=False, kind=kind)
        return self.finish(server)

    async def _drain(self, server: h11.Connection, limit: int = 1 << 20) -> None:
        """Read the request's body and drop it; past ``limit`` bytes, give up (close)."""
        seen = 0
        async for event in self.body_events(server):
            if isinstance(event, h11.Data):
                seen += len(event.data)
                if seen > limit:
                    raise h11.LocalProtocolError("a body too large to skip")

    def finish(self, server: h11.Connection) -> bool:
        """After an answer: whether the connection serves another request (the bytes read
        past this one kept for it)."""
        if server.our_state is not h11.DONE or server.their_state is not h11.DONE:
            return False
        self.pending = server.trailing_data[0]
        return True


class AppConnection:
    """The connection to a service's app that a client's connection keeps between requests."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.sock: socket.socket | None = None
        self.path = ""
        self.splicer = Splicer()

    async def get(self, found: Found) -> socket.socket:
        """The one kept from the last request when it is the same app's and still open, else
        a new one from the app's forwarder."""
        path = str(found.row.socket)
        if self.sock is not None and (self.path != path or readable_now(self.sock)):
            self.drop()
        if self.sock is None:
            self.sock = await receive_connection(path, self.conn.proxy.trusted(found.row))
            self.path = path
        return self.sock

    def drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def close(self) -> None:
        self.splicer.close()
        self.drop()
