"""The stream carries live deltas from the notifier (issue 11 wires the producers)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

from sse_starlette import ServerSentEvent

from backend.api.sse import run_events
from backend.messages.message import Message
from backend.runs.notify import LocalNotifier
from backend.store.repo import Store


async def test_a_published_delta_is_streamed_as_a_delta_event_before_the_end(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path}/d.db")
    store.migrate()
    notifier = LocalNotifier()
    try:
        cid = await store.create_conversation("1", "t")
        rid = await store.start_run("1", cid, "g", "auto", "local", owner="elsewhere")
        stream = run_events(store, notifier, cid, rid)
        first = asyncio.ensure_future(stream.__anext__())
        await asyncio.sleep(0)  # one loop turn: the reader subscribes (its first statement)
        assert notifier.bus._waiters.get(rid)
        payload = {"uuid": "u1", "action_type": "auto_reply", "text": "Hel"}
        await notifier.publish_delta(rid, payload)
        event = await asyncio.wait_for(first, 5)
        assert event.event == "delta" and json.loads(event.data) == payload
        assert event.id is None  # never replayed
        msg = Message.build("auto_reply", "Hello")
        msg.conversation_id, msg.run_id = cid, rid
        await store.append_message(msg)
        await store.end_run(rid, "completed")
        notifier.bus.notify(rid)
        rest = [e async for e in stream]
        assert [e.event for e in rest] == ["message", "end"]
    finally:
        await store.close()


async def test_streams_of_other_processes_runs_hang_up_when_this_process_shuts_down(
    tmp_path: Path,
) -> None:
    """uvicorn waits for open streams on shutdown: a stream of a run another process owns
    must close (the client resumes elsewhere with Last-Event-ID)."""
    store = Store(f"sqlite:///{tmp_path}/d.db")
    store.migrate()
    notifier = LocalNotifier()
    try:
        cid = await store.create_conversation("1", "t")
        rid = await store.start_run("1", cid, "g", "auto", "local", owner="elsewhere")
        stream = run_events(store, notifier, cid, rid)
        rest = asyncio.ensure_future(_drain(stream))
        await asyncio.sleep(0)
        notifier.bus.close_readers()
        assert await asyncio.wait_for(rest, 5) == []  # closed, no `end`: the run goes on
        run = await store.get_run(rid)
        assert run is not None and run["status"] == "running"
    finally:
        await store.close()


async def _drain(stream: AsyncIterator[ServerSentEvent]) -> list[ServerSentEvent]:
    return [e async for e in stream]
