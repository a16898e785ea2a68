"""One contract for every executor: InlineExecutor (this process runs the run) and
QueueExecutor (procrastinate on PostgreSQL; a real `planact worker` subprocess runs it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from backend.agent.specialists import BUILTIN
from backend.llm.factory import make_llm
from backend.runs import RunManager
from backend.runs.executor import QueueConfigError, QueueExecutor
from backend.runs.lease import new_instance_id
from backend.runs.notify import make_notifier
from backend.store.repo import Store
from tests.agent.scripts import finish, plan_reply, write
from tests.e2e.cluster import Worker
from tests.e2e.server import server_env
from tests.fakellm import FakeModelServer
from tests.pg import postgres_url, wipe
from tests.support.settings import make_settings

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["inline", "queue"])
async def manager(
    request: pytest.FixtureRequest, tmp_path: Path, fake_model: FakeModelServer
) -> AsyncIterator[RunManager]:
    if request.param == "inline":
        url = f"sqlite:///{tmp_path}/x.db"
    else:
        url = postgres_url()
        wipe(url)
    settings = make_settings(
        tmp_path,
        database_url=url,
        llm_model="openai/fake-model",
        llm_api_key="sk-fake",
        llm_base_url=fake_model.base_url,
        executor=request.param,
    )
    store = Store(url)
    store.migrate()
    iid = new_instance_id("serve")
    llm = make_llm(settings)
    executor = QueueExecutor(url) if request.param == "queue" else None  # None: inline
    m = RunManager(
        settings, store, make_notifier(url, iid), llm, BUILTIN, instance_id=iid, executor=executor
    )
    await m.open()
    worker = None
    if request.param == "queue":
        env = server_env(tmp_path, fake_model.base_url, DATABASE_URL=url, EXECUTOR="queue")
        worker = Worker(tmp_path, env, "contract").start()
    try:
        yield m
    finally:
        await m.shutdown()
        await llm.aclose()
        await store.close()
        if worker is not None:
            worker.stop()


async def test_a_submitted_run_is_executed_once_to_its_end_by_a_leased_owner(
    manager: RunManager, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("One")},
        {"stage": "thinking", "content": write("a.txt", "a\n") + finish("done")},
    )
    cid, rid = await manager.start("1", "write code")
    assert await manager.wait(rid, timeout=60) == "completed"
    run = await manager.store.get_run(rid)
    assert run is not None and run.owner
    if manager.executor.runs_here:
        assert run.owner == manager.instance_id
    else:
        assert run.owner.startswith("worker-")
    kinds = [m.meta.action_type for m in await manager.store.messages(cid, limit=100)]
    assert kinds.count("question") == 1 and kinds[-1] == "finish_summery"
    assert [c["stage"] for c in fake_model.model.calls] == ["planning", "thinking"]


async def test_a_run_is_stopped_through_the_executor_that_holds_it(
    manager: RunManager, fake_model: FakeModelServer
) -> None:
    fake_model.script(
        {"stage": "planning", "content": plan_reply("One")},
        {"stage": "thinking", "content": finish("never"), "hold": "held"},
    )
    cid, rid = await manager.start("1", "write code")
    sub = manager.bus.subscribe(rid)
    try:
        while not any(
            m.meta.action_type == "task" for m in await manager.store.messages(cid, limit=100)
        ):
            await manager.bus.wait(rid, sub, 1)
    finally:
        manager.bus.unsubscribe(rid, sub)
    assert await manager.stop(rid) is True
    assert await manager.wait(rid, timeout=10) == "stopped"
    fake_model.release("held")


async def test_a_run_the_queue_refuses_ends_failed_with_why_instead_of_running_ownerless(
    tmp_path: Path,
) -> None:
    """No worker would ever take it, and no process owned it to end it: it stayed
    `running` with no owner for good."""
    import psycopg
    from procrastinate.exceptions import ConnectorException

    from backend.runs.notify import psycopg_conninfo

    url = postgres_url()
    wipe(url)
    settings = make_settings(tmp_path, database_url=url, executor="queue")
    store = Store(url)
    store.migrate()
    iid = new_instance_id("serve")
    m = RunManager(
        settings, store, make_notifier(url, iid), make_llm(settings), BUILTIN,
        instance_id=iid, executor=QueueExecutor(url),
    )  # fmt: skip
    await m.open()
    try:
        async with await psycopg.AsyncConnection.connect(
            psycopg_conninfo(url), autocommit=True
        ) as conn:  # the job queue refuses every job
            await conn.execute("DROP TABLE procrastinate_jobs CASCADE")
        with pytest.raises(ConnectorException):
            await m.start("1", "write code")
        async with await psycopg.AsyncConnection.connect(psycopg_conninfo(url)) as conn:
            cur = await conn.execute("SELECT id FROM runs")
            ids = [row[0] for row in await cur.fetchall()]
        assert len(ids) == 1
        run = await store.get_run(ids[0])
        assert run is not None and (run.status, run.owner) == ("failed", iid)
        assert (run.error or "").startswith("The run could not be queued:")
        kinds = [x.meta.action_type for x in await store.messages(run.conversation_id, limit=100)]
        assert kinds[-1] == "finish_summery"
        (conversation,) = await store.list_conversations("1")
        assert conversation.status == "failed"
    finally:
        await m.shutdown()
        await store.close()
        wipe(url)


def test_the_queue_executor_needs_postgresql() -> None:
    with pytest.raises(QueueConfigError, match="PostgreSQL"):
        QueueExecutor("sqlite:///./x.db")


@pytest.mark.parametrize("command", [["worker"], ["serve"]])
def test_queue_mode_without_postgresql_is_a_clear_start_up_error(
    tmp_path: Path, command: list[str]
) -> None:
    import os
    import subprocess

    from tests.e2e.server import PLANACT, PROCESS_DEADLINE

    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path}/x.db",
        "EXECUTOR": "queue",
        "FRONTEND_DIST": str(tmp_path / "no-ui"),
    }
    done = subprocess.run(
        [PLANACT, *command],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_DEADLINE,
    )
    assert done.returncode == 2
    assert "EXECUTOR=queue needs PostgreSQL" in done.stderr


async def stall(conn: Any, job_id: int) -> None:
    """Make ``job_id`` a dead worker's: `doing`, held by a worker silent for an hour."""
    cur = await conn.execute(
        "INSERT INTO procrastinate_workers (last_heartbeat) "
        "VALUES (now() - interval '1 hour') RETURNING id"
    )
    row = await cur.fetchone()
    assert row is not None
    await conn.execute(
        "UPDATE procrastinate_jobs SET status = 'doing', worker_id = %s WHERE id = %s",
        (row[0], job_id),
    )


