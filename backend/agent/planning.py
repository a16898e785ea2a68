"""Planning: the goal becomes a task list (and a first sentence for the user)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import anyio

from backend.agent.errors import RunError
from backend.agent.narration import PLAN_LINE_STARTS
from backend.agent.plan_parse import PlanFormatError, parse_plan
from backend.agent.prompts import render

if TYPE_CHECKING:
    from backend.agent.context import RunContext

from backend.messages.kinds import MessageKind

PLAN_ATTEMPTS = 3
MAX_TASKS = 12


async def plan(ctx: RunContext, reply_uuid: str = "") -> tuple[str, list[dict[str, Any]]]:
    """Returns (first answer for the user, tasks). Retries with the parse error fed back.
    The first attempt's prose streams live as the `auto_reply` ``reply_uuid``."""
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
    for attempt in range(PLAN_ATTEMPTS):
        live = ctx.live.prose(reply_uuid, MessageKind.AUTO_REPLY, PLAN_LINE_STARTS)
        completion = await ctx.call_model(
            "planning", messages, on_delta=live if reply_uuid and attempt == 0 else None
        )
        try:
            if len(completion.text) > 20_000:  # a big reply is read off the event loop
                prose, raw_tasks = await anyio.to_thread.run_sync(parse_plan, completion.text)
            else:
                prose, raw_tasks = parse_plan(completion.text)
        except PlanFormatError as exc:
            last_error = str(exc)
            messages.append({"role": "assistant", "content": "(the plan could not be read)"})
            messages.append({"role": "user", "content": last_error})
            continue
        tasks = [
            {
                "id": uuid.uuid4().hex[:12],
                "title": t["title"].strip()[:300] or f"Task {i + 1}",
                "description": t.get("description", "").strip(),
                "requirement": t.get("requirement", "").strip(),
                "status": "pending",
            }
            for i, t in enumerate(raw_tasks[:MAX_TASKS])
        ]
        return prose.strip(), tasks
    # what the model was told (the format lesson in last_error) stays out of the user's error
    raise RunError(
        f"The model did not produce a usable plan after {PLAN_ATTEMPTS} attempts: its replies "
        "could not be read as a task list. Try again, or choose a model that follows "
        "instructions more closely."
    )


def first_answer(prose: str, tasks: list[dict[str, Any]]) -> str:
    if prose:
        return prose
    if len(tasks) == 1:
        return f"I'll get this done: {tasks[0]['title']}."
    return f"I'll do this in {len(tasks)} steps."
