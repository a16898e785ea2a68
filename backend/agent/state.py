"""RunState: a run's choices and its progress, plain and serialisable (JSON round trip).

Everything a run changes as it goes is here and nowhere else: the plan, the current task,
the notes of finished tasks, what it wrote, which messages and tasks it left open, the
budget it spent. Together with its stored messages, it is what a run resumed by another
process needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, TypeAdapter
from pydantic_core import PydanticSerializationError

from backend.agent.budget import Budget
from backend.agent.outcomes import Stage
from backend.agent.specialists import Specialist
from backend.agent.stored import ParkedWait, PendingTurn, StoredReply, StoredTurn
from backend.messages.message import Message
from backend.messages.tasks import PlanTask


class RunState(BaseModel):
    # -- the run and the person's choices ------------------------------------------------
    run_id: str
    conversation_id: str
    user_id: str
    goal: str
    mode: str
    runtime: str
    workspace: Path
    model: str | None = None  # the model the person picked (None: LLM_MODEL / specialists)
    inputs: list[str] = Field(default_factory=list)  # files the person uploaded
    history: list[dict[str, str]] = Field(default_factory=list)  # earlier goals, answers
    mcp_servers: list[str] | None = None  # the MCP servers the person picked (None: all)
    # -- a person in the loop (backend/waits, docs/api.md "Runs that wait for a person")
    # ------------------------
    approval: str = "never"  # which actions ask first: never | risky | always
    approved_classes: list[str] = Field(default_factory=list)  # approve_all'd classes
    can_ask: bool = False  # ask_user is offered (someone can answer)
    # the wait the run is parked on; None once the resumed run used the answer
    wait: ParkedWait | None = None
    # -- progress --------------------------------------------------------------------------
    specialist: Specialist | None = None  # what the goal was routed to
    tasks: list[PlanTask] = Field(default_factory=list)  # the plan
    task_index: int = 0  # the task being worked on (== len(tasks): all done)
    notes: list[str] = Field(default_factory=list)  # finish notes of completed tasks
    # files at start: stored once beside the checkpoint (up to 5,000), not in every one
    snapshot: dict[str, tuple[int, int]] = Field(default_factory=dict, exclude=True)
    written: set[str] = Field(default_factory=set)  # files the run's actions wrote
    open_actions: dict[str, Message] = Field(default_factory=dict)  # published `running`
    open_tasks: set[str] = Field(default_factory=set)  # task ids published `running`
    budget: Budget = Field(default_factory=Budget)  # what the run spent (RUN_MAX_*)
    tool_problems: list[str] = Field(default_factory=list)  # named in the stream already
    # -- where it is: a run resumed by another process goes on from here ---------------------
    stage: Stage = Stage.START
    last_seq: int = 0  # the seq of the run's last stored message
    task_head: list[dict[str, Any]] | None = None  # the current task's transcript head
    # the prompt the next task goes on from (the last task's, with its finishing reply), so
    # that a task switch appends to the prompt instead of starting it over; None: start over
    # (left out of the JSON then: a checkpoint without it reads and writes back the same)
    carried: list[dict[str, Any]] | None = Field(default=None, exclude_if=lambda v: v is None)
    # its finished turns (agent/resume.py): stored beside the checkpoint, before each model
    # call (they change only between model calls), not with every message
    turns: list[StoredTurn] = Field(default_factory=list, exclude=True)
    pending: PendingTurn | None = None  # the turn whose actions run
    reply: StoredReply | None = None  # the last model reply, until its turn begins
    reply_stage: str = ""
    reply_published: int = 0  # messages published since that reply
    in_flight: str = ""  # the stage of a model call under way
    outcome: str = ""  # once it ends early (stage "ending"): failed | stopped, and why
    reason: str = ""

    def to_json(self) -> str:
        try:
            return self.model_dump_json()
        except PydanticSerializationError:  # model text with a lone surrogate: kept, escaped
            return json.dumps(self.model_dump(mode="json"), ensure_ascii=True)

    @classmethod
    def from_json(
        cls, data: str | bytes, snapshot: str | None = None, turns: str | None = None
    ) -> RunState:
        state = cls.model_validate_json(data)
        if turns and state.task_head is not None:
            state.turns = _TURNS.validate_python(json.loads(turns))
        if snapshot:
            state.snapshot = {p: (int(v[0]), int(v[1])) for p, v in json.loads(snapshot).items()}
        return state

    def turns_json(self) -> str:
        return json.dumps(_TURNS.dump_python(self.turns, mode="json"), ensure_ascii=True)

    def snapshot_json(self) -> str:
        return json.dumps(self.snapshot, ensure_ascii=True)


_TURNS = TypeAdapter(list[StoredTurn])  # the current task's finished turns, as stored