async def job_status(conn: Any, job_id: int) -> tuple[str] | None:
    cur = await conn.execute("SELECT status FROM procrastinate_jobs WHERE id = %s", (job_id,))
    return cast("tuple[str] | None", await cur.fetchone())


async def test_a_dead_workers_job_is_marked_failed_not_retried(tmp_path: Path) -> None:
    """procrastinate keeps a killed worker's job `doing`; a starting worker closes it."""
    import psycopg

    from backend.runs.executor import JOB_NAME, build_app, ensure_schema
    from backend.runs.notify import psycopg_conninfo
    from backend.runs.worker import close_stalled_jobs

    url = postgres_url()
    wipe(url)
    await ensure_schema(url)
    await ensure_schema(url)  # idempotent
    app = build_app(url)
    await app.open_async()
    try:
        job_id = await app.configure_task(JOB_NAME).defer_async(run_id="r1")
        async with await psycopg.AsyncConnection.connect(
            psycopg_conninfo(url), autocommit=True
        ) as conn:
            await stall(conn, job_id)
            await close_stalled_jobs(app)
            assert await job_status(conn, job_id) == ("failed",)
    finally:
        await app.close_async()


async def test_a_job_that_stalls_while_workers_run_is_closed_without_a_restart(
    tmp_path: Path,
) -> None:
    """A worker killed while the others go on: its job is closed by the live ones' periodic
    look, not left `doing` until a worker starts."""
    import asyncio

    import psycopg

    from backend.runs.executor import JOB_NAME, build_app, ensure_schema
    from backend.runs.notify import psycopg_conninfo
    from backend.runs.worker import keep_closing_stalled_jobs

    url = postgres_url()
    wipe(url)
    await ensure_schema(url)
    app = build_app(url)
    await app.open_async()
    closer = asyncio.create_task(keep_closing_stalled_jobs(app, every=0.05))
    try:
        job_id = await app.configure_task(JOB_NAME).defer_async(run_id="r2")
        async with await psycopg.AsyncConnection.connect(
            psycopg_conninfo(url), autocommit=True
        ) as conn:
            await stall(conn, job_id)
            status = None
            async with asyncio.timeout(30):
                while status != ("failed",):
                    status = await job_status(conn, job_id)
                    await asyncio.sleep(0.05)  # the closer's pace, not a wait for it
    finally:
        closer.cancel()
        await asyncio.gather(closer, return_exceptions=True)
        await app.close_async()
