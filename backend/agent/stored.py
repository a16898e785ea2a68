"""The parts of a run's checkpoint (RunState) beyond plain values: the wait it is parked
on, a model turn (the current task's finished turns, and the turn whose actions run), the
last model reply. Their JSON is the checkpoint's as it always was (plain objects and
arrays): a checkpoint stored before they were typed reads back the same."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel


class ParkedWait(BaseModel):
    """The wait a run is parked on: its message's uuid, ``kind`` (``approval`` |
    ``ask_user``), and ``index``: the action's place in the pending turn."""

    uuid: str
    kind: str
    index: int


@dataclass(kw_only=True, slots=True)
class StoredAction:
    type: str
    params: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass(kw_only=True, slots=True)
class StoredTurn:
    """A model turn (backend/agent/transcript.py ``Turn``): its reply, actions, outcomes
    (``[label, verdict, content]``) and closing lines. A dataclass, not a model: every
    checkpoint (one per message a run publishes) rebuilds the current task's turns."""

    reply: str
    actions: list[StoredAction] = field(default_factory=list)
    outcomes: list[tuple[str, str, str]] = field(default_factory=list)
    footer: str = ""
    format_error: str = ""
    brief_error: str = ""


@dataclass(kw_only=True, slots=True)
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
