"""One contract for every notifier: LocalNotifier (in-process) and PgNotifier (LISTEN/NOTIFY).

A "reader" notifier wakes when a "writer" stores a message, hears stop requests and gets live
deltas. For the in-process notifier reader and writer are one object (one process); for
PostgreSQL they are two notifiers with their own connections, as two processes would be."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from backend.messages.deltas import DeltaEvent
from backend.messages.message import Message
from backend.runs.notify import LocalNotifier, Notifier, PgNotifier, psycopg_conninfo
from backend.store.repo import Store
from tests.pg import postgres_url, wipe


@dataclass
class Pair:
    store: Store
    writer: Notifier
    reader: Notifier
    kind: str


@pytest.fixture(params=["local", "postgresql"])
async def pair(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pair]:
    if request.param == "local":
        store = Store(f"sqlite:///{tmp_path}/n.db")
        store.migrate()
        local = LocalNotifier()
        p = Pair(store, local, local, "local")
    else:
        url = postgres_url()
        wipe(url)
        store = Store(url)
        store.migrate()
        p = Pair(store, PgNotifier(url, "writer"), PgNotifier(url, "reader"), "postgresql")
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
    rid = await store.start_run("1", cid, "g", "auto", "local", owner="writer")
    return cid, rid


async def test_a_stored_message_wakes_a_reader(pair: Pair) -> None:
    cid, rid = await new_run(pair.store)
    sub = pair.reader.bus.subscribe(rid)
    other = pair.reader.bus.subscribe("another-run")
    msg = Message.build("x", "hello")
    msg.conversation_id, msg.run_id = cid, rid
    stored = await pair.store.append_message(msg)
    pair.writer.bus.publish(rid, stored)  # what the owner's RunContext does
    assert await pair.reader.bus.wait(rid, sub, 5) is True
    assert await pair.reader.bus.wait("another-run", other, 0.05) is False
    # and the end of the run wakes it too
    await pair.store.end_run(rid, "completed")
    pair.writer.bus.notify(rid)
    assert await pair.reader.bus.wait(rid, sub, 5) is True


async def test_a_stop_request_reaches_the_readers_control_handler(pair: Pair) -> None:
    _, rid = await new_run(pair.store)
    heard: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
    pair.reader.on_control(lambda kind, run_id: heard.put_nowait((kind, run_id)))
    info = await pair.store.request_stop(rid)
    assert info is not None and info.owner == "writer"
    pair.writer.control("stop", rid)  # what RunManager.stop does after recording it
    async with asyncio.timeout(5):
        assert await heard.get() == ("stop", rid)


async def test_deltas_reach_the_reader_in_order_and_long_ones_arrive_whole(pair: Pair) -> None:
    _, rid = await new_run(pair.store)
    sub = pair.reader.bus.subscribe(rid)
    long_text = "é" * 9000  # more than one NOTIFY can carry
    await pair.writer.publish_delta(rid, DeltaEvent(uuid="u", action_type="auto_reply", text="a"))
    await pair.writer.publish_delta(rid, DeltaEvent(uuid="u", action_type="auto_reply", text="b"))
    await pair.writer.publish_delta(
        rid, DeltaEvent(uuid="u", action_type="auto_reply", text=long_text)
    )
    got: list[DeltaEvent] = []
    async with asyncio.timeout(5):
        while "".join(d.text for d in got) != "ab" + long_text:
            await pair.reader.bus.wait(rid, sub, 1)
            got.extend(sub.take_deltas())
    assert {d.uuid for d in got} == {"u"}


async def test_a_delta_goes_at_once_only_where_no_other_process_must_hear_of_it(
    pair: Pair,
) -> None:
    _, rid = await new_run(pair.store)
    sub = pair.writer.bus.subscribe(rid)
    delta = DeltaEvent(uuid="u", action_type="auto_reply", text="a")
    went = pair.writer.publish_delta_now(rid, delta)
    if pair.kind == "local":
        assert went is True
        assert sub.take_deltas() == [delta]  # delivered within the call
    else:  # another process's readers hear of it only by publish_delta's NOTIFY
        assert went is False
        assert sub.take_deltas() == []


@pytest.fixture
async def pg_pair(tmp_path: Path) -> AsyncIterator[Pair]:
    url = postgres_url()
    wipe(url)
    store = Store(url)
    store.migrate()
    p = Pair(store, PgNotifier(url, "writer"), PgNotifier(url, "reader"), "postgresql")
    await p.writer.start()
    await p.reader.start()
    yield p
    await p.writer.close()
    await p.reader.close()
    await store.close()


async def test_pg_notifications_flow_again_after_the_listening_connection_is_lost(
    pg_pair: Pair,
) -> None:
    """(PostgreSQL only: the in-process notifier has no connection to lose.)"""
    pair = pg_pair
    reader = pair.reader
    assert isinstance(reader, PgNotifier)
    cid, rid = await new_run(pair.store)
    sub = reader.bus.subscribe(rid)
    async with await psycopg.AsyncConnection.connect(
        psycopg_conninfo(postgres_url()), autocommit=True
    ) as admin:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE (query LIKE 'LISTEN%' OR query LIKE 'SELECT 1') AND pid <> pg_backend_pid() "
            "AND datname = current_database()"  # not another test run's connections
        )
    async with asyncio.timeout(10):
        while reader.reconnects == 0:
            await reader.bus.wait(rid, sub, 0.2)
    await reader.bus.wait(rid, sub, 0.05)  # the wake-up every reader gets on reconnect
    msg = Message.build("x", "after")
    msg.conversation_id, msg.run_id = cid, rid
    await pair.store.append_message(msg)
    assert await reader.bus.wait(rid, sub, 5) is True
