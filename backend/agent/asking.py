"""A run that waits for a person: it publishes what it asks (an approval of an action, or
the model's question), stored with the wait in one transaction, then parks: it leaves its
process (``Parked``), its state in the checkpoint stored with the message. The answer
(backend/waits, on any process) resumes it from that checkpoint, and the action goes on
from ``state.wait["index"]`` of the pending turn with ``ctx.answer``."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from backend.actions.model import Action
from backend.actions.values import scrub
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.runtime.confined import open_read, read_fd
from backend.store.parked import wait_values
from backend.waits.classes import APPROVAL, ASK_USER

if TYPE_CHECKING:
    from backend.agent.context import RunContext

DIFF_READ_CAP = 2_000_000  # bytes of the file on disk read for a diff
CONTENT_CAP = 200_000  # characters of an approval message's content


class Parked(BaseException):
    """The run waits for a person: its process lets go of it (it stays in the store)."""

    def __init__(self, uuid: str) -> None:
        super().__init__(uuid)
        self.uuid = uuid


async def park(ctx: RunContext, msg: Message, kind: str, index: int) -> NoReturn:
    """Publish ``msg`` (status running) and the wait on it in one transaction, then park.
    From the moment it is stored an answer may come, on any process."""
    state = ctx.state
    state.wait = {"uuid": msg.uuid, "kind": kind, "index": index}
    await ctx.publish(msg, wait=wait_values(msg.uuid, kind, ctx.deps.settings.approval_timeout))
    ctx.control.ending = True  # nothing more to stop or cancel here: the run left
    raise Parked(msg.uuid)


async def ask_approval(
    ctx: RunContext, task_id: str, action: Action, action_class: str, index: int
) -> NoReturn:
    content, filepath = await approval_content(ctx.state.workspace, action)
    msg = Message.build(
        MessageKind.APPROVAL,
        scrub(content),
        status="running",
        task_id=task_id,
        filepath=filepath,
        json=[{"action_type": action.type, "class": action_class, "params": dict(action.params)}],
        meta_content=f"{action.type} needs approval",
    )
    await park(ctx, msg, APPROVAL, index)


async def ask_question(ctx: RunContext, task_id: str, action: Action, index: int) -> NoReturn:
    question = scrub(action.params.get("question", "").strip())
    msg = Message.build(
        MessageKind.ASK_USER, question, status="running", task_id=task_id, meta_content="ask_user"
    )
    await park(ctx, msg, ASK_USER, index)


async def read_answer(ctx: RunContext) -> None:
    """A resumed run that waited: the answer stored by the transition that ended its wait
    (``ctx.answer``); the wait message's partner was stored with it, so it is not open."""
    state = ctx.state
    if state.wait is None:
        return
    state.open_actions.pop(state.wait["uuid"], None)
    raw = await ctx.deps.store.wait_answer(state.run_id)
    answer: dict[str, Any] = json.loads(raw) if raw else {}
    if answer.get("uuid") != state.wait["uuid"]:  # cannot happen: a parked run does not run
        answer = {"uuid": state.wait["uuid"], "decision": "reject", "reason": "No answer."}
    ctx.answer = answer


def rejection(answer: dict[str, Any]) -> str:
    """What the model reads of a rejected action (or an unanswered question)."""
    reason = str(answer.get("reason", "")).strip() or "(no reason given)"
    if answer.get("by") in ("timeout", "stop"):
        return f"rejected: {reason}"
    return f"rejected by the person: {reason}"


async def approval_content(workspace: Path, action: Action) -> tuple[str, str]:
    """What a person approves: the command, or for a file edit a unified diff against the
    file on disk (a new file: all added). Returns (content, filepath)."""
    p = action.params
    if action.type == "terminal_run":
        cwd = p.get("cwd")
        return (p.get("command", "") + (f"\n(in {cwd})" if cwd else "")), ""
    if action.type in ("write_code", "edit_file"):
        path = p.get("path", "")
        before = await anyio.to_thread.run_sync(_read, workspace, path)
        if action.type == "write_code":
            after = p.get("content", "")
        elif p.get("old_str", "") and p.get("old_str", "") in before:
            after = before.replace(p.get("old_str", ""), p.get("new_str", ""), 1)
        else:  # the edit will fail as it stands: show what it asks for
            before, after = p.get("old_str", ""), p.get("new_str", "")
        diff = difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
        return "".join(_eol(line) for line in diff)[:CONTENT_CAP] or "(no change)", path
    lines = [f"{k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in p.items()]
    return f"{action.type}\n" + "\n".join(lines)[:CONTENT_CAP], ""


def _eol(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def _read(workspace: Path, path: str) -> str:
    """The file's text as it is now ("" when it is not there, not a file, or outside the
    workspace): opened confined, never following a symlink out of the workspace, even one
    swapped in while it is opened."""
    try:
        fd, _rel = open_read(workspace, path)
    except (OSError, ValueError):  # missing, a folder, outside (PathEscapeError)
        return ""
    try:
        return read_fd(fd, DIFF_READ_CAP).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)
