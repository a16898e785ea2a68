"""The message kinds (``meta.action_type``) of a run's own structure (docs/api.md "The stream").

An action's messages carry the stream kind its definition in the action registry names
(``ActionDef.kind``, backend/actions/registry): those kinds are not repeated here. The
TypeScript types of the web UI get both, this enumeration and the registry's kinds and
action names (``python -m backend.actions.registry.wire``, run by ``make frontend``; a test
fails on drift).

A ``StrEnum``: a member *is* its wire string (``MessageKind.PLAN == "plan"``), so it goes
wherever a string went before and is stored and sent unchanged.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

from backend.messages.payloads import (
    ApprovalRequest,
    BudgetNote,
    PlanTask,
    SummaryFile,
    SummaryPreview,
)


class MessageKind(StrEnum):
    """``meta.action_type`` of a message in the run's stream, and of a live delta."""

    # the run's structure, in the order of docs/api.md "The stream"
    QUESTION = "question"
    AUTO_REPLY = "auto_reply"
    PLAN = "plan"
    TASK = "task"
    THINKING = "thinking"
    FINISH = "finish"  # a task's closing note (the `finish` action's kind)
    FINISH_SUMMERY = "finish_summery"  # sic: the wire value the Vue client checks
    ERROR = "error"
    STOP = "stop"
    # a run that waits for a person (docs/api.md "Runs that wait for a person")
    APPROVAL = "approval"
    ASK_USER = "ask_user"  # a question to the person (the `ask_user` action's kind)
    # live deltas only: the summary's text while the model writes it (stored as FINISH_SUMMERY)
    SUMMARY = "summary"


# Kinds that end a run early: a failed run publishes ERROR, a stopped one STOP.
RUN_END_KINDS: tuple[MessageKind, ...] = (MessageKind.ERROR, MessageKind.STOP)

# What each of the run's own kinds carries in meta.json (backend/messages/payloads.py): the
# models of its items; a kind not named carries nothing (an empty list). An action's kind
# says it in its definition (``ActionDef.payload``).
PAYLOADS: dict[MessageKind, tuple[type[BaseModel], ...]] = {
    MessageKind.QUESTION: (BudgetNote,),
    MessageKind.PLAN: (PlanTask,),
    MessageKind.TASK: (PlanTask,),
    MessageKind.FINISH_SUMMERY: (SummaryFile, SummaryPreview),
    MessageKind.APPROVAL: (ApprovalRequest,),
}
