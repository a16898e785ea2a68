"""Receiving a connection to a service's app from its forwarder (backend/runtime/forwarder.py):
the forwarder, inside the sandbox's network namespace, connects to the app's port and hands the
connected socket over its Unix socket (``SCM_RIGHTS``). The proxy then talks to the app
directly over that socket: no byte passes through a process of the sandbox's in between.

What the sandbox hands over is checked before use: exactly one descriptor, a connected TCP
stream socket (IPv4 or IPv6); anything else is closed and the connection refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import stat

from backend.previews.sockets import fd_path, open_socket

HANDOFF_TIMEOUT = 10.0  # seconds a forwarder may take to hand a connection over
ACCEPTED_FAMILIES = (socket.AF_INET, socket.AF_INET6)


class HandoffRefused(ConnectionError):
    """The forwarder handed over nothing usable (the port refused, or not a TCP socket)."""


async def receive_connection(path: str, trusted: str | None) -> socket.socket:
    """A non-blocking socket connected to the app, from the forwarder listening at ``path``
    (below ``trusted``, reached by :func:`open_socket`), within :data:`HANDOFF_TIMEOUT`.
    OSError (HandoffRefused, TimeoutError included) when there is none."""
    loop = asyncio.get_running_loop()
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    unix.setblocking(False)
    with unix:
        async with asyncio.timeout(HANDOFF_TIMEOUT):
            target = open_socket(path, trusted)
            try:
                await loop.sock_connect(unix, fd_path(target))
            finally:
                os.close(target)
            while True:
                try:
                    data, fds, _, _ = socket.recv_fds(unix, 16, 1, socket.MSG_CMSG_CLOEXEC)
                except BlockingIOError:
                    await _readable(loop, unix)
                    continue
                return _accept(data, fds)


async def _readable(loop: asyncio.AbstractEventLoop, sock: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(sock.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


def _accept(data: bytes, fds: list[int]) -> socket.socket:
    """The one handed descriptor as a socket, when it is a connected TCP stream; every
    descriptor received is closed otherwise."""
    if data != b"1" or len(fds) != 1:
        _close_all(fds)
        raise HandoffRefused(errno.ECONNREFUSED, "the app's port refused the connection")
    fd = fds[0]
    try:
        if not stat.S_ISSOCK(os.fstat(fd).st_mode):
            raise HandoffRefused(errno.ENOTSOCK, "the forwarder handed over no socket")
        sock = socket.socket(fileno=fd)
    except OSError:
        os.close(fd)
        raise
    try:
        if sock.family not in ACCEPTED_FAMILIES or sock.type != socket.SOCK_STREAM:
            raise HandoffRefused(errno.EPROTOTYPE, "the forwarder handed over no TCP socket")
        sock.getpeername()  # connected (OSError otherwise)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def readable_now(sock: socket.socket) -> bool:
    """Whether an idle connection to an app has something to read (the app closed it,
    usually): then it is not used for another request."""
    try:
        sock.recv(1, socket.MSG_PEEK)  # data, or b"" at its end
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True
