"""The preview listener's connections: one HTTP parser (h11) for everything a client sends.

Every request's head is read under one bound (:mod:`backend.previews.conn`: 64 KiB for the
request line and headers together, 431 past it, 400 for a head h11 refuses) and its preview
looked up here (:meth:`PreviewProxy.resolve`), on every request of a kept-alive connection.
Then:

- a service's app: the request forwarded (:mod:`backend.previews.forward`): bodies of known
  length socket to socket, chunked ones re-framed through h11, HTTP/1.0 clients answered as
  HTTP/1.0; a WebSocket (or any ``Upgrade``) is a tunnel once the app answers 101
  (:mod:`backend.previews.tunnel`);
- the conversation's static pages: the workspace file (:mod:`backend.previews.static`);
- anything else: 404, from the proxy itself.

Every answer is counted by status (``planact_preview_requests``).
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Any

import h11

from backend.observe import preview_metrics as metrics
from backend.previews import forward, static, tunnel
from backend.previews.conn import NOT_FOUND, Connection
from backend.previews.headers import get

if TYPE_CHECKING:
    from backend.previews.proxy import PreviewProxy

log = logging.getLogger(__name__)

# where another planact process asks whether this listener serves the same store's previews
# (`planact run` beside `planact serve`): never a preview's own path (no preview is found)
IDENTITY_PATH = b"/.well-known/planact-previews"
IDENTITY_TYPE = b"application/json"


class Front:
    """Serves the preview listener's connections (one :meth:`serve` task each)."""

    def __init__(
        self, proxy: PreviewProxy, body_timeout: float = 30.0, identity: bytes = b""
    ) -> None:
        self.proxy = proxy
        self.body_timeout = body_timeout
        self.identity = identity  # what IDENTITY_PATH answers (JSON), b"": nothing

    async def serve(self, client: socket.socket, peer: Any) -> None:
        await self._run(Connection(self.proxy, client, peer, self.body_timeout))

    async def _run(self, conn: Connection) -> None:
        try:
            while True:
                got = await conn.next_head()
                if got is None:
                    return
                server, request = got
                if not await self._one(conn, server, request):
                    return
                conn.answered += 1
        except (OSError, h11.ProtocolError, TimeoutError) as exc:  # the client sees it closed
            log.debug("previews: a connection ended: %r", exc)
        except Exception:  # the store failing, say: this connection ends, not the listener
            log.exception("previews: a connection failed")
        finally:
            conn.upstream.close()
            conn.client.close()

    async def _one(self, conn: Connection, server: h11.Connection, request: h11.Request) -> bool:
        """Answer one request; whether the connection goes on."""
        found = await self.proxy.resolve(bytes(request.target), list(request.headers))
        if found is None:
            if bytes(request.target) == IDENTITY_PATH and self.identity:
                metrics.request(200)
                return await conn.answer(server, 200, self.identity, IDENTITY_TYPE)
            metrics.request(404)
            return await conn.answer(server, 404, NOT_FOUND)
        if found.row.kind == "files":
            return await static.serve(conn, server, request, found)
        if get(request.headers, b"upgrade") is not None:
            return await tunnel.serve(conn, server, request, found)
        return await forward.serve(conn, server, request, found)
