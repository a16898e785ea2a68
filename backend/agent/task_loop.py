"""The per-task loop: the model replies with actions, they run, results go back."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

import anyio

from backend.actions import FormatError, extract_thinking, parse_actions
from backend.actions.model import Action, ActionSpec
from backend.actions.registry import ActionContext, Done
from backend.actions.values import scrub, scrub_data
from backend.agent.errors import LimitExceeded, StuckLoop
from backend.agent.narration import narration_message, prose_of
from backend.agent.prompts import render
from backend.agent.steps import Step, Steps, waited_turn
from backend.agent.tool_notices import tool_notice
from backend.agent.transcript import (
    STUCK_REPEATS,
    Transcript,
    Turn,
    carried,
    condense_at,
    describe,
)
from backend.agent.unusable import unusable_message
from backend.llm.base import Completion
from backend.llm.prices import input_window
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.tasks import PlanTask
from backend.runtime.base import OutputCallback
from backend.workspace import scan_off_loop

if TYPE_CHECKING:
    from backend.actions.vocabulary import Vocabulary
    from backend.agent.context import RunContext

log = logging.getLogger(__name__)

# replies longer than this are parsed on a worker thread, so the event loop never waits
THREAD_PARSE_CHARS = 20_000


async def run_task(ctx: RunContext, task: PlanTask, tasks: list[PlanTask], notes: list[str]) -> str:
    """Run one task to its `finish`; returns the finish note. Raises TaskFailed."""
    transcript = await _task_transcript(ctx, task, tasks, notes)
    ctx.begin_task(transcript)  # checkpointed; restored when the run is resumed
    if (turn := waited_turn(ctx)) is not None:  # it waited for a person: the turn goes on
        note = await run_actions(ctx, task, turn.actions, turn)
        if note is not None:
            ctx.state.carried = carried(transcript, turn.reply)
            return note
        _add_turn(transcript, turn, task)
    format_errors = 0
    for _step in range(ctx.deps.settings.max_steps_per_task):
        completion, parsed = await _next_reply(ctx, task, transcript)
        if isinstance(parsed, FormatError):
            format_errors += 1
            _add_unusable(ctx, transcript, task, parsed, format_errors, completion.text)
            continue
        format_errors = 0
        reply = scrub(completion.text)
        if not reply.strip():  # native tool calls: say what was called
            reply = "(tool calls) " + "; ".join(describe(ctx.deps.actions, a) for a in parsed)
        turn = Turn(reply=reply, actions=parsed)
        ctx.begin_turn(turn)  # checkpointed with the action messages
        note = await run_actions(ctx, task, parsed, turn)
        if note is not None:
            ctx.state.carried = carried(transcript, reply)
            return note
        _add_turn(transcript, turn, task)
    raise LimitExceeded(
        f"Task '{task.title}' failed: it did not finish within "
        f"{ctx.deps.settings.max_steps_per_task} model turns (MAX_STEPS_PER_TASK). Raise "
        "MAX_STEPS_PER_TASK, or split the goal into smaller steps."
    )


async def _task_transcript(
    ctx: RunContext, task: PlanTask, tasks: list[PlanTask], notes: list[str]
) -> Transcript:
    """The task's prompt: the actions offered, the goal, the plan, the notes so far."""
    files = sorted(await scan_off_loop(ctx.state.workspace))
    workspace_note = ctx.deps.runtime.prompt_note.thinking
    specs, tool_notes = await offered_actions(ctx, task.id)
    # what is fixed for the run first (byte-stable across its calls and tasks: a provider's
    # prompt cache serves it), then this task's part: the plan's progress, notes, files
    system = render(
        "thinking",
        actions=specs,
        tool_notes=tool_notes,
        workspace_note=workspace_note,
        timeout=ctx.deps.settings.terminal_timeout,
    )
    fixed = render("thinking_run", goal=ctx.state.goal, tasks=tasks)
    this_task = {
        "role": "user",
        "content": render(
            "thinking_task",
            tasks=tasks,
            task=task,
            notes=notes,
            files=files[:200],
            inputs=ctx.state.inputs,  # files the user uploaded
        ),
    }
    # a later task goes on from the last one's prompt: its progress is appended
    before = ctx.state.carried or [{"role": "system", "content": f"{system}\n\n{fixed}"}]
    window = await anyio.to_thread.run_sync(input_window, ctx.thinking_model())
    return Transcript(
        [*before, this_task], condense_at=condense_at(window), actions=ctx.deps.actions
    )


