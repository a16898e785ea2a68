"""The per-task loop: the model replies with actions, they run, results go back."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

import anyio

from backend.actions import FormatError, extract_thinking, parse_actions
from backend.actions.model import Action
from backend.actions.values import scrub
from backend.agent.errors import LimitExceeded, StuckLoop
from backend.agent.narration import narration_message, prose_of
from backend.agent.prompts import render
from backend.agent.transcript import STUCK_REPEATS, Outcome, Transcript, Turn, describe
from backend.llm.base import Completion
from backend.messages.kinds import FILE_ACTIONS, ActionType, MessageKind
from backend.messages.message import Message
from backend.runtime.base import ActionResult, cap_text
from backend.workspace import scan

if TYPE_CHECKING:
    from backend.agent.context import RunContext

log = logging.getLogger(__name__)

OBSERVATION_CAP = 12_000
# replies longer than this are parsed on a worker thread, so the event loop never waits
THREAD_PARSE_CHARS = 20_000
# actions whose successful result changes the file in `result.filepath`


async def run_task(
    ctx: RunContext, task: dict[str, Any], tasks: list[dict[str, Any]], notes: list[str]
) -> str:
    """Run one task to its `finish`; returns the finish note. Raises TaskFailed."""
    files = sorted(await anyio.to_thread.run_sync(scan, ctx.state.workspace))
    workspace_note = ctx.deps.runtime.prompt_note.thinking
    transcript = Transcript(
        [
            {
                "role": "system",
                "content": render(
                    "thinking",
                    workspace_note=workspace_note,
                    timeout=ctx.deps.settings.terminal_timeout,
                ),
            },
            {
                "role": "user",
                "content": render(
                    "thinking_task",
                    goal=ctx.state.goal,
                    tasks=tasks,
                    task=task,
                    notes=notes,
                    files=files[:200],
                    inputs=ctx.state.inputs,  # issue 13: files the user uploaded
                ),
            },
        ]
    )
    ctx.begin_task(transcript)  # checkpointed; restored when the run is resumed
    format_errors = 0
    for _step in range(ctx.deps.settings.max_steps_per_task):
        narration = uuid.uuid4().hex  # the agent's words before its actions (live, then stored)
        completion = await ctx.call_model(
            "thinking",
            transcript.messages(),
            specialist=True,
            on_delta=ctx.live.prose(narration, MessageKind.THINKING),
        )
        thoughts, parsed = await read_reply(completion)
        for thought in thoughts:
            await ctx.publish(
                Message.build(MessageKind.THINKING, scrub(thought), task_id=task["id"])
            )
        if words := prose_of(completion.text):
            await ctx.publish(narration_message(scrub(words), task["id"], narration))
        if isinstance(parsed, FormatError):
            format_errors += 1
            if format_errors >= ctx.deps.settings.max_format_errors:
                raise LimitExceeded(
                    f"Task '{task['title']}' failed: the model gave {format_errors} replies in "
                    f"a row with no usable action (the last one: {scrub(parsed.user)}). Try again, "
                    "or choose a model that follows the action format."
                )
            # never put the malformed text into the history
            transcript.add(
                Turn(
                    reply="(reply had no usable action)",
                    format_error=str(parsed),
                    brief_error=parsed.user,
                )
            )
            continue
        format_errors = 0
        reply = scrub(completion.text)
        if not reply.strip():  # native tool calls: say what was called
            reply = "(tool calls) " + "; ".join(describe(a) for a in parsed)
        turn = Turn(reply=reply, actions=parsed)
        ctx.begin_turn(turn)  # checkpointed with the action messages
        note = await run_actions(ctx, task, parsed, turn)
        if note is not None:
            return note
        transcript.add(turn)
        repeats = transcript.repeats()
        if repeats >= STUCK_REPEATS:
            raise StuckLoop(
                f"Task '{task['title']}' failed: the agent repeated the same step "
                f"{repeats} times with the same result ({turn.outcomes[0].label}), so it was "
                "stopped to save tokens. Try again with more detail in the goal, or choose "
                "another model."
            )
        if repeats == STUCK_REPEATS - 1:
            turn.footer += (
                "\nThis is the same action with the same result as your previous turn; "
                "repeating it will not change anything. Try a different approach."
            )
    raise LimitExceeded(
        f"Task '{task['title']}' failed: it did not finish within "
        f"{ctx.deps.settings.max_steps_per_task} model turns (MAX_STEPS_PER_TASK). Raise "
        "MAX_STEPS_PER_TASK, or split the goal into smaller steps."
    )


async def read_reply(completion: Completion) -> tuple[list[str], list[Action] | FormatError]:
    """The reasoning to publish and the actions (or the FormatError for the model).
    Never raises; a big reply is read on a worker thread."""

    def read() -> tuple[list[str], list[Action] | FormatError]:
        thoughts = [completion.reasoning.strip()] if completion.reasoning.strip() else []
        thoughts += extract_thinking(completion.text)
        try:
            actions: list[Action] | FormatError = parse_actions(
                completion.text,
                finish_reason=completion.finish_reason,
                tool_calls=completion.tool_calls,
            )
        except FormatError as exc:
            actions = exc
        return thoughts, actions

    size = len(completion.text) + len(completion.reasoning)
    if size > THREAD_PARSE_CHARS:
        return await anyio.to_thread.run_sync(read)
    return read()


async def run_actions(
    ctx: RunContext, task: dict[str, Any], actions: list[Action], turn: Turn
) -> str | None:
    """Run actions in order; the first failure skips the rest. Fills the turn's outcomes
    for the model; returns the finish note when the task finished."""
    failed = False
    for action in actions:
        label = _label(action)
        if failed:
            await ctx.publish(
                Message.build(
                    action.type,
                    "Skipped: an earlier action in the same reply failed.",
                    status="failure",
                    task_id=task["id"],
                    filepath=action.params.get("path", ""),
                    meta_content=label,
                )
            )
            turn.outcomes.append(Outcome(label, "skipped", "(an earlier action failed)"))
            continue
        for warning in action.warnings:
            turn.outcomes.append(Outcome(label, "warning", warning))
        if action.type == ActionType.FINISH:
            note = scrub(action.params.get("message", "").strip()) or "Done."
            await ctx.publish(Message.build(MessageKind.FINISH, note, task_id=task["id"]))
            return note
        uid = uuid.uuid4().hex
        path = action.params.get("path", "")
        await ctx.publish(
            Message.build(
                action.type,
                _running_text(action),
                status="running",
                task_id=task["id"],
                filepath=path,
                uuid=uid,
                meta_content=label,
            )
        )
        on_output = ctx.live.command_output(uid) if action.type == ActionType.TERMINAL_RUN else None
        try:
            result: ActionResult = await ctx.deps.runtime.execute(
                action, ctx.state.workspace, on_output
            )
        except Exception as exc:  # a runtime bug: the action fails, its message is closed
            log.exception("action %s crashed", action.type)
            result = ActionResult(
                "failure", f"The action could not run (internal error: {type(exc).__name__})."
            )
        if action.type in FILE_ACTIONS and result.ok and result.filepath:
            ctx.state.written.add(result.filepath)
        result.content = scrub(result.content)  # e.g. a NUL printed by a command
        await ctx.publish(
            Message.build(
                action.type,
                result.content,
                status="success" if result.ok else "failure",
                task_id=task["id"],
                filepath=result.filepath or path,
                uuid=uid,
                meta_content=label,
            )
        )
        verdict = "ok" if result.ok else "FAILED"
        turn.outcomes.append(Outcome(label, verdict, cap_text(result.content, OBSERVATION_CAP)))
        failed = not result.ok
    turn.footer = (
        "An action failed; fix the problem and continue."
        if failed
        else "All actions ran. Continue, or <finish> when the task is done."
    )
    return None


def _label(action: Action) -> str:
    if action.type == ActionType.TERMINAL_RUN:
        return scrub(f"terminal_run: {action.params.get('command', '')[:200]}")
    if "path" in action.params:
        return scrub(f"{action.type} {action.params['path']}")
    return action.type


def _running_text(action: Action) -> str:
    return scrub(_running(action))


def _running(action: Action) -> str:
    if action.type == ActionType.TERMINAL_RUN:
        return action.params.get("command", "")
    if action.type == ActionType.WRITE_CODE:
        return f"Writing {action.params.get('path', '')}"
    if action.type == ActionType.EDIT_FILE:
        return f"Editing {action.params.get('path', '')}"
    if action.type == ActionType.READ_FILE:
        return f"Reading {action.params.get('path', '')}"
    return action.type
