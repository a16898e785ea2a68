"""The run feed (backend/runs/feed.py) encoded as planact's SSE stream: `message` events
with the message's seq as id (a client resumes with Last-Event-ID), `delta` events without
an id (never replayed), and one `end` event."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

from backend.runs.feed import Delta, End, FeedEvent

PING_SECONDS = 15.0


async def sse_events(feed: AsyncIterator[FeedEvent]) -> AsyncIterator[ServerSentEvent]:
    async for event in feed:
        if isinstance(event, Delta):
            data = json.dumps(event.payload, ensure_ascii=False, separators=(",", ":"))
            yield ServerSentEvent(data=data, event="delta")
        elif isinstance(event, End):
            end = {
                "conversation_id": event.conversation_id,
                "run_id": event.run_id,
                "status": event.status,
            }
            yield ServerSentEvent(data=json.dumps(end), event="end")
        else:
            yield ServerSentEvent(data=event.to_json(), event="message", id=str(event.seq))


class _Stream(EventSourceResponse):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except SendTimeoutError:
            # a client that does not read: the stream is closed (its generator too); the
            # server's write timeout cuts the connection (backend/serve/protocol.py)
            return


def sse_response(
    stream: AsyncIterator[ServerSentEvent],
    headers: dict[str, str] | None = None,
    send_timeout: float | None = None,
) -> EventSourceResponse:
    """`send_timeout`: seconds one event may take to be sent before the stream ends."""
    return _Stream(
        stream,
        send_timeout=send_timeout,
        ping=PING_SECONDS,
        ping_message_factory=lambda: ServerSentEvent(comment="ping"),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no", **(headers or {})},
    )
