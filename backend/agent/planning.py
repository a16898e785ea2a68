"""Planning: the goal becomes a task list (and a first sentence for the user)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import anyio

from backend.agent.errors import RunError
from backend.agent.narration import PLAN_LINE_STARTS
from backend.agent.plan_parse import PlanFormatError, cut_plan, parse_plan, reply_words
from backend.agent.prompts import render
from backend.agent.service_note import own_reply, service_note
from backend.agent.unusable import shown, unusable_message
from backend.messages.message import Message
from backend.messages.tasks import PlanTask

if TYPE_CHECKING:
    from backend.agent.context import RunContext

from backend.messages.kinds import MessageKind

PLAN_ATTEMPTS = 3
CUT = ("length", "max_tokens")  # finish reasons of a reply the output limit cut
MAX_TASKS = 12


async def plan(ctx: RunContext, reply_uuid: str = "") -> tuple[str, list[PlanTask], str]:
    """Returns (first answer for the user, tasks, the uuid for that answer). Retries with the
    parse error fed back. The first attempt's prose streams live as the `auto_reply`
    ``reply_uuid``. A reply that is no plan is shown to the person (backend/agent/unusable.py):
    its words as an `auto_reply` (then the answer gets a new uuid), a format problem as an
    `unusable_reply`."""
    runtime_note = ctx.deps.runtime.prompt_note.planning
    ctx.state.inputs = await ctx.deps.store.uploaded_files(ctx.state.conversation_id)
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": render(
                "planning",
                runtime_note=runtime_note,
                history=ctx.state.history,
                inputs=ctx.state.inputs,
            ),
        },
        {"role": "user", "content": ctx.state.goal},
    ]
    last_error = ""
    refused = True  # every reply was an answer in words (no attempt at a plan)
    for attempt in range(PLAN_ATTEMPTS):
        live = ctx.live.prose(reply_uuid, MessageKind.AUTO_REPLY, PLAN_LINE_STARTS)
        completion = await ctx.call_model(
            "planning", messages, on_delta=live if reply_uuid and attempt == 0 else None
        )
        try:
            if completion.finish_reason in CUT:
                raise cut_plan()
            if len(completion.text) > 20_000:  # a big reply is read off the event loop
                prose, raw_tasks = await anyio.to_thread.run_sync(parse_plan, completion.text)
            else:
                prose, raw_tasks = parse_plan(completion.text)
        except PlanFormatError as exc:
            last_error = str(exc)
            refused = refused and exc.words
            reply_uuid = await _show_unusable(ctx, completion.text, exc, reply_uuid)
            # its own words as its turn, then the service's note as the service's
            messages += [*own_reply(reply_words(completion.text)), service_note(last_error)]
            continue
        tasks = [
            PlanTask(
                id=uuid.uuid4().hex[:12],
                title=t["title"].strip()[:300] or f"Task {i + 1}",
                description=t.get("description", "").strip(),
                requirement=t.get("requirement", "").strip(),
                status="pending",
            )
            for i, t in enumerate(raw_tasks[:MAX_TASKS])
        ]
        return prose.strip(), tasks, reply_uuid
    # what the model was told (the format lesson in last_error) stays out of the user's error
    if refused:
        raise RunError(
            f"The model answered without a plan ({PLAN_ATTEMPTS} times; its answer is shown "
            "above), so there was nothing to run. Rephrase the goal, or choose another model."
        )
    raise RunError(
        f"The model produced no plan: none of its {PLAN_ATTEMPTS} replies was a task list, "
        "so nothing was run. Try again, or choose a model that follows instructions more "
        "closely."
    )


async def _show_unusable(ctx: RunContext, reply: str, exc: PlanFormatError, reply_uuid: str) -> str:
    """Show the person a reply that was no plan. Returns the uuid for the next answer."""
    if exc.words:
        words = shown(reply_words(reply))
        if not words:
            return reply_uuid
        # the live prose of this reply streamed as `reply_uuid`: it is stored as such
        await ctx.publish(Message.build(MessageKind.AUTO_REPLY, words, uuid=reply_uuid or None))
        return uuid.uuid4().hex
    await ctx.publish(unusable_message(exc.user, reply, stage="plan"))
    return reply_uuid


def first_answer(prose: str, tasks: list[PlanTask]) -> str:
    if prose:
        return prose
    if len(tasks) == 1:
        return f"I'll get this done: {tasks[0].title}."
    return f"I'll do this in {len(tasks)} steps."
