"""A run's owner dies at every await point of a two-task run (it stops dead: nothing more
is published or stored by it), and another process takes the run over from its last
checkpoint: the run completes with every message once, none left `running`, at most one
model call made again, and the command it ran never run twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from backend.agent.resume import INTERRUPTED_ACTION
from backend.messages.message import Message
from tests.pg import reset
from tests.support.runs import DEADLINE, ReactiveLLM, a_process, bury, kill

FEWEST_CALLS = 5  # planning, two turns of task One, one of task Two, the summary


class SteppingTask(asyncio.tasks._PyTask):  # type: ignore[name-defined,misc]
    """The pure-Python Task, with a hook before each of its steps (each resumption)."""

    hook: Callable[[SteppingTask], None] | None = None

    def _Task__step(self, exc: BaseException | None = None) -> None:
        if SteppingTask.hook is not None and self.get_name().startswith("run-"):
            SteppingTask.hook(self)
        super()._Task__step(exc)


@pytest.fixture
async def stepping_loop() -> AsyncIterator[None]:
    loop = asyncio.get_running_loop()
    old = loop.get_task_factory()
    loop.set_task_factory(lambda lp, coro, **kw: SteppingTask(coro, loop=lp, **kw))
    yield
    loop.set_task_factory(old)
    SteppingTask.hook = None


async def one_run(tmp_path: Path, db_url: str, crash_at: int | None) -> dict[str, Any]:
    llm = ReactiveLLM()
    owner = await a_process(tmp_path, db_url, llm)
    steps, crashed = 0, False
    rid_box: list[str] = []

    def hook(task: SteppingTask) -> None:
        nonlocal steps, crashed
        if crashed or not rid_box:
            return
        steps += 1
        if steps == crash_at:
            crashed = True
            kill(owner, rid_box[0])
            task.cancel()

    SteppingTask.hook = hook
    # a file that was there before the run: no summary lists it
    cid = await owner.store.create_conversation("1", "t")
    owner.workspace("1", cid).mkdir(parents=True, exist_ok=True)
    (owner.workspace("1", cid) / "given.txt").write_text("given\n")
    cid, rid = await owner.start("1", "write code", conversation_id=cid, mode="agent")
    rid_box.append(rid)
    first = owner.runs.task(rid)
    if first is not None:
        await asyncio.wait({first}, timeout=DEADLINE)
    SteppingTask.hook = None
    taker = None
    try:
        if crashed:
            await bury(owner, db_url)
            taker = await a_process(tmp_path, db_url, llm)
            await taker.recover()
            status = await taker.wait(rid, timeout=DEADLINE)
        else:
            status = await owner.wait(rid, timeout=DEADLINE)
        store = (taker or owner).store
        return {
            "status": status,
            "steps": steps,
            "crashed": crashed,
            "row": await store.get_run(rid),
            "msgs": await store.messages(cid, limit=10_000),
            "calls": llm.calls,
            "on_disk": sorted(
                p.name
                for p in owner.workspace("1", cid).glob("*")
                if p.name not in (".planact", "given.txt")
            ),
            "ran": (owner.workspace("1", cid) / "log.txt").read_text().count("ran")
            if (owner.workspace("1", cid) / "log.txt").exists()
            else 0,
        }
    finally:
        if taker is not None:
            await taker.shutdown()
            await taker.store.close()
        await owner.shutdown()
        await owner.store.close()


def check_messages(msgs: list[Message], label: str) -> None:
    kinds = [m.meta.action_type for m in msgs]
    for once in ("question", "auto_reply", "plan", "finish_summery"):
        assert kinds.count(once) == 1, (label, once, kinds)
    assert kinds[-1] == "finish_summery", (label, kinds)
    seen: set[tuple[str, str]] = set()
    for m in msgs:
        key = (m.uuid, "running" if m.status == "running" else "final")
        if m.meta.action_type != "task":
            assert key not in seen, (label, "duplicated", m.meta.action_type, m.content[:80])
            seen.add(key)
    finals = {u for u, k in seen if k == "final"}
    assert {u for u, k in seen if k == "running"} <= finals, (label, "left running")
    tasks = [(m.meta.task_id, m.status) for m in msgs if m.meta.action_type == "task"]
    assert len(tasks) == 4 and len(set(tasks)) == 4, (label, tasks)
    assert all(s in ("running", "success") for _, s in tasks), (label, tasks)
    assert kinds.count("finish") == 2, (label, kinds)


def check_summary_files(msgs: list[Message], on_disk: list[str], label: str) -> None:
    """The summary lists the files the run made, as on disk (a command interrupted before
    it began made none; an action skipped wrote nothing)."""
    (summary,) = [m for m in msgs if m.meta.action_type == "finish_summery"]
    assert sorted(f["filepath"] for f in summary.meta.json_) == on_disk, label


async def test_a_run_whose_owner_dies_at_any_point_completes_on_another_process(
    tmp_path: Path, db_url: str, stepping_loop: None
) -> None:
    clean = await one_run(tmp_path / "clean", db_url, None)
    assert clean["status"] == "completed" and clean["ran"] == 1
    assert len(clean["calls"]) == FEWEST_CALLS
    check_messages(clean["msgs"], "no crash")
    check_summary_files(clean["msgs"], ["a.txt", "log.txt"], "no crash")
    assert clean["on_disk"] == ["a.txt", "log.txt"]
    total = clean["steps"]
    assert total > 20  # the run really awaits many times (store, model, runtime)
    told = resumed = crashes = 0
    for k in range(1, total + 1):
        if "postgresql" in db_url:
            reset(db_url)
        got = await one_run(tmp_path / f"k{k}", db_url, k)
        label = f"owner dies at step {k} of {total}"
        if not got["crashed"]:
            # the run took fewer steps than the clean one: how many awaits suspend depends
            # on timing (a thread's result already there does not), more so under load
            assert k > total // 2, label  # only a crash point near the end can miss
            assert got["status"] == "completed" and got["ran"] == 1, (label, got["status"])
            check_messages(got["msgs"], label)
            continue
        crashes += 1
        assert got["status"] == "completed", (label, got["status"], got["row"])
        check_messages(got["msgs"], label)
        check_summary_files(got["msgs"], got["on_disk"], label)
        assert got["ran"] <= 1, (label, "the command ran twice")
        # task Two's prompt goes on from one of task One's, whichever process sent them
        thinking = [msgs for stage, msgs in got["calls"] if stage == "thinking"]
        two = thinking[-1]
        assert any(two[: len(one)] == one for one in thinking[:-1]), (
            label,
            [[(m["role"], m["content"][:60]) for m in msgs] for msgs in thinking],
        )
        assert len(got["calls"]) <= FEWEST_CALLS + 1, (label, [c[0] for c in got["calls"]])
        row = got["row"]
        assert row.resumes <= 1 and row.repeated_calls <= 1, (label, row)
        resumed += row.resumes
        interrupted = [m for m in got["msgs"] if m.content == INTERRUPTED_ACTION]
        if interrupted:  # the model read it in its next call
            told += 1
            later = [msgs for stage, msgs in got["calls"] if stage == "thinking"]
            assert any("Interrupted" in msgs[-1]["content"] for msgs in later), label
    assert told >= 1  # some crash points fell while the command ran
    assert crashes >= total // 2
    assert resumed >= crashes - 3  # nearly every crash point left the run to another process


async def test_past_run_max_resumes_the_run_fails_saying_why(tmp_path: Path, db_url: str) -> None:
    llm = ReactiveLLM()
    manager = await a_process(tmp_path, db_url, llm)
    try:
        store = manager.store
        cid = await store.create_conversation("1", "t")
        rid = await store.start_run("1", cid, "g", "agent", "local", owner="serve-gone")
        await store._core(
            lambda c: c.execute(text("UPDATE runs SET resumes = 3 WHERE id = :r"), {"r": rid})
        )
        assert await manager.recover() == 1
        assert await manager.wait(rid, timeout=DEADLINE) == "failed"
        row = await store.get_run(rid)
        assert row is not None and "RUN_MAX_RESUMES=3" in (row.error or "")
        kinds = [m.meta.action_type for m in await store.messages(cid, limit=100)]
        assert kinds == ["error", "finish_summery"]
        assert llm.calls == []
    finally:
        await manager.shutdown()
        await manager.store.close()
