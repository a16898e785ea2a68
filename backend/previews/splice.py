"""Moving a body of known length from one socket to another.

An app's answer goes without being copied through user space: splice(2) from the source
socket into a pipe and from the pipe into the destination socket, waiting on the event
loop's readiness callbacks when either side has to wait. The bytes stay in the kernel's
pages; the proxy only counts them. A pipe is kept per connection (:class:`Splicer`) and
dropped whenever a move does not finish, so no stray byte of one body can reach the next.

A request's body goes to the app through a buffer of the proxy's (:func:`copy`): the app
then reads pages the proxy has just written rather than the client's pages handed on by
splice, and its reading costs it less. In bench/bench_preview.py (nine runs each way,
alternated) the app's CPU per 10 MB uploaded fell from 9.5-12.5 ms spliced to 7.0-9.0 ms
(9.0 direct), the proxy's rose by about 2 ms, and the upload's ratio to direct rose from a
median 0.72 to 0.83: the app is the busier side of an upload (docs/figures.md "Previews").
An answer copied the same way measured no better than spliced, for more of the proxy's CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import socket

PIPE_SIZE = 1 << 20  # asked of the kernel (fs.pipe-max-size is 1 MiB by default)
COPY_SIZE = 1 << 20  # the most a copy takes at once (the buffer of a body that size or more)
FLAGS = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK


class BodyCut(ConnectionError):
    """The source socket ended before the body did."""

    def __init__(self, missing: int) -> None:
        super().__init__(errno.ECONNRESET, f"the body ended {missing} bytes short")
        self.missing = missing


class Splicer:
    """A pipe for one connection's bodies, made on first use."""

    def __init__(self) -> None:
        self._pipe: tuple[int, int] | None = None
        self._size = 0

    def _open(self) -> tuple[int, int]:
        if self._pipe is None:
            r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
            with contextlib.suppress(OSError):  # a smaller pipe works, in more steps
                fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
            self._size = fcntl.fcntl(w, fcntl.F_GETPIPE_SZ)
            self._pipe = (r, w)
        return self._pipe

    def close(self) -> None:
        if self._pipe is not None:
            for fd in self._pipe:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._pipe = None

    async def move(
        self, src: socket.socket, dst: socket.socket, count: int, stall: float | None = None
    ) -> None:
        """Move exactly ``count`` bytes from ``src`` to ``dst`` (both non-blocking).
        BodyCut when ``src`` ends first; OSError when either socket fails; TimeoutError when
        ``dst`` takes none of it for ``stall`` seconds (a client that stopped reading)."""
        r, w = self._open()
        loop = asyncio.get_running_loop()
        left, held = count, 0  # still to take from src; in the pipe
        try:
            while left or held:
                moved = False
                if left and held < self._size:
                    try:
                        n = os.splice(src.fileno(), w, min(left, self._size - held), flags=FLAGS)
                    except BlockingIOError:
                        pass
                    else:
                        if n == 0:
                            raise BodyCut(left)
                        left, held, moved = left - n, held + n, True
                if held:
                    try:
                        n = os.splice(r, dst.fileno(), held, flags=FLAGS)
                    except BlockingIOError:
                        pass
                    else:
                        held, moved = held - n, True
                if not moved:  # the pipe waits for dst, or everything waits for src
                    async with asyncio.timeout(stall if held else None):
                        await _ready(loop, dst if held else src, writing=bool(held))
        except BaseException:
            self.close()  # it may hold bytes of this body
            raise


async def copy(
    src: socket.socket, dst: socket.socket, count: int, stall: float | None = None
) -> None:
    """Move exactly ``count`` bytes from ``src`` to ``dst`` (both non-blocking) through a
    buffer of the proxy's. BodyCut when ``src`` ends first; OSError when either socket fails;
    TimeoutError when ``src`` sends nothing for ``stall`` seconds (a stalled upload).
    Nothing is held between calls: a move that does not finish leaves no byte behind."""
    loop = asyncio.get_running_loop()
    view = memoryview(bytearray(min(count, COPY_SIZE)))
    left = count
    while left:
        async with asyncio.timeout(stall):
            n = await loop.sock_recv_into(src, view[: min(left, len(view))])
        if n == 0:
            raise BodyCut(left)
        await loop.sock_sendall(dst, view[:n])
        left -= n


async def _ready(loop: asyncio.AbstractEventLoop, sock: socket.socket, *, writing: bool) -> None:
    """Until ``sock`` can be written (``writing``) or read (or has ended, or failed)."""
    fd = sock.fileno()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    if writing:
        loop.add_writer(fd, wake)
    else:
        loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        if writing:
            loop.remove_writer(fd)
        else:
            loop.remove_reader(fd)
