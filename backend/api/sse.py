"""The message stream: read from the store after the last seq, then wait for news."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

from backend.messages.bus import Bus
from backend.store.repo import Store

PING_SECONDS = 15.0
POLL_SECONDS = 5.0  # re-read the store even without a notification (other replicas)
BATCH = 500


async def run_events(
    store: Store, bus: Bus, conversation_id: str, run_id: str, after: int = 0
) -> AsyncIterator[ServerSentEvent]:
    event = bus.subscribe(run_id)
    try:
        last = after
        while True:
            live = bus.stored_after(run_id, last)
            if live is not None:
                # a run of this process: its stored messages are on the bus, and it
                # notifies on every message and when it ends
                for msg in live:
                    last = msg.seq
                    yield ServerSentEvent(data=msg.to_json(), event="message", id=str(msg.seq))
                if not live:
                    await bus.wait(run_id, event, POLL_SECONDS)
                continue
            msgs = await store.messages(conversation_id, run_id=run_id, after=last, limit=BATCH)
            for msg in msgs:
                last = msg.seq
                yield ServerSentEvent(data=msg.to_json(), event="message", id=str(msg.seq))
            if len(msgs) == BATCH:
                continue
            run = await store.get_run(run_id)
            if run is None or run["status"] != "running":
                # the run stored its last message before its status: read once more
                tail = await store.messages(conversation_id, run_id=run_id, after=last)
                for msg in tail:
                    last = msg.seq
                    yield ServerSentEvent(data=msg.to_json(), event="message", id=str(msg.seq))
                status = run["status"] if run else "failed"
                yield ServerSentEvent(
                    data=json.dumps(
                        {"conversation_id": conversation_id, "run_id": run_id, "status": status}
                    ),
                    event="end",
                )
                return
            # running elsewhere (another replica) or just recovered: poll the store
            await bus.wait(run_id, event, POLL_SECONDS)
    finally:
        bus.unsubscribe(run_id, event)


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
