"""The per-task loop: the model replies with actions, they run, results go back."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import anyio

from backend.actions import FormatError, extract_thinking, parse_actions
from backend.actions.model import Action
from backend.agent.errors import LimitExceeded
from backend.agent.prompts import render
from backend.messages.message import Message
from backend.runtime.base import ActionResult, cap_text
from backend.workspace import scan

if TYPE_CHECKING:
    from backend.agent.context import RunContext

OBSERVATION_CAP = 12_000


async def run_task(
    ctx: RunContext, task: dict[str, Any], tasks: list[dict[str, Any]], notes: list[str]
) -> str:
    """Run one task to its `finish`; returns the finish note. Raises TaskFailed."""
    files = sorted(await anyio.to_thread.run_sync(scan, ctx.workspace))
    workspace_note = (
        "a Docker sandbox; the folder is /workspace"
        if ctx.runtime.name == "docker"
        else "commands run in this folder"
    )
    messages: list[dict[str, Any]] = [
        {
            "role": "system",
            "content": render(
                "thinking", workspace_note=workspace_note, timeout=ctx.settings.terminal_timeout
            ),
        },
        {
            "role": "user",
            "content": render(
                "thinking_task",
                goal=ctx.goal,
                tasks=tasks,
                task=task,
                notes=notes,
                files=files[:200],
                inputs=ctx.inputs,  # issue 13: files the user uploaded
            ),
        },
    ]
    format_errors = 0
    for _step in range(ctx.settings.max_steps_per_task):
        completion = await ctx.call_model("thinking", messages, specialist=True)
        thoughts = [completion.reasoning.strip()] if completion.reasoning.strip() else []
        for thought in thoughts + extract_thinking(completion.text):
            await ctx.publish(Message.build("thinking", thought, task_id=task["id"]))
        try:
            actions = parse_actions(
                completion.text,
                finish_reason=completion.finish_reason,
                tool_calls=completion.tool_calls,
            )
        except FormatError as exc:
            format_errors += 1
            if format_errors >= ctx.settings.max_format_errors:
                raise LimitExceeded(
                    f"Task '{task['title']}' failed: the model gave {format_errors} replies in "
                    f"a row with no usable action. Last problem: {exc}"
                ) from exc
            # never put the malformed text into the history
            messages.append({"role": "assistant", "content": "(reply had no usable action)"})
            messages.append({"role": "user", "content": f"Format error: {exc}"})
            continue
        format_errors = 0
        messages.append({"role": "assistant", "content": completion.text})
        observations, note = await run_actions(ctx, task, actions)
        if note is not None:
            return note
        messages.append({"role": "user", "content": "\n\n".join(observations)})
    raise LimitExceeded(
        f"Task '{task['title']}' failed: it did not finish within "
        f"{ctx.settings.max_steps_per_task} model turns (MAX_STEPS_PER_TASK)."
    )


async def run_actions(
    ctx: RunContext, task: dict[str, Any], actions: list[Action]
) -> tuple[list[str], str | None]:
    """Run actions in order; the first failure skips the rest. Returns the observations
    for the model and the finish note when the task finished."""
    observations: list[str] = []
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
            observations.append(f"[{label}] skipped (an earlier action failed)")
            continue
        for warning in action.warnings:
            observations.append(f"[{label}] warning: {warning}")
        if action.type == "finish":
            note = action.params.get("message", "").strip() or "Done."
            await ctx.publish(Message.build("finish", note, task_id=task["id"]))
            return observations, note
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
        result: ActionResult = await ctx.runtime.execute(action, ctx.workspace)
        if action.type == "write_code" and result.ok:
            ctx.written.add(result.filepath)
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
        observations.append(f"[{label}] {verdict}\n{cap_text(result.content, OBSERVATION_CAP)}")
        failed = not result.ok
    if failed:
        observations.append("An action failed; fix the problem and continue.")
    else:
        observations.append("All actions ran. Continue, or <finish> when the task is done.")
    return observations, None


def _label(action: Action) -> str:
    if action.type == "terminal_run":
        return f"terminal_run: {action.params.get('command', '')[:200]}"
    if "path" in action.params:
        return f"{action.type} {action.params['path']}"
    return action.type


def _running_text(action: Action) -> str:
    if action.type == "terminal_run":
        return action.params.get("command", "")
    if action.type == "write_code":
        return f"Writing {action.params.get('path', '')}"
    if action.type == "read_file":
        return f"Reading {action.params.get('path', '')}"
    return action.type