async def _next_reply(
    ctx: RunContext, task: PlanTask, transcript: Transcript
) -> tuple[Completion, list[Action] | FormatError]:
    """The model's next reply and its actions (or why it has none); its reasoning and its
    words are published (a reply with no usable action is shown as such)."""
    narration = uuid.uuid4().hex  # the agent's words before its actions (live, then stored)
    completion = await ctx.call_model(
        "thinking",
        transcript.messages(),
        specialist=True,
        on_delta=ctx.live.prose(narration, MessageKind.THINKING),
    )
    thoughts, parsed = await read_reply(completion, ctx.deps.actions.vocabulary)
    for thought in thoughts:
        await ctx.publish(Message.build(MessageKind.THINKING, scrub(thought), task_id=task.id))
    if isinstance(parsed, FormatError) and not parsed.words:
        # a format problem: the person sees what the model wrote, and that it was unusable
        # (its live prose, streamed as `narration`, becomes that message)
        await ctx.publish(
            unusable_message(
                parsed.user, completion.text, stage="action", task_id=task.id, uuid=narration
            )
        )
    elif words := prose_of(completion.text):  # the agent's words (a refusal too)
        await ctx.publish(narration_message(scrub(words), task.id, narration))
    return completion, parsed


def _add_unusable(
    ctx: RunContext,
    transcript: Transcript,
    task: PlanTask,
    parsed: FormatError,
    format_errors: int,
    reply: str,
) -> None:
    """A reply with no usable action: it is resent as the model's, the service's note on it
    as the service's (backend/agent/service_note.py); past MAX_FORMAT_ERRORS in a row the
    task fails."""
    if format_errors >= ctx.deps.settings.max_format_errors:
        raise LimitExceeded(
            f"Task '{task.title}' failed: the model gave {format_errors} replies in "
            f"a row with no usable action (the last one: {scrub(parsed.user)}). Try again, "
            "or choose a model that follows the action format."
        )
    transcript.add(Turn(reply=scrub(reply), format_error=str(parsed), brief_error=parsed.user))


def _add_turn(transcript: Transcript, turn: Turn, task: PlanTask) -> None:
    """The turn's actions ran: into the transcript, unless the agent is stuck in a loop."""
    transcript.add(turn)
    repeats = transcript.repeats()
    if repeats >= STUCK_REPEATS:
        raise StuckLoop(
            f"Task '{task.title}' failed: the agent repeated the same step "
            f"{repeats} times with the same result ({turn.outcomes[0].label}), so it was "
            "stopped to save tokens. Try again with more detail in the goal, or choose "
            "another model."
        )
    if repeats == STUCK_REPEATS - 1:
        turn.footer += (
            "\nThis is the same action with the same result as your previous turn; "
            "repeating it will not change anything. Try a different approach."
        )


async def read_reply(
    completion: Completion, vocab: Vocabulary
) -> tuple[list[str], list[Action] | FormatError]:
    """The reasoning to publish and the actions of ``vocab`` (or the FormatError for the
    model). Never raises; a big reply is read on a worker thread."""

    def read() -> tuple[list[str], list[Action] | FormatError]:
        thoughts = [completion.reasoning.strip()] if completion.reasoning.strip() else []
        thoughts += extract_thinking(completion.text, vocab)
        try:
            actions: list[Action] | FormatError = parse_actions(
                completion.text,
                finish_reason=completion.finish_reason,
                tool_calls=completion.tool_calls,
                vocab=vocab,
            )
        except FormatError as exc:
            actions = exc
        return thoughts, actions

    size = len(completion.text) + len(completion.reasoning)
    if size > THREAD_PARSE_CHARS:
        return await anyio.to_thread.run_sync(read)
    return read()


