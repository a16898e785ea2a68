"""finish: the task's closing note."""

from __future__ import annotations

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Handling, Shown
from backend.messages.kinds import MessageKind


async def finish(ctx: ActionContext, action: Action) -> Done:
    return Done("success", action.params.get("message", ""))


ACTION = ActionDef(
    spec=ActionSpec(
        name="finish",
        aliases=("attempt_completion", "finish_task"),
        description="End the current task with a short note of what was done.",
        required=("message",),
        raw=("message",),
        example="<finish><message>Wrote src/app.py and ran it.</message></finish>",
    ),
    kind=MessageKind.FINISH,
    handler=finish,
    shown=Shown(order=1000),
    handling=Handling(ends_task=True),
)
