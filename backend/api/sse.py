"""The run feed (backend/runs/feed.py) encoded as planact's SSE stream: `message` events
with the message's seq as id (a client resumes with Last-Event-ID), `delta` events without
an id (never replayed), and one `end` event.

The stream is written by a small ASGI response of its own (:class:`SseResponse`): each
event is encoded once into one body message (:func:`feed_event_bytes`: the feed's events
straight to bytes, a delta without an intermediate event object); a comment ping every
PING_SECONDS keeps proxies from closing an idle stream; the client's disconnect ends it
(the feed is closed); an event the client does not take within ``send_timeout`` seconds
ends it too. That limit is kept by one watchdog per stream (it looks a few times per
``send_timeout`` at the send under way), not by a timer armed and cancelled around every
event."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from starlette.responses import Response
from starlette.types import Message as AsgiMessage
from starlette.types import Receive, Scope, Send

from backend.messages.deltas import DeltaEvent
from backend.runs.feed import End, FeedEvent

PING_SECONDS = 15.0
WATCH_TICKS = 4  # the send watchdog looks this many times per send timeout
PING = b": ping\r\n\r\n"
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")
E = TypeVar("E")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    """One event: ``data`` (one `data:` line per line of it), ``event``, ``id``."""

    data: str
    event: str
    id: str | None = None

    def encode(self) -> bytes:
        head = f"event: {self.event}\r\n"
        if self.id is not None:
            head = f"id: {self.id}\r\n{head}"
        data = self.data
        if "\n" in data or "\r" in data:
            body = "".join(f"data: {line}\r\n" for line in _LINE_BREAKS.split(data))
        else:
            body = f"data: {data}\r\n"
        return f"{head}{body}\r\n".encode()


_DELTA_HEAD = b"event: delta\r\ndata: "


def sse_event(event: FeedEvent) -> ServerSentEvent:
    """One event of a run's feed as an SSE event."""
    if isinstance(event, DeltaEvent):
        return ServerSentEvent(data=event.json_bytes().decode(), event="delta")
    if isinstance(event, End):
        end = {
            "conversation_id": event.conversation_id,
            "run_id": event.run_id,
            "status": event.status,
        }
        return ServerSentEvent(data=json.dumps(end), event="end")
    return ServerSentEvent(data=event.to_json(), event="message", id=str(event.seq))


def feed_event_bytes(event: FeedEvent) -> bytes:
    """:func:`sse_event` encoded; a delta (~200 a run) written straight to its bytes."""
    if isinstance(event, DeltaEvent):
        return b"%s%s\r\n\r\n" % (_DELTA_HEAD, event.json_bytes())
    return sse_event(event).encode()


class SseResponse(Response, Generic[E]):
    """``events`` as a text/event-stream response, each one written as ``encode`` makes it."""

    def __init__(
        self,
        events: AsyncIterator[E],
        encode: Callable[[E], bytes],
        headers: dict[str, str],
        send_timeout: float | None,
        ping: float = PING_SECONDS,
    ) -> None:
        self.events = events
        self.encode = encode
        self.status_code = 200
        self.background = None
        self.send_timeout = send_timeout
        self.ping = ping
        merged = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            "connection": "keep-alive",
            "x-accel-buffering": "no",
        }
        merged.update({k.lower(): v for k, v in headers.items()})
        self.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in merged.items()]
        self._sending_since: float | None = None  # loop time the send under way began
        self._pinging: asyncio.Future[None] | None = None  # a ping's send under way

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        if scope.get("method") == "HEAD":  # headers only: the stream never starts
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            await _close(self.events)
            return
        pump = asyncio.ensure_future(self._pump(send))
        listen = asyncio.ensure_future(_disconnected(receive))
        pinger = asyncio.ensure_future(self._ping(send)) if self.ping > 0 else None
        watch = None
        if self.send_timeout is not None:
            watch = asyncio.ensure_future(self._watch(self.send_timeout))
        others = [t for t in (listen, pinger, watch) if t is not None]
        try:
            await asyncio.wait([pump, *others], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, *others):
                task.cancel()
            await asyncio.gather(pump, *others, return_exceptions=True)
            await _close(self.events)
        # a ping that failed (the client is gone) ends the stream; the feed's own error
        # is the response's (the server logs it and closes the connection)
        if not pump.cancelled() and (exc := pump.exception()) is not None:
            raise exc

    async def _send(self, send: Send, message: AsgiMessage) -> None:
        """Send one message (the watchdog ends the stream if it is not taken in time). One
        send at a time: the pump waits for a ping's, a ping skips while an event's is under
        way (without a lock for every event)."""
        self._sending_since = asyncio.get_running_loop().time()
        try:
            await send(message)
        finally:
            self._sending_since = None

    async def _pump(self, send: Send) -> None:
        encode = self.encode
        async for event in self.events:
            body = encode(event)
            while self._pinging is not None:
                await self._pinging
            await self._send(send, {"type": "http.response.body", "body": body, "more_body": True})
        while self._pinging is not None:
            await self._pinging
        await self._send(send, {"type": "http.response.body", "body": b"", "more_body": False})

    async def _ping(self, send: Send) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.ping)
            if self._sending_since is not None:
                continue  # an event is being sent: the stream is not idle
            done = self._pinging = loop.create_future()
            try:
                await self._send(
                    send, {"type": "http.response.body", "body": PING, "more_body": True}
                )
            finally:
                self._pinging = None
                if not done.done():
                    done.set_result(None)

    async def _watch(self, limit: float) -> None:
        """Return (which ends the stream) once a send has waited more than ``limit``
        seconds: a client that does not read. Its feed is closed; the server's write
        timeout cuts the connection (backend/serve/protocol.py)."""
        loop = asyncio.get_running_loop()
        tick = limit / WATCH_TICKS
        while True:
            since = self._sending_since
            now = loop.time()
            if since is not None and now - since >= limit:
                return
            # the earliest moment the send under way (if any) could pass the limit
            due = since + limit if since is not None else now + tick
            await asyncio.sleep(max(min(due, now + tick) - now, 0.0))


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


async def _close(events: AsyncIterator[Any]) -> None:
    aclose = getattr(events, "aclose", None)
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()


def feed_response(
    feed: AsyncIterator[FeedEvent],
    headers: dict[str, str] | None = None,
    send_timeout: float | None = None,
) -> SseResponse[FeedEvent]:
    """A run's feed as planact's SSE stream. `send_timeout`: seconds one event may take to
    be sent before the stream ends."""
    return SseResponse(feed, feed_event_bytes, headers or {}, send_timeout)
