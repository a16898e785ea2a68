"""The steps of a turn (backend/agent/steps.py): a turn that waited for a person goes on
from the action it waited on, with the answer used once (a later action of the same turn
asks again), never running an action twice; a refusal skips the rest of the turn; and the
model reads every outcome in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from backend.agent.specialists import BUILTIN
from backend.agent.steps import FAILED_FOOTER, OK_FOOTER, SKIPPED
from backend.llm.testing import ScriptedLLM
from backend.messages.bus import Bus
from backend.messages.message import Message
from backend.runs import RunManager
from backend.store.repo import Store
from backend.waits import answer_approval
from tests.agent.scripts import finish, plan_reply, run, write
from tests.support.settings import make_settings

DEADLINE = 30.0


@asynccontextmanager
async def a_manager(tmp_path: Path, llm: ScriptedLLM) -> AsyncIterator[RunManager]:
    settings = make_settings(tmp_path)
    store = Store(settings.database_url)
    store.migrate()
    manager = RunManager(settings, store, Bus(), llm, BUILTIN)
    await manager.open()
    try:
        yield manager
    finally:
        await manager.shutdown()
        await store.close()


class Approvals:
    """A run's listener: the approvals it asks for, as they are published."""

    def __init__(self) -> None:
        self.asked: asyncio.Queue[Message] = asyncio.Queue()

    def __call__(self, msg: Message) -> None:
        if msg.meta.action_type == "approval" and msg.status == "running":
            self.asked.put_nowait(msg)

    async def next(self) -> Message:
        async with asyncio.timeout(DEADLINE):
            return await self.asked.get()


def last_observation(llm: ScriptedLLM) -> str:
    return str(llm.calls[-1].messages[-1]["content"])


async def test_a_turn_goes_on_from_each_action_it_waited_on_and_runs_each_once(
    tmp_path: Path,
) -> None:
    reply = write("a.txt", "a\n") + run("cat a.txt >> log") + run("echo two >> log")
    llm = ScriptedLLM(
        [("planning", plan_reply("Log")), ("thinking", reply), ("thinking", finish("logged"))]
    )
    async with a_manager(tmp_path, llm) as manager:
        approvals = Approvals()
        cid, rid = await manager.start(
            "1", "log it", mode="agent", approval="risky", listener=approvals
        )
        first = await approvals.next()  # the first command (the write needs no approval)
        assert first.content.startswith("cat a.txt >> log")
        await answer_approval(manager, rid, first.uuid, "approve")
        second = await approvals.next()  # the answer was the first command's only
        assert second.content.startswith("echo two >> log")
        await answer_approval(manager, rid, second.uuid, "approve")
        assert await manager.wait(rid, timeout=DEADLINE) == "completed"
        assert (manager.workspace("1", cid) / "log").read_text() == "a\ntwo\n"
        msgs = await manager.store.messages(cid, limit=1000)
        writes = [m.status for m in msgs if m.meta.action_type == "write_code"]
        assert writes == ["running", "success"]  # not written again on either resume
        commands = [m.status for m in msgs if m.meta.action_type == "terminal_run"]
        assert commands == ["running", "success"] * 2
        seen = last_observation(llm)
        labels = ["[write_code a.txt] ok", "[terminal_run: cat a.txt", "[terminal_run: echo two"]
        at = [seen.index(label) for label in labels]
        assert at == sorted(at) and seen.endswith(OK_FOOTER)
        assert "FAILED" not in seen and "skipped" not in seen


async def test_a_refused_action_skips_the_rest_of_its_turn(tmp_path: Path) -> None:
    reply = run("echo one > one") + write("c.txt", "c\n")
    llm = ScriptedLLM(
        [("planning", plan_reply("One")), ("thinking", reply), ("thinking", finish("gave up"))]
    )
    async with a_manager(tmp_path, llm) as manager:
        approvals = Approvals()
        cid, rid = await manager.start(
            "1", "do it", mode="agent", approval="risky", listener=approvals
        )
        asked = await approvals.next()
        await answer_approval(manager, rid, asked.uuid, "reject", "not now")
        assert await manager.wait(rid, timeout=DEADLINE) == "completed"
        workspace = manager.workspace("1", cid)
        assert not (workspace / "one").exists() and not (workspace / "c.txt").exists()
        msgs = await manager.store.messages(cid, limit=1000)
        (skipped,) = [m for m in msgs if m.meta.action_type == "write_code"]
        assert skipped.status == "failure" and skipped.content == SKIPPED
        seen = last_observation(llm)
        assert "FAILED\nrejected by the person: not now" in seen
        assert "[write_code c.txt] skipped" in seen and seen.endswith(FAILED_FOOTER)
