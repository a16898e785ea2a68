"""A run that waits for a person: it publishes what it asks (an approval of an action, or
the model's question), stored with the wait in one transaction, then parks: it leaves its
process (``Parked``), its state in the checkpoint stored with the message. The answer
(backend/waits, on any process) resumes it from that checkpoint, and the action goes on
from ``state.wait.index`` of the pending turn with ``ctx.answer``."""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn

import anyio

from backend.actions.model import Action
from backend.actions.values import scrub
from backend.agent.stored import ParkedWait
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.payloads import ApprovalRequest, ApprovalShown
from backend.runtime.confined import open_read, read_fd
from backend.store.parked import WaitAnswer, wait_values
from backend.waits.classes import APPROVAL, ASK_USER
from backend.waits.digest import action_digest

if TYPE_CHECKING:
    from backend.actions.registry import ActionDef
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
    state.wait = ParkedWait(uuid=msg.uuid, kind=kind, index=index)
    await ctx.publish(msg, wait=wait_values(msg.uuid, kind, ctx.deps.settings.approval_timeout))
    ctx.control.ending = True  # nothing more to stop or cancel here: the run left
    raise Parked(msg.uuid)


async def ask_approval(
    ctx: RunContext, task_id: str, action: Action, action_class: str, index: int
) -> NoReturn:
    shown = await approval_content(ctx.state.workspace, action, ctx.deps.actions.get(action.type))
    content = scrub(shown.content)
    about = shown.about
    if content != shown.content:  # a NUL or broken Unicode: stored as U+FFFD
        note = (about.note + " " if about.note else "") + UNSHOWABLE
        about = about.model_copy(update={"whole": False, "note": note})
    msg = Message.build(
        MessageKind.APPROVAL,
        content,
        status="running",
        task_id=task_id,
        filepath=shown.filepath,
        json=[
            ApprovalRequest(
                action_type=action.type,
                class_=action_class,
                params=dict(action.params),
                digest=action_digest(action.type, action.params),
                shown=about,
            )
        ],
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
    uuid = state.wait.uuid
    state.open_actions.pop(uuid, None)
    answer = await ctx.deps.store.wait_answer(state.run_id)
    if answer is None or answer.uuid != uuid:  # cannot happen: a parked run does not run
        answer = WaitAnswer(uuid=uuid, decision="reject", reason="No answer.")
    ctx.answer = answer


def rejection(answer: WaitAnswer) -> str:
    """What the model reads of a rejected action (or an unanswered question)."""
    reason = answer.reason.strip() or "(no reason given)"
    if answer.by in ("timeout", "stop"):
        return f"rejected: {reason}"
    return f"rejected by the person: {reason}"


NOT_AS_APPROVED = (
    "Not run: this action is not the one the person approved (its digest differs from the "
    "approval's)."
)


def approved_as_shown(action: Action, answer: WaitAnswer) -> bool:
    """Whether the action about to run is byte for byte the one approved: the digest of the
    approval (kept in the answer) is the action's (an answer stored without one: yes)."""
    approved = answer.digest
    return not approved or approved == action_digest(action.type, action.params)


class Shown(NamedTuple):
    """What a person is shown of an action: ``content`` (the message's), ``filepath``, and
    ``about`` (meta.json's ``shown``): ``whole`` (nothing left out), ``note`` (what was left
    out, how much and where, in words; "" when whole), ``lines`` and ``chars`` of the
    action's text (the command, the new file content)."""

    content: str
    filepath: str
    about: ApprovalShown


async def approval_content(workspace: Path, action: Action, defn: ActionDef | None) -> Shown:
    """What a person approves: the whole command, or for a file edit a unified diff against
    the file on disk (a new file: all added), cut at a line past CONTENT_CAP characters with
    a note saying what was left out (the whole new content is in the approval's params)."""
    p = action.params
    view = defn.handling.approval_view if defn is not None else ""
    whole = defn.spec.whole_file if defn is not None else ""  # a whole new file (write_code)
    if view == "command":
        command = p.get("command", "")
        cwd = p.get("cwd")
        return Shown(command + (f"\n(in {cwd})" if cwd else ""), "", _about(command, ""))
    if view == "diff":
        path = p.get("path", "")
        before, too_big = await anyio.to_thread.run_sync(_read, workspace, path)
        if whole:
            after = p.get(whole, "")
        elif p.get("old_str", "") and p.get("old_str", "") in before and not too_big:
            after = before.replace(p.get("old_str", ""), p.get("new_str", ""), 1)
        else:  # the edit will fail as it stands (or the file is too big to compare)
            before, after = p.get("old_str", ""), p.get("new_str", "")
        lead = ""
        if too_big:
            lead = f"[the file on disk is over {DIFF_READ_CAP:,} bytes: not compared with it; " + (
                "it is replaced whole by the content below]\n"
                if whole
                else "shown: the text replaced and its replacement]\n"
            )
            if whole:
                before = ""
        diff = difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
        text = lead + "".join(_eol(line) for line in diff)
        content, cut = _cut(text, "of the diff", "the whole new content is in this approval")
        notes = [n for n in (lead.strip("[]\n"), cut) if n]
        about = _about(after, " ".join(notes))
        return Shown(content or "(no change)", path, about)
    lines = [f"{k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in p.items()]
    text = f"{action.type}\n" + "\n".join(lines)
    content, cut = _cut(text, "", "the whole action is in this approval")
    return Shown(content, "", _about(text, cut))


UNSHOWABLE = "Characters that cannot be stored (NUL, broken Unicode) are shown as \ufffd."


def _about(text: str, note: str) -> ApprovalShown:
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    return ApprovalShown(whole=not note, note=note, lines=lines, chars=len(text))


def _cut(text: str, what: str, where_whole: str) -> tuple[str, str]:
    """``text`` whole when it fits CONTENT_CAP, else cut at the end of the last whole line
    that fits, with a last line saying how much was left out and where; and that note."""
    if len(text) <= CONTENT_CAP:
        return text, ""
    end = text.rfind("\n", 0, CONTENT_CAP) + 1 or CONTENT_CAP  # one huge line: mid-line
    kept, rest = text[:end], text[end:]
    shown_lines = kept.count("\n")
    more_lines = rest.count("\n") + (1 if rest and not rest.endswith("\n") else 0)
    what = f" {what}" if what else ""
    note = (
        f"Cut after line {shown_lines:,}{what}: {more_lines:,} more lines "
        f"({len(rest):,} characters) are not shown here; {where_whole} (meta.json params)."
    )
    return kept + f"[… {note}]\n", note


def _eol(line: str) -> str:
    return line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def _read(workspace: Path, path: str) -> tuple[str, bool]:
    """The file's text as it is now ("" when it is not there, not a file, or outside the
    workspace), and whether it is over DIFF_READ_CAP bytes (then not compared): opened
    confined, never following a symlink out of the workspace, even one swapped in while it
    is opened."""
    try:
        fd, _rel = open_read(workspace, path)
    except (OSError, ValueError):  # missing, a folder, outside (PathEscapeError)
        return "", False
    try:
        data = read_fd(fd, DIFF_READ_CAP + 1)
    except OSError:
        return "", False
    finally:
        os.close(fd)
    if len(data) > DIFF_READ_CAP:
        return "", True
    return data.decode("utf-8", errors="replace"), False
