"""One contract for a run's feed (backend/runs/feed.py), over SQLite with the in-process
notifier and PostgreSQL with LISTEN/NOTIFY: catch-up from the store, live messages, live
deltas, the end, the cursor.

The "writer" stores messages and ends the run as an owner does; the "reader" follows the
feed. On PostgreSQL they are two notifiers with their own connections, as two processes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import event

from backend.api.sse import sse_event
from backend.messages.deltas import DeltaEvent
from backend.messages.message import Message
from backend.runs import feed as feed_module
from backend.runs.feed import End, FeedEvent, run_feed
from backend.runs.notify import LocalNotifier, Notifier, PgNotifier
from backend.store.repo import Store
from tests.pg import postgres_url, reset


@dataclass
class Pair:
    store: Store
    writer: Notifier
    reader: Notifier


@pytest.fixture(params=["sqlite", "postgresql"])
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pair]:
    if request.param == "sqlite":
        store = Store(f"sqlite:///{tmp_path}/f.db")
        store.migrate()
        local = LocalNotifier()
        p = Pair(store, local, local)
    else:
        url = postgres_url()
        reset(url)
        store = Store(url)
        store.migrate()
        p = Pair(store, PgNotifier(url, "writer"), PgNotifier(url, "reader"))
    await p.writer.start()
    if p.reader is not p.writer:
        await p.reader.start()
    yield p
    await p.writer.close()
    if p.reader is not p.writer:
        await p.reader.close()
    await store.close()


async def new_run(store: Store) -> tuple[str, str]:
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "auto", "local", owner="elsewhere")
    return cid, rid


async def store_message(pair: Pair, cid: str, rid: str, text: str) -> Message:
    msg = Message.build("auto_reply", text)
    msg.conversation_id, msg.run_id = cid, rid
    stored = await pair.store.append_message(msg)
    pair.writer.bus.publish(rid, stored)  # what the owner's Publisher does
    return stored


async def end(pair: Pair, rid: str, status: str = "completed") -> None:
    await pair.store.end_run(rid, status)
    pair.writer.bus.notify(rid)


async def drain(feed: AsyncIterator[FeedEvent]) -> list[FeedEvent]:
    async with asyncio.timeout(20):
        return [e async for e in feed]


def texts(events: list[FeedEvent]) -> list[str]:
    return [e.content for e in events if isinstance(e, Message)]


async def test_a_finished_run_is_caught_up_from_the_store_then_ends(pair: Pair) -> None:
    cid, rid = await new_run(pair.store)
    for text in ("one", "two", "three"):
        await store_message(pair, cid, rid, text)
    await end(pair, rid, "stopped")
    events = await drain(run_feed(pair.store, pair.reader, cid, rid))
    assert texts(events) == ["one", "two", "three"]
    assert events[-1] == End(cid, rid, "stopped")
    seqs = [e.seq for e in events if isinstance(e, Message)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3


async def test_the_cursor_skips_the_messages_already_read(pair: Pair) -> None:
    cid, rid = await new_run(pair.store)
    first = await store_message(pair, cid, rid, "one")
    await store_message(pair, cid, rid, "two")
    await end(pair, rid)
    events = await drain(run_feed(pair.store, pair.reader, cid, rid, after=first.seq))
    assert texts(events) == ["two"]
    assert isinstance(events[-1], End) and events[-1].status == "completed"


async def test_catch_up_longer_than_one_store_read_keeps_every_message_in_order(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_module, "BATCH", 3)
    cid, rid = await new_run(pair.store)
    for i in range(8):
        await store_message(pair, cid, rid, str(i))
    await end(pair, rid)
    events = await drain(run_feed(pair.store, pair.reader, cid, rid))
    assert texts(events) == [str(i) for i in range(8)]


async def test_messages_stored_while_reading_arrive_live_then_the_end(pair: Pair) -> None:
    cid, rid = await new_run(pair.store)
    await store_message(pair, cid, rid, "before")
    feed = run_feed(pair.store, pair.reader, cid, rid)
    async with asyncio.timeout(20):
        first = await anext(feed)
        assert isinstance(first, Message) and first.content == "before"
        waiting = asyncio.ensure_future(anext(feed))  # at the tip: waits for news
        await store_message(pair, cid, rid, "live")
        live = await waiting
        assert isinstance(live, Message) and live.content == "live"
        await end(pair, rid, "failed")
        assert [e async for e in feed] == [End(cid, rid, "failed")]


async def test_a_run_of_this_process_is_read_from_the_bus(pair: Pair) -> None:
    """The owner's own process: its stored messages are kept on the bus for live readers."""
    cid, rid = await new_run(pair.store)
    pair.writer.bus.mark_live(rid)
    feed = run_feed(pair.store, pair.writer, cid, rid)
    async with asyncio.timeout(20):
        waiting = asyncio.ensure_future(anext(feed))
        stored = await store_message(pair, cid, rid, "kept")
        assert await waiting == stored
        await pair.store.end_run(rid, "completed")
        pair.writer.bus.mark_done(rid)
        assert [e async for e in feed] == [End(cid, rid, "completed")]


