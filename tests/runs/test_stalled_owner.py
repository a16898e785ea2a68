"""An owner that stalls past its lease (paused: SIGSTOP, a frozen VM or container, a swap
storm) while another process takes its run over writes nothing more when it wakes: every
message and checkpoint write of a run is fenced by its owner in the same transaction, so
the run completes once, on the process that took it over, with no message twice."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from backend.agent.resume import INTERRUPTED_ACTION, NOT_RUN
from backend.llm.base import Completion, DeltaCallback
from backend.runs import RunManager
from tests.agent.scripts import finish, plan_reply, run, write
from tests.runs.test_resume_points import DEADLINE, a_process, bury

# bounded: it waits for a file the test creates once the run was taken over elsewhere
WAITS_FOR_GO = "for i in $(seq 2400); do [ -f go ] && break; sleep 0.05; done; echo ran >> log.txt"


class OneTaskLLM:
    """Plans one task; its first turn runs the command and then writes a file; any later
    turn finishes. Records every call."""

    default_model = "scripted/model"

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def complete(
        self,
        *,
        stage: str,
        messages: list[dict[str, Any]],
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        self.calls.append(stage)
        if stage == "planning":
            reply = plan_reply("One")
        elif stage == "thinking" and len(messages) == 2:
            reply = run(WAITS_FOR_GO) + write("after.txt", "written after the command\n")
        elif stage == "thinking":
            reply = finish("one done")
        elif stage == "summary":
            reply = "Done."
        else:
            raise AssertionError(f"unexpected stage {stage}")
        return Completion(reply, model=self.default_model, prompt_tokens=10, completion_tokens=5)

    async def aclose(self) -> None: ...


async def command_running(manager: RunManager, cid: str) -> None:
    """Until the run's command has begun (its `running` message is stored)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE
    while loop.time() < deadline:
        msgs = await manager.store.messages(cid)
        if any(m.meta.action_type == "terminal_run" for m in msgs):
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the command never began")


async def test_an_owner_that_wakes_after_a_take_over_writes_nothing_more(
    tmp_path: Path, db_url: str
) -> None:
    llm = OneTaskLLM()
    stalled = await a_process(tmp_path, db_url, llm)
    taker = None
    try:
        cid, rid = await stalled.start("1", "run it", mode="agent")
        stalled_task = stalled._tasks[rid]
        await command_running(stalled, cid)
        # the process stops renewing its lease (it is paused) and the lease ends
        await bury(stalled, db_url)
        taker = await a_process(tmp_path, db_url, llm)
        await taker.recover()
        assert await taker.wait(rid, timeout=DEADLINE) == "completed"
        after_take_over = await taker.store.messages(cid, limit=10_000)
        checkpoint = (await taker.store.run_for_execution(rid) or {})["checkpoint"]

        # the paused process wakes: its command ends, and it would publish the result
        workspace = stalled.workspace("1", cid)
        (workspace / "go").write_text("")
        done, _ = await asyncio.wait({stalled_task}, timeout=DEADLINE)
        assert done, "the woken owner did not let go of the run"

        msgs = await taker.store.messages(cid, limit=10_000)
        assert [m.seq for m in msgs] == [m.seq for m in after_take_over], [
            (m.meta.action_type, m.status, m.content[:60]) for m in msgs[len(after_take_over) :]
        ]
        row = await taker.store.get_run(rid)
        assert row is not None and row["status"] == "completed"
        assert row["owner"] == taker.instance_id
        assert (await taker.store.run_for_execution(rid) or {})["checkpoint"] == checkpoint
        # the command's one result is the taker's "interrupted"; the write after it never ran
        (command,) = [
            m for m in msgs if m.meta.action_type == "terminal_run" and m.status != "running"
        ]
        assert command.content == INTERRUPTED_ACTION
        writes = [m for m in msgs if m.meta.action_type == "write_code" and m.status != "running"]
        assert [m.content for m in writes] == [NOT_RUN]
        assert not (workspace / "after.txt").exists()
        # the command itself ran once (in the paused process); no model call after waking
        assert (workspace / "log.txt").read_text() == "ran\n"
        assert llm.calls == ["planning", "thinking", "thinking"]  # one task: no summary call
    finally:
        if taker is not None:
            await taker.shutdown()
            await taker.store.close()
        await stalled.shutdown()
        await stalled.store.close()
