"""uvicorn's httptools protocol with the limits uvicorn lacks (docs/security.md):

- a header read timeout: a connection that does not send a whole request head within
  `header_timeout` (from connect, or from the end of the previous response) is closed,
  with a JSON 408 when it had started a request;
- a body read timeout: no body bytes for `body_timeout` while the app waits for them;
- a write timeout: a client that does not read (its response stays paused, or unsent after
  the server closed it) for `write_timeout` is cut off, which frees SSE streams too;
- a cap on open connections: over it, the oldest connection that is only waiting for a
  request head is closed to make room, else the new one gets a JSON 503;
- URL and header size caps (414, 431), and uvicorn's plain-text parser 400 as JSON.

One sweep timer per server checks every connection a few times a second."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

REASONS = {
    400: "Bad Request",
    408: "Request Timeout",
    414: "URI Too Long",
    431: "Request Header Fields Too Large",
    503: "Service Unavailable",
}
CODES = {400: "invalid_request", 408: "timeout", 414: "too_large", 431: "too_large"}


@dataclass(frozen=True)
class EdgeLimits:
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    write_timeout: float = 30.0
    max_connections: int = 2048
    max_url: int = 16 * 1024
    max_head: int = 64 * 1024

    @property
    def tick(self) -> float:
        shortest = min(self.header_timeout, self.body_timeout, self.write_timeout)
        return max(0.05, min(1.0, shortest / 4))


def raw_response(status: int, message: str) -> bytes:
    """A whole JSON error response, connection closing."""
    code = CODES.get(status, "unavailable")
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {REASONS[status]}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


class _Sweeper:
    """Runs `check` on every live connection every `tick` seconds while there are any."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.handle: asyncio.TimerHandle | None = None
        self.connections: set[GuardedProtocol] = set()

    def add(self, conn: GuardedProtocol) -> None:
        self.connections.add(conn)
        if self.handle is None:
            self.handle = conn.loop.call_later(self.tick, self._run, conn.loop)

    def discard(self, conn: GuardedProtocol) -> None:
        self.connections.discard(conn)

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        self.handle = None
        now = time.monotonic()
        for conn in list(self.connections):
            conn.check(now)
        if self.connections:
            self.handle = loop.call_later(self.tick, self._run, loop)


class GuardedProtocol(HttpToolsProtocol):
    limits: ClassVar[EdgeLimits] = EdgeLimits()
    sweeper: ClassVar[_Sweeper]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        now = time.monotonic()
        self._head_since: float | None = now  # waiting for a request head since
        self._head_started = False  # bytes of that request head arrived
        self._head_bytes = 0
        self._body_since: float | None = None  # a body is expected; last progress
        self._paused_since: float | None = None  # writing paused (client not reading)
        self._closing_since: float | None = None  # closed with unsent data
        self._reject: tuple[int, str] | None = None

    # -- connection ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        self._head_since = time.monotonic()
        self.sweeper.add(self)
        if len(self.connections) > self.limits.max_connections and not self._evict_one():
            self.logger.warning("Connection refused: %d open.", len(self.connections))
            self._answer(503, "Too many open connections: try again shortly.")

    def connection_lost(self, exc: Exception | None) -> None:
        self.sweeper.discard(self)
        super().connection_lost(exc)

    def _evict_one(self) -> bool:
        """Close the oldest connection that only waits for a request head."""
        idle = [
            c
            for c in self.sweeper.connections
            if c is not self and c._waiting_for_head() and not c.transport.is_closing()
        ]
        if not idle:
            return False
        victim = min(idle, key=lambda c: c._head_since or 0.0)
        victim._head_since = None
        victim.transport.close()
        return True

    def _waiting_for_head(self) -> bool:
        """Only waiting for a request head: no response of an earlier request under way."""
        busy = self.cycle is not None and not self.cycle.response_complete
        return self._head_since is not None and not busy

    def _answer(self, status: int, message: str) -> None:
        if not self.transport.is_closing():
            self.transport.write(raw_response(status, message))
            self.transport.close()

    # -- parser callbacks --------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._head_since is not None:
            self._head_started = True
        super().data_received(data)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes = 0
        self._reject = None
        if self._head_since is None:
            self._head_since = time.monotonic()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        self._head_bytes += len(url)
        if len(self.url) > self.limits.max_url:
            self._reject = (414, f"The URL is longer than {self.limits.max_url} bytes.")
            raise httptools.HttpParserError("URL too long")

    def on_header(self, name: bytes, value: bytes) -> None:
        super().on_header(name, value)
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > self.limits.max_head:
            self._reject = (431, f"The request head is larger than {self.limits.max_head} bytes.")
            raise httptools.HttpParserError("request head too large")

    def on_headers_complete(self) -> None:
        self._head_since = None
        self._head_started = False
        self._body_since = time.monotonic()
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        self._body_since = time.monotonic()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._body_since = None

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if not pipelined and self._head_since is None:
            self._head_since = time.monotonic()
            self._head_started = False

    def handle_websocket_upgrade(self) -> None:
        self.sweeper.discard(self)  # another protocol owns the connection now
        super().handle_websocket_upgrade()

    def send_400_response(self, msg: str) -> None:
        status, message = self._reject or (400, f"Invalid HTTP request: {msg}")
        self._reject = None
        self._answer(status, message)

    # -- flow control ------------------------------------------------------------------------
    def pause_writing(self) -> None:
        super().pause_writing()
        self._paused_since = time.monotonic()

    def resume_writing(self) -> None:
        super().resume_writing()
        self._paused_since = None

    # -- the sweep ---------------------------------------------------------------------------
    def check(self, now: float) -> None:
        transport = self.transport
        limits = self.limits
        if transport is None:
            return
        if transport.is_closing():
            if transport.get_write_buffer_size() == 0:
                return
            if self._closing_since is None:
                self._closing_since = now
            elif now - self._closing_since > limits.write_timeout:
                transport.abort()
            return
        if self._paused_since is not None and now - self._paused_since > limits.write_timeout:
            self.logger.info("Closing a connection whose client does not read.")
            transport.abort()
            return
        if self.flow is not None and self.flow.read_paused:
            return  # the app has not consumed what it got yet: not the client's fault
        if self._waiting_for_head() and now - (self._head_since or now) > limits.header_timeout:
            if self._head_started:
                self._answer(408, "The request head was not received in time.")
            else:
                transport.close()
            return
        if self._body_since is not None and now - self._body_since > limits.body_timeout:
            self._body_since = None
            cycle = self.cycle
            if cycle is not None and not cycle.response_started:
                # the app sees a disconnect and its answer goes nowhere: we answer
                cycle.disconnected = True
                cycle.message_event.set()
                self._answer(408, "The request body was not received in time.")
            else:
                transport.close()


def protocol_class(limits: EdgeLimits) -> type[GuardedProtocol]:
    """A protocol class bound to these limits, with its own sweeper (one per server)."""
    return type(
        "PlanactHttpProtocol",
        (GuardedProtocol,),
        {"limits": limits, "sweeper": _Sweeper(limits.tick)},
    )
