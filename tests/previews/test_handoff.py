"""The proxy takes from a forwarder (the sandbox's, untrusted) only a connected TCP socket:
anything else it is handed (no descriptor, a file, a Unix socket, two descriptors, a
listening socket) is closed and refused, and the request gets 502, never a hang."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from backend.previews.handoff import HandoffRefused, receive_connection
from backend.runtime import forwarder

Hand = Callable[[socket.socket], None]


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


class FakeForwarder:
    """Forwarders at paths of ``folder`` that answer every connection with a ``hand``. They
    serve on threads of this process, so the descriptors a hand opens are this process's
    too until it is done: :meth:`answered` waits for that."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.servers: list[socket.socket] = []
        self._answered = threading.Semaphore(0)

    def start(self, hand: Hand) -> str:
        path = str(self.folder / f"s{len(self.servers)}")
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        server.listen()
        self.servers.append(server)

        def serve() -> None:
            while True:
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    hand(conn)
                self._answered.release()  # the hand's descriptors and the connection closed

        threading.Thread(target=serve, daemon=True).start()
        return path

    async def answered(self) -> None:
        """Until a connection has been answered and everything of it closed here."""
        assert await asyncio.to_thread(self._answered.acquire, True, 30)

    def close(self) -> None:
        for server in self.servers:
            server.close()


@pytest.fixture
def fake_forwarder(tmp_path: Path) -> Iterator[FakeForwarder]:
    forwarders = FakeForwarder(tmp_path)
    yield forwarders
    forwarders.close()


def hands(data: bytes, *make: Callable[[], int]) -> Hand:
    def hand(conn: socket.socket) -> None:
        fds = [m() for m in make]
        try:
            socket.send_fds(conn, [data], fds)
        finally:
            for fd in fds:
                os.close(fd)

    return hand


def a_file() -> int:
    return os.open(__file__, os.O_RDONLY)


def a_unix_socket() -> int:
    left, right = socket.socketpair()
    right.close()
    return left.detach()


def a_listening_socket() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock.detach()


@pytest.mark.parametrize(
    "hand",
    [
        pytest.param(hands(b"0"), id="nothing-listens"),
        pytest.param(hands(b"1"), id="no-descriptor"),
        pytest.param(hands(b"1", a_file), id="a-file"),
        pytest.param(hands(b"1", a_unix_socket), id="a-unix-socket"),
        pytest.param(hands(b"1", a_listening_socket), id="not-connected"),
        pytest.param(hands(b"1", a_file, a_file), id="two-descriptors"),
        pytest.param(lambda conn: None, id="closes-at-once"),
    ],
)
async def test_anything_but_a_connected_tcp_socket_is_refused_and_closed(
    fake_forwarder: FakeForwarder, hand: Hand
) -> None:
    path = fake_forwarder.start(hand)
    before = open_fds()
    with pytest.raises(OSError):
        await receive_connection(path, None)
    await fake_forwarder.answered()  # (the forwarder's own descriptors are closed too)
    assert open_fds() == before  # every descriptor received was closed


async def test_the_forwarder_hands_over_a_connection_to_the_app(tmp_path: Path) -> None:
    app = socket.socket()
    app.bind(("127.0.0.1", 0))
    app.listen()
    port = app.getsockname()[1]
    folder = tmp_path / "fwd"
    folder.mkdir()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", forwarder.__file__, str(folder), str(port)
    )
    try:
        while not (folder / "s").exists():
            assert proc.returncode is None
            await asyncio.sleep(0.01)
        sock = await receive_connection(str(folder / "s"), None)
        with sock:
            assert sock.getpeername()[1] == port
            accepted, _ = app.accept()
            with accepted:
                accepted.sendall(b"hello")
                sock.setblocking(True)
                assert sock.recv(5) == b"hello"
        app.close()  # nothing listens any more: the forwarder says so, with no descriptor
        with pytest.raises(HandoffRefused):
            await receive_connection(str(folder / "s"), None)
    finally:
        proc.kill()
        await proc.wait()
