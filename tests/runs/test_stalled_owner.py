"""An owner that stalls past its lease (paused: SIGSTOP, a frozen VM or container, a swap
storm) while another process takes its run over writes nothing more when it wakes: every
message and checkpoint write of a run is fenced by its owner in the same transaction, so
the run completes once, on the process that took it over, with no message twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

from backend.agent.resume import INTERRUPTED_ACTION, NOT_RUN
from backend.runs import RunManager
from tests.support.runs import DEADLINE, ReactiveLLM, a_process, bury, executable

# bounded: it waits for a file the test creates once the run was taken over elsewhere
WAITS_FOR_GO = "for i in $(seq 2400); do [ -f go ] && break; sleep 0.05; done; echo ran >> log.txt"


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
    # task One runs the command, then writes a.txt; task Two finishes at once
    llm = ReactiveLLM(command=WAITS_FOR_GO)
    stalled = await a_process(tmp_path, db_url, llm)
    taker = None
    try:
        cid, rid = await stalled.start("1", "run it", mode="agent")
        stalled_task = stalled.runs.task(rid)
        assert stalled_task is not None
        await command_running(stalled, cid)
        # the process stops renewing its lease (it is paused) and the lease ends
        await bury(stalled, db_url)
        taker = await a_process(tmp_path, db_url, llm)
        await taker.recover()
        assert await taker.wait(rid, timeout=DEADLINE) == "completed"
        after_take_over = await taker.store.messages(cid, limit=10_000)
        checkpoint = (await executable(taker.store, rid)).checkpoint

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
        assert row is not None and row.status == "completed"
        assert row.owner == taker.instance_id
        assert (await executable(taker.store, rid)).checkpoint == checkpoint
        # the command's one result is the taker's "interrupted"; the write after it never ran
        (command,) = [
            m for m in msgs if m.meta.action_type == "terminal_run" and m.status != "running"
        ]
        assert command.content == INTERRUPTED_ACTION
        writes = [m for m in msgs if m.meta.action_type == "write_code" and m.status != "running"]
        assert [m.content for m in writes] == [NOT_RUN]
        assert not (workspace / "a.txt").exists()
        # the command itself ran once (in the paused process); no model call after waking
        assert (workspace / "log.txt").read_text() == "ran\n"
        stages = [stage for stage, _ in llm.calls]
        assert stages == ["planning", "thinking", "thinking", "thinking", "summary"]
    finally:
        if taker is not None:
            await taker.shutdown()
            await taker.store.close()
        await stalled.shutdown()
        await stalled.store.close()
