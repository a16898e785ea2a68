"""`planact run`'s prompt when its wait is answered by another hand (another process, a
timeout): the prompt is dropped, the final message shown, a late answer is not taken."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from backend.agent.specialists import BUILTIN
from backend.cli.waits import Answer, Follower, Terminal, Waits
from backend.llm.testing import ScriptedLLM
from backend.messages.bus import Bus
from backend.messages.message import Message
from backend.runs import RunManager
from backend.store.repo import Store
from backend.waits import answer_approval
from tests.agent.scripts import finish, plan_reply, run
from tests.support.settings import make_settings


@dataclass
class Screen:
    """What the CLI printed: its sentences, and the progress messages."""

    said: list[str] = field(default_factory=list)
    shown: list[Message] = field(default_factory=list)
    prompted: asyncio.Event = field(default_factory=asyncio.Event)

    def say(self, text: str) -> None:
        self.said.append(text)
        if text.startswith("Approve?"):
            self.prompted.set()


@pytest.fixture
async def manager(tmp_path: Path) -> AsyncIterator[RunManager]:
    settings = make_settings(tmp_path)
    store = Store(settings.database_url)
    store.migrate()
    llm = ScriptedLLM(
        [
            ("planning", plan_reply("Mark")),
            ("thinking", run("echo ran >> marker") + finish("marked")),
        ]
    )
    manager = RunManager(settings, store, Bus(), llm, BUILTIN)
    await manager.open()
    yield manager
    await manager.shutdown()
    await store.close()


async def test_a_wait_answered_elsewhere_drops_its_prompt_and_a_late_answer_is_not_taken(
    manager: RunManager,
) -> None:
    master, slave = os.openpty()
    screen = Screen()
    follower = Follower(manager.store, screen.shown.append)
    waits = Waits(Terminal(slave, write=screen.say), manager, screen.say, follower.catch_up)
    follower.waits = waits
    try:
        _, rid = await manager.start(
            "1", "mark it", mode="agent", approval="risky", listener=follower.message
        )
        msg = await asyncio.wait_for(waits.next(), 30)
        asking = asyncio.ensure_future(waits.answer(msg))
        await asyncio.wait_for(screen.prompted.wait(), 30)
        await answer_approval(manager, rid, msg.uuid, "approve")  # another hand answers
        assert await asyncio.wait_for(asking, 30) is True  # the prompt went, the run goes on
        assert "\n(no longer asked: answered elsewhere, timed out or stopped)" in screen.said
        assert await manager.wait(rid, timeout=30) == "completed"
        ends = [m for m in screen.shown if m.uuid == msg.uuid]
        assert [(m.status, m.content) for m in ends] == [("success", "Approved")]
        # a line typed too late (after another hand answered) changes nothing
        problem = await waits.reply(msg, Answer("reject", "too late"))
        assert problem.startswith("Not taken: This approval is no longer pending")
        assert await manager.wait(rid, timeout=30) == "completed"
    finally:
        os.close(master)
        os.close(slave)


async def test_the_cli_answers_for_the_action_it_showed_and_nothing_else(
    manager: RunManager, tmp_path: Path
) -> None:
    screen = Screen()
    follower = Follower(manager.store, screen.shown.append)
    master, slave = os.openpty()
    waits = Waits(Terminal(slave, write=screen.say), manager, screen.say, follower.catch_up)
    follower.waits = waits
    try:
        _, rid = await manager.start(
            "1", "mark it", mode="agent", approval="risky", listener=follower.message
        )
        msg = await asyncio.wait_for(waits.next(), 30)
        # what the CLI would have shown, had the action been another one
        other = msg.model_copy(deep=True)
        other.meta.json_[0]["params"]["command"] = "echo other >> marker"
        other.meta.json_[0]["digest"] = "sha256:" + "0" * 64
        problem = await waits.reply(other, Answer("approve"))
        assert problem.startswith("Not taken: This approval is for another action")
        assert not list(tmp_path.rglob("marker"))  # nothing ran, it still waits
        assert await waits.reply(msg, Answer("approve")) == ""
        assert await manager.wait(rid, timeout=30) == "completed"
        (marker,) = tmp_path.rglob("marker")
        assert marker.read_text() == "ran\n"
    finally:
        os.close(master)
        os.close(slave)
