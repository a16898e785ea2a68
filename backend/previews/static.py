"""A conversation's static pages on the preview origin: the workspace file a request names,
its scripts on (docs/api.md "Previews"). GET and HEAD only; a directory's ``index.html``; a
file opened below the workspace without following a link out of it
(:func:`backend.runtime.confined.open_read`); anything else 404."""

from __future__ import annotations

import mimetypes
import os
from typing import TYPE_CHECKING

import anyio
import h11

from backend.observe import preview_metrics as metrics
from backend.previews.conn import NOT_FOUND
from backend.previews.headers import OWN
from backend.runtime import confined
from backend.runtime.paths import PathEscapeError

if TYPE_CHECKING:
    from backend.previews.conn import Connection
    from backend.previews.proxy import Found

READ = 1 << 20


async def serve(
    conn: Connection, server: h11.Connection, request: h11.Request, found: Found
) -> bool:
    """Answer one request for a static page; whether the connection goes on."""
    if request.method not in (b"GET", b"HEAD"):
        metrics.request(405)
        return await conn.answer(server, 405, b"Only GET and HEAD.")
    rel = found.path.lstrip("/") or "index.html"
    if rel.endswith("/"):
        rel += "index.html"
    root = conn.proxy.workspace(found.row)
    try:
        fd, _ = await anyio.to_thread.run_sync(confined.open_read, root, rel)
    except (OSError, PathEscapeError, ValueError):
        metrics.request(404)
        return await conn.answer(server, 404, NOT_FOUND)
    try:
        async for _ in conn.body_events(server):  # a GET's (empty) body
            pass
        size = os.fstat(fd).st_size
        kind = mimetypes.guess_type(rel)[0] or "application/octet-stream"
        if kind.startswith("text/") or kind in ("application/javascript", "application/json"):
            kind += "; charset=utf-8"
        headers = [
            (b"content-type", kind.encode()),
            (b"content-length", str(size).encode()),
            (b"cache-control", b"no-store"),
            (b"x-content-type-options", b"nosniff"),
            *OWN,
        ]
        metrics.request(200)
        await conn.send(server.send(h11.Response(status_code=200, headers=headers)))
        left = size if request.method == b"GET" else 0
        while left > 0:
            data = await anyio.to_thread.run_sync(os.read, fd, min(READ, left))
            if not data:  # the file shrank meanwhile: the answer cannot be completed
                return False
            left -= len(data)
            await conn.send(server.send(h11.Data(data=data)))
        metrics.moved("out", size)
        await conn.send(server.send(h11.EndOfMessage()))
    finally:
        os.close(fd)
    return conn.finish(server)
