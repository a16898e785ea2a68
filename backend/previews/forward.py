"""One HTTP request to a service's app, and its answer (the preview front's, front.py).

The request goes on with h11 framing it for the app: a body of known length copied through a
buffer of the proxy's (:func:`backend.previews.splice.copy`), a chunked one re-framed piece by
piece. The answer comes back through h11 too: of known length spliced socket to socket
(:class:`backend.previews.splice.Splicer`), chunked or until-close re-framed for the client
(chunked to HTTP/1.1, until-close to HTTP/1.0). A body that stalls longer than
``PREVIEW_BODY_TIMEOUT``, either way, ends both connections. The connection to the app is kept
for the client's next request when both sides allow it.
"""

from __future__ import annotations

import contextlib
import socket
from typing import TYPE_CHECKING

import h11

from backend.observe import preview_metrics as metrics
from backend.previews.conn import MAX_HEAD, NOT_FOUND, STREAM_READ
from backend.previews.headers import closes, get, to_app, to_browser
from backend.previews.splice import copy

if TYPE_CHECKING:
    from backend.previews.conn import Connection
    from backend.previews.proxy import Found

NO_BODY = frozenset({204, 304})


async def connect(conn: Connection, found: Found) -> tuple[socket.socket, Found]:
    """A connection to the app ``found`` names; when it does not answer, the preview is read
    again past the cache (a restart moves a service to another socket under the same
    token). LookupError when it is no longer live; OSError when its app does not answer."""
    try:
        return await conn.upstream.get(found), found
    except OSError:
        again = await conn.proxy.again(found)
        if again is None:
            raise LookupError(found.token) from None
        if again.row.socket == found.row.socket:
            raise
        return await conn.upstream.get(again), again


async def serve(
    conn: Connection, server: h11.Connection, request: h11.Request, found: Found
) -> bool:
    """Forward one request and its answer; whether the client's connection goes on."""
    try:
        app, found = await connect(conn, found)
    except LookupError:  # stopped meanwhile
        metrics.request(404)
        return await conn.answer(server, 404, NOT_FOUND)
    except OSError as exc:
        metrics.request(502)
        return await conn.answer(server, 502, f"The preview's app did not answer: {exc}".encode())
    chunked = get(request.headers, b"transfer-encoding") is not None
    length = int(get(request.headers, b"content-length") or 0) if not chunked else 0
    headers = [(k, v) for k, v in to_app(request.headers, conn.peer, prefix=found.prefix)]
    headers = [(k, v) for k, v in headers if k != b"expect"]
    if chunked:
        headers.append((b"transfer-encoding", b"chunked"))
    upstream = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD)
    head = upstream.send(h11.Request(method=request.method, target=found.target, headers=headers))
    try:
        if server.they_are_waiting_for_100_continue:
            await conn.send(
                server.send(
                    h11.InformationalResponse(status_code=100, headers=[], reason=b"Continue")
                )
            )
        sent = await _request_body(conn, server, upstream, app, head or b"", length, chunked)
        metrics.moved("in", sent)
        response = await _response_head(conn, app, upstream)
    except TimeoutError:  # the client's body stalled: the app's half request ends with it
        conn.upstream.drop()
        metrics.malformed("timeout")
        metrics.request(408)
        with contextlib.suppress(OSError, h11.ProtocolError):
            await conn.send_answer(server, 408, b"The request's body stalled.", close=True)
        return False
    except (OSError, h11.ProtocolError) as exc:  # best effort: the client may be gone
        conn.upstream.drop()
        metrics.request(502)
        with contextlib.suppress(OSError, h11.ProtocolError):
            message = f"The preview's app did not answer: {exc}".encode()
            await conn.send_answer(server, 502, message, close=True)
        return False
    metrics.request(response.status_code)
    return await relay(conn, server, request, upstream, response)


async def _request_body(
    conn: Connection,
    server: h11.Connection,
    upstream: h11.Connection,
    app: socket.socket,
    head: bytes,
    length: int,
    chunked: bool,
) -> int:
    """Send the request's head and body to the app; the body's size."""
    if chunked:
        await conn.loop.sock_sendall(app, head)
        sent = 0
        async for event in conn.body_events(server):
            if isinstance(event, h11.Data):
                sent += len(event.data)
            await conn.loop.sock_sendall(app, upstream.send(event) or b"")
        conn.pending = server.trailing_data[0]
        return sent
    early = server.trailing_data[0]
    first = early[:length]
    conn.pending = early[length:]  # the next request's bytes, when pipelined
    await conn.loop.sock_sendall(app, head + first)
    if length > len(first):
        await copy(conn.client, app, length - len(first), stall=conn.body_timeout)
    return length


async def _response_head(
    conn: Connection, app: socket.socket, upstream: h11.Connection
) -> h11.Response:
    while True:
        event = upstream.next_event()
        if isinstance(event, h11.Response):
            return event
        if event is h11.NEED_DATA:
            upstream.receive_data(await conn.loop.sock_recv(app, 16384))
        elif not isinstance(event, h11.InformationalResponse):  # a 1xx is not passed on
            raise h11.RemoteProtocolError("the app closed without an answer")


async def relay(
    conn: Connection,
    server: h11.Connection,
    request: h11.Request,
    upstream: h11.Connection,
    response: h11.Response,
) -> bool:
    """Send the app's answer on; whether the client's connection serves another request."""
    app = conn.upstream.sock
    assert app is not None
    out = to_browser(list(response.headers))
    head = server.send(
        h11.Response(status_code=response.status_code, headers=out, reason=response.reason)
    )
    keep_app = response.http_version == b"1.1" and not closes(response.headers)
    keep_client = (
        request.http_version == b"1.1"
        and server.our_state is not h11.MUST_CLOSE
        and not closes(request.headers)
    )
    length = get(response.headers, b"content-length")
    chunked = get(response.headers, b"transfer-encoding") is not None
    bodiless = request.method == b"HEAD" or response.status_code in NO_BODY
    if bodiless or (length is not None and not chunked):
        size = 0 if bodiless else int(length or 0)
        early = upstream.trailing_data[0]
        keep_app = keep_app and len(early) <= size
        first = early[:size]
        await conn.send((head or b"") + first)
        try:
            if size > len(first):
                await conn.upstream.splicer.move(
                    app, conn.client, size - len(first), stall=conn.body_timeout
                )
        except (OSError, TimeoutError):
            conn.upstream.drop()
            raise
        metrics.moved("out", size)
    else:  # chunked or until the app closes: through h11, re-framed for the client
        await conn.send(head)
        metrics.moved("out", await _stream(conn, server, upstream, app))
        keep_app = keep_app and chunked
        keep_client = keep_client and server.our_state is h11.DONE
    if not keep_app:
        conn.upstream.drop()
    return keep_client


async def _stream(
    conn: Connection, server: h11.Connection, upstream: h11.Connection, app: socket.socket
) -> int:
    moved = 0
    while True:
        event = upstream.next_event()
        if event is h11.NEED_DATA:
            # (no time limit: an app may stream events, as a dev server's reload channel)
            upstream.receive_data(await conn.loop.sock_recv(app, STREAM_READ))
        elif isinstance(event, h11.Data):
            moved += len(event.data)
            await conn.send(server.send(event))
        elif isinstance(event, h11.EndOfMessage):
            await conn.send(server.send(h11.EndOfMessage()))
            return moved
        else:
            raise h11.RemoteProtocolError("the app's answer ended early")
