"""Cancel the run at every await point of one task step; each time the run ends
`stopped` (or `completed` when the stop came after the last step) with nothing left
`running`, in the store and in the messages, and at most one more model call."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from backend.agent.specialists import BUILTIN
from backend.llm.testing import ScriptedLLM
from backend.messages.bus import Bus
from backend.runs import RunManager
from backend.store.repo import Store
from tests.agent.scripts import finish, plan_reply, run, write
from tests.support.settings import make_settings


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


def script() -> ScriptedLLM:
    return ScriptedLLM(
        [
            ("planning", plan_reply("One")),
            ("thinking", run("echo hi") + write("a.txt", "a\n") + finish("done")),
        ]
    )


async def one_run(manager: RunManager, stop_at: int | None) -> dict[str, Any]:
    manager.llm = llm = script()
    steps = 0
    calls_at_stop: list[int] = []
    rid_box: list[str] = []

    def hook(task: SteppingTask) -> None:
        nonlocal steps
        steps += 1
        if stop_at is not None and steps == stop_at and rid_box:
            calls_at_stop.append(len(llm.calls))
            manager.runs.stop(rid_box[0])
            task.cancel()  # lands exactly at the await point this step resumes from

    SteppingTask.hook = hook
    cid, rid = await manager.start("1", "write code", mode="agent")
    rid_box.append(rid)
    status = await manager.wait(rid, timeout=30)
    SteppingTask.hook = None
    msgs = await manager.store.messages(cid, limit=10_000)
    run_row = await manager.store.get_run(rid)
    return {
        "status": status,
        "row": run_row,
        "steps": steps,
        "msgs": msgs,
        "calls_after": len(llm.calls) - calls_at_stop[0] if calls_at_stop else 0,
        "stopped_at": bool(calls_at_stop),
        "llm_errors": llm.errors,
    }


async def test_a_stop_at_every_await_point_of_a_task_step_stops_cleanly(
    tmp_path: Path, stepping_loop: None
) -> None:
    settings = make_settings(tmp_path)
    store = Store(settings.database_url)
    store.migrate()
    manager = RunManager(settings, store, Bus(), script(), BUILTIN)
    await manager.open()
    try:
        clean = await one_run(manager, None)
        assert clean["status"] == "completed" and not clean["llm_errors"]
        total = clean["steps"]
        assert total > 20  # the run really awaits many times (store, model, runtime)
        outcomes: dict[str, int] = {}
        for k in range(1, total + 1):
            got = await one_run(manager, k)
            label = f"stop at step {k} of {total}"
            assert got["status"] in ("stopped", "completed"), (label, got["status"])
            assert got["row"].status == got["status"], label
            assert got["calls_after"] <= 1, label
            assert not got["llm_errors"], (label, got["llm_errors"])
            running = {m.uuid for m in got["msgs"] if m.status == "running"}
            closed = {m.uuid for m in got["msgs"] if m.status != "running"}
            tasks_open = [
                m
                for m in got["msgs"]
                if m.meta.action_type == "task"
                and m.status == "running"
                and not any(
                    t.meta.action_type == "task"
                    and t.meta.task_id == m.meta.task_id
                    and t.status != "running"
                    for t in got["msgs"]
                )
            ]
            untasked = {m.uuid for m in got["msgs"] if m.meta.action_type == "task"}
            assert (running - untasked) <= closed, label
            assert tasks_open == [], label
            kinds = [m.meta.action_type for m in got["msgs"]]
            if got["status"] == "stopped":
                assert kinds[-2:] == ["stop", "finish_summery"], (label, kinds)
            outcomes[got["status"]] = outcomes.get(got["status"], 0) + 1
        assert outcomes.get("stopped", 0) > total // 2, outcomes
    finally:
        await manager.shutdown()
        await store.close()
