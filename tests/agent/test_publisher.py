"""The Publisher stores first, then notifies: a woken reader finds the message stored."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backend.agent.publisher import Publisher
from backend.messages.bus import Bus
from backend.messages.message import Message
from backend.store.repo import Store


async def test_a_published_message_is_stored_before_readers_and_the_listener_hear_of_it(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path}/p.db")
    store.migrate()
    try:
        cid = await store.create_conversation("1", "t")
        rid = await store.start_run("1", cid, "g", "auto", "local", owner="me")
        bus = Bus()
        bus.mark_live(rid)
        sub = bus.subscribe(rid)
        seen_in_store: list[list[str]] = []

        async def listener(msg: Message) -> None:
            stored = await store.messages(cid, run_id=rid)
            seen_in_store.append([m.uuid for m in stored])

        publisher = Publisher(store, bus, cid, rid, listener)
        tracked: list[int] = []
        msg = await publisher.publish(
            Message.build("auto_reply", "hello"), lambda stored: tracked.append(stored.seq)
        )
        assert msg.seq > 0 and (msg.conversation_id, msg.run_id) == (cid, rid)
        assert tracked == [msg.seq]
        assert sub.is_set()  # the reader was woken
        assert bus.stored_after(rid, 0) == [msg]  # and finds it with its seq
        assert seen_in_store == [[msg.uuid]]
    finally:
        await store.close()


async def test_a_message_whose_publisher_is_cancelled_is_still_stored_and_tracked(
    tmp_path: Path,
) -> None:
    store = Store(f"sqlite:///{tmp_path}/p.db")
    store.migrate()
    try:
        cid = await store.create_conversation("1", "t")
        rid = await store.start_run("1", cid, "g", "auto", "local", owner="me")
        bus = Bus()
        tracked: list[str] = []
        publisher = Publisher(store, bus, cid, rid)
        running = Message.build("terminal_run", "ls", status="running")
        task = asyncio.ensure_future(
            publisher.publish(running, lambda stored: tracked.append(stored.uuid))
        )
        await asyncio.sleep(0)  # the write has begun on the store's thread
        task.cancel()
        await asyncio.wait({task})
        assert task.cancelled()
        assert tracked == [running.uuid]  # known to the run, so that it gets closed
        assert [m.uuid for m in await store.messages(cid, run_id=rid)] == [running.uuid]
    finally:
        await store.close()
