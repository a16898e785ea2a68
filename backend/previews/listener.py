"""The preview origin's own listener (``PREVIEW_URL``, default ``http://127.0.0.1:<PORT+1>``,
each preview on a host of its own under it), run beside the API in the same process
(`planact serve`, `planact run`). Every connection is served by the front (front.py, one
parser for everything); at most ``PREVIEW_MAX_CONNECTIONS`` at once, one more is answered 503
and closed at once, so that no number of clients can hold the process's memory or
descriptors."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from backend.observe import preview_metrics as metrics
from backend.previews.front import IDENTITY_PATH, Front
from backend.previews.links import links_of
from backend.previews.proxy import PreviewProxy

if TYPE_CHECKING:
    from backend.config import Settings
    from backend.store.repo import Store

log = logging.getLogger(__name__)

BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 28\r\nconnection: close\r\nretry-after: 1\r\n\r\n"
    b"Too many connections; retry."
)


def store_identity(settings: Settings) -> bytes:
    """What names this process's store to another planact process (a digest: the address
    itself may carry a password)."""
    url = settings.database_url
    if url.startswith("sqlite:///"):
        url = "sqlite:///" + os.path.realpath(url.removeprefix("sqlite:///"))
    digest = hashlib.sha256(url.encode()).hexdigest()
    return json.dumps({"store": digest}).encode()


async def served_elsewhere(host: str, port: int, identity: bytes) -> bool:
    """Whether a planact preview listener on the same store answers on ``host:port``."""
    address = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    request = b"GET " + IDENTITY_PATH + b" HTTP/1.1\r\nHost: planact\r\nConnection: close\r\n\r\n"
    try:
        async with asyncio.timeout(2):
            reader, writer = await asyncio.open_connection(address, port)
            try:
                writer.write(request)
                answer = await reader.read(4096)
            finally:
                writer.close()
    except (OSError, TimeoutError):
        return False
    head, _, body = answer.partition(b"\r\n\r\n")
    return head.startswith(b"HTTP/1.1 200 ") and body == identity


def listen_address(settings: Settings) -> tuple[str, int]:
    """Where the preview listener binds: the API's host; PREVIEW_LISTEN_PORT, else the port
    browsers use (PREVIEW_URL's, PREVIEW_PUBLIC_PORT, or PORT+1)."""
    parts = urlsplit(settings.preview_base())
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return settings.host, settings.preview_listen_port or port


class PreviewListener:
    """Accepts the preview origin's connections, each served by the front."""

    def __init__(self, settings: Settings, store: Store) -> None:
        self.settings = settings
        self.proxy = PreviewProxy(store, Path(settings.workspace_dir).resolve(), links_of(settings))
        self.identity = store_identity(settings)
        self.front = Front(self.proxy, settings.preview_body_timeout, self.identity)
        self.limit = settings.preview_max_connections
        self.sock: socket.socket | None = None
        self.problem: str | None = None  # why it does not listen, when it does not
        self._task: asyncio.Task[None] | None = None
        self._served: set[asyncio.Task[None]] = set()
        self._lock = asyncio.Lock()

    async def start(self) -> bool:
        """Start listening (once); False (logged, and in :attr:`problem`) when the address
        is taken."""
        async with self._lock:
            if self.sock is not None:
                return True
            host, port = listen_address(self.settings)
            try:
                family = socket.AF_INET6 if ":" in host else socket.AF_INET
                sock = socket.create_server((host, port), family=family, backlog=2048)
            except OSError as exc:
                if await served_elsewhere(host, port, self.identity):
                    # `planact run` beside `planact serve` on the same store: its listener
                    # serves this process's previews too (the URLs work as printed)
                    log.info("previews: served by the planact already listening on %d", port)
                    return True
                self.problem = (
                    f"could not listen on {host}:{port}: {exc.strerror or exc}; previews of "
                    "this process cannot be opened (another program holds the port)"
                )
                log.warning("previews: %s", self.problem)
                return False
            sock.setblocking(False)
            self.sock = sock
            self._task = asyncio.create_task(self._accept(sock))
            log.info("previews: listening on %s:%d (%s)", host, port, self.settings.preview_base())
            return True

    def open_connections(self) -> int:
        """Connections served now."""
        return len(self._served)

    async def _accept(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, peer = await loop.sock_accept(sock)
            except OSError as exc:  # out of descriptors, a connection reset while queued
                log.warning("previews: accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            if len(self._served) >= self.limit:
                metrics.REFUSED.inc()
                with contextlib.suppress(OSError):
                    conn.setblocking(False)
                    conn.send(BUSY)
                conn.close()
                continue
            conn.setblocking(False)
            with contextlib.suppress(OSError):
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = asyncio.create_task(self.front.serve(conn, peer))
            self._served.add(task)
            metrics.CONNECTIONS.inc()
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._served.discard(task)
        metrics.CONNECTIONS.dec()

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
