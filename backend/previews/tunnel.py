"""A request with ``Upgrade`` (a WebSocket: a dev server's hot reload, an app's live channel):
its head goes to the app through h11 with ``Upgrade`` and ``Connection: upgrade`` kept; once
the app answers 101 the connection is a tunnel, bytes each way as they come, until both sides
have closed (a side that ends is half-closed on the other; :data:`CLOSE_GRACE` seconds later
the rest is closed too). An app that refuses the upgrade is answered as any request is."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING

import h11

from backend.observe import preview_metrics as metrics
from backend.previews import forward
from backend.previews.conn import MAX_HEAD, NOT_FOUND
from backend.previews.headers import get, to_app, to_browser

if TYPE_CHECKING:
    from backend.previews.conn import Connection
    from backend.previews.proxy import Found

READ = 65536
CLOSE_GRACE = 10.0  # seconds the other side may take to close once one side has
UPGRADE_KEEP = (b"upgrade", b"connection")


async def serve(
    conn: Connection, server: h11.Connection, request: h11.Request, found: Found
) -> bool:
    """Tunnel the upgraded connection (then it ends), or answer the app's refusal."""
    if get(request.headers, b"content-length") or get(request.headers, b"transfer-encoding"):
        metrics.request(400)
        return await conn.answer(server, 400, b"An upgrade request has no body.")
    async for _ in conn.body_events(server):  # the head's EndOfMessage
        pass
    try:
        app, found = await forward.connect(conn, found)
        conn.upstream.sock = None  # the tunnel's own: never kept for another request
    except LookupError:
        metrics.request(404)
        await conn.send_answer(server, 404, NOT_FOUND, close=True)
        return False
    except OSError as exc:
        metrics.request(502)
        await conn.send_answer(
            server, 502, f"The preview's app did not answer: {exc}".encode(), close=True
        )
        return False
    try:
        keep = [(b"connection", b"upgrade"), (b"upgrade", get(request.headers, b"upgrade") or b"")]
        headers = to_app(list(request.headers), conn.peer, prefix=found.prefix, keep=keep)
        upstream = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
        head = upstream.send(
            h11.Request(method=request.method, target=found.target, headers=headers)
        )
        await conn.loop.sock_sendall(
            app, (head or b"") + (upstream.send(h11.EndOfMessage()) or b"")
        )
        answer = await _answer(conn, app, upstream)
    except (OSError, h11.ProtocolError) as exc:
        app.close()
        metrics.request(502)
        with contextlib.suppress(OSError, h11.ProtocolError):
            message = f"The preview's app did not answer: {exc}".encode()
            await conn.send_answer(server, 502, message, close=True)
        return False
    metrics.request(answer.status_code)
    if isinstance(answer, h11.Response):  # refused: answered as any request, then closed
        conn.upstream.drop()
        conn.upstream.sock, conn.upstream.path = app, str(found.row.socket)
        await forward.relay(conn, server, request, upstream, answer)
        return False
    out = to_browser(list(answer.headers), keep=UPGRADE_KEEP)
    await conn.send(
        server.send(h11.InformationalResponse(status_code=101, headers=out, reason=answer.reason))
    )
    try:
        await conn.send(upstream.trailing_data[0])
        await conn.loop.sock_sendall(app, server.trailing_data[0])
        await _both_ways(conn, app)
    finally:
        app.close()
    return False


async def _answer(
    conn: Connection, app: socket.socket, upstream: h11.Connection
) -> h11.Response | h11.InformationalResponse:
    """The app's 101, or its refusal's head."""
    while True:
        event = upstream.next_event()
        if isinstance(event, h11.Response):
            return event
        if isinstance(event, h11.InformationalResponse) and event.status_code == 101:
            return event
        if event is h11.NEED_DATA:
            data = await conn.loop.sock_recv(app, 16384)
            upstream.receive_data(data)
        elif not isinstance(event, h11.InformationalResponse):
            raise h11.RemoteProtocolError("the app closed without an answer")


async def _both_ways(conn: Connection, app: socket.socket) -> None:
    loop = conn.loop

    async def pump(src: socket.socket, dst: socket.socket, way: str) -> None:
        try:
            while data := await loop.sock_recv(src, READ):
                await loop.sock_sendall(dst, data)
                metrics.moved(way, len(data))
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    tasks = {
        asyncio.create_task(pump(conn.client, app, "in")),
        asyncio.create_task(pump(app, conn.client, "out")),
    }
    try:
        _, rest = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if rest:
            await asyncio.wait(rest, timeout=CLOSE_GRACE)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
