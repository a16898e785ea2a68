"""The uvicorn protocol's limits (backend/serve/protocol.py) on real asyncio transports
over socket pairs with small buffers, the sweep driven with explicit clock values. The
real server is exercised in tests/e2e/test_security_http.py."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from uvicorn.config import Config
from uvicorn.server import ServerState

from backend.serve.protocol import EdgeLimits, GuardedProtocol, protocol_class

LIMITS = EdgeLimits(header_timeout=5, body_timeout=20, write_timeout=5, max_connections=2)


async def app(scope: Any, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


@dataclass
class Rig:
    loop: asyncio.AbstractEventLoop
    cls: type[GuardedProtocol]
    state: ServerState = field(default_factory=ServerState)
    clients: list[socket.socket] = field(default_factory=list)

    def connect(self) -> tuple[GuardedProtocol, socket.socket]:
        config = Config(app=app, log_level="warning", lifespan="off")
        config.load()
        server_end, client = socket.socketpair()
        for s in (server_end, client):
            s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        proto = self.cls(config=config, server_state=self.state, app_state={}, _loop=self.loop)
        self.loop.run_until_complete(self.loop.connect_accepted_socket(lambda: proto, server_end))
        client.settimeout(5)
        self.clients.append(client)
        return proto, client

    def spin(self) -> None:
        self.loop.run_until_complete(asyncio.sleep(0.05))


@pytest.fixture
def rig() -> Iterator[Rig]:
    loop = asyncio.new_event_loop()
    r = Rig(loop, protocol_class(LIMITS))
    yield r
    for c in r.clients:
        c.close()
    for conn in list(r.state.connections):
        conn.transport.abort()
    r.spin()
    loop.close()


def received(client: socket.socket) -> bytes:
    data = b""
    while chunk := client.recv(65536):
        data += chunk
    return data


def test_data_left_unsent_after_close_is_dropped_after_the_write_timeout(rig: Rig) -> None:
    proto, _client = rig.connect()
    proto.transport.write(b"x" * 30_000)  # under the high-water mark: writing not paused
    proto.transport.close()
    rig.spin()
    assert proto.transport.is_closing() and proto.transport.get_write_buffer_size() > 0
    now = time.monotonic()
    proto.check(now)
    proto.check(now + LIMITS.write_timeout / 2)
    rig.spin()
    assert proto in rig.state.connections  # still within its time
    proto.check(now + LIMITS.write_timeout + 1)
    rig.spin()
    assert proto not in rig.state.connections


def test_a_client_that_stops_reading_is_cut_off(rig: Rig) -> None:
    proto, _client = rig.connect()
    proto.transport.write(b"x" * 500_000)  # over the high-water mark: writing paused
    rig.spin()
    assert proto.flow.write_paused
    now = time.monotonic()
    proto.check(now + LIMITS.write_timeout / 2)
    assert proto in rig.state.connections
    proto.check(now + LIMITS.write_timeout + 1)
    rig.spin()
    assert proto not in rig.state.connections


def test_a_half_sent_head_gets_408_and_a_silent_connection_is_closed(rig: Rig) -> None:
    partial, partial_client = rig.connect()
    silent, silent_client = rig.connect()
    partial_client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
    rig.spin()
    later = time.monotonic() + LIMITS.header_timeout + 1
    partial.check(later)
    silent.check(later)
    rig.spin()
    head, _, body = received(partial_client).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 ")
    assert json.loads(body)["error"]["code"] == "timeout"
    assert received(silent_client) == b""


def test_a_stalled_body_gets_408(rig: Rig) -> None:
    proto, client = rig.connect()
    client.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345")
    rig.spin()
    proto.check(time.monotonic() + LIMITS.header_timeout + 1)  # the head arrived: no effect
    rig.spin()
    assert proto in rig.state.connections
    proto.check(time.monotonic() + LIMITS.body_timeout + 1)
    rig.spin()
    assert received(client).startswith(b"HTTP/1.1 408 ")


def test_a_finished_request_then_idle_is_a_head_wait_again(rig: Rig) -> None:
    proto, client = rig.connect()
    client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    rig.spin()
    assert client.recv(65536).startswith(b"HTTP/1.1 200 ")
    proto.check(time.monotonic() + LIMITS.header_timeout + 1)
    rig.spin()
    assert received(client) == b""  # idle keep-alive: closed without an answer


def test_over_the_cap_the_oldest_head_wait_makes_room(rig: Rig) -> None:
    _oldest, oldest_client = rig.connect()
    busy, busy_client = rig.connect()
    busy_client.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n1")
    rig.spin()  # busy is in a request: never evicted
    newest, newest_client = rig.connect()
    rig.spin()
    assert received(oldest_client) == b""
    assert busy in rig.state.connections and newest in rig.state.connections
    newest_client.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n1")
    rig.spin()
    # nothing left to evict: the next one is refused with a JSON 503
    _refused, refused_client = rig.connect()
    rig.spin()
    head, _, body = received(refused_client).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 ") and json.loads(body)["error"]["code"]
