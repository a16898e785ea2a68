"""The seam of backend/waits, in-process over the real store (SQLite and PostgreSQL): the
typed errors change nothing, an answer is taken once, and an approved action is neither lost
nor doubled when a process dies between the approval and the action."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from backend.agent.resume import INTERRUPTED_ACTION
from backend.agent.specialists import BUILTIN
from backend.llm.base import Completion, DeltaCallback
from backend.messages.bus import Bus
from backend.messages.message import Message
from backend.runs import RunManager
from backend.store.base import RUNS
from backend.store.parked import WaitAnswer
from backend.store.repo import Store
from backend.waits import (
    BadAnswer,
    WaitConflict,
    WaitNotFound,
    answer_approval,
    answer_question,
)
from backend.waits.replies import Decision
from tests.agent.scripts import finish, plan_reply, run
from tests.support.runs import bury, kill
from tests.support.settings import make_settings

pytestmark = pytest.mark.anyio


class StageLLM:
    """Replies queued per stage; the summary always answers. Records every call."""

    default_model = "scripted/model"

    def __init__(self, **stages: list[str]) -> None:
        self.queues: dict[str, deque[str]] = defaultdict(deque)
        for stage, replies in stages.items():
            self.queues[stage].extend(replies)
        self.calls: list[tuple[str, list[dict[str, Any]]]] = []

    async def complete(
        self,
        *,
        stage: str,
        messages: list[dict[str, Any]],
        model: str | None = None,
        on_delta: DeltaCallback | None = None,
    ) -> Completion:
        self.calls.append((stage, [dict(m) for m in messages]))
        if stage == "summary":
            return Completion("Done.", model=self.default_model)
        return Completion(self.queues[stage].popleft(), model=self.default_model)

    async def aclose(self) -> None: ...


@pytest.fixture
async def processes(tmp_path: Path, db_url: str) -> AsyncIterator[list[RunManager]]:
    made: list[RunManager] = []
    yield made
    for m in made:
        await m.shutdown()
        await m.store.close()


async def a_process(
    made: list[RunManager], tmp_path: Path, db_url: str, llm: StageLLM, **settings: Any
) -> RunManager:
    values = {"database_url": db_url, "lease_seconds": 30.0, **settings}
    store = Store(db_url)
    store.migrate()
    m = RunManager(make_settings(tmp_path, **values), store, Bus(), llm, BUILTIN)
    await m.open()
    made.append(m)
    return m


async def waiting_message(m: RunManager, cid: str, kind: str = "approval") -> Message:
    """The wait message, once the run is parked (waited on through the store)."""
    for _ in range(2000):
        msgs = await m.store.messages(cid, limit=10_000)
        closed = {x.uuid for x in msgs if x.status != "running"}
        found = [x for x in msgs if x.meta.action_type == kind and x.uuid not in closed]
        run = await m.store.get_run(msgs[0].run_id) if msgs else None
        if found and run is not None and run.status == "waiting" and run.owner is None:
            return found[0]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {kind} message")


async def first_message(m: RunManager, cid: str, kind: str) -> Message:
    """The first stored version of the run's ``kind`` message, whether or not it is still
    open (a wait that times out at once may be closed by the keeper's sweep before a look
    sees it open)."""
    for _ in range(2000):
        found = [x for x in await m.store.messages(cid, limit=10_000) if x.meta.action_type == kind]
        if found:
            return found[0]
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {kind} message")


def ran(m: RunManager, cid: str) -> int:
    log = m.workspace("1", cid) / "log.txt"
    return log.read_text().count("ran") if log.exists() else 0


async def test_typed_errors_change_nothing_and_the_first_answer_wins(
    tmp_path: Path, db_url: str, processes: list[RunManager]
) -> None:
    llm = StageLLM(
        planning=[plan_reply("One")],
        thinking=[run("echo ran >> log.txt"), finish("done")],
    )
    m = await a_process(processes, tmp_path, db_url, llm)
    cid, rid = await m.start("1", "write code", mode="agent", approval="risky")
    asked = await waiting_message(m, cid)
    before = (await m.store.get_run(rid), len(await m.store.messages(cid, limit=10_000)))
    with pytest.raises(BadAnswer):
        await answer_approval(m, rid, asked.uuid, "perhaps")
    with pytest.raises(BadAnswer):
        await answer_approval(m, rid, asked.uuid, "reject", "x" * 4001)
    with pytest.raises(WaitNotFound):
        await answer_approval(m, rid, asked.uuid, "approve", user_id="someone-else")
    with pytest.raises(WaitNotFound):
        await answer_approval(m, "no-such-run", asked.uuid, "approve")
    with pytest.raises(WaitNotFound):
        await answer_approval(m, rid, "no-such-uuid", "approve")
    with pytest.raises(WaitNotFound):
        await answer_question(m, rid, asked.uuid, "an answer to no question")
    after = (await m.store.get_run(rid), len(await m.store.messages(cid, limit=10_000)))
    assert after == before and ran(m, cid) == 0
    # two answers at once: exactly one is taken
    results = await asyncio.gather(
        answer_approval(m, rid, asked.uuid, "approve", user_id="1"),
        answer_approval(m, rid, asked.uuid, "reject", "no"),
        return_exceptions=True,
    )
    assert sum(isinstance(r, WaitConflict) for r in results) == 1, results
    assert await m.wait(rid, timeout=30) == "completed"
    partners = [x for x in await m.store.messages(cid, limit=10_000) if x.uuid == asked.uuid]
    assert partners[0].status == "running" and len(partners) == 2
    assert ran(m, cid) == (1 if partners[1].status == "success" else 0)


async def test_an_approval_taken_by_a_process_that_died_before_acting_is_not_lost(
    tmp_path: Path, db_url: str, processes: list[RunManager]
) -> None:
    llm = StageLLM(
        planning=[plan_reply("One")],
        thinking=[run("echo ran >> log.txt"), finish("done")],
    )
    m = await a_process(processes, tmp_path, db_url, llm)
    cid, rid = await m.start("1", "write code", mode="agent", approval="risky")
    asked = await waiting_message(m, cid)
    # the answering process stored the transition, then died before it resumed the run
    partner = Message.build(
        "approval", "Approved", task_id=asked.meta.task_id, uuid=asked.uuid, json=asked.meta.json_
    )
    answer = WaitAnswer(uuid=asked.uuid, decision="approve")
    stored = await m.store.end_wait(rid, asked.uuid, "approval", "serve-dead-1", answer, partner)
    assert stored is not None and ran(m, cid) == 0
    await m.recover()  # its owner is dead: a live process takes the run over
    assert await m.wait(rid, timeout=30) == "completed"
    assert ran(m, cid) == 1
    row = await m.store.get_run(rid)
    assert row is not None and row.resumes == 1


async def test_an_approved_command_under_way_when_its_process_died_is_not_run_again(
    tmp_path: Path, db_url: str, processes: list[RunManager]
) -> None:
    llm = StageLLM(
        planning=[plan_reply("One")],
        thinking=[run("echo ran >> log.txt; sleep 60"), finish("done")],
    )
    owner = await a_process(processes, tmp_path, db_url, llm)
    cid, rid = await owner.start("1", "write code", mode="agent", approval="risky")
    asked = await waiting_message(owner, cid)
    assert await answer_approval(owner, rid, asked.uuid, "approve") == Decision(decision="approve")
    for _ in range(3000):  # the command runs (its output is on disk)
        if ran(owner, cid):
            break
        await asyncio.sleep(0.01)
    assert ran(owner, cid) == 1
    task = owner.runs.task(rid)
    assert task is not None
    kill(owner, rid)
    task.cancel()
    await asyncio.wait({task}, timeout=30)
    await bury(owner, db_url)
    taker = await a_process(processes, tmp_path, db_url, llm)
    await taker.recover()
    assert await taker.wait(rid, timeout=30) == "completed"
    assert ran(taker, cid) == 1  # never run twice
    msgs = await taker.store.messages(cid, limit=10_000)
    commands = [x for x in msgs if x.meta.action_type == "terminal_run"]
    assert [x.status for x in commands] == ["running", "failure"]
    assert commands[1].content.startswith(INTERRUPTED_ACTION[:40])
    assert [x.status for x in msgs if x.uuid == asked.uuid] == ["running", "success"]


async def test_an_unanswered_question_times_out_and_the_model_reads_why(
    tmp_path: Path, db_url: str, processes: list[RunManager]
) -> None:
    llm = StageLLM(
        planning=[plan_reply("One")],
        thinking=["<ask_user><question>Which one?</question></ask_user>", finish("assumed")],
    )
    m = await a_process(processes, tmp_path, db_url, llm, approval_timeout=0.001)
    cid, rid = await m.start("1", "write code", mode="agent")
    asked = await first_message(m, cid, "ask_user")
    await m.recover()  # the lease keeper's sweep, at once rather than in a second
    assert await m.wait(rid, timeout=30) == "completed"
    partners = [x for x in await m.store.messages(cid, limit=10_000) if x.uuid == asked.uuid]
    assert [x.status for x in partners] == ["running", "failure"]
    assert "APPROVAL_TIMEOUT" in partners[1].content
    last = llm.calls[-2][1] if llm.calls[-1][0] == "summary" else llm.calls[-1][1]
    assert "rejected: Nobody answered it within" in "\n".join(str(x["content"]) for x in last)
    with pytest.raises(WaitConflict):
        await answer_question(m, rid, asked.uuid, "too late")


async def test_an_answer_that_comes_the_moment_the_message_is_stored_is_taken(
    tmp_path: Path, db_url: str, processes: list[RunManager]
) -> None:
    """Answered from the run's own listener, called as soon as the approval message is
    stored: the run has not let go of its process yet, and the answer is not refused."""
    llm = StageLLM(
        planning=[plan_reply("One")],
        thinking=[run("echo ran >> log.txt"), finish("done")],
    )
    m = await a_process(processes, tmp_path, db_url, llm)
    taken: list[Decision] = []

    async def at_once(msg: Message) -> None:
        if msg.meta.action_type == "approval" and msg.status == "running":
            row = await m.store.get_run(msg.run_id)
            assert row is not None and row.owner == m.instance_id  # not let go yet
            taken.append(await answer_approval(m, msg.run_id, msg.uuid, "approve"))

    cid, rid = await m.start("1", "write code", mode="agent", approval="risky", listener=at_once)
    assert await m.wait(rid, timeout=30) == "completed"
    assert taken == [Decision(decision="approve")]
    assert ran(m, cid) == 1


BEFORE_TYPING = Path(__file__).parents[1] / "agent" / "data" / "checkpoints_before_typing.json"


async def test_a_run_parked_with_a_checkpoint_stored_before_typing_goes_on_when_approved(
    tmp_path: Path, db_url: str, processes: list[RunManager]
) -> None:
    """The checkpoint a run parked with, in the shape the code before typed run state
    stored it (its wait, tasks and pending turn plain dicts; tests/agent/data): approved,
    the run goes on from it, runs the action once and completes."""
    llm = StageLLM(
        planning=[plan_reply("One")],
        thinking=["<think>check first</think>" + run("echo ran >> log.txt"), finish("done")],
    )
    m = await a_process(processes, tmp_path, db_url, llm)
    cid, rid = await m.start("1", "write code", mode="agent", approval="risky")
    asked = await waiting_message(m, cid)
    stored = json.loads(BEFORE_TYPING.read_text())
    checkpoint = stored["parked"]["checkpoint"]
    for key, now in (
        ("run_id", rid),
        ("conversation_id", cid),
        ("workspace", str(m.workspace("1", cid))),
        ("task_id", str(asked.meta.task_id)),
        ("wait_uuid", asked.uuid),
    ):
        checkpoint = checkpoint.replace(stored["ids"][key], now)
    values = {"checkpoint": checkpoint, "transcript": stored["parked"]["transcript"]}
    await m.store._core(lambda c: c.execute(update(RUNS).where(RUNS.c.id == rid).values(values)))
    assert await answer_approval(m, rid, asked.uuid, "approve") == Decision(decision="approve")
    assert await m.wait(rid, timeout=30) == "completed"
    assert ran(m, cid) == 1
    thinking = [msgs for stage, msgs in llm.calls if stage == "thinking"]
    assert (
        len(thinking) == 2
        and "[terminal_run: echo ran >> log.txt] ok" in thinking[1][-1]["content"]
    )
