"""The preview origin's own listener (``PREVIEW_URL``, default ``http://127.0.0.1:<PORT+1>``),
run beside the API in the same process (`planact serve`, `planact run`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

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


class _QuietServer(uvicorn.Server):
    """A uvicorn server that leaves the process's signals to the API's server."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def listen_address(settings: Settings) -> tuple[str, int]:
    """Where the preview listener binds: the API's host, PREVIEW_URL's port."""
    parts = urlsplit(settings.preview_base())
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if settings.preview_url:  # behind a proxy of its own: the port of PREVIEW_URL is its
        port = settings.preview_listen_port or port
    return settings.host, port


class PreviewListener:
    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.proxy = PreviewProxy(store, Path(settings.workspace_dir).resolve(), links_of(settings))
        self.server: _QuietServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> bool:
        """Start listening (once); False (logged) when the address is taken."""
        async with self._lock:
            if self.server is not None:
                return True
            return await self._start()

    async def _start(self) -> bool:
        host, port = listen_address(self.settings)
        config = uvicorn.Config(
            self.proxy,
            host=host,
            port=port,
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
        try:  # bound here: uvicorn itself would exit the process on a taken address
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.create_server((host, port), family=family, backlog=2048)
        except OSError as exc:
            log.warning("previews: could not listen on %s:%d: %s", host, port, exc)
            return False
        self.server = _QuietServer(config)
        self._task = asyncio.create_task(self.server.serve(sockets=[sock]))
        while not self.server.started:
            if self._task.done():
                log.warning("previews: could not listen on %s:%d", host, port)
                return False
            await asyncio.sleep(0.01)
        log.info("previews: listening on %s:%d (%s)", host, port, self.settings.preview_base())
        return True

    async def close(self) -> None:
        if self.server is not None and self._task is not None:
            self.server.should_exit = True
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self._task, 10)
        await self.proxy.aclose()
