"""The families the store gives (runs active and waiting, queued jobs, read at scrape time)
and the ones counted where the store changes a run (runs by final status, approvals by
decision), over SQLite and PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest

from backend.messages.message import Message
from backend.observe.metrics import REGISTRY
from backend.observe.store_collector import StoreCollector
from backend.runs.executor import QUEUE, QueueExecutor
from backend.store.parked import WaitAnswer, wait_values
from backend.store.repo import Store
from tests.pg import postgres_url, wipe


@pytest.fixture
async def store(db_url: str) -> AsyncIterator[Store]:
    s = Store(db_url)
    s.migrate()
    yield s
    await s.close()


def gauges(store: Store) -> dict[str, float]:
    return {f.name: f.samples[0].value for f in StoreCollector(store.engine, QUEUE).collect()}


def counted(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def approvals() -> float:
    """Every approval counted so far, whatever the decision."""
    family = next(f for f in REGISTRY.collect() if f.name == "planact_approvals")
    return sum(s.value for s in family.samples if s.name == "planact_approvals_total")


async def a_run(store: Store, owner: str | None = "serve-test-1") -> str:
    cid = await store.create_conversation("1", "t")
    return await store.start_run("1", cid, "goal", "agent", "local", owner)


async def park(store: Store, rid: str, kind: str = "approval") -> Message:
    run = await store.get_run(rid)
    assert run is not None
    asked = Message.build(kind, "may I?", status="running")
    asked.conversation_id, asked.run_id = run.conversation_id, rid
    return await store.append_message(asked, None, wait_values(asked.uuid, kind, 600))


async def answer(store: Store, rid: str, asked: Message, kind: str, body: dict[str, str]) -> bool:
    partner = Message.build(kind, "answered", uuid=asked.uuid)
    decided = WaitAnswer.model_validate({"uuid": asked.uuid, **body})
    stored = await store.end_wait(rid, asked.uuid, kind, None, decided, partner)
    return stored is not None


async def test_runs_active_and_waiting_are_read_from_the_store(store: Store) -> None:
    assert gauges(store)["planact_runs_active"] == 0
    first, second = await a_run(store), await a_run(store)
    await park(store, second)
    got = gauges(store)
    assert (got["planact_runs_active"], got["planact_runs_waiting"]) == (1, 1)
    assert got["planact_queued_jobs"] == 0
    before = counted("planact_runs_total", status="stopped")
    assert await store.end_run(first, "stopped")
    assert not await store.end_run(first, "completed")  # ended once: counted once
    assert counted("planact_runs_total", status="stopped") - before == 1
    assert gauges(store)["planact_runs_active"] == 0


async def test_approvals_are_counted_by_decision_once_and_questions_not(store: Store) -> None:
    rid = await a_run(store)
    before = {d: counted("planact_approvals_total", decision=d) for d in ("approve_all", "timeout")}
    asked = await park(store, rid)
    body = {"uuid": asked.uuid, "decision": "approve_all", "reason": ""}
    assert await answer(store, rid, asked, "approval", body)
    assert not await answer(store, rid, asked, "approval", body)  # no longer pending
    asked = await park(store, rid)
    timeout = {"uuid": asked.uuid, "decision": "reject", "reason": "late", "by": "timeout"}
    assert await answer(store, rid, asked, "approval", timeout)
    question = await park(store, rid, "ask_user")
    total = approvals()
    assert await answer(store, rid, question, "ask_user", {"decision": "answer", "answer": "x"})
    assert counted("planact_approvals_total", decision="approve_all") - before["approve_all"] == 1
    assert counted("planact_approvals_total", decision="timeout") - before["timeout"] == 1
    after = approvals()
    assert after == total  # an answered question is no approval


async def test_queued_jobs_count_the_runs_waiting_for_a_worker() -> None:
    """The queue is PostgreSQL's (procrastinate, EXECUTOR=queue)."""
    url = postgres_url()
    wipe(url)
    store = Store(url)
    store.migrate()
    executor = QueueExecutor(url)
    await executor.start()
    try:
        assert gauges(store)["planact_queued_jobs"] == 0
        for _ in range(2):
            await executor.submit(await a_run(store, owner=None))
        assert gauges(store)["planact_queued_jobs"] == 2
    finally:
        await executor.close()
        await store.close()


async def test_the_families_are_absent_while_the_database_is_away(tmp_path: object) -> None:
    s = Store(f"sqlite:///{tmp_path}/missing-{uuid.uuid4().hex}/no.db")
    try:
        assert list(StoreCollector(s.engine, QUEUE).collect()) == []
    finally:
        await s.close()


async def test_preview_services_by_state_read_a_dead_owners_as_stopped(store: Store) -> None:
    import datetime

    await store.renew_instance("alive", "serve", 3600.0, "test")
    cid = await store.create_conversation("u", "previews")
    far = datetime.datetime(2100, 1, 1)
    for name, state, owner in (
        ("a", "ready", "alive"),
        ("b", "ready", "dead"),
        ("c", "starting", "alive"),
        ("d", "failed", "alive"),
    ):
        await store.put_preview(
            {
                "conversation_id": cid,
                "user_id": "u",
                "kind": "service",
                "name": name,
                "port": 8000,
                "path": "/",
                "state": state,
                "owner": owner,
                "socket": "/nowhere",
                "token": uuid.uuid4().hex,
                "token_expires": far,
            }
        )
    [family] = [
        f
        for f in StoreCollector(store.engine, QUEUE).collect()
        if f.name == "planact_preview_services"
    ]
    by_state = {s.labels["state"]: s.value for s in family.samples}
    assert by_state == {"starting": 1, "ready": 1, "stopped": 1, "failed": 1}
