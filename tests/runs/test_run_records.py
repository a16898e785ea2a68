"""A run in this process is one record (backend/runs/local.py): made once, when the run
starts or is launched here, and dropped whichever way its execution ends (finished, failed,
stopped, parked on a wait, handed over, taken over by another process, cancelled before it
began, refused because it had ended), so nothing of a run stays behind in the manager."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from procrastinate.exceptions import ConnectorException
from sqlalchemy import create_engine, text

from backend.agent.specialists import BUILTIN
from backend.llm.base import LLMError
from backend.llm.testing import Reply, ScriptedLLM
from backend.messages.bus import Bus
from backend.messages.message import Message
from backend.runs import RunManager
from backend.runs.executor import QueueExecutor
from backend.runs.local import LocalRun
from backend.store.repo import Store
from backend.waits import answer_approval
from tests.agent.scripts import finish, plan_reply, run
from tests.pg import postgres_url, wipe
from tests.support.settings import make_settings

DEADLINE = 30.0
# bounded: it waits for a file the test creates (or for the run to be cancelled)
WAITS_FOR_GO = "for i in $(seq 600); do [ -f go ] && break; sleep 0.05; done; echo ran"


@asynccontextmanager
async def a_manager(
    tmp_path: Path, script: Sequence[tuple[str, Reply]]
) -> AsyncIterator[RunManager]:
    settings = make_settings(tmp_path)
    store = Store(settings.database_url)
    store.migrate()
    manager = RunManager(settings, store, Bus(), ScriptedLLM(script), BUILTIN)
    await manager.open()
    try:
        yield manager
    finally:
        await manager.shutdown()
        await store.close()


class Seen:
    """A run's listener: its messages, and the record the manager held at each one."""

    def __init__(self, manager: RunManager) -> None:
        self.manager = manager
        self.messages: list[Message] = []
        self.records: list[LocalRun | None] = []
        self._changed = asyncio.Event()

    def __call__(self, msg: Message) -> None:
        self.messages.append(msg)
        self.records.append(self.manager.runs.get(msg.run_id))
        self._changed.set()

    async def until(self, found: Callable[[Message], bool]) -> Message:
        async with asyncio.timeout(DEADLINE):
            while True:
                for msg in self.messages:
                    if found(msg):
                        return msg
                self._changed.clear()
                await self._changed.wait()


def command_running(msg: Message) -> bool:
    return msg.meta.action_type == "terminal_run" and msg.status == "running"


async def started(manager: RunManager, seen: Seen, **kw: object) -> tuple[str, LocalRun]:
    """Start a run followed by ``seen``; its record as the start left it."""
    _cid, rid = await manager.start("1", "do it", mode="agent", listener=seen, **kw)  # type: ignore[arg-type]
    record = manager.runs.get(rid)
    assert record is not None and record.task is not None
    return rid, record


async def ended(record: LocalRun) -> str:
    """The status the run's execution here ended with."""
    assert record.task is not None
    done, _ = await asyncio.wait({record.task}, timeout=DEADLINE)
    assert done, "the run's execution did not end"
    return record.task.result()


def assert_made_once(seen: Seen, record: LocalRun) -> None:
    """Every message of the run was published while the start's record was its record."""
    assert seen.records, "the run published nothing"
    assert all(r is record for r in seen.records)


def assert_dropped(manager: RunManager, rid: str, *, followed: bool = False) -> None:
    assert rid not in manager.runs and len(manager.runs) == 0
    assert manager.runs.task(rid) is None and manager.runs.controls() == {}
    assert manager.runs.followed() == ({rid} if followed else set())


async def test_a_finished_run_leaves_no_record(tmp_path: Path) -> None:
    script = [("planning", plan_reply("One")), ("thinking", run("echo hi") + finish("done"))]
    async with a_manager(tmp_path, script) as manager:
        seen = Seen(manager)
        rid, record = await started(manager, seen)
        assert await ended(record) == "completed"
        assert_made_once(seen, record)
        assert_dropped(manager, rid)
        # launched again, it is refused (it ended): no record stays behind either
        assert await manager.launch(rid) == "completed"
        assert_dropped(manager, rid)


async def test_a_failed_run_leaves_no_record(tmp_path: Path) -> None:
    script: list[tuple[str, Reply]] = [("planning", LLMError("the model is down"))]
    async with a_manager(tmp_path, script) as manager:
        seen = Seen(manager)
        rid, record = await started(manager, seen)
        assert await ended(record) == "failed"
        assert_made_once(seen, record)
        assert_dropped(manager, rid)


async def test_a_stopped_run_leaves_no_record(tmp_path: Path) -> None:
    script = [("planning", plan_reply("One")), ("thinking", run(WAITS_FOR_GO))]
    async with a_manager(tmp_path, script) as manager:
        seen = Seen(manager)
        rid, record = await started(manager, seen)
        await seen.until(command_running)
        assert await manager.stop(rid)
        assert await ended(record) == "stopped"
        assert_made_once(seen, record)
        assert_dropped(manager, rid)
        assert record.canceller is None  # the stop's canceller went with it


