"""Ownership in the store: leases, recovery per lease, ending only running runs, one running
run per conversation across processes (two Store objects stand for two processes)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from backend.actions.model import Action
from backend.agent.specialists import BUILTIN
from backend.llm.testing import ScriptedLLM
from backend.messages.bus import Bus
from backend.messages.message import Message
from backend.messages.tasks import PlanTask
from backend.runs import RunManager
from backend.runtime.base import ActionResult
from backend.store.repo import ConflictError, Store
from tests.support.runs import close
from tests.support.settings import make_settings


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    s = Store(db_url)
    s.migrate()
    yield s
    await s.close()


class ReapingRuntime:
    """The docker runtime's owner-reaping hook, as the lease keeper sees it."""

    name = "docker"

    def __init__(self) -> None:
        self.reaped: list[list[str]] = []

    async def execute(self, action: Action, workspace: Path) -> ActionResult:
        raise AssertionError("not used")

    async def start(self) -> None: ...

    async def forget(self, workspace: Path) -> None: ...

    async def close(self) -> None: ...

    async def reap_owners(self, owners: list[str]) -> None:
        self.reaped.append(sorted(owners))


async def manager_on(tmp_path: Path, db_url: str, **kw: Any) -> RunManager:
    # a lease no test outlives: the keeper's own passes (every third of it) never race the
    # recover() a test calls, and a starved process never loses its own runs; expiry is
    # set in the store (expire_instance, set_expiry), never waited for
    settings = make_settings(tmp_path, database_url=db_url, lease_seconds=3600.0)
    store = Store(db_url)
    store.migrate()
    m = RunManager(settings, store, Bus(), ScriptedLLM([]), BUILTIN, **kw)
    await m.open()
    return m


async def test_ending_changes_only_a_run_that_is_still_running(store: Store) -> None:
    cid = await store.create_conversation("1", "t")
    rid = await store.start_run("1", cid, "g", "auto", "local", owner="me")
    assert await store.end_run(rid, "failed", "lease expired") is True
    assert await store.end_run(rid, "completed") is False  # a late owner cannot overwrite
    run = await store.get_run(rid)
    assert run is not None and run.status == "failed" and run.error == "lease expired"


async def test_thirty_racing_starts_from_two_processes_give_exactly_one_run(
    store: Store, db_url: str
) -> None:
    other = Store(db_url)  # a second process's store on the same database
    try:
        cid = await store.create_conversation("1", "t")
        results = await asyncio.gather(
            *[
                (store if i % 2 else other).start_run("1", cid, "g", "auto", "local", owner="x")
                for i in range(30)
            ],
            return_exceptions=True,
        )
        assert sum(isinstance(r, str) for r in results) == 1
        assert sum(isinstance(r, ConflictError) for r in results) == 29
    finally:
        await other.close()


async def set_expiry(store: Store, iid: str, when: datetime) -> None:
    await store._core(
        lambda c: c.execute(
            text("UPDATE instances SET expires_at = :t WHERE id = :i").bindparams(t=when, i=iid)
        )
    )


