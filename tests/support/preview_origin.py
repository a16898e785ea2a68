"""A real preview listener (on uvloop, as `planact serve` runs it) in a thread of its own,
with a real forwarder process and an app process (tests/previews/framing_app.py) behind one
ready service preview: the fixture of the listener's own tests."""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import h11
import pytest
import uvloop

from backend.previews.listener import PreviewListener
from backend.runtime import forwarder
from backend.store.repo import Store
from tests.support.ports import free_port
from tests.support.previews import seed_ready_service
from tests.support.settings import make_settings

APP = Path(__file__).parents[1] / "previews" / "framing_app.py"
TOKEN = "spliced0123456789abcdefghijklmno"
BIG = 10_000_000
T = TypeVar("T")


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@dataclass
class Origin:
    base: str  # the preview's address on the origin: http://127.0.0.1:<port>/p/<token>
    port: int
    listener: PreviewListener
    loop: asyncio.AbstractEventLoop

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def connections(self) -> int:
        async def count() -> int:
            return self.listener.open_connections()

        return self.call(count())

    def wait_idle(self, fds: int) -> None:
        """Until no connection is served and the process holds ``fds`` descriptors again."""
        deadline = time.monotonic() + 20
        while self.connections() or open_fds() > fds:
            assert time.monotonic() < deadline, (self.connections(), open_fds(), fds)
            time.sleep(0.02)

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=20)


@pytest.fixture
def origin(tmp_path: Path) -> Iterator[Origin]:
    app_port, port = free_port(), free_port()
    app = subprocess.Popen([sys.executable, str(APP), str(app_port)], stdout=subprocess.PIPE)
    assert app.stdout is not None and app.stdout.readline().strip() == b"listening"
    sockdir = tmp_path / "fwd"
    sockdir.mkdir()
    fwd = subprocess.Popen(
        ["python3", "-I", "-S", forwarder.__file__, str(sockdir), str(app_port)],
        stdout=subprocess.DEVNULL,
    )
    settings = make_settings(tmp_path, preview_url=f"http://127.0.0.1:{port}")
    loop = uvloop.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    store = Store(settings.database_url)
    listener = PreviewListener(settings, store)
    origin = Origin(f"http://127.0.0.1:{port}/p/{TOKEN}", port, listener, loop)

    async def seed() -> None:
        await seed_ready_service(
            store,
            port=app_port,
            socket=str(sockdir / "s"),
            token=TOKEN,
            owner="test",
            title="spliced",
        )
        assert await listener.start()

    try:
        while not (sockdir / "s").exists():  # the forwarder's socket: it listens
            assert fwd.poll() is None
            time.sleep(0.01)
        origin.call(seed())
        yield origin
    finally:
        origin.call(listener.close())
        origin.call(store.close())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        for proc in (fwd, app):
            proc.kill()
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()


def pattern(size: int) -> bytes:
    return random.Random(size).randbytes(size)


def exchange(sock: socket.socket, client: h11.Connection, *events: Any) -> tuple[Any, bytes]:
    """Send a request's events on ``sock``; its answer (head, body) read with h11."""
    for event in events:
        sock.sendall(client.send(event) or b"")
    head, body = None, b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(sock.recv(1 << 20))
        elif isinstance(event, h11.Response):
            head = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            if client.our_state is h11.DONE:
                client.start_next_cycle()
            return head, body
        else:
            raise AssertionError(event)


def request(method: str, target: str, body: bytes | None = None) -> list[Any]:
    headers = [("host", "127.0.0.1")]
    if body is not None:
        headers.append(("content-length", str(len(body))))
    events: list[Any] = [h11.Request(method=method, target=target, headers=headers)]
    if body:
        events.append(h11.Data(data=body))
    return [*events, h11.EndOfMessage()]
