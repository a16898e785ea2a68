"""The database thread's group commit (backend/store/committer.py), on SQLite and PostgreSQL:
writes queued at the same moment share a transaction, each caller hears of its write only
once it is committed, and one piece's failure is its own."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, event, select

from backend.messages.message import Message
from backend.messages.tasks import PlanTask
from backend.store.base import MESSAGES, RUNS, TASKS
from backend.store.repo import ConflictError, NotFoundError, RunNotOwned, Store
from tests.support.runs import executable

RUNS_AT_ONCE = 20


def msg(cid: str, rid: str) -> Message:
    m = Message.build("auto_reply", "hello")
    m.conversation_id, m.run_id = cid, rid
    return m


@contextmanager
def counted(store: Store) -> Iterator[dict[str, int]]:
    """Statements and commits on the store's engines meanwhile (SQLAlchemy events)."""
    counts = {"statements": 0, "commits": 0}

    def statement(*_args: Any) -> None:
        counts["statements"] += 1

    def commit(_conn: Any) -> None:
        counts["commits"] += 1

    for engine in store.engines:
        event.listen(engine, "before_cursor_execute", statement)
        event.listen(engine, "commit", commit)
    try:
        yield counts
    finally:
        for engine in store.engines:
            event.remove(engine, "before_cursor_execute", statement)
            event.remove(engine, "commit", commit)


@contextmanager
def write_lock_held(store: Store, other: Engine) -> Iterator[None]:
    """On SQLite, another connection holds the write lock meanwhile: no write can take the
    quick path (backend/store/committer.py), each waits on the database thread."""
    if store.engine.dialect.name != "sqlite":
        yield
        return
    with other.connect() as conn:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.exec_driver_sql("ROLLBACK")


@contextmanager
def outsider(store: Store) -> Iterator[Engine]:
    """Another connection to the same database: what is committed, as anyone sees it."""
    engine = create_engine(store.url)
    try:
        yield engine
    finally:
        engine.dispose()


async def runs(store: Store, n: int, owner: str = "a") -> list[tuple[str, str]]:
    out = []
    for i in range(n):
        cid = await store.create_conversation("1", f"c{i}")
        out.append((cid, await store.start_run("1", cid, "g", "auto", "local", owner=owner)))
    return out


async def test_writes_made_at_once_share_commits_and_are_committed_when_answered(
    store: Store,
) -> None:
    pairs = await runs(store, RUNS_AT_ONCE)
    seen: list[bool] = []
    with outsider(store) as other:

        async def append(cid: str, rid: str) -> None:
            stored = await store.append_message(msg(cid, rid), checkpoint="cp", owner="a")
            # the moment its caller hears of it, the message is committed (stored before
            # it is shown): another connection reads it
            with other.connect() as conn:
                row = conn.execute(
                    select(MESSAGES.c.seq).where(MESSAGES.c.uuid == stored.uuid)
                ).scalar_one_or_none()
            seen.append(row == stored.seq == 1)

        with counted(store) as counts:
            with write_lock_held(store, other):
                appending = asyncio.gather(*(append(cid, rid) for cid, rid in pairs))
                await asyncio.sleep(0)  # their first steps: each queued to the thread
                if store.engine.dialect.name == "sqlite":  # the lock is held: none is done
                    assert store.committer.queued == RUNS_AT_ONCE
            await appending
    assert seen == [True] * RUNS_AT_ONCE
    # one transaction per write would be RUNS_AT_ONCE commits
    assert counts["commits"] <= RUNS_AT_ONCE // 2, counts
    for cid, rid in pairs:
        assert (await executable(store, rid)).checkpoint == "cp"
        assert [m.seq for m in await store.messages(cid)] == [1]


async def test_a_failing_write_fails_alone_among_the_writes_it_was_batched_with(
    store: Store,
) -> None:
    pairs = await runs(store, RUNS_AT_ONCE)
    theirs = {rid for _, rid in pairs[::4]}  # fenced by an owner that is not theirs
    tasks = [
        PlanTask(id=f"t{i}", title="task", description="", requirement="", status="pending")
        for i in range(2)
    ]
    done, conflicts = 0, 0

    async def write(cid: str, rid: str) -> str:
        owner = "b" if rid in theirs else "a"
        await store.save_tasks(
            rid, cid, [t.model_copy(update={"id": t.id + rid}) for t in tasks]
        )  # ORM
        try:
            await store.append_message(msg(cid, rid), checkpoint="cp", owner=owner)
        except RunNotOwned:
            return "not owned"
        return "stored"

    async def conflict(cid: str) -> None:
        nonlocal conflicts
        try:
            await store.start_run("1", cid, "g", "auto", "local")
        except ConflictError:
            conflicts += 1

    async def missing() -> None:
        nonlocal done
        with pytest.raises(NotFoundError):
            await store.start_run("1", "no such conversation", "g", "auto", "local")
        done += 1

    with counted(store) as counts:
        got = await asyncio.gather(
            *(write(cid, rid) for cid, rid in pairs),
            *(conflict(cid) for cid, _ in pairs[:3]),
            missing(),
        )
    assert got[:RUNS_AT_ONCE] == ["not owned" if rid in theirs else "stored" for _, rid in pairs]
    assert (conflicts, done) == (3, 1)
    assert counts["commits"] > 0
    with outsider(store) as other, other.connect() as conn:
        for cid, rid in pairs:
            checkpoint = conn.execute(select(RUNS.c.checkpoint).where(RUNS.c.id == rid)).scalar()
            seqs = conn.execute(
                select(MESSAGES.c.seq).where(MESSAGES.c.conversation_id == cid)
            ).all()
            if rid in theirs:  # nothing of the refused write
                assert (checkpoint, seqs) == (None, [])
            else:
                assert (checkpoint, [s for (s,) in seqs]) == ("cp", [1])
            tasks_saved = conn.execute(select(TASKS.c.id).where(TASKS.c.run_id == rid)).all()
            assert len(tasks_saved) == 2  # the ORM writes batched with it: each its own


async def test_a_cancelled_caller_gets_its_answer_nowhere_and_the_thread_goes_on(
    store: Store,
) -> None:
    (cid, rid), *_ = await runs(store, 1)
    waiting = asyncio.ensure_future(store.append_message(msg(cid, rid), owner="a"))
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    stored = await store.append_message(msg(cid, rid), owner="a")
    assert stored.seq in (1, 2)  # the cancelled one ran or not; the next one did
    assert [m.seq for m in await store.messages(cid)][-1] == stored.seq


async def test_a_run_starts_in_three_statements(store: Store) -> None:
    """The start of a run: the conversation marked running (its row locked), the check for
    a live run, the run's row; before, an ORM SELECT … FOR UPDATE came first (4)."""
    cid = await store.create_conversation("1", "t")
    with counted(store) as counts:
        rid = await store.start_run("1", cid, "g", "auto", "local", owner="a")
    assert counts == {"statements": 3, "commits": 1}
    run = await store.run_for_execution(rid)
    assert run is not None
    assert (run.status, run.owner, run.user_id) == ("running", "a", "1")
    conv = await store.get_conversation("1", cid)
    assert conv is not None and conv.status == "running"


async def test_work_after_close_is_refused(store: Store) -> None:
    cid = await store.create_conversation("1", "t")
    await store.close()
    with pytest.raises(RuntimeError, match="closed"):
        await store.get_conversation("1", cid)