async def test_a_parked_run_leaves_no_record_and_its_resumption_one_of_its_own(
    tmp_path: Path,
) -> None:
    script = [("planning", plan_reply("One")), ("thinking", run("echo hi") + finish("done"))]
    async with a_manager(tmp_path, script) as manager:
        seen = Seen(manager)
        rid, record = await started(manager, seen, approval="risky")
        assert await ended(record) == "parked"
        assert_made_once(seen, record)
        # its listener is kept while it waits: the answered run reports to it again
        assert_dropped(manager, rid, followed=True)
        asked = await seen.until(lambda m: m.meta.action_type == "approval")
        before = len(seen.records)
        await answer_approval(manager, rid, asked.uuid, "approve")
        resumed = manager.runs.get(rid)
        assert resumed is not None and resumed is not record
        assert await ended(resumed) == "completed"
        assert all(r is resumed for r in seen.records[before:])
        assert_dropped(manager, rid)


async def test_a_run_taken_over_elsewhere_leaves_no_record(tmp_path: Path) -> None:
    script = [("planning", plan_reply("One")), ("thinking", run(WAITS_FOR_GO))]
    async with a_manager(tmp_path, script) as manager:
        seen = Seen(manager)
        rid, record = await started(manager, seen)
        msg = await seen.until(command_running)
        # another process took it over (this one's lease had expired, as far as it knew)
        assert await manager.store.take_over(rid, manager.instance_id, "elsewhere") == 1
        (manager.workspace("1", msg.conversation_id) / "go").write_text("")
        assert await ended(record) == "failed"
        assert record.control is None and all(r is record for r in seen.records)
        assert_dropped(manager, rid)
        row = await manager.store.get_run(rid)
        assert row is not None and row.owner == "elsewhere" and row.status == "running"


async def test_a_run_handed_over_at_shutdown_leaves_no_record(tmp_path: Path) -> None:
    script = [("planning", plan_reply("One")), ("thinking", run(WAITS_FOR_GO))]
    async with a_manager(tmp_path, script) as manager:
        seen = Seen(manager)
        rid, record = await started(manager, seen)
        await seen.until(command_running)
        await manager.drain(0)  # SIGTERM with no grace: interrupted where it is
        assert await ended(record) == "handed_over"
        assert_made_once(seen, record)
        assert_dropped(manager, rid)
        row = await manager.store.get_run(rid)
        assert row is not None and row.status == "running"  # a live process goes on


async def test_a_run_cancelled_before_it_began_leaves_no_record(tmp_path: Path) -> None:
    async with a_manager(tmp_path, []) as manager:
        cid = await manager.store.create_conversation("1", "t")
        rid = await manager.store.start_run(
            "1", cid, "do it", "agent", "local", manager.instance_id
        )
        task = manager.launch(rid)
        assert manager.runs.task(rid) is task
        task.cancel()  # before its first step: its coroutine never runs
        await asyncio.wait({task}, timeout=DEADLINE)
        assert_dropped(manager, rid)
        assert await manager.wait(rid, timeout=DEADLINE) == "stopped"  # ended all the same
        assert_dropped(manager, rid)


async def test_a_queued_run_a_worker_executes_has_one_record_while_it_runs(
    tmp_path: Path,
) -> None:
    held: list[LocalRun | None] = []

    def plan(_messages: list[dict[str, object]]) -> str:
        held.append(manager.runs.get(rid))  # (during its model calls)
        return plan_reply("One")

    def act(_messages: list[dict[str, object]]) -> str:
        held.append(manager.runs.get(rid))
        return run("echo hi") + finish("done")

    async with a_manager(tmp_path, [("planning", plan), ("thinking", act)]) as manager:
        cid = await manager.store.create_conversation("1", "t")
        rid = await manager.store.start_run("1", cid, "do it", "agent", "local", None)
        job = asyncio.ensure_future(manager.execute(rid))  # as a queue worker's job does
        assert await job == "completed"
        first = held[0]
        assert len(held) == 2 and first is not None and held[1] is first and first.task is job
        assert_dropped(manager, rid)


def drop_queue(url: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE procrastinate_jobs CASCADE"))
    engine.dispose()


async def test_a_run_the_executor_could_not_take_is_followed_no_more(tmp_path: Path) -> None:
    url = postgres_url()
    wipe(url)
    settings = make_settings(tmp_path, database_url=url, executor="queue")
    store = Store(url)
    store.migrate()
    executor = QueueExecutor(url)
    manager = RunManager(settings, store, Bus(), ScriptedLLM([]), BUILTIN, executor=executor)
    await manager.open()
    try:
        drop_queue(url)  # the database refuses the run's job
        seen = Seen(manager)
        cid = await store.create_conversation("1", "t")
        with pytest.raises(ConnectorException) as refused:
            await manager.start("1", "do it", conversation_id=cid, mode="agent", listener=seen)
        assert "procrastinate_jobs" in str(refused.value.__cause__)
        (rid,) = {m.run_id for m in await store.messages(cid)}
        assert_dropped(manager, rid)  # nobody here follows it any more
    finally:
        await manager.shutdown()
        await store.close()
        wipe(url)  # no half of the queue's schema is left to the next test
