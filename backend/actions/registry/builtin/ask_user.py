"""ask_user: the model asks the person (docs/api.md "Runs that wait for a person"). Parsed
everywhere; offered only
where someone can answer (``RunState.can_ask``: API runs, `planact run` on a terminal). The
task loop parks the run on the question (backend/agent/asking.py); the answer is the action's
result. Where it is not offered, this handler answers instead."""

from __future__ import annotations

from backend.actions.model import Action, ActionSpec
from backend.actions.registry.core import ActionContext, ActionDef, Done, Handling, Offer, Shown
from backend.messages.kinds import MessageKind

WHEN_TO_ASK = (
    "ask_user waits for the person's answer, which can take a long time: ask only for "
    "information that is missing and that you cannot find yourself (in the goal, the "
    "workspace, the files, with your tools). Never ask for confirmation or permission, "
    "and never ask what you can decide yourself; ask one clear question at a time."
)


async def ask_user(ctx: ActionContext, action: Action) -> Done:
    return Done(
        "failure",
        "There is no person to ask in this run: decide with what you know, and say in your "
        "finish note what you assumed.",
    )


async def offer_if_someone_answers(ctx: ActionContext) -> Offer | None:
    return Offer(note=WHEN_TO_ASK) if ctx.can_ask else None


ACTION = ActionDef(
    spec=ActionSpec(
        name="ask_user",
        aliases=("ask_followup_question", "ask_human"),
        description=(
            "Ask the person a question and wait for the answer (only for missing "
            "information you cannot find yourself)."
        ),
        required=("question",),
        raw=("question",),
        example="<ask_user><question>Which database should I use?</question></ask_user>",
    ),
    kind=MessageKind.ASK_USER,
    handler=ask_user,
    shown=Shown(
        running=lambda a: a.params.get("question", ""),
        describe=lambda a: f"ask_user {a.params.get('question', '')[:80]!r}",
        order=900,
    ),
    handling=Handling(
        offer=offer_if_someone_answers,
        asks_person=True,
    ),
)
