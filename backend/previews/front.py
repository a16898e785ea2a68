"""The preview listener's connections, read by our own code first.

Each request's head is parsed here (h11) and its token checked by the proxy
(:meth:`PreviewProxy.resolve`), on every request of a kept-alive connection. A plain
HTTP/1.1 request to a service's app — no body, or a ``Content-Length`` one — is forwarded
here: the heads through h11, the bodies of known length moved by
:mod:`backend.previews.splice` (an answer's socket to socket by splice(2), a request's
through a buffer), an answer through h11 when the app answers chunked or until it closes.
Everything else (a WebSocket, a static page, an unknown token, a chunked upload, HTTP/1.0,
a head h11 refuses) goes, with the bytes read so far, to uvicorn's protocol and the proxy's
ASGI path for the rest of the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import h11

from backend.previews.handoff import receive_connection
from backend.previews.proxy import HOP_BY_HOP_B, PREFIX, forwarded_headers
from backend.previews.splice import Splicer, copy
from backend.previews.upstream import readable_now

if TYPE_CHECKING:
    from backend.previews.proxy import PreviewProxy
    from backend.store.rows import StoredPreview

log = logging.getLogger(__name__)

IDLE = 5.0  # seconds a kept-alive connection may wait for its next request (uvicorn's own)
HEAD_TIMEOUT = 30.0  # seconds a connection's first request head, or a started one, may take
MAX_HEAD = 65536  # bytes of a request or answer head
HEAD_READ = 16384  # bytes read at once while a head is awaited (the body after it is spliced)
STREAM_READ = 1 << 20  # bytes read at once of an answer relayed through h11
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
NO_BODY = frozenset({204, 304})

HandOver = Callable[[socket.socket, bytes], Awaitable[None]]


class _Route:
    """Where one request goes: the app behind ``socket_path``, at ``target``."""

    def __init__(
        self, request: h11.Request, scope: dict[str, Any], token: str, row: StoredPreview
    ) -> None:
        self.request = request
        self.scope = scope
        self.token = token
        self.socket_path = str(row.socket)
        self.row = row


class Front:
    """Serves the preview listener's connections (one :meth:`serve` task each)."""

    def __init__(self, proxy: PreviewProxy, hand_over: HandOver) -> None:
        self.proxy = proxy
        self.hand_over = hand_over

    async def serve(self, client: socket.socket, peer: Any) -> None:
        await _Connection(self, client, peer).run()


