"""The summary: what the run did, and every file it created or changed."""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from pydantic import BaseModel

from backend.actions.values import scrub
from backend.agent.budget import BudgetExceeded
from backend.agent.prompts import render
from backend.llm.base import LLMError
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.payloads import PreviewEntry, SummaryFile, SummaryPreview
from backend.messages.tasks import PlanTask
from backend.workspace import file_entry, scan_off_loop

if TYPE_CHECKING:
    from backend.agent.context import RunContext

log = logging.getLogger(__name__)


async def changed_files(ctx: RunContext) -> list[SummaryFile]:
    now = await scan_off_loop(ctx.state.workspace)
    paths = sorted(
        p for p, stat in now.items() if ctx.state.snapshot.get(p) != stat or p in ctx.state.written
    )
    await ctx.deps.store.record_files(
        ctx.state.conversation_id, ctx.run_id, [(p, now[p][0]) for p in paths]
    )
    cid = ctx.state.conversation_id
    return [SummaryFile.model_validate(file_entry(cid, p, now[p][0])) for p in paths]


async def summarize(
    ctx: RunContext, tasks: list[PlanTask], notes: list[str], outcome: str, reason: str = ""
) -> None:
    """Publish `finish_summery`. A model call only when several tasks completed; a single
    task's finish note is the summary (keeps a one-task run at 3 model calls).

    A failed or stopped run's summary says so and lists what was done, but not the reason:
    the `error` message before it says that once (``reason`` is kept for callers)."""
    files = await changed_files(ctx)
    content = ""
    summary = uuid.uuid4().hex  # the model's summary streams live as this message
    if outcome == "completed" and len(notes) > 1:
        content = await _model_summary(ctx, tasks, notes, files, summary)
    if not content:
        content = _plain_summary(tasks, notes, outcome, reason)
    # previews: the conversation's running ones, after the files ({"preview": {...}} entries,
    # which the file lists pass over: they have no filepath)
    previews = await running_previews(ctx)
    if previews:
        lines = [f"- {p.name}: {p.url}" for p in previews]
        content = "\n".join([content, "", "Previews (running):", *lines])
    entries: list[BaseModel] = [*files]
    entries += [SummaryPreview(preview=p) for p in previews]
    await ctx.publish(
        Message.build(MessageKind.FINISH_SUMMERY, content, json=entries, uuid=summary)
    )


async def running_previews(ctx: RunContext) -> list[PreviewEntry]:
    """The conversation's previews that run now."""
    host = ctx.deps.tools.previews if ctx.deps.tools is not None else None
    if host is None:
        return []
    try:
        rows = await host.rows(ctx.state.conversation_id)
    except Exception:
        log.exception("could not list the previews for the summary")
        return []
    return [PreviewEntry.model_validate(host.entry(r)) for r in rows if r.state == "ready"]


async def _model_summary(
    ctx: RunContext,
    tasks: list[PlanTask],
    notes: list[str],
    files: list[SummaryFile],
    live_uuid: str = "",
) -> str:
    done = "\n".join(f"- {t.title}: {n}" for t, n in zip(tasks, notes, strict=False))
    names = "\n".join(f"- {f.filepath} ({f.filesize} bytes)" for f in files) or "(none)"
    try:
        completion = await ctx.call_model(
            "summary",
            [
                {"role": "system", "content": render("summary")},
                {
                    "role": "user",
                    "content": (
                        f"Goal: {ctx.state.goal}\n\nTasks and notes:\n{done}\n\nFiles:\n{names}"
                    ),
                },
            ],
            on_delta=ctx.live.model_text(live_uuid, MessageKind.SUMMARY) if live_uuid else None,
        )
    except (LLMError, BudgetExceeded) as exc:  # the work is done: a plain summary will do
        log.warning("summary call skipped: %s", exc)
        return ""
    return scrub(completion.text.strip())


def _plain_summary(tasks: list[PlanTask], notes: list[str], outcome: str, reason: str) -> str:
    lines: list[str] = []
    if outcome == "completed":
        if len(notes) == 1:
            return notes[0]
        lines = [f"- **{t.title}**: {n}" for t, n in zip(tasks, notes, strict=False)]
        return "Done.\n\n" + "\n".join(lines)
    head = "The run was stopped." if outcome == "stopped" else "The run did not finish."
    if outcome != "stopped" and reason:
        head += " The error above says why."
    done = [f"- **{t.title}**: {n}" for t, n in zip(tasks, notes, strict=False)]
    if done:
        head += "\n\nCompleted before that:\n" + "\n".join(done)
    return head
