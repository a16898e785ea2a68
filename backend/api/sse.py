"""The message stream: read from the store after the last seq, then wait for news.

Wake-ups come from the notifier: this process's runs through the bus, other processes'
runs through PostgreSQL LISTEN/NOTIFY. A slow periodic store read stays as a safety net
(and is the only news of another process's run on SQLite)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.sse import SendTimeoutError
from starlette.types import Receive, Scope, Send

from backend.messages.bus import Subscription
from backend.runs.notify import Notifier
from backend.store.repo import Store

PING_SECONDS = 15.0
SAFETY_POLL_SECONDS = 5.0  # notifications cross processes: re-read only as a safety net
LOCAL_POLL_SECONDS = 1.0  # no cross-process notifications (SQLite): another process's run
BATCH = 500


async def run_events(
    store: Store, notifier: Notifier, conversation_id: str, run_id: str, after: int = 0
) -> AsyncIterator[ServerSentEvent]:
    bus = notifier.bus
    poll = SAFETY_POLL_SECONDS if notifier.cross_process else LOCAL_POLL_SECONDS
    event = bus.subscribe(run_id)
    # deltas go only to a reader that has every stored message so far: one that is still
    # catching up (a replay, a resume) would get them before the messages they belong to
    caught_up = False
    try:
        last = after
        while True:
            deltas = _deltas(event)  # made before the messages read below
            live = bus.stored_after(run_id, last)
            if live is not None:
                # a run of this process: its stored messages are on the bus, and it
                # notifies on every message and when it ends
                if caught_up or not live:
                    for delta in deltas:
                        yield delta
                for msg in live:
                    last = msg.seq
                    yield ServerSentEvent(data=msg.to_json(), event="message", id=str(msg.seq))
                if not live:
                    caught_up = True
                    await bus.wait(run_id, event, SAFETY_POLL_SECONDS)
                continue
            msgs = await store.messages(conversation_id, run_id=run_id, after=last, limit=BATCH)
            if caught_up or not msgs:
                for delta in deltas:
                    yield delta
            caught_up = len(msgs) < BATCH  # at the tip of the stored messages
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
            if bus.closing:
                # this process shuts down while another one runs the run: hang up, the
                # client resumes elsewhere with Last-Event-ID
                return
            await bus.wait(run_id, event, poll)
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


def _deltas(event: Subscription) -> list[ServerSentEvent]:
    return [
        ServerSentEvent(
            data=json.dumps(d, ensure_ascii=False, separators=(",", ":")), event="delta"
        )
        for d in event.take_deltas()
    ]


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
