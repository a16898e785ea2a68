"""ask_user: the model asks the person (CONTRACT section 10). Parsed everywhere; offered
only where a run can wait for an answer, which this server does not do yet."""

from __future__ import annotations

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Offer
from backend.messages.kinds import ActionType, MessageKind


async def ask_user(ctx: ActionContext, action: Action) -> Done:
    return Done(
        "failure",
        "There is no person to ask in this run: decide with what you know, and say in your "
        "finish note what you assumed.",
    )


async def not_offered(ctx: ActionContext) -> Offer | None:
    return None


ACTION = ActionDef(
    spec=ActionSpec(
        name=ActionType.ASK_USER,
        description="Ask the person a question and wait for the answer.",
        required=("question",),
        raw=("question",),
        example="<ask_user><question>Which database should I use?</question></ask_user>",
    ),
    kind=MessageKind.ASK_USER,
    handler=ask_user,
    offer=not_offered,
    running=lambda a: a.params.get("question", ""),
    describe=lambda a: f"ask_user {a.params.get('question', '')[:80]!r}",
    order=900,
)
