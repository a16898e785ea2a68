"""The proxy's HTTP client to a service's app: httpcore's connection pool over connections
the forwarder hands over (:mod:`backend.previews.handoff`), read and written with the event
loop's own socket calls in large pieces (a 10 MB body is a few dozen reads, not hundreds)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterable
from typing import Any

import httpcore

from backend.previews.handoff import receive_connection

READ_SIZE = 1048576  # bytes asked of the socket at once (httpcore asks 64 KiB)
KEEPALIVE = 30.0  # seconds an idle connection to an app is kept


class AppStream(httpcore.AsyncNetworkStream):
    """A connected, non-blocking socket to the app."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.loop = asyncio.get_running_loop()

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        try:
            async with asyncio.timeout(timeout):
                return await self.loop.sock_recv(self.sock, max(max_bytes, READ_SIZE))
        except TimeoutError as exc:
            raise httpcore.ReadTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ReadError(str(exc)) from exc

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:  # noqa: ASYNC109
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                await self.loop.sock_sendall(self.sock, buffer)
        except TimeoutError as exc:
            raise httpcore.WriteTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        self.sock.close()

    def get_extra_info(self, info: str) -> Any:
        if info == "socket":
            return self.sock
        if info == "is_readable":
            return readable_now(self.sock)
        return None


def readable_now(sock: socket.socket) -> bool:
    """Whether an idle connection has something to read (the app closed it, usually)."""
    try:
        sock.recv(1, socket.MSG_PEEK)  # data, or b"" at its end
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


class HandoffBackend(httpcore.AsyncNetworkBackend):
    """httpcore's way to connect: ask the forwarder for a connection to the app."""

    def __init__(self, trusted: str | None) -> None:
        self.trusted = trusted

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("a preview's app is reached through its forwarder only")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's signature)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            sock = await receive_connection(path, self.trusted)
        except OSError as exc:
            raise httpcore.ConnectError(str(exc) or "the forwarder did not answer") from exc
        return AppStream(sock)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def app_pool(socket_path: str, trusted: str | None) -> httpcore.AsyncConnectionPool:
    """A pool of connections to the app behind the forwarder at ``socket_path``."""
    return httpcore.AsyncConnectionPool(
        uds=socket_path,
        network_backend=HandoffBackend(trusted),
        keepalive_expiry=KEEPALIVE,
        max_connections=100,
    )
