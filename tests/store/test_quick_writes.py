"""A run's small store work on SQLite runs on the caller's event loop while the database
thread is idle and the lock free (backend/store/committer.py): no hand-off between threads
per write. A write that finds the lock held waits on the thread, never on the loop; the WAL
is checkpointed on the thread. On PostgreSQL every piece goes to the thread as before."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, select

from backend.messages.message import Message
from backend.store import committer
from backend.store.base import MESSAGES
from backend.store.repo import RunNotOwned, Store


def msg(cid: str, rid: str) -> Message:
    m = Message.build("auto_reply", "hello")
    m.conversation_id, m.run_id = cid, rid
    return m


@contextmanager
def outsider(store: Store) -> Iterator[Engine]:
    engine = create_engine(store.url)
    try:
        yield engine
    finally:
        engine.dispose()


@contextmanager
def statements(engine: Engine, checkpoint: threading.Event | None = None) -> Iterator[list[str]]:
    """The statements ``engine`` runs meanwhile; ``checkpoint`` is set at a WAL checkpoint."""
    seen: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(statement)
        if checkpoint is not None and "wal_checkpoint" in statement:
            checkpoint.set()

    event.listen(engine, "before_cursor_execute", before)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", before)


def threads() -> set[threading.Thread]:
    return set(threading.enumerate())


async def a_run(store: Store) -> tuple[str, str]:
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "auto", "local", owner="a")
    await store.record_usage(cid, rid, "auto_reply", "m", 10, 20, None)
    await store.append_message(msg(cid, rid), checkpoint="cp", owner="a")
    await store.save_checkpoint(rid, "cp2", owner="a", run_fields={"task_type": "chat"})
    assert await store.get_run(rid) is not None
    assert await store.end_run(rid, "completed", owner="a")
    return cid, rid


async def test_a_runs_writes_hand_nothing_to_the_database_thread_on_sqlite(
    store: Store,
) -> None:
    before = threads()
    with outsider(store) as other:
        _cid, rid = await a_run(store)
        with other.connect() as conn:  # each committed when answered
            seqs = conn.execute(select(MESSAGES.c.seq).where(MESSAGES.c.run_id == rid)).all()
        assert [s for (s,) in seqs] == [1]
    started = {t.name for t in threads() - before}
    if store.engine.dialect.name == "sqlite":
        assert "planact-db" not in started  # before: the thread started with the first write
        assert store.committer.quick_commits >= 7
    else:  # PostgreSQL: the database thread does it all
        assert store.committer.quick_commits == 0
        assert len(store.engines) == 1


async def test_a_failing_quick_write_fails_alone_and_leaves_nothing(store: Store) -> None:
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "auto", "local", owner="a")
    with pytest.raises(RunNotOwned):
        await store.append_message(msg(cid, rid), checkpoint="cp", owner="b")
    assert await store.messages(cid) == []
    stored = await store.append_message(msg(cid, rid), checkpoint="cp", owner="a")
    assert stored.seq == 1


async def test_a_write_that_finds_the_lock_held_waits_on_the_thread_not_on_the_loop(
    store: Store,
) -> None:
    if store.engine.dialect.name != "sqlite":
        assert store.committer.quick_engine is None  # nothing quick to fall back from
        return
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "auto", "local", owner="a")
    with outsider(store) as other, other.connect() as holder:
        holder.exec_driver_sql("BEGIN IMMEDIATE")  # another process is writing
        appending = asyncio.ensure_future(store.append_message(msg(cid, rid), owner="a"))
        await asyncio.sleep(0)  # its first step: tried here, found the lock, handed over
        assert store.committer.queued == 1
        # the loop goes on meanwhile (the write waits on the thread), and later small work
        # queues behind it: the database commits in the order of submission
        later = asyncio.ensure_future(store.record_usage(cid, rid, "s", "m", 1, 1, None))
        await asyncio.sleep(0)
        assert store.committer.queued == 2
        assert not appending.done() and not later.done()
        holder.exec_driver_sql("ROLLBACK")
    stored = await appending
    await later
    assert stored.seq == 1
    assert [m.seq for m in await store.messages(cid)] == [1]
    assert store.committer.queued == 0


async def test_the_wal_is_checkpointed_on_the_thread_never_by_a_quick_write(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    if store.engine.dialect.name != "sqlite":
        assert store.committer.quick_engine is None
        return
    quick = store.committer.quick_engine
    assert quick is not None
    with quick.connect() as conn:  # the quick path's connections never checkpoint
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0
    with store.engine.connect() as conn:  # the thread's do, as SQLite's default
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 1000
    monkeypatch.setattr(committer, "CHECKPOINT_EVERY", 3)
    checkpointed = threading.Event()
    with statements(store.engine, checkpointed) as on_thread, statements(quick) as on_loop:
        cid = await store.create_conversation("1", "t")
        rid = await store.start_run("1", cid, "g", "auto", "local", owner="a")
        await store.append_message(msg(cid, rid), owner="a")  # the third quick commit
        assert await asyncio.to_thread(checkpointed.wait, 10)
    assert any("wal_checkpoint" in s for s in on_thread)
    assert not any("wal_checkpoint" in s for s in on_loop)