async def test_recovery_takes_only_runs_whose_owner_lease_expired(
    tmp_path: Path, db_url: str
) -> None:
    reaper = ReapingRuntime()
    b = await manager_on(tmp_path, db_url, runtimes={"docker": reaper})
    b.llm = ScriptedLLM([("auto_reply", "hi")])
    store = b.store
    try:
        # a live owner (another host: its lease is all we know), and an owner that is gone
        # with a run begun before runs stored checkpoints (nothing to go on from)
        await store.renew_instance("worker-a", "worker", 3600, "elsewhere|pid:[1]")
        cid_a = await store.create_conversation("1", "a")
        rid_a = await store.start_run("1", cid_a, "g", "chat", "local", owner="worker-a")
        cid_g = await store.create_conversation("1", "g")
        rid_g = await store.start_run("1", cid_g, "g", "auto", "local", owner="ghost")
        task = PlanTask(id="t1", title="T", description="", requirement="", status="running")
        await store.save_tasks(rid_g, cid_g, [task])
        for msg in (
            Message.build("task", "T", status="running", task_id="t1"),
            Message.build("terminal_run", "sleep 9", status="running", task_id="t1", uuid="u1"),
        ):
            msg.conversation_id, msg.run_id = cid_g, rid_g
            await store.append_message(msg)

        assert await b.recover() == 1
        ghost = await store.get_run(rid_g)
        assert ghost is not None and ghost.status == "failed"
        live = await store.get_run(rid_a)
        assert live is not None and live.status == "running"  # never touched
        msgs = await store.messages(cid_g, limit=100)
        kinds = [(m.meta.action_type, m.status) for m in msgs]
        assert kinds == [
            ("task", "running"),
            ("terminal_run", "running"),
            ("terminal_run", "failure"),
            ("task", "failure"),
            ("error", "failure"),
            ("finish_summery", "success"),
        ]
        assert msgs[2].uuid == "u1"
        assert "no stored step to go on from" in msgs[4].content
        assert await store.running_tasks(rid_g) == []

        # worker-a dies (kill -9) before its run began: it renews nothing, its lease runs
        # out, and its run is taken over and executed here, from its beginning
        await store.expire_instance("worker-a")
        assert await b.recover() == 1
        assert await b.wait(rid_a, timeout=30) == "completed"
        taken = await store.get_run(rid_a)
        assert taken is not None and taken.owner == b.instance_id and taken.resumes == 1
        stored = [m.meta.action_type for m in await store.messages(cid_a, limit=100)]
        assert stored == ["question", "auto_reply"]
        assert reaper.reaped == []  # not yet: a lease's grace after it expired
        # the conversation takes a new run
        await store.start_run("1", cid_a, "again", "auto", "local", owner=b.instance_id)
        # an expired owner with no running run left: its sandboxes are reaped, row dropped
        await set_expiry(store, "worker-a", datetime(2000, 1, 1))
        await b.recover()
        assert reaper.reaped == [["worker-a"]]
        assert "worker-a" not in {i.id for i in await store.instances()}
    finally:
        await close(b)


async def test_a_queued_run_no_worker_took_is_stopped_by_whoever_is_asked(
    tmp_path: Path, db_url: str
) -> None:
    m = await manager_on(tmp_path, db_url)
    try:
        cid = await m.store.create_conversation("1", "q")
        rid = await m.store.start_run("1", cid, "g", "auto", "local", owner=None)
        assert await m.stop(rid) is True
        assert await m.wait(rid, timeout=5) == "stopped"
        kinds = [x.meta.action_type for x in await m.store.messages(cid, limit=100)]
        assert kinds == ["stop", "finish_summery"]
        # a worker that picks the job up later finds nothing to do
        assert await m.execute(rid) == "stopped"
        assert await m.stop(rid) is False
    finally:
        await close(m)


async def test_a_restarted_process_recovers_its_dead_predecessor_at_once(
    tmp_path: Path, db_url: str
) -> None:
    """Same host and PID namespace, process gone: no need to wait for the lease."""
    m = await manager_on(tmp_path, db_url)
    m.llm = ScriptedLLM([("auto_reply", "hi")])
    try:
        store = m.store
        await store.renew_instance("serve-old", "serve", 3600, m.lease.host)
        await store._core(
            lambda c: c.execute(
                __import__("sqlalchemy").text(
                    "UPDATE instances SET pid = 999999999 WHERE id = 'serve-old'"
                )
            )
        )
        cid = await store.create_conversation("1", "o")
        rid = await store.start_run("1", cid, "g", "chat", "local", owner="serve-old")
        assert await m.recover() == 1
        assert await m.wait(rid, timeout=30) == "completed"  # taken over, not failed
    finally:
        await close(m)


async def test_a_run_storing_its_own_end_is_never_taken_for_one_ended_elsewhere(
    tmp_path: Path, db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The lease keeper's watch compares the store with the runs of this process. A run
    whose end was just stored, but which had not left the process yet, read as "ended
    elsewhere": a false warning, and its task cancelled (1 run in 100 in bench_core)."""
    runs = 20
    m = await manager_on(tmp_path, db_url)
    m.llm = ScriptedLLM([("auto_reply", "hi")] * runs)
    done = asyncio.Event()

    async def watch_all_along() -> int:
        """How many rounds found a run in the window the test is about (storing its end)."""
        in_window = 0
        while not done.is_set():
            in_window += any(c.ending for c in m.lease.local_runs().values())
            await m.lease.watch()
            await asyncio.sleep(0)
        return in_window

    try:
        with caplog.at_level(logging.WARNING, logger="backend.runs.lease"):
            watcher = asyncio.create_task(watch_all_along())
            ids = [(await m.start("1", "say hi", mode="chat"))[1] for _ in range(runs)]
            ends = [await m.wait(rid, timeout=30) for rid in ids]
            done.set()
            assert await watcher > 0  # the watch did meet runs storing their end
        assert ends == ["completed"] * runs
        assert [r.getMessage() for r in caplog.records if "elsewhere" in r.getMessage()] == []
    finally:
        await close(m)