async def test_a_run_that_ends_in_this_process_gives_its_reader_the_end_without_a_store_read(
    pair: Pair,
) -> None:
    """Its last messages and its final status, as the owner stored them, come from the bus."""
    cid, rid = await new_run(pair.store)
    bus = pair.writer.bus
    bus.mark_live(rid)
    feed = run_feed(pair.store, pair.writer, cid, rid)
    statements: list[str] = []

    def counted(*args: object) -> None:
        statements.append(str(args[2]))

    async with asyncio.timeout(20):
        waiting = asyncio.ensure_future(anext(feed))
        first = await store_message(pair, cid, rid, "first")
        assert await waiting == first
        last = await store_message(pair, cid, rid, "last")
        assert await pair.store.end_run(rid, "stopped")
        for engine in pair.store.engines:
            event.listen(engine, "before_cursor_execute", counted)
        try:
            bus.mark_done(rid, "stopped")
            assert [e async for e in feed] == [last, End(cid, rid, "stopped")]
        finally:
            for engine in pair.store.engines:
                event.remove(engine, "before_cursor_execute", counted)
    assert statements == []
    assert bus.stored_after(rid, 0) is None  # its last reader has gone: forgotten


async def test_a_run_that_ends_while_its_reader_takes_a_delta_loses_no_message(
    pair: Pair,
) -> None:
    """The reader is suspended handing on a delta while the run stores its last message
    and ends: that message still comes before the end."""
    cid, rid = await new_run(pair.store)
    bus = pair.writer.bus
    bus.mark_live(rid)
    feed = run_feed(pair.store, pair.writer, cid, rid)
    payload = DeltaEvent(uuid="u1", action_type="auto_reply", text="Hel")
    async with asyncio.timeout(20):
        waiting = asyncio.ensure_future(anext(feed))
        await asyncio.sleep(0)  # one loop turn: the reader subscribes
        bus.deliver_delta(rid, payload)
        assert await waiting == payload  # the feed waits in its yield of the delta
        last = await store_message(pair, cid, rid, "Hello")
        assert await pair.store.end_run(rid, "completed")
        bus.mark_done(rid, "completed")
        assert [e async for e in feed] == [last, End(cid, rid, "completed")]


async def test_a_delta_reaches_a_caught_up_reader_and_is_never_replayed(pair: Pair) -> None:
    cid, rid = await new_run(pair.store)
    feed = run_feed(pair.store, pair.reader, cid, rid)
    waiting = asyncio.ensure_future(anext(feed))
    await asyncio.sleep(0)  # one loop turn: the reader subscribes (its first statement)
    assert pair.reader.bus.has_readers(rid)
    payload = DeltaEvent(uuid="u1", action_type="auto_reply", text="Hel")
    await pair.writer.publish_delta(rid, payload)
    async with asyncio.timeout(20):
        assert await waiting == payload
    await store_message(pair, cid, rid, "Hello")
    await end(pair, rid)
    rest = await drain(feed)
    assert texts(rest) == ["Hello"] and rest[-1] == End(cid, rid, "completed")
    replay = await drain(run_feed(pair.store, pair.reader, cid, rid))
    assert not any(isinstance(e, DeltaEvent) for e in replay)


async def test_a_reader_still_catching_up_gets_no_delta_before_the_stored_messages(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_module, "BATCH", 2)
    cid, rid = await new_run(pair.store)
    for i in range(5):
        await store_message(pair, cid, rid, str(i))
    feed = run_feed(pair.store, pair.reader, cid, rid)
    async with asyncio.timeout(20):
        first = await anext(feed)  # subscribed, one batch read: behind the tip
        assert isinstance(first, Message)
        await pair.writer.publish_delta(
            rid, DeltaEvent(uuid="u", action_type="auto_reply", text="x")
        )
        seen: list[FeedEvent] = [first]
        while len(texts(seen)) < 5:
            seen.append(await anext(feed))
        assert not any(isinstance(e, DeltaEvent) for e in seen)
        await end(pair, rid)
        await drain(feed)


async def test_a_feed_of_another_processs_run_hangs_up_when_this_process_shuts_down(
    pair: Pair,
) -> None:
    """uvicorn waits for open streams on shutdown: a feed of a run another process owns
    ends (no End: the run goes on; the reader resumes elsewhere with its cursor)."""
    cid, rid = await new_run(pair.store)
    feed = run_feed(pair.store, pair.reader, cid, rid)
    rest = asyncio.ensure_future(drain(feed))
    await asyncio.sleep(0)
    pair.reader.bus.close_readers()
    assert await rest == []
    run = await pair.store.get_run(rid)
    assert run is not None and run.status == "running"


async def test_the_sse_encoding_numbers_messages_and_not_deltas(tmp_path: Path) -> None:
    cid, rid = "c1", "r1"
    msg = Message.build("auto_reply", "hi")
    msg.seq = 7

    async def events() -> AsyncIterator[FeedEvent]:
        yield DeltaEvent(uuid="u", action_type="auto_reply", text="é")
        yield msg
        yield End(cid, rid, "completed")

    sse = [sse_event(e) async for e in events()]
    assert [(e.event, e.id) for e in sse] == [("delta", None), ("message", "7"), ("end", None)]
    assert sse[0].data == '{"uuid":"u","action_type":"auto_reply","text":"é"}'
    assert json.loads(str(sse[1].data))["content"] == "hi"
    assert json.loads(str(sse[2].data)) == {
        "conversation_id": cid,
        "run_id": rid,
        "status": "completed",
    }
