"""A quiet notice in a run: something about its tools the person may want to know (an MCP
server it picked is down), shown as one muted line in the task, never as an action's card.

It is a ``thinking`` message of ``type: "notice"`` (status ``success``): clients that do not
know the type show it folded away like reasoning.
"""

from __future__ import annotations

from backend.messages.kinds import MessageKind
from backend.messages.message import Message

NOTICE = "notice"  # Message.type of a `thinking` message that is a notice


def tool_notice(text: str, task_id: str) -> Message:
    msg = Message.build(MessageKind.THINKING, text, task_id=task_id)
    msg.type = NOTICE
    return msg
