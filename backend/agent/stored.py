"""The parts of a run's checkpoint (RunState) beyond plain values: the wait it is parked
on, a model turn (the current task's finished turns, and the turn whose actions run), the
last model reply. Their JSON is the checkpoint's as it always was (plain objects and
arrays): a checkpoint stored before they were typed reads back the same."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class ParkedWait(BaseModel):
    """The wait a run is parked on: its message's uuid, ``kind`` (``approval`` |
    ``ask_user``), and ``index``: the action's place in the pending turn."""

    uuid: str
    kind: str
    index: int


class StoredAction(BaseModel):
    type: str
    params: dict[str, str] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)


class StoredTurn(BaseModel):
    """A model turn (backend/agent/transcript.py ``Turn``): its reply, actions, outcomes
    (``[label, verdict, content]``) and closing lines."""

    reply: str
    actions: list[StoredAction] = Field(default_factory=list)
    outcomes: list[tuple[str, str, str]] = Field(default_factory=list)
    footer: str = ""
    format_error: str = ""
    brief_error: str = ""


class PendingTurn(StoredTurn):
    """The turn whose actions run, and the seq of the last message before it."""

    after_seq: int


class StoredReply(BaseModel):
    """The last model reply, kept until its turn begins (a resumed run uses it again
    rather than asking again): what ``Completion`` it was, less what was counted."""

    text: str
    model: str = ""
    finish_reason: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    reasoning: str = ""
