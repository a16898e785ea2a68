"""The SSE writer (backend/api/sse.py) driven as an ASGI app: its headers, events, pings,
the end of the stream when the client goes away or stops reading, and HEAD; and a
delta's bytes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import pytest

from backend.api.sse import ServerSentEvent, SseResponse, feed_event_bytes, sse_event
from backend.messages.deltas import DeltaEvent


class Client:
    """An ASGI peer: records what is sent; ``gone`` makes receive() say disconnect."""

    def __init__(self, method: str = "GET", stalled: bool = False) -> None:
        self.scope: dict[str, Any] = {"type": "http", "method": method, "path": "/"}
        self.sent: list[MutableMapping[str, Any]] = []
        self.gone = asyncio.Event()
        self.stalled = stalled  # body sends are never taken
        self.body_seen = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body" and self.stalled:
            await asyncio.Event().wait()
        self.sent.append(message)
        if message["type"] == "http.response.body":
            self.body_seen.set()

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])


async def events(items: list[ServerSentEvent], closed: list[str], hold: bool = False) -> Any:
    async def gen() -> AsyncIterator[ServerSentEvent]:
        try:
            for item in items:
                yield item
            if hold:
                await asyncio.Event().wait()
        finally:
            closed.append("closed")

    return gen()


async def test_events_are_encoded_after_the_headers_and_the_stream_ends() -> None:
    closed: list[str] = []
    items = [
        ServerSentEvent(data='{"a":1}', event="message", id="3"),
        ServerSentEvent(data="two\nlines", event="delta"),
    ]
    response = SseResponse(
        await events(items, closed), ServerSentEvent.encode, {"X-Run-Id": "r1"}, send_timeout=5
    )
    client = Client()
    await response(client.scope, client.receive, client.send)
    start = client.sent[0]
    assert start["status"] == 200
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"text/event-stream; charset=utf-8"
    assert headers[b"cache-control"] == b"no-cache"
    assert headers[b"x-accel-buffering"] == b"no"
    assert headers[b"x-run-id"] == b"r1"
    assert client.body() == (
        b'id: 3\r\nevent: message\r\ndata: {"a":1}\r\n\r\n'
        b"event: delta\r\ndata: two\r\ndata: lines\r\n\r\n"
    )
    assert client.sent[-1]["more_body"] is False
    assert closed == ["closed"]


async def test_an_idle_stream_is_pinged() -> None:
    closed: list[str] = []
    response = SseResponse(
        await events([], closed, hold=True), ServerSentEvent.encode, {}, send_timeout=5, ping=0.01
    )
    client = Client()
    serving = asyncio.create_task(response(client.scope, client.receive, client.send))
    async with asyncio.timeout(10):
        while client.body().count(b": ping\r\n\r\n") < 2:
            await client.body_seen.wait()
            client.body_seen.clear()
        client.gone.set()
        await serving
    assert closed == ["closed"]


async def test_the_clients_disconnect_ends_the_stream_and_closes_the_feed() -> None:
    closed: list[str] = []
    items = [ServerSentEvent(data="x", event="delta")]
    response = SseResponse(
        await events(items, closed, hold=True), ServerSentEvent.encode, {}, send_timeout=5
    )
    client = Client()
    serving = asyncio.create_task(response(client.scope, client.receive, client.send))
    async with asyncio.timeout(10):
        await client.body_seen.wait()
        client.gone.set()
        await serving
    assert closed == ["closed"]
    assert client.body() == b"event: delta\r\ndata: x\r\n\r\n"


async def test_a_client_that_takes_nothing_ends_the_stream_after_the_send_timeout() -> None:
    closed: list[str] = []
    items = [ServerSentEvent(data="x", event="delta")]
    response = SseResponse(
        await events(items, closed, hold=True), ServerSentEvent.encode, {}, send_timeout=0.05
    )
    client = Client(stalled=True)
    async with asyncio.timeout(10):
        await response(client.scope, client.receive, client.send)
    assert closed == ["closed"]
    assert len(client.sent) == 1  # the head only: the event was never taken


async def test_head_answers_the_headers_and_never_starts_the_feed() -> None:
    closed: list[str] = []
    items = [ServerSentEvent(data="x", event="delta")]
    response = SseResponse(await events(items, closed), ServerSentEvent.encode, {}, send_timeout=5)
    client = Client("HEAD")
    await response(client.scope, client.receive, client.send)
    assert client.sent[0]["status"] == 200
    assert client.body() == b""
    assert client.sent[-1]["more_body"] is False
    assert closed == []  # its generator never ran


async def test_events_arm_no_timer_each_the_send_timeout_is_one_watchdog_per_stream(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every timer the loop is asked for while 500 events are written (asyncio.timeout and
    # asyncio.sleep both schedule through loop.call_at)
    loop = asyncio.get_running_loop()
    armed: list[float] = []
    call_at = loop.call_at

    def counting_call_at(when: float, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        armed.append(when)
        return call_at(when, *args, **kwargs)

    closed: list[str] = []
    items = [ServerSentEvent(data=str(i), event="delta") for i in range(500)]
    response = SseResponse(
        await events(items, closed), ServerSentEvent.encode, {}, send_timeout=5, ping=0
    )
    client = Client()
    with monkeypatch.context() as patched:
        patched.setattr(loop, "call_at", counting_call_at)
        await response(client.scope, client.receive, client.send)
    assert client.body().count(b"event: delta") == 500
    assert len(armed) <= 2  # the watchdog's first look; before: one timer per event


async def test_a_ping_the_client_does_not_take_ends_the_stream_after_the_send_timeout() -> None:
    closed: list[str] = []
    response = SseResponse(
        await events([], closed, hold=True),
        ServerSentEvent.encode,
        {},
        send_timeout=0.05,
        ping=0.01,
    )
    client = Client(stalled=True)
    async with asyncio.timeout(10):
        await response(client.scope, client.receive, client.send)
    assert closed == ["closed"]
    assert len(client.sent) == 1  # the head only: the ping was never taken


class OneAtATime(Client):
    """A client whose body sends wait for ``taken``; records sends that overlapped."""

    def __init__(self) -> None:
        super().__init__()
        self.taken = asyncio.Event()
        self.in_flight = 0
        self.overlapped = 0
        self.waiting = asyncio.Event()

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] != "http.response.body":
            return await super().send(message)
        self.in_flight += 1
        self.overlapped += self.in_flight > 1
        try:
            self.waiting.set()
            await self.taken.wait()
            await super().send(message)
        finally:
            self.in_flight -= 1


async def test_a_ping_and_an_event_are_never_sent_at_once() -> None:
    gate = asyncio.Event()
    closed: list[str] = []

    async def feed() -> AsyncIterator[ServerSentEvent]:
        try:
            await gate.wait()  # the first event comes while a ping's send is under way
            yield ServerSentEvent(data="x", event="delta")
            await gate.wait()
            yield ServerSentEvent(data="y", event="delta")
        finally:
            closed.append("closed")

    response = SseResponse(feed(), ServerSentEvent.encode, {}, send_timeout=5, ping=0.01)
    client = OneAtATime()
    serving = asyncio.create_task(response(client.scope, client.receive, client.send))
    async with asyncio.timeout(10):
        await client.waiting.wait()  # a ping is being sent, and not taken yet
        gate.set()  # the events are ready meanwhile; more pings come due meanwhile
        client.taken.set()
        await serving
    assert client.overlapped == 0
    body = client.body()
    assert body.index(b": ping") < body.index(b"data: x") < body.index(b"data: y")
    assert client.sent[-1]["more_body"] is False
    assert closed == ["closed"]


@pytest.mark.parametrize(
    "payload",
    [
        {"uuid": "u", "action_type": "auto_reply", "text": "plain words "},
        {"uuid": "u", "action_type": "auto_reply", "text": 'é ü 中文 🙂 "q" \\ / \u2028 \x7f'},
        {"uuid": "u", "action_type": "x", "text": "two\nlines\r\nand\ra tab\t\x00\x01\x1f\b\f"},
        {"uuid": "u", "action_type": "t", "text": "out", "stream": "stdout", "offset": 7},
        {"uuid": "u", "action_type": "x", "text": "big", "offset": 2**70},  # past orjson
    ],
)
def test_a_delta_is_written_as_its_standard_json_sse_event(payload: dict[str, Any]) -> None:
    standard = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    expected = ServerSentEvent(data=standard, event="delta").encode()
    delta = DeltaEvent.model_validate(payload)
    assert feed_event_bytes(delta) == expected
    assert sse_event(delta).encode() == expected
