"""The preview origin: an ASGI app of its own (its own listener, never the API's origin).

``/p/<token>/<path>`` reaches the preview the token names: a service's app through the
forwarder's Unix socket (every method, bodies streamed both ways, WebSockets, the app's
statuses and headers without hop-by-hop ones, ``X-Forwarded-*``), or, for a conversation's
static pages, the workspace file at ``<path>`` with its scripts on. A request for an
absolute path of the app (``/api/items`` from a page under ``/p/<token>/``) is routed by its
``Referer``. An unknown, forged or expired token, another user's: 404. The origin sets no
cookie and opens no CORS: a previewed page gets nothing of the person's API credentials.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import mimetypes
import os
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import httpcore
from starlette.types import Message, Receive, Scope, Send
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidURI

from backend.previews.handoff import receive_connection
from backend.previews.links import PreviewLinks
from backend.previews.upstream import app_pool
from backend.runtime import confined
from backend.runtime.paths import PathEscapeError
from backend.store.rows import StoredPreview
from backend.store.tables import utcnow
from backend.workspace import workspace_path

if TYPE_CHECKING:
    from pathlib import Path

    from backend.store.repo import Store

PREFIX = "/p/"
CACHE_SECONDS = 2.0  # a token's row is looked up again after this
TOUCH_EVERY = 5.0  # seconds between two stored "last request" times of a preview
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
    }
)
WS_SKIP = HOP_BY_HOP | {
    "sec-websocket-key",
    "sec-websocket-version",
    "sec-websocket-extensions",
    "sec-websocket-protocol",
    "origin",
}
HOP_BY_HOP_B = frozenset(h.encode() for h in HOP_BY_HOP)
UPSTREAM_ERRORS = (
    httpcore.NetworkError,
    httpcore.ProtocolError,
    httpcore.TimeoutException,
    httpcore.UnsupportedProtocol,
)
NOT_FOUND = b"Not found."


def split_token(path: str) -> tuple[str, str] | None:
    """('<token>', '/rest') of ``/p/<token>/rest``; None for any other path."""
    if not path.startswith(PREFIX):
        return None
    token, _, rest = path[len(PREFIX) :].partition("/")
    return (token, "/" + rest) if token else None


class PreviewProxy:
    def __init__(
        self, store: Store, workspace_root: Path, links: PreviewLinks | None = None
    ) -> None:
        self.store = store
        self.links = links
        self.workspace_root = workspace_root
        self._rows: dict[str, tuple[float, StoredPreview | None]] = {}
        self._pools: dict[str, httpcore.AsyncConnectionPool] = {}
        self._touched: dict[str, float] = {}

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()
        self._pools.clear()

    # -- finding the preview ---------------------------------------------------------------
    async def _row(self, token: str) -> StoredPreview | None:
        now = time.monotonic()
        cached = self._rows.get(token)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            row = cached[1]
        else:
            row = await self.store.preview_by_token(token)
            self._rows[token] = (now, row)
        if row is None or row.token_expires < utcnow():
            return None
        if row.kind == "service" and row.state not in ("starting", "ready"):
            return None
        return row

    def _target(self, scope: Scope) -> tuple[str, str] | None:
        if self.links is not None and (token := self.links.token_of_host(scope)):
            return token, scope["path"]  # a preview's own host (PREVIEW_HOST_PATTERN)
        found = split_token(scope["path"])
        if found is not None:
            return found
        for key, value in scope.get("headers", []):
            if key == b"referer":
                ref = split_token(urlsplit(value.decode("latin-1")).path)
                if ref is not None:
                    return ref[0], scope["path"]
        return None

    async def _touch(self, row: StoredPreview) -> None:
        now = time.monotonic()
        if now - self._touched.get(row.id, 0.0) < TOUCH_EVERY:
            return
        self._touched[row.id] = now
        with contextlib.suppress(Exception):
            await self.store.touch_preview(row.id, utcnow())

    async def resolve(self, scope: Scope) -> tuple[str, str, StoredPreview] | None:
        """(token, path in the preview, its row) of a request, the preview's use recorded;
        None when the request names no live preview it may reach (unknown, forged, expired
        token, a stopped service). Checked on every request, kept-alive ones too."""
        target = self._target(scope)
        row = await self._row(target[0]) if target is not None else None
        if target is None or row is None:
            return None
        await self._touch(row)
        return target[0], target[1], row

    # -- ASGI ------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        found = await self.resolve(scope)
        if found is None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 4404})
            else:
                await _plain(send, 404, NOT_FOUND)
            return
        token, rest, row = found
        if row.kind == "files":
            await self._static(scope, send, row, rest)
        elif scope["type"] == "websocket":
            await self._websocket(scope, receive, send, row, rest)
        else:
            await self._http(scope, receive, send, row, rest, token)

    # -- static pages of the workspace -----------------------------------------------------
    async def _static(self, scope: Scope, send: Send, row: StoredPreview, rest: str) -> None:
        if scope["type"] != "http" or scope["method"] not in ("GET", "HEAD"):
            await _plain(send, 405, b"Only GET and HEAD.")
            return
        root = workspace_path(self.workspace_root, row.user_id, row.conversation_id)
        rel = rest.lstrip("/") or "index.html"
        if rel.endswith("/"):
            rel += "index.html"
        try:
            fd, _ = await anyio.to_thread.run_sync(confined.open_read, root, rel)
        except IsADirectoryError:
            await _plain(send, 404, NOT_FOUND)
            return
        except (OSError, PathEscapeError, ValueError) as exc:
            if isinstance(exc, OSError) and exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                await _plain(send, 404, NOT_FOUND)
                return
            await _plain(send, 404, NOT_FOUND)
            return
        kind = mimetypes.guess_type(rel)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/javascript", "application/json"):
            kind += "; charset=utf-8"
        headers = [(b"content-type", kind.encode()), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        try:
            if scope["method"] == "GET":
                while data := await anyio.to_thread.run_sync(_read, fd):
                    await send({"type": "http.response.body", "body": data, "more_body": True})
        finally:
            await anyio.to_thread.run_sync(_close, fd)
        await send({"type": "http.response.body", "body": b""})

    # -- a service over HTTP ---------------------------------------------------------------
    def trusted(self, row: StoredPreview) -> str | None:
        """The workspace, when the service's socket lies in it (docker): the sandbox can
        write there, so the socket is reached by :mod:`backend.previews.sockets`."""
        root = os.path.realpath(
            workspace_path(self.workspace_root, row.user_id, row.conversation_id)
        )
        return root if str(row.socket).startswith(root + "/") else None

    def _pool(self, row: StoredPreview) -> httpcore.AsyncConnectionPool:
        sock = str(row.socket)
        pool = self._pools.get(sock)
        if pool is None:
            pool = self._pools[sock] = app_pool(sock, self.trusted(row))
        return pool

    async def _http(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        row: StoredPreview,
        rest: str,
        token: str,
    ) -> None:
        headers = forwarded_headers(scope, token)
        query = scope.get("query_string", b"").decode("latin-1")
        url = "http://preview" + rest + (f"?{query}" if query else "")
        has_body = any(
            k == b"content-length" or k == b"transfer-encoding" for k, _ in scope["headers"]
        )
        if has_body and not any(k == b"content-length" for k, _ in headers):
            # a body of unknown length goes on chunked (without a framing header h11 would
            # frame it as empty and fail on its first byte)
            headers.append((b"transfer-encoding", b"chunked"))
        request = httpcore.Request(
            scope["method"],
            url,
            headers=headers,
            content=_body(receive) if has_body else None,
        )
        try:
            response = await self._pool(row).handle_async_request(request)
        except UPSTREAM_ERRORS as exc:
            await _plain(send, 502, f"The preview's app did not answer: {exc}".encode())
            return
        stream: Any = response.stream
        try:
            out = [(k.lower(), v) for k, v in response.headers if k.lower() not in HOP_BY_HOP_B]
            # the head goes out with the first chunk of the body (one write: no small
            # segment waiting for the client's delayed ACK)
            chunks = stream.__aiter__()
            first = await anext(chunks, b"")
            await send({"type": "http.response.start", "status": response.status, "headers": out})
            await send({"type": "http.response.body", "body": first, "more_body": True})
            async for chunk in chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await stream.aclose()

    # -- a service over WebSocket ----------------------------------------------------------
    async def _websocket(
        self, scope: Scope, receive: Receive, send: Send, row: StoredPreview, rest: str
    ) -> None:
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        query = scope.get("query_string", b"").decode("latin-1")
        uri = "ws://preview" + rest + (f"?{query}" if query else "")
        extra = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1") not in WS_SKIP
        ]
        try:
            sock = await receive_connection(str(row.socket), self.trusted(row))
        except OSError:
            await send({"type": "websocket.close", "code": 1011})
            return
        try:
            upstream = await connect(
                uri,
                sock=sock,
                additional_headers=extra,
                subprotocols=scope.get("subprotocols") or None,
                max_size=None,
                compression=None,
                open_timeout=10,
            )
        except (OSError, InvalidHandshake, InvalidURI, TimeoutError):
            sock.close()
            await send({"type": "websocket.close", "code": 1011})
            return
        async with upstream:
            await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})

            async def to_app() -> None:
                while True:
                    msg = await receive()
                    if msg["type"] == "websocket.disconnect":
                        await upstream.close()
                        return
                    if msg.get("text") is not None:
                        await upstream.send(msg["text"])
                    elif msg.get("bytes") is not None:
                        await upstream.send(msg["bytes"])

            async def to_page() -> None:
                try:
                    async for data in upstream:
                        if isinstance(data, str):
                            await send({"type": "websocket.send", "text": data})
                        else:
                            await send({"type": "websocket.send", "bytes": data})
                except ConnectionClosed:
                    pass
                code = upstream.close_code or 1000
                with contextlib.suppress(Exception):
                    await send({"type": "websocket.close", "code": code})

            tasks = [asyncio.create_task(to_app()), asyncio.create_task(to_page())]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)


def forwarded_headers(scope: Scope, token: str) -> list[tuple[bytes, bytes]]:
    """The request's headers for the app: hop-by-hop ones removed, X-Forwarded-* added."""
    out: list[tuple[bytes, bytes]] = []
    host = b""
    for key, value in scope["headers"]:
        if key == b"host":
            host = value
        if key.decode("latin-1") in HOP_BY_HOP or key.startswith(b"x-forwarded-"):
            continue
        out.append((key, value))
    out.append((b"host", host or b"preview"))
    client = scope.get("client")
    if client:
        out.append((b"x-forwarded-for", str(client[0]).encode()))
    out.append((b"x-forwarded-proto", str(scope.get("scheme", "http")).encode()))
    if host:
        out.append((b"x-forwarded-host", host))
    out.append((b"x-forwarded-prefix", f"{PREFIX}{token}".encode()))
    return out


async def _body(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        msg: Message = await receive()
        if msg["type"] == "http.disconnect":
            return
        chunk = msg.get("body", b"")
        if chunk:
            yield chunk
        if not msg.get("more_body", False):
            return


async def _plain(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8")],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def _read(fd: int) -> bytes:
    return confined.read_fd(fd, 1 << 20)


def _close(fd: int) -> None:
    os.close(fd)
