"""Replies the agent could not use, shown to the person.

When the model answers with something that is neither a plan nor an action, the person
sees what it said, and an answer in words looks different from a format problem:

- an answer in words (a refusal, a question, prose with no attempt at a plan or an action)
  is published as the model speaking: the planner's ``auto_reply``, the task loop's
  narration (``thinking`` of type ``narration``);
- a format problem (a plan or an action it got wrong, a reply cut off or too large) is a
  ``thinking`` message of type ``unusable_reply``: what went wrong in a person's words, then
  what the model wrote (scrubbed, capped; also in ``meta.content``).

What the model is told to correct its format stays between it and the agent: never here,
never in ``error`` or ``finish_summery`` (docs/api.md "The stream").
"""

from __future__ import annotations

from backend.actions.values import scrub
from backend.messages.kinds import MessageKind
from backend.messages.message import Message

UNUSABLE = "unusable_reply"  # Message.type of a `thinking` message showing such a reply
SHOW_CHARS = 4000  # characters of the model's reply shown


def shown(reply: str) -> str:
    """The model's reply as a person sees it: scrubbed, capped."""
    text = scrub(reply.strip())
    if len(text) > SHOW_CHARS:
        text = f"{text[:SHOW_CHARS]}\n[… {len(text) - SHOW_CHARS:,} more characters]"
    return text


def unusable_message(
    reason: str, reply: str, *, stage: str, task_id: str | None = None, uuid: str | None = None
) -> Message:
    """A format problem: ``reason`` (a person's words), then the model's reply. ``stage``:
    what the reply was meant to be ("plan", "action")."""
    words = shown(reply) or "(nothing)"
    content = (
        f"The model's reply could not be used as {'a plan' if stage == 'plan' else 'an action'}: "
        f"{scrub(reason)}. It was asked to correct it. What it wrote:\n\n{words}"
    )
    msg = Message.build(
        MessageKind.THINKING, content, task_id=task_id, uuid=uuid, meta_content=words
    )
    msg.type = UNUSABLE
    return msg
