"""The preview origin's own listener (``PREVIEW_URL``, default ``http://127.0.0.1:<PORT+1>``),
run beside the API in the same process (`planact serve`, `planact run`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from backend.previews.front import Front
from backend.previews.links import links_of
from backend.previews.proxy import PreviewProxy

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.store.repo import Store

log = logging.getLogger(__name__)


class NoDelayHttp(HttpToolsProtocol):
    """uvicorn's HTTP protocol with TCP_NODELAY: a proxied answer goes out in several writes
    (head, body chunks), and Nagle would hold each small one for the client's delayed ACK
    (40 ms). It writes no access line: a preview's path carries its token."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.access_log = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        super().connection_made(transport)


class HandedOver(NoDelayHttp):
    """uvicorn's protocol taking over a connection the front (backend/previews/front.py)
    started reading: the bytes it read are parsed first."""

    def __init__(self, data: bytes, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handed = data

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.handed:
            self.data_received(self.handed)


def listen_address(settings: Settings) -> tuple[str, int]:
    """Where the preview listener binds: the API's host, PREVIEW_URL's port."""
    parts = urlsplit(settings.preview_base())
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if settings.preview_url:  # behind a proxy of its own: the port of PREVIEW_URL is its
        port = settings.preview_listen_port or port
    return settings.host, port


class PreviewListener:
    """Accepts the preview origin's connections: each is served by the front (its own
    code, bodies moved by splice) and handed to uvicorn's protocol and the proxy's ASGI
    path for what the front does not forward itself."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.proxy = PreviewProxy(store, Path(settings.workspace_dir).resolve(), links_of(settings))
        self.front = Front(self.proxy, self._hand_over)
        self.config = uvicorn.Config(
            self.proxy,
            lifespan="off",
            # the process's logging is the API server's: configuring it again here (levels,
            # handlers of the shared uvicorn loggers) silenced the API's access lines
            log_config=None,
            log_level=None,
            proxy_headers=False,
            http=NoDelayHttp,
            ws="websockets-sansio",
            server_header=False,  # the app's own headers only
            date_header=False,
        )
        self.state = ServerState()  # uvicorn's connections (the handed-over ones)
        self.sock: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None
        self._served: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    async def start(self) -> bool:
        """Start listening (once); False (logged) when the address is taken."""
        async with self._lock:
            if self.sock is not None:
                return True
            host, port = listen_address(self.settings)
            try:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.create_server((host, port), family=family, backlog=2048)
            except OSError as exc:
                log.warning("previews: could not listen on %s:%d: %s", host, port, exc)
                return False
            sock.setblocking(False)
            self.config.load()
            self.sock = sock
            self._task = asyncio.create_task(self._accept(sock))
            log.info("previews: listening on %s:%d (%s)", host, port, self.settings.preview_base())
            return True

    def open_connections(self) -> int:
        """Connections served now: by the front, and handed over to uvicorn."""
        return len(self._served) + len(self.state.connections)

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except OSError as exc:  # out of descriptors, a connection reset while queued
                log.warning("previews: accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            conn.setblocking(False)
            with contextlib.suppress(OSError):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = asyncio.create_task(self.front.serve(conn, peer))
            self._served.add(task)
            task.add_done_callback(self._served.discard)

    async def _hand_over(self, conn: socket.socket, data: bytes) -> None:
        loop = asyncio.get_running_loop()

        def protocol() -> HandedOver:
            return HandedOver(data, config=self.config, server_state=self.state, app_state={})

        try:
            await loop.connect_accepted_socket(protocol, conn)
        except OSError:
            conn.close()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.sock is not None:
            self.sock.close()
        for task in list(self._served):
            task.cancel()
        await asyncio.gather(*self._served, return_exceptions=True)
        for connection in list(self.state.connections):
            connection.shutdown()
        cycles = list(self.state.tasks)  # requests under way: as uvicorn's shutdown waits
        if cycles:
            await asyncio.wait(cycles, timeout=10)
        for cycle in cycles:
            cycle.cancel()
        await self.proxy.aclose()
