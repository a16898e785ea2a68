"""Ending a run this instance owns but does not execute: one whose owner died (recovery),
or a queued run stopped before a worker took it. Its open messages and tasks are read
from the store; the end itself is the pipeline's (backend/agent/ending.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from backend.actions.registry import Registry
from backend.agent.ending import STOPPED, close_run
from backend.agent.publisher import Publisher
from backend.messages.bus import Bus
from backend.messages.kinds import MessageKind
from backend.messages.message import Message
from backend.messages.payloads import SummaryFile
from backend.messages.tasks import PlanTask
from backend.store.repo import Store
from backend.store.rows import RunToExecute
from backend.workspace import file_entry

WorkspaceOf = Callable[[str, str], Path]  # (user id, conversation id) -> its folder
# (user id, conversation id, run id): the run's end-of-run checkpoint (backend/checkpoints)
EndCheckpoint = Callable[[str, str, str], Awaitable[None]]


async def close_unexecuted(
    store: Store,
    bus: Bus,
    workspace_of: WorkspaceOf,
    owner: str,
    run_id: str,
    status: str,
    reason: str,
    actions: Registry,
    end_checkpoint: EndCheckpoint | None = None,
) -> bool:
    """Close the run's open messages and tasks, publish `error` or `stop` and
    `finish_summery`, end it with ``status``. False when it had already ended."""
    run = await store.run_for_execution(run_id)
    if run is None or run.status != "running":
        return False
    cid = run.conversation_id
    publisher = Publisher(store, bus, cid, run_id)
    stopped = status == "stopped"

    async def fail_task(task: PlanTask, result: str) -> None:
        await store.update_task(task.id, "failed", result)
        task.status = "failed"
        await publisher.publish(
            Message.build(
                MessageKind.TASK, task.title, status="failure", task_id=task.id, json=[task]
            )
        )

    async def summary() -> None:
        files = await _files_of(store, run, workspace_of(run.user_id, cid), actions)
        head = STOPPED if stopped else f"The run failed. {reason}"
        entries = [SummaryFile.model_validate(f) for f in files]
        await publisher.publish(Message.build(MessageKind.FINISH_SUMMERY, head, json=entries))

    await close_run(
        publisher.publish,
        fail_task,
        stopped=stopped,
        reason=reason,
        open_actions=await store.open_messages(run_id),
        open_tasks=await store.running_tasks(run_id),
        summary=summary,
        closing=f"Interrupted: {reason}",
    )
    if end_checkpoint is not None:
        await end_checkpoint(run.user_id, cid, run_id)
    ended = await store.end_run(run_id, status, reason, owner=owner)
    bus.notify(run_id)
    return ended


async def _files_of(
    store: Store, run: RunToExecute, workspace: Path, actions: Registry
) -> list[dict[str, object]]:
    """Files the run recorded, or wrote with a successful action, that still exist."""
    rid, cid = run.run_id, run.conversation_id
    paths = {p for p, _ in await store.run_files(rid)}
    # the kinds of the actions that write files (write_code, edit_file)
    writers = tuple(d.kind for d in actions.defs() if d.handling.writes_files)
    for msg in await store.messages(cid, run_id=rid, limit=100_000, action_types=writers):
        if msg.status == "success" and msg.meta.filepath:
            paths.add(msg.meta.filepath)

    def sizes() -> list[tuple[str, int]]:
        out = []
        for p in sorted(paths):
            full = workspace / p
            if full.is_file() and not full.is_symlink():
                out.append((p, full.stat().st_size))
        return out

    found = await anyio.to_thread.run_sync(sizes)
    if found:
        await store.record_files(cid, rid, found)
    return [file_entry(cid, p, size) for p, size in found]
