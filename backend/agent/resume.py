"""Going on with a run another process began: the task transcript as stored in a checkpoint,
and what a resumed run does first (close what was running, finish the interrupted turn).

A checkpoint is the run's RunState, written with each message it publishes (same
transaction) and before each model call. So on resume, what was stored is exactly what the
run had done: a model call in flight is made again (counted in the run row), a reply that
was stored is used again rather than asked again, and an action whose `running` message has
no final partner was interrupted: it is never run again, it gets its `failure` partner, and
the model reads that it was interrupted in its next call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from backend.actions.model import Action
from backend.actions.values import scrub
from backend.agent.asking import read_answer
from backend.agent.stored import PendingTurn
from backend.agent.transcript import (
    Outcome,
    Transcript,
    carried,
    condense_at,
    stored_turn,
    turn_from,
)
from backend.llm.prices import input_window
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.runtime.base import cap_text

if TYPE_CHECKING:
    from backend.actions.registry import Registry
    from backend.agent.context import RunContext

OBSERVATION_CAP = 12_000  # as a task step's (backend/agent/steps.py)
INTERRUPTED_ACTION = (
    "Interrupted: the process running this run stopped before this action finished. It was "
    "not run again; check what it did before running it again."
)
NOT_RUN = "Skipped: the run was interrupted before this action ran."
FAILED_FOOTER = "An action failed; fix the problem and continue."
OK_FOOTER = "All actions ran. Continue, or <finish> when the task is done."


async def prepare_resume(ctx: RunContext) -> str | None:
    """Make a resumed run ready to go on from its checkpoint. Returns the current task's
    finish note when the interrupted turn had already finished the task."""
    state, store = ctx.state, ctx.deps.store
    if state.in_flight:  # the model call under way when the owner died is made again
        await store.count_repeated_call(state.run_id)
        state.in_flight = ""
    ctx.replay_reply = state.reply is not None
    await read_answer(ctx)  # it waited for a person: the answer it goes on with
    for running in list(state.open_actions.values()):  # never run again: closed, said so
        await ctx.publish(
            Message.build(
                running.meta.action_type,
                INTERRUPTED_ACTION,
                status="failure",
                task_id=running.meta.task_id,
                filepath=running.meta.filepath,
                uuid=running.uuid,
                meta_content=running.meta.content,
            )
        )
    if state.pending is None or ctx.answer is not None:  # (the task loop goes on with it)
        return None
    return await _finish_turn(ctx, state.pending)


async def _carried(ctx: RunContext, reply: str) -> list[dict[str, Any]] | None:
    """What the next task goes on from, as the task loop would have left it
    (task_loop.run_task) had the owner not died after the finishing turn."""
    state = ctx.state
    if state.task_head is None:
        return None
    window = await anyio.to_thread.run_sync(input_window, ctx.thinking_model())
    transcript = Transcript(list(state.task_head), condense_at=condense_at(window))
    transcript.turns = [turn_from(t) for t in state.turns]
    return carried(transcript, reply)


async def _finish_turn(ctx: RunContext, pending: PendingTurn) -> str | None:
    """The turn whose actions were running: its outcomes from the stored messages; the
    actions that had not begun are skipped (the model may do them again)."""
    state = ctx.state
    turn = turn_from(pending)
    task_id = state.tasks[state.task_index].id
    stored = await ctx.deps.store.messages(
        state.conversation_id, run_id=state.run_id, after=pending.after_seq, limit=100_000
    )
    actions = ctx.deps.actions
    kinds = {actions.kind_of(a.type) for a in turn.actions}
    closing = {d.kind for d in actions.defs() if d.handling.ends_task}  # a task's closing note
    finals = [
        m
        for m in stored
        if m.meta.task_id == task_id
        and m.status != "running"
        and (
            m.meta.action_type in kinds
            # a rejected approval is its action's result (an approved one: the action's own)
            or (m.meta.action_type == MessageKind.APPROVAL and m.status == "failure")
        )
    ]
    for m in finals:
        if m.meta.action_type in closing:
            state.pending = None
            state.carried = await _carried(ctx, pending.reply)  # the next task goes on from it
            return m.content
    finals = [m for m in finals if m.meta.action_type not in closing]
    turn.outcomes, failed, done = [], False, 0
    for action in turn.actions:
        defn = actions.get(action.type)
        if defn is not None and defn.handling.ends_task:
            break  # not reached: an earlier action failed
        rejected = done < len(finals) and finals[done].meta.action_type == MessageKind.APPROVAL
        label = (
            _label_of(finals[done])
            if done < len(finals) and not rejected
            else _label(actions, action)
        )
        turn.outcomes.extend(Outcome(label, "warning", w) for w in action.warnings)
        if done < len(finals):
            msg = finals[done]
            done += 1
            if rejected:
                failed = True
                turn.outcomes.append(Outcome(label, "FAILED", f"rejected: {msg.content}"))
            elif msg.status == "success":
                turn.outcomes.append(Outcome(label, "ok", cap_text(msg.content, OBSERVATION_CAP)))
            elif msg.content.startswith("Skipped:"):
                turn.outcomes.append(Outcome(label, "skipped", "(an earlier action failed)"))
            else:
                failed = True
                turn.outcomes.append(
                    Outcome(label, "FAILED", cap_text(msg.content, OBSERVATION_CAP))
                )
            continue
        await ctx.publish(
            Message.build(
                actions.kind_of(action.type),
                NOT_RUN,
                status="failure",
                task_id=task_id,
                filepath=action.params.get("path", ""),
                meta_content=label,
            )
        )
        failed = True
        turn.outcomes.append(Outcome(label, "skipped", "(not run: the run was interrupted)"))
    turn.footer = FAILED_FOOTER if failed else OK_FOOTER
    state.turns.append(stored_turn(turn))
    state.pending = None
    return None


def _label_of(msg: Message) -> str:
    return msg.meta.content or msg.meta.action_type


def _label(actions: Registry, action: Action) -> str:
    """As the task loop labels it (the action's own ``label``)."""
    defn = actions.get(action.type)
    return scrub(defn.shown.label(action)) if defn is not None else action.type
