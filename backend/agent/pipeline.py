"""The whole run: route → auto_reply → plan → (thinking → actions)* per task → summary."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

import anyio

from backend.actions.values import scrub
from backend.agent.budget import limits
from backend.agent.code_act import run_task
from backend.agent.context import RunContext, RunStopped
from backend.agent.errors import RunError, TaskFailed
from backend.agent.planning import first_answer, plan
from backend.agent.prompts import render
from backend.agent.routing import Specialist, route
from backend.agent.runlog import logged_run
from backend.agent.summary import summarize
from backend.agent.titles import goal_title
from backend.llm.base import LLMError
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.workspace import scan

log = logging.getLogger(__name__)


async def run_pipeline(ctx: RunContext, specialists: tuple[Specialist, ...]) -> str:
    """Run to the end and return the final status: completed | failed | stopped."""
    return await logged_run(ctx, _run_pipeline(ctx, specialists))


async def _run_pipeline(ctx: RunContext, specialists: tuple[Specialist, ...]) -> str:
    tasks: list[dict[str, Any]] = []
    notes: list[str] = []
    try:
        await ctx.publish(
            Message.build(
                MessageKind.QUESTION,
                ctx.goal,
                role="user",
                json=[{"budget": limits(ctx.settings)}],
            )
        )
        # a conversation made empty (to upload files first) is named by its first goal
        await ctx.store.retitle_if_default(ctx.conversation_id, ("",), goal_title(ctx.goal))
        ctx.snapshot = await anyio.to_thread.run_sync(scan, ctx.workspace)
        ctx.specialist = await route(ctx, specialists)
        await ctx.store.set_run_task_type(ctx.run_id, ctx.specialist.task_type)
        if not ctx.specialist.needs_tools:
            await answer_directly(ctx)
            return "completed"
        reply = uuid.uuid4().hex  # the planner's prose streams live as this auto_reply
        prose, tasks = await plan(ctx, reply)
        tasks = _scrubbed(tasks)  # model text: no lone surrogates into the store
        await ctx.publish(
            Message.build(MessageKind.AUTO_REPLY, scrub(first_answer(prose, tasks)), uuid=reply)
        )
        await ctx.store.save_tasks(ctx.run_id, ctx.conversation_id, tasks)
        await ctx.publish(
            Message.build(MessageKind.PLAN, _plan_text(tasks), json=[dict(t) for t in tasks])
        )
        for task in tasks:
            await _set_task(ctx, task, "running")
            try:
                note = await run_task(ctx, task, tasks, notes)
            except TaskFailed as exc:
                await _set_task(ctx, task, "failed", str(exc))
                raise
            notes.append(note)
            await _set_task(ctx, task, "completed", note)
        await summarize(ctx, tasks, notes, "completed")
        return "completed"
    except (asyncio.CancelledError, RunStopped):
        # the owner cancels until the run ends (ctx.ending tells it to hold off now)
        ctx.ending = True
        task_obj = asyncio.current_task()
        while task_obj is not None and task_obj.uncancel() > 0:
            pass
        return await _end_early(ctx, tasks, notes, stopped=not ctx.shutting_down)
    except (RunError, LLMError) as exc:
        return await _end_early(ctx, tasks, notes, reason=str(exc))
    except Exception as exc:  # a bug of ours: the run still ends cleanly
        log.exception("run %s crashed", ctx.run_id)
        reason = (
            f"Internal error: {type(exc).__name__}: {str(exc)[:300]}. The run could not go "
            "on; the server log has the details. Try again."
        )
        return await _end_early(ctx, tasks, notes, reason=scrub(reason))


async def answer_directly(ctx: RunContext) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": render("auto_reply", history=ctx.history)},
        {"role": "user", "content": ctx.goal},
    ]
    reply = uuid.uuid4().hex  # the answer streams live as this message
    completion = await ctx.call_model(
        "auto_reply",
        messages,
        specialist=True,
        on_delta=ctx.live.model_text(reply, MessageKind.AUTO_REPLY),
    )
    await ctx.publish(
        Message.build(MessageKind.AUTO_REPLY, scrub(completion.text.strip()), uuid=reply)
    )


async def _end_early(
    ctx: RunContext,
    tasks: list[dict[str, Any]],
    notes: list[str],
    *,
    stopped: bool = False,
    reason: str = "",
) -> str:
    ctx.ending = True
    if ctx.lost:  # another process already ended this run and closed its messages
        return "failed"
    if ctx.shutting_down:
        reason = "The server shut down while this run was active."
    # every `running` action message gets its final partner, innermost first; a command
    # keeps the output it printed (the reason itself is said once, in `error`)
    closing = "Stopped before it finished." if stopped else "Interrupted."
    for uid, running in reversed(list(ctx.open_actions.items())):
        await ctx.publish(
            Message.build(
                running.meta.action_type,
                ctx.live.closing_text(uid, closing),
                status="failure",
                task_id=running.meta.task_id,
                filepath=running.meta.filepath,
                uuid=uid,
                meta_content=running.meta.content,
            )
        )
    for task in tasks:
        if task["id"] in ctx.open_tasks:  # published `running`, not closed yet
            await _set_task(ctx, task, "failed", "stopped" if stopped else reason)
    if stopped:
        await ctx.publish(Message.build(MessageKind.STOP, "The run was stopped.", status="failure"))
    else:
        await ctx.publish(Message.build(MessageKind.ERROR, reason, status="failure"))
    # a failed or stopped run still offers the files it made
    await summarize(ctx, tasks, notes, "stopped" if stopped else "failed", reason)
    return "stopped" if stopped else "failed"


async def _set_task(ctx: RunContext, task: dict[str, Any], status: str, result: str = "") -> None:
    task["status"] = status
    await ctx.store.update_task(task["id"], status, result)
    await ctx.publish(
        Message.build(
            MessageKind.TASK,
            task["title"],
            status="running"
            if status == "running"
            else ("success" if status == "completed" else "failure"),
            task_id=task["id"],
            json=[dict(task)],
        )
    )


def _scrubbed(tasks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: scrub(v) if isinstance(v, str) else v for k, v in t.items()} for t in tasks]


def _plan_text(tasks: list[dict[str, Any]]) -> str:
    return "\n".join(f"{i + 1}. {t['title']}" for i, t in enumerate(tasks))