class _Connection:
    def __init__(self, front: Front, client: socket.socket, peer: Any) -> None:
        self.front = front
        self.client: socket.socket | None = client
        self.peer = peer
        self.loop = asyncio.get_running_loop()
        self.pending = b""  # bytes of the client's not yet handled
        self.app: socket.socket | None = None
        self.app_path = ""
        self.splicer = Splicer()
        self.answered = 0  # requests answered on this connection

    async def run(self) -> None:
        try:
            while self.client is not None:
                got = await self._next_head()
                if got is None:
                    return
                server, request = got
                route = await self._route(request) if request is not None else None
                if route is None:  # the rest of the connection is uvicorn's
                    client, self.client = self.client, None
                    await self.front.hand_over(client, self.pending)
                    return
                if not await self._forward(server, route):
                    return
                self.answered += 1
        except (OSError, h11.ProtocolError) as exc:  # the client sees its connection closed
            log.debug("previews: a connection ended: %r", exc)
        except Exception:  # the store failing, say: this connection ends, not the listener
            log.exception("previews: a connection failed")
        finally:
            self.splicer.close()
            self._drop_app()
            if self.client is not None:
                self.client.close()

    # -- the client's side -----------------------------------------------------------------
    async def _next_head(self) -> tuple[h11.Connection, h11.Request | None] | None:
        """The next request's head (and the h11 connection that read it); request None for
        one h11 refuses; None when the client is gone or idle too long."""
        assert self.client is not None
        server = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        if self.pending:  # (nothing fed means nothing: b"" would mean the end)
            server.receive_data(self.pending)
        head_by: float | None = None  # when the head must be in, from its first byte on
        while True:
            try:
                event = server.next_event()
            except h11.RemoteProtocolError:
                return server, None
            if isinstance(event, h11.Request):
                return server, event
            if event is not h11.NEED_DATA:
                return None  # the client closed between requests
            try:
                if self.answered and not self.pending:  # between two requests
                    until = self.loop.time() + IDLE
                else:
                    head_by = head_by or self.loop.time() + HEAD_TIMEOUT
                    until = head_by
                async with asyncio.timeout_at(until):
                    data = await self.loop.sock_recv(self.client, HEAD_READ)
            except TimeoutError:
                return None
            if not data:
                return None
            self.pending += data
            server.receive_data(data)

    async def _route(self, request: h11.Request) -> _Route | None:
        """The service a request is forwarded to here, its token checked; None for any
        request that is not a plain HTTP/1.1 one to a live service's app."""
        if request.http_version != b"1.1":
            return None
        headers = list(request.headers)
        if any(k in (b"transfer-encoding", b"upgrade") for k, _ in headers):
            return None
        raw_path, _, query = bytes(request.target).partition(b"?")
        scope = {
            "type": "http",
            "method": request.method.decode("ascii"),
            "path": unquote(raw_path.decode("latin-1")),
            "raw_path": raw_path,
            "query_string": query,
            "headers": headers,
            "client": self.peer,
            "scheme": "http",
        }
        found = await self.front.proxy.resolve(scope)
        if found is None or found[2].kind != "service":
            return None
        token = found[0]
        prefix = f"{PREFIX}{token}".encode()
        if raw_path.startswith(prefix + b"/") or raw_path == prefix:
            rest = raw_path[len(prefix) :] or b"/"
        elif scope["path"].startswith(prefix.decode() + "/") or scope["path"] == prefix.decode():
            return None  # an encoded token: the ASGI path reads it
        else:
            rest = raw_path  # by the preview's own host, or by its Referer
        scope["target"] = rest + (b"?" + query if query else b"")
        return _Route(request, scope, token, found[2])

    # -- one request -----------------------------------------------------------------------
    async def _forward(self, server: h11.Connection, route: _Route) -> bool:
        """Forward one request and its answer; whether the client's connection goes on."""
        client = self.client
        assert client is not None
        request = route.request
        body = server.trailing_data[0]
        length = int(_header(request.headers, b"content-length") or 0)
        self.pending = body[length:]  # the next request's bytes, when pipelined
        headers = [(k, v) for k, v in forwarded_headers(route.scope, route.token) if k != b"expect"]
        try:
            app = await self._app(route)
        except OSError as exc:
            message = f"The preview's app did not answer: {exc}".encode()
            await _answer(self.loop, client, server, 502, message, close=length > 0)
            return length == 0
        upstream = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        head = upstream.send(
            h11.Request(method=request.method, target=route.scope["target"], headers=headers)
        )
        if b"100-continue" in (_header(request.headers, b"expect") or b"").lower():
            await self.loop.sock_sendall(client, CONTINUE)
        first = body[:length]
        try:
            await self.loop.sock_sendall(app, (head or b"") + first)
            if length > len(first):
                await copy(client, app, length - len(first))
            response = await self._response_head(app, upstream)
        except (OSError, h11.ProtocolError) as exc:  # best effort: the client may be gone
            self._drop_app()
            message = f"The preview's app did not answer: {exc}".encode()
            await _answer(self.loop, client, server, 502, message, close=True)
            return False
        return await self._relay(server, upstream, route, response)

    async def _response_head(self, app: socket.socket, upstream: h11.Connection) -> h11.Response:
        while True:
            event = upstream.next_event()
            if isinstance(event, h11.Response):
                return event
            if event is h11.NEED_DATA:
                upstream.receive_data(await self.loop.sock_recv(app, HEAD_READ))
            elif not isinstance(event, h11.InformationalResponse):  # a 1xx is not passed on
                raise h11.RemoteProtocolError("the app closed without an answer")

    async def _relay(
        self,
        server: h11.Connection,
        upstream: h11.Connection,
        route: _Route,
        response: h11.Response,
    ) -> bool:
        """Send the app's answer on; whether both connections can serve another request."""
        client, app = self.client, self.app
        assert client is not None and app is not None
        out = [(k, v) for k, v in response.headers if k not in HOP_BY_HOP_B]
        head = server.send(
            h11.Response(status_code=response.status_code, headers=out, reason=response.reason)
        )
        keep_app = response.http_version == b"1.1" and not _closes(response.headers)
        keep_client = server.our_state is not h11.MUST_CLOSE and not _closes(route.request.headers)
        length = _header(response.headers, b"content-length")
        chunked = _header(response.headers, b"transfer-encoding") is not None
        bodiless = (
            route.request.method == b"HEAD"
            or response.status_code in NO_BODY
            or response.status_code < 200
        )
        if bodiless or (length is not None and not chunked):
            size = 0 if bodiless else int(length or 0)
            early = upstream.trailing_data[0]
            keep_app = keep_app and len(early) <= size
            first = early[:size]
            await self.loop.sock_sendall(client, (head or b"") + first)
            try:
                if size > len(first):
                    await self.splicer.move(app, client, size - len(first))
            except OSError:
                self._drop_app()
                raise
        else:  # chunked or until the app closes: through h11, re-framed for the client
            await self.loop.sock_sendall(client, head or b"")
            await self._stream(server, upstream)
            keep_app = keep_app and chunked
            keep_client = keep_client and server.our_state is h11.DONE
        if not keep_app:
            self._drop_app()
        return keep_client

    async def _stream(self, server: h11.Connection, upstream: h11.Connection) -> None:
        client, app = self.client, self.app
        assert client is not None and app is not None
        while True:
            event = upstream.next_event()
            if event is h11.NEED_DATA:
                upstream.receive_data(await self.loop.sock_recv(app, STREAM_READ))
            elif isinstance(event, h11.Data):
                await self.loop.sock_sendall(client, server.send(event) or b"")
            elif isinstance(event, h11.EndOfMessage):
                await self.loop.sock_sendall(client, server.send(h11.EndOfMessage()) or b"")
                return
            else:
                raise h11.RemoteProtocolError("the app's answer ended early")

    # -- the app's side --------------------------------------------------------------------
    async def _app(self, route: _Route) -> socket.socket:
        """A connection to the route's app: the one kept from the last request when it is
        the same app's and still open, else a new one from its forwarder."""
        if self.app is not None and (self.app_path != route.socket_path or readable_now(self.app)):
            self._drop_app()
        if self.app is None:
            self.app = await receive_connection(
                route.socket_path, self.front.proxy.trusted(route.row)
            )
            self.app_path = route.socket_path
        return self.app

    def _drop_app(self) -> None:
        if self.app is not None:
            self.app.close()
            self.app = None


def _header(headers: Any, name: bytes) -> bytes | None:
    for key, value in headers:
        if key == name:
            return bytes(value)
    return None


def _closes(headers: Any) -> bool:
    value = _header(headers, b"connection") or b""
    return b"close" in value.lower()


async def _answer(
    loop: asyncio.AbstractEventLoop,
    client: socket.socket,
    server: h11.Connection,
    status: int,
    message: bytes,
    *,
    close: bool,
) -> None:
    """A plain-text answer of the proxy's own (best effort: the client may be gone)."""
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    headers.append((b"content-length", str(len(message)).encode()))
    if close:
        headers.append((b"connection", b"close"))
    with contextlib.suppress(OSError, h11.ProtocolError):
        data = server.send(h11.Response(status_code=status, headers=headers))
        await loop.sock_sendall(client, (data or b"") + message)