async def run_actions(
    ctx: RunContext, task: PlanTask, actions: list[Action], turn: Turn
) -> str | None:
    """Run actions in order through the action registry; the first failure skips the rest.
    Fills the turn's outcomes for the model; returns the finish note when the task finished.
    Each action is a step (backend/agent/steps.py): a turn resumed after a wait goes on
    from the action it waited on, with the answer; one that needs a person asks first."""
    steps = Steps(ctx, task.id, turn)
    for step in steps.walk(actions):
        if steps.failed:  # an earlier action failed
            await step.skip()
            continue
        if not await step.cleared():  # the person said no (or answered the question)
            continue
        if step.ends_task:
            return await _finish(ctx, step)
        step.ran(await _run(ctx, step))
    steps.end()
    return None


async def _finish(ctx: RunContext, step: Step) -> str:
    """The action that ends the task: its note (through the registry as every action: the
    stop check, a crash as its failure, its metrics)."""
    done = await _execute(ctx, step.action, None)
    note = scrub(done.content.strip()) or "Done."
    await ctx.publish(Message.build(step.kind, note, task_id=step.task_id))
    return note


async def _run(ctx: RunContext, step: Step) -> Done:
    """One action, between its `running` message and its final one."""
    action, defn, kind = step.action, step.defn, step.kind
    uid = uuid.uuid4().hex
    path = action.params.get("path", "")
    await ctx.publish(
        Message.build(
            kind,
            scrub(defn.shown.running(action)) if defn else action.type,
            status="running",
            task_id=step.task_id,
            filepath=path,
            uuid=uid,
            meta_content=step.label,
        )
    )
    live = defn is not None and defn.handling.streams_output
    done = await _execute(ctx, action, ctx.live.command_output(uid, kind) if live else None)
    if defn is not None and defn.handling.writes_files and done.ok and done.filepath:
        ctx.state.written.add(done.filepath)
    done.content = scrub(done.content)  # e.g. a NUL printed by a command
    result = Message.build(
        kind,
        done.content,
        status="success" if done.ok else "failure",
        task_id=step.task_id,
        filepath=done.filepath or path,
        url=done.url,
        json=done.data,
        uuid=uid,
        meta_content=step.label,
    )
    result.meta.json_ = scrub_data(result.meta.json_)
    stored = await ctx.publish(result)
    if ctx.checkpoints is not None:  # the workspace after it (backend/checkpoints)
        ctx.checkpoints.after_action(stored.seq, step.label)
    return done


def action_context(ctx: RunContext, on_output: OutputCallback | None = None) -> ActionContext:
    """What the run's action handlers are given."""
    return ActionContext(
        runtime=ctx.deps.runtime,
        workspace=ctx.state.workspace,
        tools=ctx.deps.tools,
        on_output=on_output,
        mcp_servers=ctx.state.mcp_servers,
        can_ask=ctx.state.can_ask,
    )


async def _execute(ctx: RunContext, action: Action, on_output: OutputCallback | None) -> Done:
    """One action through its handler, after the stop check; a handler's crash is the
    action's failure (its message is closed), a stop propagates."""
    ctx.check_stop()
    if ctx.checkpoints is not None:  # the previous action's checkpoint is complete
        await ctx.checkpoints.settle()
    try:
        return await ctx.deps.actions.execute(action_context(ctx, on_output), action)
    except Exception as exc:
        log.exception("action %s crashed", action.type)
        return Done("failure", f"The action could not run (internal error: {type(exc).__name__}).")


async def offered_actions(ctx: RunContext, task_id: str) -> tuple[list[ActionSpec], list[str]]:
    """The actions offered for this task (their specs, in prompt order) and the notes they
    add to the prompt. A tool the run picked that cannot be offered (an MCP server that is
    down) is named once in the run, as a quiet notice: never as an action's card, which is
    for what the model did (the Tools panel is where the person sees the server's state)."""
    specs: list[ActionSpec] = []
    notes: list[str] = []
    for defn, offer in await ctx.deps.actions.offered(action_context(ctx)):
        for about, problem in offer.problems.items():
            if about in ctx.state.tool_problems:
                continue
            ctx.state.tool_problems.append(about)
            await ctx.publish(tool_notice(scrub(problem), task_id))
        if offer.available:
            specs.append(defn.spec)
            if offer.note:
                notes.append(offer.note)
    return specs, notes
