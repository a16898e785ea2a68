"""The whole run: route → auto_reply → plan → (thinking → actions)* per task → summary."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from backend.actions.values import scrub
from backend.agent.asking import Parked
from backend.agent.budget import limits
from backend.agent.context import RunContext
from backend.agent.control import RunStopped
from backend.agent.ending import close_run
from backend.agent.errors import RunError, TaskFailed
from backend.agent.outcomes import Outcome, Stage
from backend.agent.planning import first_answer, plan
from backend.agent.prompts import render
from backend.agent.resume import prepare_resume
from backend.agent.routing import route
from backend.agent.runlog import HANDED_OVER as HANDED_OVER  # what run_pipeline returns
from backend.agent.runlog import PARKED as PARKED
from backend.agent.runlog import logged_run
from backend.agent.specialists import Specialist
from backend.agent.summary import summarize
from backend.agent.task_loop import run_task
from backend.llm.base import LLMError
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.payloads import BudgetNote
from backend.messages.tasks import PlanTask, TaskStatus
from backend.workspace import scan_off_loop

log = logging.getLogger(__name__)


async def run_pipeline(ctx: RunContext, specialists: tuple[Specialist, ...]) -> str:
    """Run to the end and return the final status: completed | failed | stopped, or
    ``HANDED_OVER`` (this process shuts down; the run stays running in the store), or
    ``PARKED`` (it waits for a person: the answer resumes it, on any process)."""
    return await logged_run(ctx, _run_pipeline(ctx, specialists))


async def _run_pipeline(ctx: RunContext, specialists: tuple[Specialist, ...]) -> str:
    """Each stage goes on from where the run's checkpoint says it was (``state.stage``,
    set before the message that ends the stage: the checkpoint is stored with it)."""
    state = ctx.state
    if ctx.resumed and await _summary_stored(ctx):  # it had ended but for its status
        return state.outcome or Outcome.COMPLETED
    if state.stage == Stage.ENDING:  # it was ending (a stop, an error): it ends so
        ctx.resumed = False
        return await _end_early(ctx, stopped=state.outcome == Outcome.STOPPED, reason=state.reason)
    try:
        resumed_note = await prepare_resume(ctx) if ctx.resumed else None
        if state.stage == Stage.START:
            state.stage = Stage.ROUTE
            budget = BudgetNote(budget=limits(ctx.deps.settings))
            await ctx.publish(
                Message.build(MessageKind.QUESTION, state.goal, role="user", json=[budget])
            )
        if state.stage == Stage.ROUTE:
            state.snapshot = await scan_off_loop(state.workspace)
            ctx.store_with_next_checkpoint(start_files=state.snapshot_json())
            state.specialist = specialist = await route(ctx, specialists)
            ctx.store_with_next_checkpoint(task_type=specialist.task_type)
            if not specialist.needs_tools:
                await answer_directly(ctx)
                return Outcome.COMPLETED
            reply = uuid.uuid4().hex  # the planner's prose streams live as this auto_reply
            prose, tasks, reply = await plan(ctx, reply)
            state.tasks = _scrubbed(tasks)  # model text: no lone surrogates into the store
            state.stage = Stage.PLANNED
            await ctx.publish(
                Message.build(
                    MessageKind.AUTO_REPLY, scrub(first_answer(prose, state.tasks)), uuid=reply
                )
            )
        if state.stage == Stage.ANSWERED:
            return Outcome.COMPLETED
        if state.stage == Stage.PLANNED:
            await ctx.deps.store.save_tasks(state.run_id, state.conversation_id, state.tasks)
            state.stage = Stage.TASKS
            await ctx.publish(
                Message.build(
                    MessageKind.PLAN,
                    _plan_text(state.tasks),
                    json=[PlanTask.model_validate(t) for t in state.tasks],
                )
            )
        if state.stage == Stage.TASKS:
            await _run_tasks(ctx, resumed_note)
            state.stage = Stage.SUMMARY
        await summarize(ctx, state.tasks, state.notes, "completed")
        return Outcome.COMPLETED
    except Parked:
        return PARKED
    except (asyncio.CancelledError, RunStopped):
        # the owner cancels until the run ends (ctx.control.ending tells it to hold off now)
        ctx.control.ending = True
        task_obj = asyncio.current_task()
        while task_obj is not None and task_obj.uncancel() > 0:
            pass
        control = ctx.control
        if control.handing_over and not (control.stop_requested or control.lost):
            return HANDED_OVER  # still running in the store: a live process goes on with it
        return await _end_early(ctx, stopped=not ctx.control.shutting_down)
    except (RunError, LLMError) as exc:
        return await _end_early(ctx, reason=str(exc))
    except Exception as exc:  # a bug of ours: the run still ends cleanly
        log.exception("run %s crashed", ctx.run_id)
        reason = (
            f"Internal error: {type(exc).__name__}: {str(exc)[:300]}. The run could not go "
            "on; the server log has the details. Try again."
        )
        return await _end_early(ctx, reason=scrub(reason))


async def _run_tasks(ctx: RunContext, resumed_note: str | None) -> None:
    """The tasks from the current one on (a resumed run: its task goes on)."""
    state = ctx.state
    for index in range(state.task_index, len(state.tasks)):
        task = state.tasks[index]
        state.task_index = index
        if task.id not in state.open_tasks:
            await _set_task(ctx, task, "running")
        try:
            note = resumed_note or await run_task(ctx, task, state.tasks, state.notes)
        except TaskFailed as exc:
            ctx.end_task()
            await _set_task(ctx, task, "failed", str(exc))
            raise
        resumed_note = None
        ctx.end_task()
        state.notes.append(note)
        state.task_index = index + 1  # stored with the task's end
        await _set_task(ctx, task, "completed", note)
    state.task_index = len(state.tasks)


async def _summary_stored(ctx: RunContext) -> bool:
    state = ctx.state
    kinds = (MessageKind.FINISH_SUMMERY,)
    return bool(
        await ctx.deps.store.messages(
            state.conversation_id, run_id=state.run_id, limit=1, action_types=kinds
        )
    )


async def answer_directly(ctx: RunContext) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": render("auto_reply", history=ctx.state.history)},
        {"role": "user", "content": ctx.state.goal},
    ]
    reply = uuid.uuid4().hex  # the answer streams live as this message
    completion = await ctx.call_model(
        "auto_reply",
        messages,
        specialist=True,
        on_delta=ctx.live.model_text(reply, MessageKind.AUTO_REPLY),
    )
    ctx.state.stage = Stage.ANSWERED
    await ctx.publish(
        Message.build(MessageKind.AUTO_REPLY, scrub(completion.text.strip()), uuid=reply)
    )


async def _end_early(ctx: RunContext, *, stopped: bool = False, reason: str = "") -> str:
    ctx.control.ending = True
    if ctx.control.lost:  # another process already ended this run and closed its messages
        return Outcome.FAILED
    if ctx.control.shutting_down:
        reason = "The server shut down while this run was active."
    state = ctx.state
    outcome = Outcome.STOPPED if stopped else Outcome.FAILED
    state.stage, state.outcome, state.reason = Stage.ENDING, outcome, reason

    async def fail_task(task: PlanTask, result: str) -> None:
        await _set_task(ctx, task, "failed", result)

    async def summary() -> None:
        await summarize(ctx, state.tasks, state.notes, outcome, reason)

    await close_run(
        ctx.publish,
        fail_task,
        stopped=stopped,
        reason=reason,
        # innermost first; a command keeps the output it printed
        open_actions=reversed(list(state.open_actions.values())),
        open_tasks=[t for t in state.tasks if t.id in state.open_tasks],
        summary=summary,
        output=ctx.live.closing_text,
    )
    return outcome


async def _set_task(ctx: RunContext, task: PlanTask, status: TaskStatus, result: str = "") -> None:
    task.status = status
    await ctx.deps.store.update_task(task.id, status, result)
    await ctx.publish(
        Message.build(
            MessageKind.TASK,
            task.title,
            status="running"
            if status == "running"
            else ("success" if status == "completed" else "failure"),
            task_id=task.id,
            json=[task],
        )
    )


def _scrubbed(tasks: list[PlanTask]) -> list[PlanTask]:
    return [t.model_copy(update={k: scrub(v) for k, v in dict(t).items()}) for t in tasks]


def _plan_text(tasks: list[PlanTask]) -> str:
    return "\n".join(f"{i + 1}. {t.title}" for i, t in enumerate(tasks))
